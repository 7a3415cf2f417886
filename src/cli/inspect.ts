/**
 * `callgate inspect`: the state of the limits (src/observe/inspect.ts) on the live Redis that routing
 * processes or sidecars share, read-only, as a table or as JSON.
 */
import { Redis } from 'ioredis';
import { redactUrl, redisConnectionOptions, type RedisConnectionArgs } from './redis.js';
import { loadConfigFile } from '../config/load.js';
import { CallGateError } from '../errors/index.js';
import { inspectState, stateText } from '../observe/inspect.js';
import { RedisStore } from '../store/redis/redis-store.js';

export interface InspectArgs extends RedisConnectionArgs {
  config: string;
  redisUrl: string;
  prefix: string;
  peer: string[];
  json?: boolean;
}

export async function runInspect(args: InspectArgs, out: NodeJS.WritableStream = process.stdout): Promise<void> {
  const config = await loadConfigFile(args.config);
  const redis = new Redis(args.redisUrl, {
    ...redisConnectionOptions(args),
    lazyConnect: true,
    maxRetriesPerRequest: 1,
    retryStrategy: () => null,
    connectTimeout: 3000,
  });
  let lastError: Error | undefined;
  redis.on('error', (err: Error) => (lastError = err));
  try {
    await redis.connect();
  } catch (err) {
    redis.disconnect();
    throw new CallGateError(
      'ERR_STORE_UNAVAILABLE',
      `cannot reach Redis at ${redactUrl(args.redisUrl)}: ${(lastError ?? (err as Error)).message}`,
    );
  }
  try {
    const state = await inspectState(config, new RedisStore({ redis, prefix: args.prefix }), { peers: args.peer });
    out.write(args.json ? `${JSON.stringify(state)}\n` : stateText(state));
  } finally {
    await redis.quit().catch(() => redis.disconnect());
  }
}
