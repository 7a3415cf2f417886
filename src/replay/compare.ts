/**
 * What-if: one trace replayed under two configurations (each on its own store), and the calls
 * whose decision differs, grouped by what changed (level or carrier, and reason).
 *
 * The two replays run side by side and are paired call by call as they go (both process the
 * trace in the same order), so memory stays flat however long the trace: at most PAIR_AHEAD
 * decisions of the faster one wait for the other.
 */
import type { CallGateConfig } from '../config/types.js';
import { printable } from '../ids.js';
import type { Store } from '../store/types.js';
import { replay, type DecisionLine, type ReplayResult } from './replay.js';
import type { ReplaySeries } from './series.js';
import { formatTime } from './trace.js';

export interface CompareOptions {
  /** The configuration under test ("new"), and the one it is compared with ("old"). */
  readonly config: CallGateConfig;
  readonly baseline: CallGateConfig;
  readonly configName: string;
  readonly baselineName: string;
  readonly tracePath: string;
  /** Two independent stores: counts of one run never meet the other's. */
  readonly store: Store;
  readonly baselineStore: Store;
  /** The new configuration's decisions, in processing order. */
  readonly onDecision?: (d: DecisionLine) => void | Promise<void>;
  /** (calls done under both, total). */
  readonly onProgress?: (done: number, total: number) => void;
  readonly progressEvery?: number;
  /** Fed with the new configuration's decisions, and with the old one's. */
  readonly series?: ReplaySeries;
  readonly baselineSeries?: ReplaySeries;
  /** Stops both replays (see ReplayOptions.signal). */
  readonly signal?: AbortSignal;
}

export interface DiffCall {
  call_id: string;
  time: string;
  direction: 'in' | 'out';
  old: string;
  new: string;
}

export interface CompareJson {
  config: string;
  baseline_config: string;
  calls: number;
  /** Calls whose decision differs (outcome, level or reason; carrier for outbound). */
  differing: number;
  inbound: { differing: number; now_admitted: number; now_rejected: number; rejected_elsewhere: number };
  outbound: {
    differing: number;
    now_dispatched: number;
    now_rejected: number;
    other_carrier: number;
    delay_only: number;
  };
  /** One sentence saying the above. */
  summary: string;
  /** Counts under each configuration (sub-rows: only the levels and carriers whose count changed). */
  totals: { metric: string; old: number; new: number }[];
  /** Busiest first: every (old decision, new decision) pair with its count and first calls. */
  groups: { direction: 'in' | 'out'; from: string; to: string; count: number; calls: string[] }[];
  /** The first MAX_LISTED differing calls, in processing order. */
  calls_listed: DiffCall[];
}

export interface CompareOutcome {
  result: ReplayResult;
  baseline: ReplayResult;
  whatif: CompareJson;
}

/** Most differing calls listed one by one (all are counted). */
export const MAX_LISTED = 1000;
/** First calls named per group. */
const GROUP_EXAMPLES = 5;
/** Most decisions of one replay waiting for the other's. */
const PAIR_AHEAD = 1024;

/** A decision as one comparable label: what happened, where, and why. */
export function decisionLabel(d: DecisionLine): string {
  if (d.direction === 'in') {
    if (d.outcome === 'admitted') return 'admitted';
    const reason = (d as { reason?: string }).reason;
    return `rejected by ${d.limited_by}${reason ? ` (${reason})` : ''}`;
  }
  return d.outcome === 'dispatched' ? `dispatched on ${d.carrier}` : `rejected (${d.reason ?? 'no reason'})`;
}

/** Decisions of the old run waiting for the new run's, in order; a failure of either ends both. */
class Pairing {
  private queue: DecisionLine[] = [];
  private head = 0;
  private wantItem?: { resolve: (d: DecisionLine) => void; reject: (e: Error) => void };
  private wantSpace?: { resolve: () => void; reject: (e: Error) => void };
  private failure?: Error;
  private ended = false;

  get size(): number {
    return this.queue.length - this.head;
  }

  push(d: DecisionLine): Promise<void> | undefined {
    if (this.failure) return Promise.reject(this.failure);
    if (this.wantItem) {
      const w = this.wantItem;
      this.wantItem = undefined;
      w.resolve(d);
      return undefined;
    }
    this.queue.push(d);
    if (this.size < PAIR_AHEAD) return undefined;
    return new Promise((resolve, reject) => (this.wantSpace = { resolve, reject }));
  }

  /** The next old decision: at once when waiting, else a promise. */
  take(): DecisionLine | Promise<DecisionLine> {
    if (this.failure) return Promise.reject(this.failure);
    if (this.size === 0) {
      if (this.ended) return Promise.reject(new Error('what-if: the baseline replay decided fewer calls'));
      return new Promise((resolve, reject) => (this.wantItem = { resolve, reject }));
    }
    const d = this.queue[this.head++]!;
    if (this.head > 4096 && this.head * 2 > this.queue.length) {
      this.queue = this.queue.slice(this.head);
      this.head = 0;
    }
    if (this.wantSpace && this.size < PAIR_AHEAD) {
      const w = this.wantSpace;
      this.wantSpace = undefined;
      w.resolve();
    }
    return d;
  }

  /** The old run is done: a take() beyond what it decided fails. */
  end(): void {
    this.ended = true;
    this.wantItem?.reject(new Error('what-if: the baseline replay decided fewer calls'));
    this.wantItem = undefined;
  }

  fail(err: Error): void {
    this.failure ??= err;
    this.wantItem?.reject(this.failure);
    this.wantSpace?.reject(this.failure);
    this.wantItem = this.wantSpace = undefined;
  }
}

class Differences {
  calls = 0;
  readonly inbound = { differing: 0, now_admitted: 0, now_rejected: 0, rejected_elsewhere: 0 };
  readonly outbound = { differing: 0, now_dispatched: 0, now_rejected: 0, other_carrier: 0, delay_only: 0 };
  readonly groups = new Map<string, CompareJson['groups'][number]>();
  readonly listed: DiffCall[] = [];

  constructor(private readonly attributeLevels: ReadonlySet<string> = new Set()) {}

  /** A label for grouping: an attribute level's value becomes `*` (a group per level, not per value). */
  private groupLabel(label: string): string {
    const m = /^rejected by ([^:]+):.*?( \([a-z-]+\))?$/.exec(label);
    return m && this.attributeLevels.has(m[1]!) ? `rejected by ${m[1]}:*${m[2] ?? ''}` : label;
  }

  add(old: DecisionLine, neu: DecisionLine): void {
    this.calls++;
    if (old.call_id !== neu.call_id || old.direction !== neu.direction) {
      throw new Error(
        `what-if: the two replays went out of step at call ${this.calls} (${old.call_id} / ${neu.call_id})`,
      );
    }
    const from = decisionLabel(old);
    const to = decisionLabel(neu);
    if (from === to) {
      if (neu.direction === 'out' && old.direction === 'out' && neu.delay_ms !== old.delay_ms)
        this.outbound.delay_only++;
      return;
    }
    if (neu.direction === 'in') {
      this.inbound.differing++;
      if (neu.outcome === 'admitted') this.inbound.now_admitted++;
      else if (old.outcome === 'admitted') this.inbound.now_rejected++;
      else this.inbound.rejected_elsewhere++;
    } else {
      this.outbound.differing++;
      if (neu.outcome === 'rejected') this.outbound.now_rejected++;
      else if (old.outcome === 'rejected') this.outbound.now_dispatched++;
      else this.outbound.other_carrier++;
    }
    const gFrom = this.groupLabel(from);
    const gTo = this.groupLabel(to);
    const key = `${neu.direction}\u0000${gFrom}\u0000${gTo}`;
    let g = this.groups.get(key);
    if (!g) this.groups.set(key, (g = { direction: neu.direction, from: gFrom, to: gTo, count: 0, calls: [] }));
    g.count++;
    if (g.calls.length < GROUP_EXAMPLES) g.calls.push(neu.call_id);
    if (this.listed.length < MAX_LISTED) {
      this.listed.push({
        call_id: neu.call_id,
        time: formatTime(neu.time_us),
        direction: neu.direction,
        old: from,
        new: to,
      });
    }
  }
}

function totals(old: ReplayResult, neu: ReplayResult): CompareJson['totals'] {
  const rows: CompareJson['totals'] = [
    { metric: 'inbound admitted', old: old.inbound.admitted, new: neu.inbound.admitted },
    { metric: 'inbound rejected', old: old.inbound.rejected, new: neu.inbound.rejected },
  ];
  const by = new Set([...old.inbound.byReason.keys(), ...neu.inbound.byReason.keys()]);
  for (const k of [...by].sort()) {
    const row = {
      metric: `  rejected by ${k}`,
      old: old.inbound.byReason.get(k) ?? 0,
      new: neu.inbound.byReason.get(k) ?? 0,
    };
    if (row.old !== row.new) rows.push(row); // the levels that changed
  }
  rows.push(
    { metric: 'outbound dispatched', old: old.outbound.dispatched, new: neu.outbound.dispatched },
    { metric: 'outbound rejected', old: old.outbound.rejected, new: neu.outbound.rejected },
    { metric: 'outbound rerouted', old: old.outbound.rerouted, new: neu.outbound.rerouted },
  );
  const carriers = new Set([...old.carriers.keys(), ...neu.carriers.keys()]);
  for (const id of [...carriers].sort()) {
    const row = {
      metric: `  dispatched on ${id}`,
      old: old.carriers.get(id)?.dispatched ?? 0,
      new: neu.carriers.get(id)?.dispatched ?? 0,
    };
    if (row.old !== row.new) rows.push(row);
  }
  return rows;
}

function summary(d: Differences, configName: string, baselineName: string): string {
  const i = d.inbound;
  const o = d.outbound;
  const parts = [
    `${i.differing + o.differing} of ${d.calls} calls decided differently under ${configName} than under ${baselineName}`,
    `inbound ${i.differing} (${i.now_admitted} now admitted, ${i.now_rejected} now rejected, ${i.rejected_elsewhere} rejected by another level or reason)`,
    `outbound ${o.differing} (${o.now_dispatched} now dispatched, ${o.now_rejected} now rejected, ${o.other_carrier} on another carrier); ${o.delay_only} more outbound calls changed only their delay`,
  ];
  return `${parts[0]}: ${parts[1]}; ${parts[2]}.`;
}

export async function compare(opts: CompareOptions): Promise<CompareOutcome> {
  const pairing = new Pairing();
  // attribute levels of either configuration: their values stay out of the group keys (unbounded)
  const levels = new Set(
    [...(opts.config.inbound.attributes ?? []), ...(opts.baseline.inbound.attributes ?? [])].map((l) => l.name),
  );
  const diff = new Differences(levels);
  const every = opts.progressEvery ?? 10_000;
  const done = { old: 0, neu: 0 };
  const progress = (side: 'old' | 'neu') => (n: number, total: number) => {
    done[side] = n;
    opts.onProgress?.(Math.min(done.old, done.neu), total);
  };
  const onNew = (d: DecisionLine): void | Promise<void> => {
    const old = pairing.take();
    if (old instanceof Promise) {
      return old.then((o) => {
        diff.add(o, d);
        return opts.onDecision?.(d);
      });
    }
    diff.add(old, d);
    return opts.onDecision?.(d);
  };
  // the first failure is the cause; the other run then fails through the pairing
  let firstError: unknown;
  const run = <T>(p: Promise<T>): Promise<T> =>
    p.catch((err: Error) => {
      firstError ??= err;
      pairing.fail(err);
      throw err;
    });
  const [baseline, result] = await Promise.allSettled([
    run(
      replay({
        config: opts.baseline,
        tracePath: opts.tracePath,
        store: opts.baselineStore,
        onDecision: (d) => pairing.push(d),
        onProgress: progress('old'),
        progressEvery: every,
        series: opts.baselineSeries,
        signal: opts.signal,
      }),
    ).then((r) => {
      pairing.end();
      return r;
    }),
    run(
      replay({
        config: opts.config,
        tracePath: opts.tracePath,
        store: opts.store,
        onDecision: onNew,
        onProgress: progress('neu'),
        progressEvery: every,
        series: opts.series,
        signal: opts.signal,
      }),
    ),
  ]);
  if (baseline.status === 'rejected' || result.status === 'rejected') throw firstError;
  const old = baseline.value;
  const neu = result.value;
  if (pairing.size > 0 || diff.calls !== neu.calls || old.calls !== neu.calls) {
    throw new Error(`what-if: the two replays decided ${old.calls} and ${neu.calls} calls, ${diff.calls} paired`);
  }
  const groups = [...diff.groups.values()].sort(
    (a, b) =>
      b.count - a.count ||
      (a.direction < b.direction ? -1 : a.direction > b.direction ? 1 : 0) ||
      (a.from + a.to < b.from + b.to ? -1 : 1),
  );
  return {
    result: neu,
    baseline: old,
    whatif: {
      config: opts.configName,
      baseline_config: opts.baselineName,
      calls: diff.calls,
      differing: diff.inbound.differing + diff.outbound.differing,
      inbound: diff.inbound,
      outbound: diff.outbound,
      summary: summary(diff, opts.configName, opts.baselineName),
      totals: totals(old, neu),
      groups,
      calls_listed: diff.listed,
    },
  };
}

const pad = (s: string | number, w: number, right = false): string =>
  right ? String(s).padStart(w) : String(s).padEnd(w);

/** Groups listed in the text report (the busiest). */
const TEXT_GROUPS = 25;

/** The what-if section of the text report. */
export function compareText(w: CompareJson): string {
  // ids, labels and file names as a terminal may show them (printable)
  const out: string[] = [
    '',
    printable(`What-if: ${w.config} (new) against ${w.baseline_config} (old)`),
    printable(w.summary),
    '',
  ];
  const totals = w.totals.map((t) => ({ ...t, metric: printable(t.metric) }));
  const mw = Math.max(...totals.map((t) => t.metric.length), 6);
  const nw = Math.max(...totals.flatMap((t) => [String(t.old).length, String(t.new).length]), 3);
  out.push(`${pad('', mw)}  ${pad('old', nw, true)}  ${pad('new', nw, true)}  change`);
  for (const t of totals) {
    const c = t.new - t.old;
    out.push(`${pad(t.metric, mw)}  ${pad(t.old, nw, true)}  ${pad(t.new, nw, true)}  ${c > 0 ? `+${c}` : c}`);
  }
  if (w.groups.length > 0) {
    out.push('', 'Calls decided differently (old decision → new decision: calls, first calls)');
    for (const g of w.groups.slice(0, TEXT_GROUPS)) {
      const more = g.count > g.calls.length ? ', …' : '';
      out.push(
        printable(
          `  ${g.direction === 'in' ? 'in ' : 'out'}  ${g.from} → ${g.to}: ${g.count} (${g.calls.join(', ')}${more})`,
        ),
      );
    }
    if (w.groups.length > TEXT_GROUPS)
      out.push(`  … and ${w.groups.length - TEXT_GROUPS} smaller groups (every group in --json and --html)`);
  }
  return out.join('\n');
}
