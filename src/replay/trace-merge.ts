/**
 * Merge recorded traces (several routing processes, rotated files) into one trace in the
 * contract's processing order: sorted by time, rows of equal time in the order of the inputs as
 * given, then of their place in their file. Recorded files are not in time order (a call's row
 * is written when it ends), so this is a sort, done in bounded memory: runs of `chunkRows` rows
 * are sorted and spilled to temporary files, then merged. The output is sorted, so the replay
 * streams it. Every input is validated as it is read: a bad row stops the merge with a
 * TraceError and no output file is left behind.
 */
import { OutputFile } from '../output-file.js';
import { TRACE_HEADER, TRACE_HEADER_ATTRIBUTES, traceRow } from '../recording/trace-recorder.js';
import { inTimeOrder } from './time-order.js';
import { readTrace, refuseUnreadableTwice } from './trace.js';

export interface MergeResult {
  rows: number;
  /** Sorted runs spilled to temporary files (0: everything was sorted in memory). */
  spilled: number;
}

/**
 * Whether a trace's header names caller, callee or source: the trace reader's own header (past
 * a BOM, comments and blank lines, however many), read up to its first row. Its problems are
 * left to the merge's own read, which reports them.
 */
async function hasAttributeColumns(path: string): Promise<boolean> {
  let found = false;
  const onHeader = (columns: readonly string[]) => {
    found = columns.some((c) => c === 'caller' || c === 'callee' || c === 'source');
  };
  try {
    for await (const _call of readTrace(path, { onHeader, onProblem: () => undefined })) break;
  } catch {
    return false; // the reader reports it
  }
  return found;
}

export async function mergeTraces(
  inputs: readonly string[],
  output: string,
  opts: { chunkRows?: number } = {},
): Promise<MergeResult> {
  // each input is read twice (its header, then its rows): a FIFO hung on the second open, and
  // the merge then took what the next writer sent for the file
  for (const input of inputs) refuseUnreadableTwice(input, 'merge-traces reads each input twice');
  // whole or not at all, and never over a directory or a device (see OutputFile)
  const out = await OutputFile.open(output, (name) => `the merged trace ${name}`);
  // rows carry the attribute columns when an input has one of them
  let attributes = false;
  for (const input of inputs) if ((attributes = await hasAttributeColumns(input))) break;
  async function* rows(): AsyncGenerator<[time: number, row: string]> {
    for (const input of inputs)
      for await (const call of readTrace(input)) yield [call.time, traceRow(call, call.durationUs, attributes)];
  }
  let count = 0;
  let spilled = 0;
  try {
    let text = `${attributes ? TRACE_HEADER_ATTRIBUTES : TRACE_HEADER}\n`;
    for await (const [, row] of inTimeOrder(rows(), (r) => r[0], {
      chunkRows: opts.chunkRows,
      onSpill: () => spilled++,
    })) {
      count++;
      text += row;
      if (text.length > 65_536) {
        await out.write(text);
        text = '';
      }
    }
    await out.write(text);
    await out.commit();
    return { rows: count, spilled };
  } catch (err) {
    out.abort();
    throw err;
  }
}
