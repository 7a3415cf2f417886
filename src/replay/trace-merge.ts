/**
 * Merge recorded traces (several routing processes, rotated files) into one trace in the
 * contract's processing order: sorted by time, rows of equal time in the order of the inputs as
 * given, then of their place in their file. Recorded files are not in time order (a call's row
 * is written when it ends), so this is a sort, done in bounded memory: runs of `chunkRows` rows
 * are sorted and spilled to temporary files, then merged. The output is sorted, so the replay
 * streams it. Every input is validated as it is read: a bad row stops the merge with a
 * TraceError and no output file is left behind.
 */
import {
  closeSync,
  createReadStream,
  createWriteStream,
  mkdtempSync,
  openSync,
  readSync,
  rmSync,
  type WriteStream,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { OutputFile } from '../output-file.js';
import { TRACE_HEADER, TRACE_HEADER_ATTRIBUTES, traceRow } from '../recording/trace-recorder.js';
import { readTrace } from './trace.js';

export interface MergeResult {
  rows: number;
  /** Sorted runs spilled to temporary files (0: everything was sorted in memory). */
  spilled: number;
}

/** A row and its place: time, then position over all inputs. */
type Placed = [time: number, seq: number, row: string];

const byPlace = (a: Placed, b: Placed): number => a[0] - b[0] || a[1] - b[1];

/** Write to a stream, waiting when it is full; a stream error rejects. */
async function writeAll(out: WriteStream, failed: Promise<never>, text: string): Promise<void> {
  if (!out.write(text)) await Promise.race([new Promise<void>((r) => out.once('drain', () => r())), failed]);
}

function outputStream(path: string, what: string): { out: WriteStream; failed: Promise<never> } {
  const out = createWriteStream(path);
  const failed = new Promise<never>((_, reject) =>
    out.on('error', (err) => reject(new Error(`cannot write ${what}: ${err.message}`, { cause: err }))),
  );
  failed.catch(() => undefined);
  return { out, failed };
}

async function endStream(out: WriteStream, failed: Promise<never>): Promise<void> {
  await Promise.race([new Promise<void>((resolve) => out.end(resolve)), failed]);
}

/** The rows of a spilled run, in order. */
async function* readRun(path: string): AsyncGenerator<Placed> {
  const lines = createInterface({ input: createReadStream(path), crlfDelay: Infinity });
  for await (const line of lines) yield JSON.parse(line) as Placed;
}

/** Whether a trace's header (its first line that is neither blank nor a comment) names caller, callee or source. */
function hasAttributeColumns(path: string): boolean {
  let head = '';
  try {
    const fd = openSync(path, 'r');
    try {
      const buf = Buffer.alloc(65_536);
      head = buf.toString('utf8', 0, readSync(fd, buf, 0, buf.length, 0));
    } finally {
      closeSync(fd);
    }
  } catch {
    return false; // the reader reports it
  }
  const header = head.split(/\r?\n/).find((l) => l.trim() !== '' && !l.startsWith('#')) ?? '';
  return header.split(',').some((c) => ['caller', 'callee', 'source'].includes(c.trim().replace(/^"|"$/g, '')));
}

export async function mergeTraces(
  inputs: readonly string[],
  output: string,
  opts: { chunkRows?: number } = {},
): Promise<MergeResult> {
  const chunkRows = opts.chunkRows ?? 200_000;
  // whole or not at all, and never over a directory or a device (see OutputFile)
  const out = await OutputFile.open(output, (name) => `the merged trace ${name}`);
  let spill: string | undefined;
  const runs: string[] = [];
  let chunk: Placed[] = [];
  let seq = 0;
  const spillChunk = async () => {
    chunk.sort(byPlace);
    spill ??= mkdtempSync(join(tmpdir(), 'callgate-merge-'));
    const path = join(spill, `run-${runs.length}.jsonl`);
    const { out, failed } = outputStream(path, `a temporary run of the merge (${path})`);
    let text = '';
    for (const p of chunk) {
      text += `${JSON.stringify(p)}\n`;
      if (text.length > 65_536) {
        await writeAll(out, failed, text);
        text = '';
      }
    }
    await writeAll(out, failed, text);
    await endStream(out, failed);
    runs.push(path);
    chunk = [];
  };
  // rows carry the attribute columns when an input has one of them
  const attributes = inputs.some(hasAttributeColumns);
  try {
    for (const input of inputs) {
      for await (const call of readTrace(input)) {
        chunk.push([call.time, seq++, traceRow(call, call.durationUs, attributes)]);
        if (chunk.length >= chunkRows) await spillChunk();
      }
    }
    // the last run stays in memory; the spilled ones are read back one row at a time
    chunk.sort(byPlace);
    const sources: (AsyncGenerator<Placed> | Placed[])[] = [...runs.map(readRun), chunk];
    const heads: (Placed | undefined)[] = [];
    let inMemory = 0;
    const next = async (i: number): Promise<Placed | undefined> => {
      const s = sources[i]!;
      if (Array.isArray(s)) return s[inMemory++];
      return (await s.next()).value ?? undefined;
    };
    for (let i = 0; i < sources.length; i++) heads.push(await next(i));
    let text = `${attributes ? TRACE_HEADER_ATTRIBUTES : TRACE_HEADER}\n`;
    for (;;) {
      let k = -1;
      for (let i = 0; i < heads.length; i++) if (heads[i] && (k < 0 || byPlace(heads[i]!, heads[k]!) < 0)) k = i;
      if (k < 0) break;
      text += heads[k]![2];
      if (text.length > 65_536) {
        await out.write(text);
        text = '';
      }
      heads[k] = await next(k);
    }
    await out.write(text);
    await out.commit();
    return { rows: seq, spilled: runs.length };
  } catch (err) {
    out.abort();
    throw err;
  } finally {
    if (spill) rmSync(spill, { recursive: true, force: true });
  }
}
