/**
 * The connection options of `callgate replay --store redis`: TLS files from the command line,
 * ACL credentials from the URL or the environment (REDIS_USERNAME / REDIS_PASSWORD: a password
 * on the command line is visible to every user of the machine in `ps`). Bad input throws an
 * InvalidArgumentError (exit 2, one line); a connection that then fails is exit 1.
 */
import { readFileSync } from 'node:fs';
import type { RedisOptions } from 'ioredis';
import { InvalidArgumentError } from '../errors/index.js';

export interface RedisConnectionArgs {
  redisUrl: string;
  redisTlsCa?: string;
  redisTlsCert?: string;
  redisTlsKey?: string;
}

/** The URL with its password hidden, for messages. */
export function redactUrl(url: string): string {
  try {
    const u = new URL(url);
    if (u.password === '') return url;
    u.password = '***';
    return u.toString();
  } catch {
    return url;
  }
}

function readPem(flag: string, file: string): Buffer {
  let pem: Buffer;
  try {
    pem = readFileSync(file);
  } catch (err) {
    throw new InvalidArgumentError(`cannot read ${flag} ${file}: ${(err as Error).message}`);
  }
  if (!/-----BEGIN [A-Z0-9 ]+-----/.test(pem.toString('latin1')))
    throw new InvalidArgumentError(`${flag} ${file} is not a PEM file`);
  return pem;
}

/** ioredis options for args (TLS only on a rediss:// URL, always verifying the server). */
export function redisConnectionOptions(args: RedisConnectionArgs, env: NodeJS.ProcessEnv = process.env): RedisOptions {
  const options: RedisOptions = {};
  if (env.REDIS_USERNAME) options.username = env.REDIS_USERNAME;
  if (env.REDIS_PASSWORD) options.password = env.REDIS_PASSWORD;
  const { redisTlsCa: ca, redisTlsCert: cert, redisTlsKey: key } = args;
  if (ca === undefined && cert === undefined && key === undefined) return options;
  if (!/^rediss:\/\//i.test(args.redisUrl)) {
    throw new InvalidArgumentError(
      `--redis-tls-ca, --redis-tls-cert and --redis-tls-key need a rediss:// URL, got ${redactUrl(args.redisUrl)}`,
    );
  }
  if ((cert === undefined) !== (key === undefined))
    throw new InvalidArgumentError('--redis-tls-cert and --redis-tls-key go together');
  options.tls = {
    ...(ca !== undefined && { ca: readPem('--redis-tls-ca', ca) }),
    ...(cert !== undefined && { cert: readPem('--redis-tls-cert', cert) }),
    ...(key !== undefined && { key: readPem('--redis-tls-key', key) }),
  };
  return options;
}
