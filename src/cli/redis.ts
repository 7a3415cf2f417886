/**
 * Redis for the commands (replay --store redis, serve --store redis, inspect): the one definition
 * of the --redis-url / --redis-tls-* options and the one client builder. TLS files come from the
 * command line, ACL credentials from the URL or the environment (REDIS_USERNAME / REDIS_PASSWORD:
 * a password on the command line is visible to every user of the machine in `ps`). Bad input
 * throws an InvalidArgumentError (exit 2, one line); a connection that then fails is a
 * StoreUnavailableError (exit 1). Every message names the URL through redactUrl.
 */
import { readFileSync } from 'node:fs';
import { type Command, Option } from 'commander';
import { Cluster, Redis, type RedisOptions } from 'ioredis';
import { InvalidArgumentError, StoreUnavailableError } from '../errors/index.js';
import { connectionReason } from '../store/redis/connection.js';
import { RECOMMENDED_REDIS_OPTIONS } from '../store/redis/redis-store.js';

export interface RedisConnectionArgs {
  redisUrl: string;
  /** --redis-cluster: the URL names one node of a Redis Cluster (the others are discovered). */
  redisCluster?: boolean;
  redisTlsCa?: string;
  redisTlsCert?: string;
  redisTlsKey?: string;
}

/**
 * The URL with its password hidden, for messages: `scheme://user:***@host…`, whatever the scheme
 * and even when the URL does not parse. Everything between `://` and the last `@` is credentials
 * (a password may hold `/`, `@` or `:` unescaped); a user without a password may be a password
 * in disguise (`redis://secret@host`), so it is hidden too.
 */
export function redactUrl(url: string): string {
  const start = url.indexOf('://');
  const from = start < 0 ? 0 : start + 3;
  const at = url.lastIndexOf('@');
  if (at < from) return url;
  const info = url.slice(from, at);
  const colon = info.indexOf(':');
  const shown = colon < 0 ? '***' : `${info.slice(0, colon)}:***`;
  return `${url.slice(0, from)}${shown}${url.slice(at)}`;
}

/** Secrets that no output may show: URL passwords and REDIS_PASSWORD (rememberSecrets). */
const secrets = new Set<string>();
/** Shorter secrets are hidden only inside URLs: replacing them everywhere would garble every message. */
const MIN_SECRET = 3;

function remember(secret: string): void {
  if (secret.length < MIN_SECRET) return;
  secrets.add(secret);
  try {
    const decoded = decodeURIComponent(secret);
    if (decoded.length >= MIN_SECRET) secrets.add(decoded);
  } catch {
    // not percent-encoded
  }
}

/**
 * Remember the credentials of a Redis URL (its password, or a user given without one) and of
 * REDIS_PASSWORD, so that redactSecrets hides them wherever a message repeats them (a client's
 * error may quote a URL that is not a URL to it: `connect ENOENT //user:secret@…`).
 */
export function rememberSecrets(url: string | undefined, env: NodeJS.ProcessEnv = process.env): void {
  if (env.REDIS_PASSWORD) remember(env.REDIS_PASSWORD);
  if (url === undefined) return;
  const start = url.indexOf('://');
  const from = start < 0 ? 0 : start + 3;
  const at = url.lastIndexOf('@');
  if (at < from) return;
  const info = url.slice(from, at);
  const colon = info.indexOf(':');
  remember(colon < 0 ? info : info.slice(colon + 1));
}

/** `text` with every remembered secret shown as `***`, and the credentials of any URL in it. */
export function redactSecrets(text: string): string {
  let out = text;
  for (const secret of secrets) if (out.includes(secret)) out = out.split(secret).join('***');
  return out.replace(/\b([a-z][a-z0-9+.-]*:\/\/)([^\s/@"']*:)[^\s@"']*@/gi, '$1$2***@');
}

/**
 * A --redis-url a client can take: parses as a URL and is redis:// or rediss://. Throws an
 * InvalidArgumentError (one line, credentials hidden) otherwise.
 */
export function checkRedisUrl(url: string, flag = '--redis-url'): void {
  let scheme: string;
  try {
    scheme = new URL(url).protocol;
  } catch {
    throw new InvalidArgumentError(`invalid ${flag} ${JSON.stringify(redactUrl(url))}: Invalid URL`);
  }
  if (scheme !== 'redis:' && scheme !== 'rediss:')
    throw new InvalidArgumentError(
      `invalid ${flag} ${JSON.stringify(redactUrl(url))}: expected redis://host:port or rediss://…`,
    );
}

/**
 * Add --redis-url and --redis-tls-ca / -cert / -key to a command. `purpose` starts the URL's
 * help line (e.g. "Redis for --store redis"). The default comes from REDIS_URL and is described,
 * never shown: it may hold a password.
 */
export function redisOptions(cmd: Command, purpose: string): Command {
  return cmd
    .addOption(
      new Option(
        '--redis-url <url>',
        `${purpose} (rediss:// for TLS; ACL user via the URL or REDIS_USERNAME / REDIS_PASSWORD)`,
      ).default(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379', '$REDIS_URL, else redis://127.0.0.1:6379'),
    )
    .option(
      '--redis-tls-ca <file>',
      'PEM CA certificate(s) to verify the rediss:// server with (default: the system CAs)',
    )
    .option('--redis-tls-cert <file>', 'PEM client certificate, for a server that asks for one (with --redis-tls-key)')
    .option('--redis-tls-key <file>', 'PEM private key of --redis-tls-cert')
    .option('--redis-cluster', 'the URL names one node of a Redis Cluster (hash tags on; the others are discovered)');
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

export interface OpenRedisOptions {
  /**
   * A long-running service (serve): the client keeps reconnecting through outages and is
   * returned unconnected (the caller connects it, its outages being the policy's business).
   * Default: a one-shot command: one attempt, connected before it returns or a
   * StoreUnavailableError, commands failing fast afterwards.
   */
  readonly service?: boolean;
  /**
   * A service's client to a far region's Redis (serve --lease-regions): a command fails at once
   * while it is out of reach, and the client retries every 100 ms, not at a growing backoff.
   */
  readonly far?: boolean;
  /** One-shot: aborting disconnects (the connection attempt then rejects with the signal's reason). */
  readonly signal?: AbortSignal;
}

/**
 * A Cluster client from one node's URL: its credentials and TLS apply to every node (as
 * redisConnectionOptions gives them); the URL's database number has no meaning on a Cluster.
 */
function clusterClient(args: RedisConnectionArgs, options: RedisOptions, service: boolean, far: boolean): Cluster {
  const u = new URL(args.redisUrl);
  const { retryStrategy: _r, maxRetriesPerRequest, lazyConnect: _l, ...nodeOptions } = options;
  if (u.username !== '') nodeOptions.username = decodeURIComponent(u.username);
  if (u.password !== '') nodeOptions.password = decodeURIComponent(u.password);
  if (u.protocol === 'rediss:') nodeOptions.tls ??= {};
  return new Cluster([{ host: u.hostname.replace(/^\[|\]$/g, ''), port: Number(u.port || 6379) }], {
    redisOptions: nodeOptions,
    lazyConnect: true,
    enableReadyCheck: true,
    ...(maxRetriesPerRequest !== undefined && { maxRetriesPerRequest }),
    ...(far && { enableOfflineQueue: false }),
    // one-shot: one attempt at the nodes; a service keeps trying
    clusterRetryStrategy: far ? () => 100 : service ? (times) => Math.min(100 * times, 2_000) : () => null,
  });
}

/** The client of a command, built from its Redis options. */
export async function openRedis(args: RedisConnectionArgs, opts: OpenRedisOptions = {}): Promise<Redis | Cluster> {
  const options: RedisOptions = opts.service
    ? {
        ...redisConnectionOptions(args),
        ...RECOMMENDED_REDIS_OPTIONS,
        lazyConnect: true,
        ...(opts.far && { maxRetriesPerRequest: 0, enableOfflineQueue: false, retryStrategy: () => 100 }),
      }
    : {
        ...redisConnectionOptions(args),
        lazyConnect: true,
        maxRetriesPerRequest: 1,
        retryStrategy: () => null,
        connectTimeout: 3000,
      };
  checkRedisUrl(args.redisUrl);
  rememberSecrets(args.redisUrl);
  let redis: Redis | Cluster;
  try {
    redis = args.redisCluster
      ? clusterClient(args, options, opts.service === true, opts.far === true)
      : new Redis(args.redisUrl, options);
  } catch (err) {
    // ioredis parses the URL in its constructor: "notaurl::" is a TypeError there
    throw new InvalidArgumentError(
      `invalid --redis-url ${JSON.stringify(redactUrl(args.redisUrl))}: ${redactSecrets((err as Error).message)}`,
    );
  }
  if (opts.service) return redis;
  // connection errors surface through the commands that fail; keep the cause for the message
  let lastError: Error | undefined;
  redis.on('error', (err: Error) => (lastError = err));
  const { signal } = opts;
  const onAbort = () => redis.disconnect();
  signal?.addEventListener('abort', onAbort, { once: true });
  try {
    await redis.connect();
  } catch (err) {
    redis.disconnect();
    signal?.throwIfAborted();
    const cause = lastError ?? (err as Error);
    throw new StoreUnavailableError(
      `cannot reach Redis at ${redactUrl(args.redisUrl)}: ${redactSecrets(cause.message)}`,
      cause,
    );
  } finally {
    signal?.removeEventListener('abort', onAbort);
  }
  return redis;
}

/**
 * Whether Redis answers (the sidecar's /readyz): TIME within a second. TIME, not PING: the
 * minimal ACL user (README) may run TIME, which every decision on Redis' clock needs, and not
 * PING, so a PING check never read ready for such a user.
 */
export async function redisAnswers(redis: Redis | Cluster): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error('Redis did not answer TIME within 1 s')), 1000);
  });
  try {
    await Promise.race([redis.time(), late]);
  } catch (err) {
    throw new Error(connectionReason(err), { cause: err });
  } finally {
    clearTimeout(timer);
  }
}

/** Close a client: QUIT, or drop the connection when that fails or Redis does not answer in a second. */
export { quitClient as closeRedis } from '../store/redis/connection.js';
