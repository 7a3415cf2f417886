/**
 * `callgate inspect`: the state of the limits (src/observe/inspect.ts) on the live Redis that routing
 * processes or sidecars share, read-only, as a table or as JSON.
 */
import type { Command } from 'commander';
import { loadConfigFile } from '../config/load.js';
import { InvalidArgumentError } from '../errors/index.js';
import { leasedLevel, MAX_LANES } from '../lease/lanes.js';
import { inspectState, stateText } from '../observe/inspect.js';
import { RedisStore } from '../store/redis/redis-store.js';
import { closeRedis, openRedis, redisOptions, type RedisConnectionArgs } from './redis.js';

export interface InspectArgs extends RedisConnectionArgs {
  config: string;
  prefix: string;
  peer: string[];
  value: string[];
  json?: boolean;
  /** The deployment leases its global level over this many lanes (its keys are on the lanes). */
  leaseLanes?: number;
}

export async function runInspect(args: InspectArgs, out: NodeJS.WritableStream = process.stdout): Promise<void> {
  const lanes = args.leaseLanes;
  if (lanes !== undefined && !(Number.isSafeInteger(lanes) && lanes >= 1 && lanes <= MAX_LANES))
    throw new InvalidArgumentError(`--lease-lanes: expected an integer from 1 to ${MAX_LANES}, got ${String(lanes)}`);
  const config = await loadConfigFile(args.config);
  if (lanes !== undefined) leasedLevel(config); // a clear error when the level cannot be leased
  const redis = await openRedis(args);
  try {
    const bans = (config.inbound.attributes ?? []).some((l) => l.ban !== undefined);
    // leased: the lanes are hash tags, on a single Redis too (as `serve --lease-lanes` makes them)
    const store = new RedisStore({
      redis,
      prefix: args.prefix,
      ...(lanes !== undefined && { lease: { lanes }, hashTags: true }),
    });
    const state = await inspectState(config, store, {
      peers: args.peer,
      values: args.value ?? [],
      bans,
    });
    out.write(args.json ? `${JSON.stringify(state)}\n` : stateText(state));
  } finally {
    await closeRedis(redis);
  }
}

export function inspectCommand(program: Command): void {
  const cmd = program
    .command('inspect')
    .summary('show what the limits see now on Redis')
    .description(
      "what the limits see now on a live Redis: each bucket's count and retry-after per limit, each carrier's queue wait",
    )
    .requiredOption('--config <file>', 'limit configuration (JSON or YAML) the routing processes use');
  redisOptions(cmd, 'the Redis they share')
    .option('--prefix <prefix>', 'their key prefix', 'callgate:')
    .option(
      '--peer <id>',
      'also show this peer (repeatable; peers on defaultPeer are not listed otherwise)',
      (v: string, all: string[]) => [...all, v],
      [],
    )
    .option(
      '--value <level:value>',
      'also show this value of an attribute level, as limited_by names it (repeatable)',
      (v: string, all: string[]) => [...all, v],
      [],
    )
    .option('--json', 'one JSON object (as GET /v1/state)')
    .option(
      '--lease-lanes <n>',
      'their global level is leased over N lanes (as `serve --lease-lanes`): read the lanes',
      (v: string) => (/^\d+$/.test(v) ? Number(v) : Number.NaN),
    )
    .action(async (opts: InspectArgs) => runInspect(opts));
}
