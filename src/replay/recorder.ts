/**
 * Recording live traffic as call traces: every decision's input written as one row of the
 * contract's trace CSV (`time,call_id,direction,peer,account,route,duration`), time being the
 * decision time in µs (Redis TIME live on Redis), so that `callgate replay` on the recorded
 * trace takes the same decisions. Files rotate by size; each starts with the header.
 *
 * Recording never slows or breaks a decision: rows are gathered and written once per tick, and
 * a write failure is reported (onError, the CallGate's 'error' event) and ends the recording.
 * When the disk cannot keep up, rows beyond `maxPendingBytes` waiting to be written are dropped
 * and counted (`dropped`), rather than growing the process without bound.
 *
 * Rows are written in decision order, which is time order within one process (decisions come back
 * from one Redis in the order it executed them); merge the files of several processes with
 * mergeTraces (trace-merge.ts), which keeps that order and sorts across files.
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
import type { AdmissionDecision, AdmitInput } from '../admission/Admission.js';
import type { DispatchInput, Reservation } from '../dispatch/Dispatcher.js';

export const TRACE_HEADER = 'time,call_id,direction,peer,account,route,duration';

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
  row: { time: number; callId: string; direction: 'in' | 'out'; peer?: string; account?: string; route?: readonly string[] },
  durationUs?: number,
): string {
  const duration = durationUs === undefined ? '' : epochSeconds(durationUs);
  return `${epochSeconds(row.time)},${cell(row.callId)},${row.direction},${cell(row.peer)},${cell(row.account)},${cell(row.route?.join('|'))},${duration}\n`;
}

export class TraceRecorder {
  /** Set by the CallGate: where write failures and drops are reported. */
  onError?: (err: Error) => void;
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

  constructor(opts: TraceRecorderOptions) {
    this.dir = opts.dir;
    this.prefix = opts.prefix ?? 'callgate-trace';
    this.maxBytes = opts.maxBytes ?? 64 * 1024 * 1024;
    this.maxPending = opts.maxPendingBytes ?? 64 * 1024 * 1024;
    if (!(this.maxBytes > TRACE_HEADER.length + 1)) throw new RangeError(`maxBytes must exceed the header's ${TRACE_HEADER.length + 1} bytes`);
    mkdirSync(this.dir, { recursive: true });
    this.stamp = new Date().toISOString().replace(/[-:]/g, '').replace(/\.\d+Z$/, 'Z');
  }

  /** An inbound decision (admit or record). */
  inbound(input: AdmitInput, d: AdmissionDecision): void {
    // TODO(channels, issue 10): an admitted call's row waits for release(callId) to fill `duration`
    this.add(traceRow({ time: d.at, callId: input.callId, direction: 'in', peer: input.peer, account: input.account || undefined }));
  }

  /** An outbound decision (reserve, or dispatch once reserved). */
  outbound(input: DispatchInput, r: Reservation): void {
    // TODO(channels, issue 10): a dispatched call's row waits for release(callId) to fill `duration`
    this.add(traceRow({ time: r.at, callId: input.callId, direction: 'out', route: input.route }));
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
        this.onError?.(new Error(`trace recorder: the disk is behind by more than ${this.maxPending} bytes; rows are being dropped`));
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
    const file = join(this.dir, `${this.prefix}-${this.stamp}-${process.pid}-${String(this.files.length + 1).padStart(4, '0')}.csv`);
    this.files.push(file);
    const out = createWriteStream(file, { flags: 'wx' });
    out.on('error', (err) => {
      if (this.error) return;
      this.error = err;
      this.onError?.(new Error(`trace recorder: ${err.message}`));
    });
    const header = TRACE_HEADER + '\n';
    out.write(header);
    this.out = out;
    this.bytesInFile = header.length;
  }

  /** Write what is pending and close the files; later rows are dropped. Never rejects. */
  close(): Promise<void> {
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
