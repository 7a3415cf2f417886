/**
 * `callgate inspect`: the state of the limits (src/observe/inspect.ts) on the live Redis that routing
 * processes or sidecars share, read-only, as a table or as JSON.
 */
import type { Command } from 'commander';
import { loadConfigFile } from '../config/load.js';
import { inspectState, stateText } from '../observe/inspect.js';
import { RedisStore } from '../store/redis/redis-store.js';
import { checkLeasable, leasedStoreOptions, leaseLanesOption } from './lease-lanes.js';
import type { LanePins } from '../lease/lanes.js';
import { closeRedis, openRedis, redisOptions, type RedisConnectionArgs } from './redis.js';

export interface InspectArgs extends RedisConnectionArgs {
  config: string;
  prefix: string;
  peer: string[];
  value: string[];
  json?: boolean;
  /** The deployment leases its global level over this many lanes (its keys are on the lanes). */
  leaseLanes?: number;
  /** ... with an overflow lane. */
  leaseOverflow?: boolean;
  /** ... and owners placed on lanes (--lease-pin). */
  leasePin?: LanePins;
}

export async function runInspect(args: InspectArgs, out: NodeJS.WritableStream = process.stdout): Promise<void> {
  const lanes = args.leaseLanes;
  const config = await loadConfigFile(args.config);
  checkLeasable(lanes, config, args.leaseOverflow, args.leasePin);
  const redis = await openRedis(args);
  try {
    const bans = (config.inbound.attributes ?? []).some((l) => l.ban !== undefined);
    const store = new RedisStore({
      redis,
      prefix: args.prefix,
      ...leasedStoreOptions(lanes, args.leaseOverflow, args.leasePin),
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
  leaseLanesOption(
    redisOptions(cmd, 'the Redis they share'),
    'their global level is leased over N lanes: read the lanes',
  )
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
    .action(async (opts: InspectArgs) => runInspect(opts));
}
