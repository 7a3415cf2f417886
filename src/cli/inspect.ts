/**
 * `callgate inspect`: the state of the limits (src/observe/inspect.ts) on the live Redis that routing
 * processes or sidecars share, read-only, as a table or as JSON.
 */
import type { Command } from 'commander';
import { checkIdArgument } from '../ids.js';
import { loadConfigFile } from '../config/load.js';
import { checkValues, inspectState, stateText } from '../observe/inspect.js';
import { RedisStore } from '../store/redis/redis-store.js';
import {
  checkLeasable,
  leasedCarrierIds,
  leasedStoreOptions,
  leaseLanesOption,
  type LeaseArgs,
} from './lease-lanes.js';
import { closeRedis, openRedis, redisOptions, type RedisConnectionArgs } from './redis.js';

export interface InspectArgs extends RedisConnectionArgs, LeaseArgs {
  config: string;
  prefix: string;
  peer: string[];
  value: string[];
  json?: boolean;
  /** Carriers leased across regions (serve's --leased-carriers): their shares are shown. */
  leasedCarriers?: string;
}

export async function runInspect(args: InspectArgs, out: NodeJS.WritableStream = process.stdout): Promise<void> {
  for (const peer of args.peer) checkIdArgument('--peer', peer);
  const config = await loadConfigFile(args.config);
  checkLeasable(args, config);
  const leasedCarriers = leasedCarrierIds(args.leasedCarriers, config);
  checkValues(config, args.value ?? []); // before Redis: a wrong value is no outage
  const redis = await openRedis(args);
  try {
    const bans = (config.inbound.attributes ?? []).some((l) => l.ban !== undefined);
    const store = new RedisStore({
      redis,
      prefix: args.prefix,
      ...leasedStoreOptions(args),
      ...(leasedCarriers && { leasedCarriers }),
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
    .option('--leased-carriers <ids>', "carriers they lease across regions, comma-separated: show this region's shares")
    .option('--json', 'one JSON object (as GET /v1/state)')
    .action(async (opts: InspectArgs) => runInspect(opts));
}
