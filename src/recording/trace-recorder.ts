/**
 * Recording live traffic as call traces: every decision's input written as one row of the
 * contract's trace CSV (`time,call_id,direction,peer,account,route,duration`), time being the
 * decision time in µs (Redis TIME live on Redis), so that `callgate replay` on the recorded
 * trace takes the same decisions. Files rotate by size; each starts with the header.
 *
 * Durations. A call that holds channels (admitted, or dispatched) is written once its end is
 * known: release(callId) through the same CallGate (duration = the store's release time − its
 * start: the decision inbound, the slot outbound), a cancel or a failed send (duration up to
 * then, at least 0), or its hold lapsing maxCallDuration after its start or last refresh (then
 * written with an empty duration, or, when refreshed, the duration the hold lasted). A duration
 * the caller gave (`durationUs`) is written as given; refusals are written at once. Calls still
 * in progress at close() are written as if their hold lapsed. A release seen only by another
 * routing process cannot be known here: that call's row says its hold lapsed.
 *
 * Order. Rows are written as calls end, so a file is not in time order (the replay sorts it); a
 * row never goes before an earlier-decided row of the same microsecond (a batch on Redis shares
 * one), since the replay keeps the file order of equal times. mergeTraces merges the files of
 * several processes.
 *
 * Recording never slows or breaks a decision: rows are gathered and written once per tick, and
 * a write failure is reported (onError, the CallGate's 'error' event) and ends the recording.
 * When the disk cannot keep up, rows beyond `maxPendingBytes` waiting to be written are dropped
 * and counted (`dropped`), rather than growing the process without bound.
 *
 * What cannot be written as the contract's trace (the replay reports such a row as bad): a peer
 * or call id that is empty or only whitespace, a carrier id holding `|` or leading/trailing
 * spaces. Calls counted by record() (emergency calls, never refused) are written as ordinary
 * `in` rows: the trace has no way to say "forced", so a replay decides them like any call.
 * A call whose decision failed (store out of reach under the `error` policy) has no decision
 * and is not written; one decided by a degraded policy is written with the time it got.
 */
import { createWriteStream, mkdirSync, type WriteStream } from 'node:fs';
import { join } from 'node:path';
import type { AdmissionDecision, AdmitInput } from '../admission/admission.js';
import { systemClockUs } from '../clock.js';
import type { DispatchInput, Reservation } from '../dispatch/dispatcher.js';

export const TRACE_HEADER = 'time,call_id,direction,peer,account,route,duration';
/** The header of a recording with the attribute columns (docs/attributes.md), duration last still. */
export const TRACE_HEADER_ATTRIBUTES = 'time,call_id,direction,peer,account,route,caller,callee,source,duration';

export interface TraceRecorderOptions {
  /** Folder of the trace files (created when missing). */
  readonly dir: string;
  /** File names: `<prefix>-<start, UTC>-<pid>-<sequence>.csv` (default prefix `callgate-trace`). */
  readonly prefix?: string;
  /** A file is closed and the next one begun before it would pass this size (default 64 MiB). */
  readonly maxBytes?: number;
  /** Most bytes waiting for the disk before new rows are dropped (default 64 MiB). */
  readonly maxPendingBytes?: number;
}

/** RFC 4180: a cell holding a quote, a comma or a line break is quoted, quotes doubled. */
function cell(s: string | undefined): string {
  if (s === undefined) return '';
  return /[",\r\n]/.test(s) ? `"${s.replace(/"/g, '""')}"` : s;
}

/** Integer µs as epoch seconds with six decimals: exact, and read back to the same µs. */
export function epochSeconds(us: number): string {
  const t = Math.round(us);
  return `${Math.floor(t / 1e6)}.${String(t % 1e6).padStart(6, '0')}`;
}

/** One trace row (with its line break). `duration` in µs, or undefined when unknown. */
export function traceRow(
  row: {
    time: number;
    callId: string;
    direction: 'in' | 'out';
    peer?: string;
    account?: string;
    route?: readonly string[];
    caller?: string;
    callee?: string;
    source?: string;
  },
  durationUs?: number,
  attributes = false,
): string {
  const duration = durationUs === undefined ? '' : epochSeconds(durationUs);
  const attrs = attributes ? `${cell(row.caller)},${cell(row.callee)},${cell(row.source)},` : '';
  return `${epochSeconds(row.time)},${cell(row.callId)},${row.direction},${cell(row.peer)},${cell(row.account)},${cell(row.route?.join('|'))},${attrs}${duration}\n`;
}

/** A decided call whose row waits for its end (or for an earlier row of the same microsecond). */
interface Entry {
  readonly time: number;
  readonly callId: string;
  readonly direction: 'in' | 'out';
  /** The row without its duration cell and line break; the whole row once known. */
  readonly head: string;
  row?: string;
  /** Where its hold began (decision inbound, slot outbound) and when it lapses, µs. */
  readonly start: number;
  deadline: number;
  refreshed: boolean;
}

export class TraceRecorder {
  /** Set by the CallGate: where write failures and drops are reported. */
  onError?: (err: Error) => void;
  /** Set by the CallGate: how long a hold lasts unless released or refreshed, µs. */
  maxCallDurationUs: () => number = () => 4 * 3600 * 1e6;
  /** Set by the CallGate: the time, µs, to tell lapsed holds by (the store's clock when it has one). */
  now: () => number = systemClockUs;
  /**
   * Write the caller, callee and source columns (TRACE_HEADER_ATTRIBUTES): set by the CallGate
   * when its configuration has attribute levels, before the first row.
   */
  attributes = false;
  /** Every file begun, in order. */
  readonly files: string[] = [];
  rows = 0;
  dropped = 0;
  /** The write failure that ended the recording, if any. */
  error?: Error;

  private readonly dir: string;
  private readonly prefix: string;
  private readonly maxBytes: number;
  private readonly maxPending: number;
  private readonly stamp: string;
  private out?: WriteStream;
  private bytesInFile = 0;
  private batch: string[] = [];
  private flushing?: NodeJS.Immediate;
  private closing?: Promise<void>;
  private readonly ending: Promise<void>[] = [];
  private droppedReported = false;
  /** Calls waiting for their end, oldest first; by call id; rows of one microsecond in decision order. */
  private readonly waiting = new Set<Entry>();
  private readonly byCall = new Map<string, Entry[]>();
  private readonly sameTime = new Map<number, Entry[]>();
  private sweeper?: NodeJS.Timeout;

  constructor(opts: TraceRecorderOptions) {
    this.dir = opts.dir;
    this.prefix = opts.prefix ?? 'callgate-trace';
    this.maxBytes = opts.maxBytes ?? 64 * 1024 * 1024;
    this.maxPending = opts.maxPendingBytes ?? 64 * 1024 * 1024;
    if (!(this.maxBytes > TRACE_HEADER.length + 1))
      throw new RangeError(`maxBytes must exceed the header's ${TRACE_HEADER.length + 1} bytes`);
    mkdirSync(this.dir, { recursive: true });
    this.stamp = new Date()
      .toISOString()
      .replace(/[-:]/g, '')
      .replace(/\.\d+Z$/, 'Z');
  }

  /** An inbound decision (admit or record); returns it, so that it can sit in a promise chain. */
  inbound(input: AdmitInput, d: AdmissionDecision): AdmissionDecision {
    const row = {
      time: d.at,
      callId: input.callId,
      direction: 'in' as const,
      peer: input.peer,
      account: input.account || undefined,
      caller: input.caller,
      callee: input.callee,
      source: input.source,
    };
    const a = this.attributes;
    // a repeat of a call still holding (an INVITE sent again) is no call: a replay decides every
    // row as a call of its own
    if (d.duplicate) return d;
    if (!d.admitted || input.durationUs !== undefined) this.decided(row.time, traceRow(row, input.durationUs, a));
    else this.wait(row.time, input.callId, 'in', traceRow(row, undefined, a).slice(0, -1), d.at);
    return d;
  }

  /** An outbound decision (reserve, or dispatch once reserved); returns it, as inbound() does. */
  outbound(input: DispatchInput, r: Reservation): Reservation {
    const row = { time: r.at, callId: input.callId, direction: 'out' as const, route: input.route };
    const a = this.attributes;
    if (r.outcome !== 'dispatched' || input.durationUs !== undefined)
      this.decided(row.time, traceRow(row, input.durationUs, a));
    else this.wait(row.time, input.callId, 'out', traceRow(row, undefined, a).slice(0, -1), r.slotAt!);
    return r;
  }

  /**
   * The call ended at `atUs` (its release, cancel or failed send): its rows get their duration,
   * unless their hold had lapsed by then. (A call that held no channel, on levels or carriers
   * without a channel limit, gets its duration too: a what-if may add one.)
   */
  ended(callId: string, atUs: number, direction?: 'in' | 'out'): void {
    for (const e of [...(this.byCall.get(callId) ?? [])]) {
      if (direction !== undefined && e.direction !== direction) continue;
      if (atUs >= e.deadline) this.lapse(e);
      else this.complete(e, Math.max(0, Math.round(atUs - e.start)));
    }
  }

  /** The call's holds were extended at `atUs` (refresh): they now lapse maxCallDuration later. */
  refreshed(callId: string, atUs: number): void {
    for (const e of this.byCall.get(callId) ?? []) {
      e.deadline = atUs + this.maxCallDurationUs();
      e.refreshed = true;
      this.waiting.delete(e); // to the back: the oldest deadlines stay in front
      this.waiting.add(e);
    }
  }

  /** Rows of the calls whose hold lapsed by `nowUs` (checked on each decision and every second). */
  sweep(nowUs = this.now()): void {
    for (const e of this.waiting) {
      if (e.deadline > nowUs) break;
      this.lapse(e);
    }
  }

  /** A row known whole at its decision: written at once, unless an earlier one of its microsecond waits. */
  private decided(time: number, row: string): void {
    this.sweep();
    const group = this.sameTime.get(time);
    if (group)
      group.push({ time, callId: '', direction: 'in', head: '', row, start: 0, deadline: 0, refreshed: false });
    else this.add(row);
  }

  private wait(time: number, callId: string, direction: 'in' | 'out', head: string, start: number): void {
    this.sweep();
    if (this.closing || this.error) {
      this.dropped++;
      return;
    }
    const e: Entry = {
      time,
      callId,
      direction,
      head,
      start,
      deadline: start + this.maxCallDurationUs(),
      refreshed: false,
    };
    this.waiting.add(e);
    const calls = this.byCall.get(callId);
    if (calls) calls.push(e);
    else this.byCall.set(callId, [e]);
    const group = this.sameTime.get(time);
    if (group) group.push(e);
    else this.sameTime.set(time, [e]);
    if (!this.sweeper) {
      this.sweeper = setInterval(() => this.sweep(), 1000);
      this.sweeper.unref();
    }
  }

  /** The hold lapsed (or the recording ends): how long it lasted if refreshed, else unknown. */
  private lapse(e: Entry): void {
    this.complete(e, e.refreshed ? Math.round(e.deadline - e.start) : undefined);
  }

  private complete(e: Entry, durationUs: number | undefined): void {
    e.row = `${e.head}${durationUs === undefined ? '' : epochSeconds(durationUs)}\n`;
    this.waiting.delete(e);
    const calls = this.byCall.get(e.callId)!;
    calls.splice(calls.indexOf(e), 1);
    if (calls.length === 0) this.byCall.delete(e.callId);
    // write the rows of this microsecond that are whole, in decision order
    const group = this.sameTime.get(e.time)!;
    let n = 0;
    while (n < group.length && group[n]!.row !== undefined) this.add(group[n++]!.row!);
    group.splice(0, n);
    if (group.length === 0) this.sameTime.delete(e.time);
    if (this.waiting.size === 0 && this.sweeper) {
      clearInterval(this.sweeper);
      this.sweeper = undefined;
    }
  }

  /** Calls whose row waits for their end. */
  get inProgress(): number {
    return this.waiting.size;
  }

  private add(row: string): void {
    if (this.closing || this.error) {
      this.dropped++;
      return;
    }
    if (this.out && this.out.writableLength > this.maxPending) {
      this.dropped++;
      if (!this.droppedReported) {
        this.droppedReported = true;
        this.onError?.(
          new Error(`trace recorder: the disk is behind by more than ${this.maxPending} bytes; rows are being dropped`),
        );
      }
      return;
    }
    this.batch.push(row);
    this.rows++;
    this.flushing ??= setImmediate(() => this.flush());
  }

  private flush(): void {
    this.flushing = undefined;
    let chunk = '';
    for (const row of this.batch) {
      const bytes = Buffer.byteLength(row);
      if (!this.out || (this.bytesInFile + bytes > this.maxBytes && this.bytesInFile > TRACE_HEADER.length + 1)) {
        if (chunk) this.out!.write(chunk);
        chunk = '';
        this.rotate();
      }
      chunk += row;
      this.bytesInFile += bytes;
    }
    this.batch = [];
    if (chunk && this.out && !this.error) this.out.write(chunk);
    if (this.out && this.out.writableLength <= this.maxPending) this.droppedReported = false;
  }

  private rotate(): void {
    if (this.out) this.ending.push(endStream(this.out));
    const file = join(
      this.dir,
      `${this.prefix}-${this.stamp}-${process.pid}-${String(this.files.length + 1).padStart(4, '0')}.csv`,
    );
    this.files.push(file);
    const out = createWriteStream(file, { flags: 'wx' });
    out.on('error', (err) => {
      if (this.error) return;
      this.error = err;
      this.onError?.(new Error(`trace recorder: ${err.message}`));
    });
    const header = `${this.attributes ? TRACE_HEADER_ATTRIBUTES : TRACE_HEADER}\n`;
    out.write(header);
    this.out = out;
    this.bytesInFile = header.length;
  }

  /**
   * Write the calls still in progress as if their holds lapsed, then what is pending, and close
   * the files; later rows are dropped. Never rejects.
   */
  close(): Promise<void> {
    if (!this.closing) for (const e of [...this.waiting]) this.lapse(e);
    return (this.closing ??= (async () => {
      if (this.flushing) clearImmediate(this.flushing);
      this.flush();
      if (this.out) this.ending.push(endStream(this.out));
      await Promise.all(this.ending);
    })());
  }
}

function endStream(out: WriteStream): Promise<void> {
  return new Promise((resolve) => {
    if (out.destroyed) return resolve();
    out.once('error', () => resolve());
    out.end(() => resolve());
  });
}
