/**
 * The callgate command line. Its main job:
 *
 *   callgate replay --config FILE --trace FILE [--store memory|redis] [--redis-url URL]
 *                   [--decisions FILE|-] [--json]
 *
 * Bad input (an invalid configuration, a malformed trace, an unreadable file, a decisions file
 * that cannot be written, a bad option) ends with exit code 2 and one line per problem (at most
 * 20, then a count), no stack trace; an unreachable Redis with exit code 1. A decisions file is
 * written to a temporary name and renamed only when the replay succeeded, so it is never left
 * half written (see cli/decisionsFile.ts). SIGINT / SIGTERM stop the replay, remove the temporary
 * file, delete the run's Redis keys and exit with 130 / 143.
 */
import { randomBytes } from 'node:crypto';
import { realpathSync } from 'node:fs';
import { constants as osConstants } from 'node:os';
import { fileURLToPath } from 'node:url';
import { Command, InvalidArgumentError as CliArgumentError, Option } from 'commander';
import cliProgress from 'cli-progress';
import { Redis } from 'ioredis';
import { DecisionsFile } from './cli/decisionsFile.js';
import { loadConfigFile } from './config/load.js';
import { CallgateError } from './errors/index.js';
import { osReason } from './errors/osReason.js';
import { replay } from './replay/replay.js';
import { reportJson, reportText } from './replay/report.js';
import { MemoryStore } from './store/MemoryStore.js';
import { RedisStore } from './store/RedisStore.js';
import type { Store } from './store/types.js';

const EXIT_BAD_INPUT = 2;

interface ReplayArgs {
  config: string;
  trace: string;
  store: 'memory' | 'redis';
  redisUrl: string;
  decisions?: string;
  json?: boolean;
  progress: boolean;
}

/** SIGINT or SIGTERM received: the replay stops and the process exits with 128 + its number. */
class InterruptedError extends CallgateError {
  constructor(readonly signal: 'SIGINT' | 'SIGTERM') {
    super('ERR_INTERRUPTED', `interrupted by ${signal}`);
  }

  get exitCode(): number {
    return 128 + osConstants.signals[this.signal];
  }
}

/**
 * SIGINT / SIGTERM while replaying: the first aborts `signal` (the replay stops at the next row
 * or call, then everything is cleaned up as after any failure); a second one exits at once,
 * after the synchronous part of the clean-up (removing the temporary decisions file).
 */
class Interruption {
  private readonly controller = new AbortController();
  readonly signal = this.controller.signal;
  /** Run before exiting on a second signal. */
  onSecond: () => void = () => undefined;

  private readonly handler = (sig: 'SIGINT' | 'SIGTERM'): void => {
    const err = new InterruptedError(sig);
    if (this.signal.aborted) {
      this.onSecond();
      process.exit(err.exitCode);
    }
    this.controller.abort(err);
  };

  constructor() {
    process.on('SIGINT', this.handler);
    process.on('SIGTERM', this.handler);
  }

  dispose(): void {
    process.off('SIGINT', this.handler);
    process.off('SIGTERM', this.handler);
  }
}

async function openStore(args: ReplayArgs, signal: AbortSignal): Promise<Store> {
  if (args.store === 'memory') return new MemoryStore();
  let redis: Redis;
  try {
    redis = new Redis(args.redisUrl, { maxRetriesPerRequest: 1, lazyConnect: true, retryStrategy: () => null });
  } catch (err) {
    // ioredis parses the URL in its constructor: "notaurl::" is a TypeError there
    throw new CallgateError('ERR_INVALID_ARGUMENT', `invalid --redis-url ${JSON.stringify(args.redisUrl)}: ${(err as Error).message}`);
  }
  // connection errors surface through the commands that fail; keep the cause for the message
  let lastError: Error | undefined;
  redis.on('error', (err: Error) => (lastError = err));
  const onAbort = () => redis.disconnect();
  signal.addEventListener('abort', onAbort, { once: true });
  try {
    await redis.connect();
  } catch (err) {
    redis.disconnect();
    signal.throwIfAborted();
    throw new CallgateError('ERR_STORE_UNAVAILABLE', `cannot reach Redis at ${args.redisUrl}: ${(lastError ?? (err as Error)).message}`);
  } finally {
    signal.removeEventListener('abort', onAbort);
  }
  // a fresh prefix per run: a replay never sees, nor leaves behind, another run's counts
  const store = new RedisStore({ redis, prefix: `callgate:replay:${Date.now().toString(36)}${randomBytes(3).toString('hex')}:` });
  const close = store.close.bind(store);
  // closed by the replay's engine, and again by runReplay when the replay failed first: once only
  let closing: Promise<void> | undefined;
  store.close = () =>
    (closing ??= (async () => {
      await store.clear().catch(() => undefined);
      await close();
      await redis.quit().catch(() => redis.disconnect());
    })());
  return store;
}

async function runReplay(args: ReplayArgs): Promise<void> {
  const interruption = new Interruption();
  try {
    await replayInterruptibly(args, interruption);
  } finally {
    interruption.dispose();
  }
}

async function replayInterruptibly(args: ReplayArgs, interruption: Interruption): Promise<void> {
  const { signal } = interruption;
  const config = await loadConfigFile(args.config);
  signal.throwIfAborted(); // a large configuration takes a while to load
  // opened before the store: a target that cannot be written fails with nothing to undo
  const writer = args.decisions !== undefined ? await DecisionsFile.open(args.decisions, signal) : undefined;
  if (writer) interruption.onSecond = () => writer.removeTemporary();
  let store: Store;
  try {
    store = await openStore(args, signal);
  } catch (err) {
    writer?.abort();
    throw err;
  }
  // the report goes to stderr when the decisions take stdout
  const reportOut = writer?.toStdout ? process.stderr : process.stdout;
  const bar =
    args.progress && process.stderr.isTTY
      ? new cliProgress.SingleBar({ stream: process.stderr, format: 'replay [{bar}] {percentage}% {value}/{total} calls', hideCursor: true }, cliProgress.Presets.shades_classic)
      : undefined;
  let barStarted = false;
  try {
    const result = await replay({
      config,
      tracePath: args.trace,
      store,
      signal,
      onDecision: writer ? (d) => writer.write(d) : undefined,
      progressEvery: 5_000,
      onProgress: bar
        ? (done, total) => {
            if (!barStarted && total >= 50_000) {
              bar.start(total, 0);
              barStarted = true;
            }
            if (barStarted) bar.update(done);
          }
        : undefined,
    });
    if (barStarted) bar!.stop();
    await writer?.commit();
    await writeReport(reportOut, (args.json ? JSON.stringify(reportJson(result)) : reportText(result)) + '\n');
  } catch (err) {
    if (barStarted) bar!.stop();
    writer?.abort();
    throw err;
  } finally {
    await store.close();
  }
}

/** The report; an output closed by its reader (`| true`) is one line of error, not a crash. */
async function writeReport(out: NodeJS.WriteStream, text: string): Promise<void> {
  out.on('error', () => undefined); // reported through the write's callback below
  try {
    await new Promise<void>((resolve, reject) => out.write(text, (err) => (err ? reject(err) : resolve())));
  } catch (e) {
    const name = out === process.stderr ? 'standard error' : 'standard output';
    throw new CallgateError('ERR_OUTPUT', `cannot write the report to ${name}: ${osReason(e)}`, { cause: e });
  }
}

/**
 * One line per problem, no stack trace: bad input is the user's to fix, not a crash. The messages
 * of ConfigError and TraceError hold one problem a line, at most 20 and a count of the rest.
 */
function reportFailure(err: unknown): number {
  if (err instanceof CallgateError) {
    for (const line of err.message.split('\n')) process.stderr.write(`error: ${line}\n`);
    if (err instanceof InterruptedError) return err.exitCode;
    return err.code === 'ERR_STORE_UNAVAILABLE' ? 1 : EXIT_BAD_INPUT;
  }
  process.stderr.write(`error: ${(err as Error)?.stack ?? String(err)}\n`);
  return 1;
}

export function program(): Command {
  const cmd = new Command('callgate').description('Call admission and pacing on Redis: replay call traces through the engine.');
  cmd.exitOverride();
  cmd
    .command('replay')
    .description('replay a call trace on a virtual clock and report every decision')
    .requiredOption('--config <file>', 'limit configuration (JSON or YAML)')
    .requiredOption('--trace <file>', 'call trace (CSV)')
    .addOption(new Option('--store <kind>', 'where counts live').choices(['memory', 'redis']).default('memory'))
    .option('--redis-url <url>', 'Redis for --store redis', process.env.REDIS_URL ?? 'redis://127.0.0.1:6379')
    .option('--decisions <file>', "write one decision per call as JSON Lines ('-' for standard output)")
    .option('--json', 'print the report as one JSON object')
    .option('--no-progress', 'no progress bar, even on a terminal')
    .action(async (opts: ReplayArgs) => runReplay(opts));
  return cmd;
}

export async function main(argv: string[]): Promise<number> {
  try {
    await program().parseAsync(argv, { from: 'user' });
    return 0;
  } catch (err) {
    const code = (err as { code?: string }).code;
    if (code === 'commander.helpDisplayed' || code === 'commander.version' || code === 'commander.help') return 0;
    if (typeof code === 'string' && code.startsWith('commander.')) return EXIT_BAD_INPUT; // commander printed it
    if (err instanceof CliArgumentError) return EXIT_BAD_INPUT;
    const exitCode = reportFailure(err);
    // cleaned up; what cannot be cancelled (a FIFO's open waiting for a reader) must not keep the
    // process alive
    if (err instanceof InterruptedError) process.exit(exitCode);
    return exitCode;
  }
}

const invokedDirectly = process.argv[1] !== undefined && fileURLToPath(import.meta.url) === realpathSync(process.argv[1]);
if (invokedDirectly) {
  process.exitCode = await main(process.argv.slice(2));
}
