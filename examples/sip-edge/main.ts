/**
 * The SIP edge's command line (`npm run edge -- [options]`; it imports `callgate` by name, which
 * in this repository Node resolves to the sources through the `callgate-source` condition):
 *
 *   --config FILE        edge configuration (default examples/sip-edge/edge.config.json)
 *   --listen IP:PORT     override the configuration's listen address
 *   --store memory|redis where counts live (default memory: this process only)
 *   --redis-url URL      Redis for --store redis (default $REDIS_URL or redis://127.0.0.1:6379)
 *   --prefix P           Redis key prefix (default callgate:)
 *
 * Prints one JSON line once listening ({"listening": "ip:port", "store": ...}); on SIGINT or
 * SIGTERM it stops (held calls are refused 503), prints one JSON line with its summary (counts,
 * latencies) and exits 0. Problems (a Redis outage: once per outage) go to standard error. A bad
 * configuration exits 2 with one line per problem.
 */
import { fileURLToPath } from 'node:url';
import { ConfigError, RECOMMENDED_REDIS_OPTIONS, RedisStore, type Store } from 'callgate';
import { Command, Option } from 'commander';
import { Redis } from 'ioredis';
import { loadEdgeConfig, parseHostPort } from './config.js';
import { SipEdge } from './edge.js';

interface Args {
  config: string;
  listen?: string;
  store: 'memory' | 'redis';
  redisUrl: string;
  prefix: string;
}

const DEFAULT_CONFIG = fileURLToPath(new URL('./edge.config.json', import.meta.url));

/** A URL for messages: everything between `://` and the last `@` (credentials) shown as `***`. */
function hideCredentials(url: string): string {
  const from = url.indexOf('://') + 3;
  const at = url.lastIndexOf('@');
  return from < 3 || at < from ? url : `${url.slice(0, from)}***${url.slice(at)}`;
}

/** A RedisStore on its own client; fails fast when Redis is not there at all (outages later are the policy's business). */
async function openRedis(args: Args): Promise<{ store: Store; close: () => Promise<void> }> {
  const redis = new Redis(args.redisUrl, { ...RECOMMENDED_REDIS_OPTIONS, lazyConnect: true, connectTimeout: 5_000 });
  const store = new RedisStore({ redis, prefix: args.prefix }); // listens to the client's errors
  try {
    await redis.connect();
  } catch (err) {
    redis.disconnect();
    const why = (err as Error).message.split(args.redisUrl.slice(args.redisUrl.indexOf('://') + 1)).join('***');
    throw new Error(`cannot reach Redis at ${hideCredentials(args.redisUrl)}: ${why}`);
  }
  return {
    store,
    close: () =>
      redis.quit().then(
        () => undefined,
        () => redis.disconnect(),
      ),
  };
}

async function run(args: Args): Promise<number> {
  let config = await loadEdgeConfig(args.config);
  if (args.listen !== undefined) {
    const listen = parseHostPort(args.listen);
    if (!listen) throw new ConfigError([`--listen: expected "ip:port", got ${JSON.stringify(args.listen)}`]);
    config = { ...config, listen, advertise: listen.host };
  }
  const redis = args.store === 'redis' ? await openRedis(args) : undefined;
  let edge: SipEdge;
  try {
    edge = await SipEdge.start({
      config,
      store: redis?.store,
      onProblem: (err) => process.stderr.write(`edge: ${err.message}\n`),
    });
  } catch (err) {
    await redis?.close();
    throw err;
  }
  process.stdout.write(
    `${JSON.stringify({ listening: `${config.listen.host}:${config.listen.port}`, store: args.store })}\n`,
  );
  await new Promise<void>((resolve) => {
    process.once('SIGINT', resolve);
    process.once('SIGTERM', resolve);
  });
  await edge.stop();
  await redis?.close();
  process.stdout.write(`${JSON.stringify(edge.summary())}\n`);
  return 0;
}

async function main(argv: string[]): Promise<number> {
  const cmd = new Command('edge')
    .description('callgate reference SIP edge: a stateful UDP proxy with admission and carrier pacing')
    .option('--config <file>', 'edge configuration (JSON)', DEFAULT_CONFIG)
    .option('--listen <ip:port>', 'listen address (overrides the configuration)')
    .addOption(new Option('--store <kind>', 'where counts live').choices(['memory', 'redis']).default('memory'))
    .addOption(
      // the default is described, never shown: REDIS_URL may hold a password
      new Option('--redis-url <url>', 'Redis for --store redis').default(
        process.env.REDIS_URL ?? 'redis://127.0.0.1:6379',
        '$REDIS_URL, else redis://127.0.0.1:6379',
      ),
    )
    .option('--prefix <prefix>', 'Redis key prefix', 'callgate:')
    .exitOverride();
  try {
    cmd.parse(argv, { from: 'user' });
  } catch {
    return 2; // commander printed it
  }
  try {
    return await run(cmd.opts<Args>());
  } catch (err) {
    if (err instanceof ConfigError) {
      for (const p of err.problems) process.stderr.write(`error: ${p}\n`);
      return 2;
    }
    process.stderr.write(`error: ${(err as Error).message}\n`);
    return 1;
  }
}

process.exitCode = await main(process.argv.slice(2));
