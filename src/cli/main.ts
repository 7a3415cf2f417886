/**
 * The callgate command line. Its main job:
 *
 *   callgate replay --config FILE --trace FILE [--store memory|redis] [--redis-url URL]
 *                   [--redis-tls-ca FILE] [--redis-tls-cert FILE --redis-tls-key FILE]
 *                   [--decisions FILE|-] [--json] [--html FILE] [--compare OLD_CONFIG]
 *   callgate merge-traces --out FILE TRACE...
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
import { fileURLToPath } from 'node:url';
import { Command, InvalidArgumentError as CliArgumentError, Option } from 'commander';
import { Redis } from 'ioredis';
import { OutputFile } from './output-file.js';
import { loadConfigFile } from '../config/load.js';
import { CallGateError, InterruptedError, OutputError } from '../errors/index.js';
import { osReason } from './os-reason.js';
import { compare, compareText } from '../replay/compare.js';
import { reportHtml } from '../replay/html.js';
import { progress } from '../replay/progress.js';
import { replay, type DecisionLine } from '../replay/replay.js';
import { reportJson, reportText } from '../replay/report.js';
import { ReplaySeries } from '../replay/series.js';
import { mergeTraces } from '../replay/trace-merge.js';
import { runInspect, type InspectArgs } from './inspect.js';
import { runServe, type ServeArgs } from './serve.js';
import { DEFAULT_LISTEN } from '../server/listen.js';
import { DEFAULT_TIMEOUT_MS } from '../store/timeout.js';
import { redactUrl, redisConnectionOptions } from './redis.js';
import { packageVersion } from '../package-root.js';
import { MemoryStore } from '../store/memory-store.js';
import { RedisStore } from '../store/redis/redis-store.js';
import type { Store } from '../store/types.js';

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
  const options = {
    ...redisConnectionOptions(args),
    maxRetriesPerRequest: 1,
    lazyConnect: true,
    retryStrategy: () => null,
  };
  try {
    redis = new Redis(args.redisUrl, options);
  } catch (err) {
    // ioredis parses the URL in its constructor: "notaurl::" is a TypeError there
    throw new CallGateError(
      'ERR_INVALID_ARGUMENT',
      `invalid --redis-url ${JSON.stringify(redactUrl(args.redisUrl))}: ${(err as Error).message}`,
    );
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
    throw new CallGateError(
      'ERR_STORE_UNAVAILABLE',
      `cannot reach Redis at ${redactUrl(args.redisUrl)}: ${(lastError ?? (err as Error)).message}`,
    );
  } finally {
    signal.removeEventListener('abort', onAbort);
  }
  // a fresh prefix per run: a replay never sees, nor leaves behind, another run's counts
  const store = new RedisStore({
    redis,
    prefix: `callgate:replay:${Date.now().toString(36)}${randomBytes(3).toString('hex')}:`,
  });
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
  const baseline = args.compare !== undefined ? await loadConfigFile(args.compare) : undefined;
  // outputs opened before the stores: a target that cannot be written fails with nothing to undo
  const outputs: OutputFile[] = [];
  const abortOutputs = () =>
    outputs.forEach((o) => {
      o.abort();
    });
  interruption.onSecond = () =>
    outputs.forEach((o) => {
      o.removeTemporary();
    });
  let writer: OutputFile | undefined;
  let htmlOut: OutputFile | undefined;
  let store: Store;
  let baselineStore: Store | undefined;
  try {
    if (args.decisions !== undefined)
      outputs.push(
        (writer = await OutputFile.open(args.decisions, (name) => `decisions to ${name}`, { signal, dash: true })),
      );
    if (args.html !== undefined)
      outputs.push((htmlOut = await OutputFile.open(args.html, (name) => `the HTML report ${name}`, { signal })));
    store = await openStore(args, signal);
    // what-if: the old configuration on a store of its own
    baselineStore = baseline
      ? await openStore(args, signal).catch(async (err) => {
          await store.close();
          throw err;
        })
      : undefined;
  } catch (err) {
    abortOutputs();
    throw err;
  }
  // the report goes to stderr when an output takes stdout
  const reportOut = writer?.toStdout || htmlOut?.toStdout ? process.stderr : process.stdout;
  const bar = progress(baseline ? 'what-if' : 'replay', process.stderr, args.progress);
  const series = args.html !== undefined ? new ReplaySeries() : undefined;
  const baselineSeries = args.html !== undefined && baseline ? new ReplaySeries() : undefined;
  try {
    const common = {
      tracePath: args.trace,
      signal,
      onDecision: writer ? (d: DecisionLine) => writer.writeLine(d) : undefined,
      progressEvery: 5_000,
      onProgress: bar.update,
      series,
    };
    const { result, whatif, old } = baseline
      ? await compare({
          ...common,
          config,
          baseline,
          configName: args.config,
          baselineName: args.compare!,
          store,
          baselineStore: baselineStore!,
          baselineSeries,
        }).then((c) => ({ ...c, old: c.baseline }))
      : { result: await replay({ ...common, config, store }), whatif: undefined, old: undefined };
    bar.finish();
    await writer?.commit();
    if (htmlOut) {
      await htmlOut.write(
        reportHtml({
          result,
          series: series!,
          config,
          configPath: args.config,
          tracePath: args.trace,
          whatif,
          baselineSeries,
        }),
      );
      await htmlOut.commit();
    }
    if (args.json)
      await writeReport(
        reportOut,
        `${JSON.stringify(
          whatif ? { report: reportJson(result), baseline: reportJson(old), whatif } : reportJson(result),
        )}\n`,
      );
    else await writeReport(reportOut, `${reportText(result) + (whatif ? `\n${compareText(whatif)}` : '')}\n`);
  } catch (err) {
    bar.abort();
    abortOutputs();
    throw err;
  } finally {
    await store.close();
    await baselineStore?.close();
  }
}

/** The report; an output closed by its reader (`| true`) is one line of error, not a crash. */
async function writeReport(out: NodeJS.WriteStream, text: string): Promise<void> {
  out.on('error', () => undefined); // reported through the write's callback below
  try {
    await new Promise<void>((resolve, reject) => out.write(text, (err) => (err ? reject(err) : resolve())));
  } catch (e) {
    const name = out === process.stderr ? 'standard error' : 'standard output';
    throw new OutputError(`the report to ${name}`, osReason(e), { cause: e });
  }
}

/**
 * One line per problem, no stack trace: bad input is the user's to fix, not a crash. The messages
 * of ConfigError and TraceError hold one problem a line, at most 20 and a count of the rest.
 */
function reportFailure(err: unknown): number {
  if (err instanceof CallGateError) {
    for (const line of err.message.split('\n')) process.stderr.write(`error: ${line}\n`);
    if (err instanceof InterruptedError) return err.exitCode;
    return err.code === 'ERR_STORE_UNAVAILABLE' ? 1 : EXIT_BAD_INPUT;
  }
  process.stderr.write(`error: ${(err as Error)?.stack ?? String(err)}\n`);
  return 1;
}

export function program(): Command {
  const cmd = new Command('callgate').description(
    'Call admission and pacing on Redis: replay call traces through the engine.',
  );
  cmd.exitOverride();
  cmd.version(packageVersion(), '-V, --version', 'print the version of callgate');
  cmd
    .command('replay')
    .description('replay a call trace on a virtual clock and report every decision')
    .requiredOption('--config <file>', 'limit configuration (JSON or YAML)')
    .requiredOption('--trace <file>', 'call trace (CSV)')
    .addOption(new Option('--store <kind>', 'where counts live').choices(['memory', 'redis']).default('memory'))
    .addOption(
      new Option(
        '--redis-url <url>',
        'Redis for --store redis (rediss:// for TLS; ACL user via the URL or REDIS_USERNAME / REDIS_PASSWORD)',
      )
        // described, not shown: REDIS_URL may hold a password
        .default(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379', '$REDIS_URL, else redis://127.0.0.1:6379'),
    )
    .option(
      '--redis-tls-ca <file>',
      'PEM CA certificate(s) to verify the rediss:// server with (default: the system CAs)',
    )
    .option('--redis-tls-cert <file>', 'PEM client certificate, for a server that asks for one (with --redis-tls-key)')
    .option('--redis-tls-key <file>', 'PEM private key of --redis-tls-cert')
    .option('--decisions <file>', "write one decision per call as JSON Lines ('-' for standard output)")
    .option('--json', 'print the report as one JSON object')
    .option('--html <file>', 'also write the report with charts as one self-contained HTML file')
    .option(
      '--compare <file>',
      'what-if: replay under this (old) configuration too, report the calls decided differently',
    )
    .option('--no-progress', 'no progress bar, even on a terminal')
    .action(async (opts: ReplayArgs) => runReplay(opts));
  const int = (v: string) => (/^\d+$/.test(v) ? Number(v) : NaN);
  cmd
    .command('serve')
    .description('run the engine as an HTTP sidecar (JSON API, /metrics, /healthz, /readyz); see README "Sidecar"')
    .requiredOption('--config <file>', 'limit configuration (JSON or YAML), reloaded on SIGHUP and on change')
    .addOption(new Option('--store <kind>', 'where counts live').choices(['memory', 'redis']).default('memory'))
    .option(
      '--redis-url <url>',
      'Redis for --store redis (rediss:// for TLS; ACL user via the URL or REDIS_USERNAME / REDIS_PASSWORD)',
      process.env.REDIS_URL ?? 'redis://127.0.0.1:6379',
    )
    .option('--prefix <prefix>', 'Redis key prefix (sidecars sharing limits share it)', 'callgate:')
    .option(
      '--redis-tls-ca <file>',
      'PEM CA certificate(s) to verify the rediss:// server with (default: the system CAs)',
    )
    .option('--redis-tls-cert <file>', 'PEM client certificate, for a server that asks for one (with --redis-tls-key)')
    .option('--redis-tls-key <file>', 'PEM private key of --redis-tls-cert')
    .option('--listen <addr>', 'PORT, HOST:PORT or [IPv6]:PORT; not loopback: needs a token', DEFAULT_LISTEN)
    .addOption(
      new Option('--token <token>', 'require "Authorization: Bearer <token>" (16+ characters)').env('CALLGATE_TOKEN'),
    )
    .addOption(
      new Option('--policy <policy>', 'when Redis is out of reach')
        .choices(['fail-closed', 'fail-open', 'local'])
        .default('fail-closed'),
    )
    .option('--timeout-ms <ms>', "bound on one decision's store call", int, DEFAULT_TIMEOUT_MS)
    .option('--body-limit <bytes>', 'largest request body', int, 16384)
    .option('--retry-jitter <s>', 'add up to this many seconds to Retry-After', int, 0)
    .option(
      '--channels-status <code>',
      'SIP status for a refusal by a channel limit (default 503; 486 and 480 are common)',
      int,
    )
    .option('--log-level <level>', 'fatal, error, warn, info, debug or silent', 'info')
    .option('--no-watch', 'do not reload when the configuration file changes')
    .option('--metrics-per-bucket', 'label refusals with the configured account and peer ids, not only the level kind')
    .action(async (opts: ServeArgs) => runServe(opts));
  cmd
    .command('inspect')
    .description(
      "what the limits see now on a live Redis: each bucket's count and retry-after per limit, each carrier's queue wait",
    )
    .requiredOption('--config <file>', 'limit configuration (JSON or YAML) the routing processes use')
    .option('--redis-url <url>', 'the Redis they share', process.env.REDIS_URL ?? 'redis://127.0.0.1:6379')
    .option(
      '--redis-tls-ca <file>',
      'PEM CA certificate(s) to verify the rediss:// server with (default: the system CAs)',
    )
    .option('--redis-tls-cert <file>', 'PEM client certificate, for a server that asks for one (with --redis-tls-key)')
    .option('--redis-tls-key <file>', 'PEM private key of --redis-tls-cert')
    .option('--prefix <prefix>', 'their key prefix', 'callgate:')
    .option(
      '--peer <id>',
      'also show this peer (repeatable; peers on defaultPeer are not listed otherwise)',
      (v: string, all: string[]) => [...all, v],
      [],
    )
    .option('--json', 'one JSON object (as GET /v1/state)')
    .action(async (opts: InspectArgs) => runInspect(opts));
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
    const exitCode = reportFailure(err);
    // cleaned up; what cannot be cancelled (a FIFO's open waiting for a reader) must not keep the
    // process alive
    if (err instanceof InterruptedError) process.exit(exitCode);
    return exitCode;
  }
}

const invokedDirectly =
  process.argv[1] !== undefined && fileURLToPath(import.meta.url) === realpathSync(process.argv[1]);
if (invokedDirectly) {
  process.exitCode = await main(process.argv.slice(2));
}
