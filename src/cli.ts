/**
 * The callgate command line. Its main job:
 *
 *   callgate replay --config FILE --trace FILE [--store memory|redis] [--redis-url URL]
 *                   [--redis-tls-ca FILE] [--redis-tls-cert FILE --redis-tls-key FILE]
 *                   [--decisions FILE|-] [--json] [--html FILE] [--compare OLD_CONFIG]
 *   callgate merge-traces --out FILE TRACE...
 *
 * Bad input (an invalid configuration, a malformed trace, an unreadable file) ends with exit
 * code 2 and one line per problem, no stack trace; a decisions file is written to a temporary
 * name and renamed only when the replay succeeded, so it is never left half written.
 */
import { randomBytes } from 'node:crypto';
import { createWriteStream, realpathSync, renameSync, rmSync, type WriteStream } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { Command, InvalidArgumentError as CliArgumentError, Option } from 'commander';
import { Redis } from 'ioredis';
import { ConfigError } from './config/ConfigError.js';
import { loadConfigFile } from './config/load.js';
import { CallgateError } from './errors/index.js';
import { compare, compareText } from './replay/compare.js';
import { checkHtmlTarget, writeHtmlReport } from './replay/html.js';
import { progress } from './replay/progress.js';
import { replay, type DecisionLine } from './replay/replay.js';
import { reportJson, reportText } from './replay/report.js';
import { ReplaySeries } from './replay/series.js';
import { mergeTraces } from './replay/trace-merge.js';
import { TraceError, formatProblem } from './replay/trace.js';
import { redactUrl, redisConnectionOptions } from './cliRedisOptions.js';
import { packageVersion } from './packageRoot.js';
import { MemoryStore } from './store/MemoryStore.js';
import { RedisStore } from './store/RedisStore.js';
import type { Store } from './store/types.js';

const EXIT_BAD_INPUT = 2;

interface ReplayArgs {
  config: string;
  trace: string;
  store: 'memory' | 'redis';
  redisUrl: string;
  redisTlsCa?: string;
  redisTlsCert?: string;
  redisTlsKey?: string;
  decisions?: string;
  json?: boolean;
  html?: string;
  compare?: string;
  progress: boolean;
}

/** Decisions as JSON Lines, to a temporary file renamed into place on success (or stdout). */
class DecisionWriter {
  private readonly out: WriteStream | NodeJS.WriteStream;
  private readonly tmp?: string;

  constructor(private readonly target: string) {
    if (target === '-') this.out = process.stdout;
    else {
      this.tmp = `${target}.tmp-${process.pid}-${randomBytes(3).toString('hex')}`;
      this.out = createWriteStream(this.tmp);
    }
  }

  private buffer: string[] = [];

  /** Returns a promise only when the output is full: the replay then waits (flat memory). */
  write(d: DecisionLine): Promise<void> | undefined {
    this.buffer.push(JSON.stringify(d));
    if (this.buffer.length >= 512 && !this.flush()) return new Promise((resolve) => this.out.once('drain', resolve));
    return undefined;
  }

  private flush(): boolean {
    const ok = this.buffer.length > 0 ? this.out.write(this.buffer.join('\n') + '\n') : true;
    this.buffer = [];
    return ok;
  }

  private end(): Promise<void> {
    this.flush();
    if (this.out === process.stdout) return Promise.resolve();
    return new Promise((resolve, reject) => {
      this.out.once('error', reject);
      (this.out as WriteStream).end(() => resolve());
    });
  }

  async commit(): Promise<void> {
    await this.end();
    if (this.tmp) renameSync(this.tmp, this.target);
  }

  async abort(): Promise<void> {
    await this.end().catch(() => undefined);
    if (this.tmp) rmSync(this.tmp, { force: true });
  }
}

async function openStore(args: ReplayArgs): Promise<Store> {
  if (args.store === 'memory') return new MemoryStore();
  // a fresh prefix per run: a replay never sees, nor leaves behind, another run's counts
  const redis = new Redis(args.redisUrl, { ...redisConnectionOptions(args), maxRetriesPerRequest: 1, lazyConnect: true, retryStrategy: () => null });
  // connection errors surface through the commands that fail; keep the cause for the message
  let lastError: Error | undefined;
  redis.on('error', (err: Error) => (lastError = err));
  try {
    await redis.connect();
  } catch (err) {
    redis.disconnect();
    throw new CallgateError('ERR_STORE_UNAVAILABLE', `cannot reach Redis at ${redactUrl(args.redisUrl)}: ${(lastError ?? (err as Error)).message}`);
  }
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
  const config = await loadConfigFile(args.config);
  const baseline = args.compare !== undefined ? await loadConfigFile(args.compare) : undefined;
  if (args.html !== undefined) checkHtmlTarget(args.html);
  const store = await openStore(args);
  // what-if: the old configuration on a store of its own
  const baselineStore = baseline ? await openStore(args).catch(async (err) => (await store.close(), Promise.reject(err))) : undefined;
  const writer = args.decisions !== undefined ? new DecisionWriter(args.decisions) : undefined;
  // the report goes to stderr when the decisions take stdout
  const reportOut = args.decisions === '-' ? process.stderr : process.stdout;
  const bar = progress(baseline ? 'what-if' : 'replay', process.stderr, args.progress);
  const series = args.html !== undefined ? new ReplaySeries() : undefined;
  const baselineSeries = args.html !== undefined && baseline ? new ReplaySeries() : undefined;
  try {
    const common = { tracePath: args.trace, onDecision: writer ? (d: DecisionLine) => writer.write(d) : undefined, progressEvery: 5_000, onProgress: bar.update, series };
    const { result, whatif, old } = baseline
      ? await compare({ ...common, config, baseline, configName: args.config, baselineName: args.compare!, store, baselineStore: baselineStore!, baselineSeries }).then((c) => ({ ...c, old: c.baseline }))
      : { result: await replay({ ...common, config, store }), whatif: undefined, old: undefined };
    bar.finish();
    await writer?.commit();
    if (args.html !== undefined) writeHtmlReport(args.html, { result, series: series!, config, configPath: args.config, tracePath: args.trace, whatif, baselineSeries });
    if (args.json) reportOut.write(JSON.stringify(whatif ? { report: reportJson(result), baseline: reportJson(old!), whatif } : reportJson(result)) + '\n');
    else reportOut.write(reportText(result) + (whatif ? '\n' + compareText(whatif) : '') + '\n');
  } catch (err) {
    bar.abort();
    await writer?.abort();
    throw err;
  } finally {
    await store.close();
    await baselineStore?.close();
  }
}

/** One line per problem, no stack trace: bad input is the user's to fix, not a crash. */
function reportFailure(err: unknown): number {
  if (err instanceof TraceError) {
    for (const p of err.problems) process.stderr.write(`error: ${formatProblem(p)}\n`);
    return EXIT_BAD_INPUT;
  }
  if (err instanceof ConfigError) {
    for (const p of err.problems) process.stderr.write(`error: ${p}\n`);
    return EXIT_BAD_INPUT;
  }
  if (err instanceof CallgateError) {
    process.stderr.write(`error: ${err.message}\n`);
    return err.code === 'ERR_STORE_UNAVAILABLE' ? 1 : EXIT_BAD_INPUT;
  }
  process.stderr.write(`error: ${(err as Error)?.stack ?? String(err)}\n`);
  return 1;
}

export function program(): Command {
  const cmd = new Command('callgate').description('Call admission and pacing on Redis: replay call traces through the engine.');
  cmd.exitOverride();
  cmd.version(packageVersion(), '-V, --version', 'print the version of callgate');
  cmd
    .command('replay')
    .description('replay a call trace on a virtual clock and report every decision')
    .requiredOption('--config <file>', 'limit configuration (JSON or YAML)')
    .requiredOption('--trace <file>', 'call trace (CSV)')
    .addOption(new Option('--store <kind>', 'where counts live').choices(['memory', 'redis']).default('memory'))
    .addOption(
      new Option('--redis-url <url>', 'Redis for --store redis (rediss:// for TLS; ACL user via the URL or REDIS_USERNAME / REDIS_PASSWORD)')
        // described, not shown: REDIS_URL may hold a password
        .default(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379', '$REDIS_URL, else redis://127.0.0.1:6379'),
    )
    .option('--redis-tls-ca <file>', 'PEM CA certificate(s) to verify the rediss:// server with (default: the system CAs)')
    .option('--redis-tls-cert <file>', 'PEM client certificate, for a server that asks for one (with --redis-tls-key)')
    .option('--redis-tls-key <file>', 'PEM private key of --redis-tls-cert')
    .option('--decisions <file>', "write one decision per call as JSON Lines ('-' for standard output)")
    .option('--json', 'print the report as one JSON object')
    .option('--html <file>', 'also write the report with charts as one self-contained HTML file')
    .option('--compare <file>', 'what-if: replay under this (old) configuration too, report the calls decided differently')
    .option('--no-progress', 'no progress bar, even on a terminal')
    .action(async (opts: ReplayArgs) => runReplay(opts));
  cmd
    .command('merge-traces')
    .description('merge recorded traces (several processes, rotated files) into one, in time order')
    .requiredOption('--out <file>', 'the merged trace (written whole or not at all)')
    .argument('<traces...>', 'recorded trace files; equal times keep the order given')
    .action(async (traces: string[], opts: { out: string }) => {
      const r = await mergeTraces(traces, opts.out);
      process.stdout.write(`${opts.out}: ${r.rows} calls from ${traces.length} files\n`);
    });
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
    return reportFailure(err);
  }
}

const invokedDirectly = process.argv[1] !== undefined && fileURLToPath(import.meta.url) === realpathSync(process.argv[1]);
if (invokedDirectly) {
  process.exitCode = await main(process.argv.slice(2));
}
