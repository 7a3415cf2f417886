/**
 * An operator's commands on the live Redis the routing processes share (src/observe/operate.ts):
 *
 *   callgate holds --config FILE (--bucket peer:X | --carrier C) [--max N] [--json]
 *   callgate release --call-id X [--json]
 *   callgate reset --config FILE --bucket peer:X [--yes] [--json]
 *
 * reset asks for a confirmation on the terminal; without one (a script, a pipe) it refuses
 * unless given --yes. Its report names what was removed, on stderr (a log line) and stdout.
 */
import { createInterface } from 'node:readline/promises';
import { checkIdArgument, printable, printableJson } from '../ids.js';
import { intOption, shownOption } from './int-option.js';
import type { Command } from 'commander';
import { loadConfigFile } from '../config/load.js';
import { InvalidArgumentError } from '../errors/index.js';
import { holdsText, LISTED_BY_DEFAULT, listHolds, locateBucket, resetBucket, resetLine } from '../observe/operate.js';
import { prefixProblem } from '../store/redis/redis-keys.js';
import { RedisStore } from '../store/redis/redis-store.js';
import { checkLeasable, checkLeaseLanes, leasedStoreOptions, leaseLanesOption, type LeaseArgs } from './lease-lanes.js';
import { closeRedis, openRedis, redactUrl, redisOptions, type RedisConnectionArgs } from './redis.js';

interface OperateArgs extends RedisConnectionArgs, LeaseArgs {
  prefix: string;
  json?: boolean;
}

export interface HoldsArgs extends OperateArgs {
  config: string;
  bucket?: string;
  carrier?: string;
  max: number;
}

export interface ReleaseArgs extends OperateArgs {
  callId: string;
}

export interface ResetArgs extends OperateArgs {
  config: string;
  bucket: string;
  yes?: boolean;
}

/** Run `fn` on a store over the command's Redis, closed afterwards. */
async function onRedis<T>(args: OperateArgs, fn: (store: RedisStore) => Promise<T>): Promise<T> {
  const problem = prefixProblem('--prefix', args.prefix);
  if (problem !== undefined) throw new InvalidArgumentError(problem);
  checkLeaseLanes(args);
  const redis = await openRedis(args);
  const store = new RedisStore({
    redis,
    prefix: args.prefix,
    ...leasedStoreOptions(args),
  });
  try {
    return await fn(store);
  } finally {
    await store.close(); // its timers and listeners; the connection is ours to close
    await closeRedis(redis);
  }
}

export async function runHolds(args: HoldsArgs, out: NodeJS.WritableStream = process.stdout): Promise<void> {
  if ((args.bucket === undefined) === (args.carrier === undefined))
    throw new InvalidArgumentError('give one of --bucket global|account:<id>|peer:<id> or --carrier <id>');
  if (!(Number.isSafeInteger(args.max) && args.max >= 1 && args.max <= 10_000))
    throw new InvalidArgumentError(`--max: expected an integer from 1 to 10000, got ${shownOption(args.max)}`);
  if (args.carrier !== undefined) checkIdArgument('--carrier', args.carrier);
  const config = await loadConfigFile(args.config);
  if (args.bucket !== undefined) {
    checkLeasable(args, config); // a carrier's holds do not depend on leasing
    locateBucket(config, args.bucket, false); // before Redis: a bucket the configuration lacks is no outage
  }
  const target = args.bucket !== undefined ? { bucket: args.bucket } : { carrier: args.carrier! };
  const l = await onRedis(args, (store) => listHolds(config, store, target, { max: args.max }));
  out.write(args.json ? `${JSON.stringify(l)}\n` : holdsText(l));
}

export async function runRelease(args: ReleaseArgs, out: NodeJS.WritableStream = process.stdout): Promise<void> {
  checkIdArgument('--call-id', args.callId);
  const r = await onRedis(args, (store) => store.release({ id: args.callId }));
  const outcome = r.released > 0 ? 'released' : 'not-held';
  if (args.json) out.write(`${JSON.stringify({ call_id: args.callId, released: r.released > 0, outcome })}\n`);
  else
    out.write(
      r.released > 0
        ? `released call ${printableJson(args.callId)}: its channels are free\n`
        : `call ${printableJson(args.callId)} held nothing (released already, or its hold lapsed)\n`,
    );
}

/** Ask on the terminal; false unless the answer is y or yes. */
async function confirm(question: string): Promise<boolean> {
  const rl = createInterface({ input: process.stdin, output: process.stderr });
  try {
    return /^y(es)?$/i.test((await rl.question(question)).trim());
  } finally {
    rl.close();
  }
}

export async function runReset(args: ResetArgs, out: NodeJS.WritableStream = process.stdout): Promise<void> {
  const config = await loadConfigFile(args.config);
  // before the confirmation (and Redis): nothing to confirm for a command that cannot run
  checkLeasable(args, config);
  locateBucket(config, args.bucket, false);
  if (!args.yes) {
    if (!process.stdin.isTTY)
      throw new InvalidArgumentError(
        `reset ${printable(args.bucket)} needs a confirmation: run it in a terminal, or add --yes to skip it`,
      );
    const question = `Reset ${printable(args.bucket)} on ${redactUrl(args.redisUrl)} (prefix ${args.prefix})? Its counts and the holds of its calls in progress are removed. [y/N] `;
    if (!(await confirm(question))) {
      process.stderr.write('reset cancelled: nothing removed\n');
      return;
    }
  }
  const r = await onRedis(args, (store) => resetBucket(config, store, args.bucket));
  process.stderr.write(`${new Date().toISOString()} ${resetLine(r)}\n`);
  if (args.json) out.write(`${JSON.stringify(r)}\n`);
}

export function operateCommands(program: Command): void {
  const holds = program
    .command('holds')
    .summary('list calls holding a bucket or carrier')
    .description('the calls in progress holding a bucket or a carrier on a live Redis, with the end of each hold')
    .requiredOption('--config <file>', 'limit configuration (JSON or YAML) the routing processes use')
    .option('--bucket <bucket>', 'global, account:<id> or peer:<id>')
    .option('--carrier <id>', 'a carrier id');
  leaseLanesOption(
    redisOptions(holds, 'the Redis they share'),
    'their global level is leased over N lanes: read the lanes',
  )
    .option('--prefix <prefix>', 'their key prefix', 'callgate:')
    .option('--max <n>', 'list at most this many calls (the total is always shown)', intOption, LISTED_BY_DEFAULT)
    .option('--json', 'one JSON object (as GET /v1/holds)')
    .action(async (opts: HoldsArgs) => runHolds(opts));

  const release = program
    .command('release')
    .summary('free one call by id')
    .description(
      "free one call's channels on every level and carrier, whatever process admitted it (as its hang-up would)",
    )
    .requiredOption('--call-id <id>', 'the call id');
  redisOptions(release, 'the Redis the routing processes share')
    .option('--prefix <prefix>', 'their key prefix', 'callgate:')
    .option('--json', 'one JSON object (as POST /v1/release)')
    .action(async (opts: ReleaseArgs) => runRelease(opts));

  const reset = program
    .command('reset')
    .summary("empty a bucket's counts and holds")
    .description(
      "empty one bucket on a live Redis: its sliding log, its window counters and its calls' holds there (they keep their holds on other levels); asks for a confirmation",
    )
    .requiredOption('--config <file>', 'limit configuration (JSON or YAML) the routing processes use')
    .requiredOption('--bucket <bucket>', 'global, account:<id> or peer:<id>');
  leaseLanesOption(
    redisOptions(reset, 'the Redis the routing processes share'),
    'their global level is leased over N lanes: reset the bucket on its lanes',
  )
    .option('--prefix <prefix>', 'their key prefix', 'callgate:')
    .option('--yes', 'do not ask for a confirmation (needed without a terminal)')
    .option('--json', 'also print the report as one JSON object (as POST /v1/reset)')
    .action(async (opts: ResetArgs) => runReset(opts));
}
