/**
 * `callgate replay`: a call trace through the engine on a virtual clock, with its report (text,
 * `--json`, `--html`), its decisions (`--decisions`, JSON Lines) and a what-if against an older
 * configuration (`--compare`). Outputs are written to a temporary name and renamed only when the
 * replay succeeded (output-file.ts), so none is left half written. SIGINT / SIGTERM stop the
 * replay, remove the temporary files, delete the run's Redis keys and exit with 130 / 143.
 */
import { randomBytes } from 'node:crypto';
import { type Command, Option } from 'commander';
import { loadConfigFile } from '../config/load.js';
import type { CallGateConfig } from '../config/types.js';
import { InterruptedError, InvalidArgumentError, OutputError } from '../errors/index.js';
import { leasedLevel } from '../lease/lanes.js';
import { LeasedMemoryStore } from '../lease/replay-lanes.js';
import { compare, compareText } from '../replay/compare.js';
import { reportHtml } from '../replay/html.js';
import { progress } from '../replay/progress.js';
import { replay, type DecisionLine } from '../replay/replay.js';
import { reportJson, reportText } from '../replay/report.js';
import { ReplaySeries } from '../replay/series.js';
import { MemoryStore } from '../store/memory-store.js';
import { RedisStore } from '../store/redis/redis-store.js';
import type { Store } from '../store/types.js';
import { OutputFile, sameFileProblems } from '../output-file.js';
import { osReason } from '../os-reason.js';
import { checkLeasable, leaseLanesOption, type LeaseArgs } from './lease-lanes.js';
import { closeRedis, openRedis, redisOptions, type RedisConnectionArgs } from './redis.js';

interface ReplayArgs extends RedisConnectionArgs, LeaseArgs {
  config: string;
  trace: string;
  store: 'memory' | 'redis';
  decisions?: string;
  json?: boolean;
  html?: string;
  compare?: string;
  leaseTickMs?: number;
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
  const redis = await openRedis(args, { signal });
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
      await closeRedis(redis);
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

/** The leased deployment a replay was asked for (--lease-lanes), checked before anything starts. */
function leasedStore(args: ReplayArgs, config: CallGateConfig): LeasedMemoryStore | undefined {
  const bad = (message: string): never => {
    throw new InvalidArgumentError(message);
  };
  if (args.leaseLanes === undefined) {
    if (args.leaseTickMs !== undefined) bad('--lease-tick-ms needs --lease-lanes');
  }
  checkLeasable(args, config);
  if (args.leaseLanes === undefined) return undefined;
  if (args.store !== 'memory')
    bad('--lease-lanes replays on the memory store: a leased Redis level decides on Redis time, not a trace’s');
  if (args.compare !== undefined)
    bad('--lease-lanes is a what-if of its own (the leased deployment against the exact contract): not with --compare');
  const tickMs = args.leaseTickMs ?? 50;
  if (!(typeof tickMs === 'number' && Number.isFinite(tickMs) && tickMs >= 1 && tickMs <= 10_000))
    bad(`--lease-tick-ms: expected a number of milliseconds from 1 to 10000, got ${JSON.stringify(args.leaseTickMs)}`);
  return new LeasedMemoryStore({
    lanes: args.leaseLanes,
    overflow: args.leaseOverflow === true,
    ...(args.leasePin !== undefined && { pin: args.leasePin }),
    limit: leasedLevel(config),
    tickMs,
  });
}

const pinned = (n: number) => (n === 0 ? '' : `, ${n} owner${n === 1 ? '' : 's'} pinned`);

async function replayInterruptibly(args: ReplayArgs, interruption: Interruption): Promise<void> {
  const { signal } = interruption;
  // an output over an input (decisions over their own trace) or over another output: refused
  const clashes = sameFileProblems(
    [
      ['--decisions', args.decisions, true],
      ['--html', args.html, true],
    ],
    [
      ['--config', args.config],
      ['--trace', args.trace],
      ['--compare', args.compare],
    ],
  );
  if (clashes.length > 0) throw new InvalidArgumentError(clashes.join('\n'));
  const config = await loadConfigFile(args.config);
  signal.throwIfAborted(); // a large configuration takes a while to load
  const leased = leasedStore(args, config);
  // leased: the same configuration, exact, is the what-if's old side
  const baseline = leased ? config : args.compare !== undefined ? await loadConfigFile(args.compare) : undefined;
  const configName = leased
    ? `${args.config}, global level leased over ${leased.lanes} lane${leased.lanes === 1 ? '' : 's'}${pinned(leased.plan.pins.size)}`
    : args.config;
  const baselineName = leased ? `${args.config}, exact` : args.compare;
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
      outputs.push(
        (htmlOut = await OutputFile.open(args.html, (name) => `the HTML report ${name}`, { signal, dash: true })),
      );
    store = leased ?? (await openStore(args, signal));
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
          configName,
          baselineName: baselineName!,
          store,
          baselineStore: baselineStore!,
          baselineSeries,
        }).then((c) => ({ ...c, old: c.baseline }))
      : { result: await replay({ ...common, config, store }), whatif: undefined, old: undefined };
    bar.finish();
    // files take their names once everything is written, the report too: a report that cannot
    // be written (a full disk) leaves the old files in place, as any failure does. Standard
    // output has no name to take: flushed first, its failure (a reader gone) is the one error.
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
    }
    for (const o of outputs) if (o.toStdout) await o.commit();
    const lease = leased?.summary;
    if (args.json)
      await writeReport(
        reportOut,
        `${JSON.stringify(
          whatif
            ? { report: reportJson(result), baseline: reportJson(old), whatif, ...(lease && { lease }) }
            : reportJson(result),
        )}\n`,
      );
    else {
      const leaseLine = lease
        ? `\n\nLeased: ${lease.ticks} ticks of ${lease.tick_ms} ms; refused for lack of a lane's share: ${lease.refused_for_share.calls} (calls), ${lease.refused_for_share.channels} (channels)${lease.overflow === undefined ? '' : `; spilled to the overflow lane: ${lease.overflow.spilled}`}`
        : '';
      await writeReport(reportOut, `${reportText(result) + (whatif ? `\n${compareText(whatif)}` : '') + leaseLine}\n`);
    }
    for (const o of outputs) if (!o.toStdout) await o.commit();
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

export function replayCommand(program: Command): void {
  const cmd = program
    .command('replay')
    .summary('replay a call trace, report every decision')
    .description(
      'replay a call trace on a virtual clock and report every decision (text, JSON or HTML; optionally the ' +
        'decisions as JSON Lines, and a what-if against another configuration)',
    )
    .requiredOption('--config <file>', 'limit configuration (JSON or YAML)')
    .requiredOption('--trace <file>', 'call trace (CSV)')
    .addOption(new Option('--store <kind>', 'where counts live').choices(['memory', 'redis']).default('memory'));
  leaseLanesOption(
    redisOptions(cmd, 'Redis for --store redis'),
    'what-if: the global level leased over N lanes (docs/leasing.md) against the exact contract',
  )
    .option('--decisions <file>', "write one decision per call as JSON Lines ('-' for standard output)")
    .option('--json', 'print the report as one JSON object')
    .option('--html <file>', 'also write the report with charts as one self-contained HTML file')
    .option(
      '--compare <file>',
      'what-if: replay under this (old) configuration too, report the calls decided differently',
    )
    .option('--lease-tick-ms <ms>', "with --lease-lanes: the coordinator's tick (default 50)", (v: string) =>
      /^\d+(\.\d+)?$/.test(v) ? Number(v) : v,
    )
    .option('--no-progress', 'no progress bar, even on a terminal')
    .action(async (opts: ReplayArgs) => runReplay(opts));
}
