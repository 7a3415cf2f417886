/**
 * Merge recorded traces (several routing processes, rotated files) into one trace in the
 * contract's processing order: a streaming k-way merge by time, rows of equal time in the order
 * of the inputs (then file order), so each input's own order is kept. Memory holds one row per
 * input. Every input is validated as it is read: a bad row stops the merge with a TraceError
 * and no output file is left behind.
 */
import { randomBytes } from 'node:crypto';
import { createWriteStream, renameSync, rmSync } from 'node:fs';
import { CallgateError } from '../errors/CallgateError.js';
import { TRACE_HEADER, traceRow } from './recorder.js';
import { readTrace, type TraceCall } from './trace.js';

export interface MergeResult {
  rows: number;
  /** False when an input went back in time: the merged file is then not sorted either (replay sorts it). */
  sorted: boolean;
}

export async function mergeTraces(inputs: readonly string[], output: string): Promise<MergeResult> {
  const tmp = `${output}.tmp-${process.pid}-${randomBytes(3).toString('hex')}`;
  const out = createWriteStream(tmp);
  const failed = new Promise<never>((_, reject) =>
    out.on('error', (err) => reject(new CallgateError('ERR_OUTPUT', `cannot write the merged trace ${output}: ${err.message}`, { cause: err }))),
  );
  failed.catch(() => undefined);
  const readers = inputs.map((p) => readTrace(p));
  const heads: (TraceCall | undefined)[] = [];
  let rows = 0;
  let sorted = true;
  let last = Number.NEGATIVE_INFINITY;
  try {
    for (const r of readers) heads.push((await r.next()).value ?? undefined);
    out.write(TRACE_HEADER + '\n');
    let batch = '';
    for (;;) {
      let k = -1;
      for (let i = 0; i < heads.length; i++) if (heads[i] && (k < 0 || heads[i]!.time < heads[k]!.time)) k = i;
      if (k < 0) break;
      const call = heads[k]!;
      if (call.time < last) sorted = false;
      last = call.time;
      // TODO(channels, issue 10): carry the call's duration once TraceCall has it
      batch += traceRow(call);
      rows++;
      if (batch.length > 65_536) {
        if (!out.write(batch)) await Promise.race([new Promise<void>((r) => out.once('drain', () => r())), failed]);
        batch = '';
      }
      heads[k] = (await readers[k]!.next()).value ?? undefined;
    }
    out.write(batch);
    await Promise.race([new Promise<void>((resolve) => out.end(resolve)), failed]);
    try {
      renameSync(tmp, output);
    } catch (err) {
      throw new CallgateError('ERR_OUTPUT', `cannot write the merged trace ${output}: ${(err as Error).message}`, { cause: err });
    }
    return { rows, sorted };
  } catch (err) {
    out.destroy();
    rmSync(tmp, { force: true });
    throw err;
  } finally {
    await Promise.all(readers.map((r) => r.return(undefined)));
  }
}
