/**
 * Items in time order, items of equal time in the order they came (the contract's processing
 * order), sorted in bounded memory: runs of `chunkRows` items are sorted and spilled to temporary
 * files as JSON lines, then merged one item at a time. A source that fits in one run never
 * touches the disk. Serves the replay of an unsorted trace and `callgate merge-traces`: a
 * recorded trace is written as calls end, not as they began, so it is rarely in order, and held
 * whole in memory a few million rows took gigabytes.
 */
import { createReadStream, createWriteStream, mkdtempSync, rmSync, type WriteStream } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { OutputError } from '../errors/index.js';
import { osReason } from '../os-reason.js';

/** An item and its place: time, then arrival. */
type Placed<T> = [time: number, seq: number, item: T];

const byPlace = <T>(a: Placed<T>, b: Placed<T>): number => a[0] - b[0] || a[1] - b[1];

/** How many items a run holds by default: a few hundred MB at most for a trace's calls. */
export const DEFAULT_RUN_ITEMS = 200_000;

/** Write to a stream, waiting when it is full; a stream error rejects. */
async function writeAll(out: WriteStream, failed: Promise<never>, text: string): Promise<void> {
  if (!out.write(text)) await Promise.race([new Promise<void>((r) => out.once('drain', () => r())), failed]);
}

async function spillRun<T>(run: Placed<T>[], path: string): Promise<void> {
  const out = createWriteStream(path);
  // a full disk or a missing $TMPDIR is one line, as any output's (exit 2), not a bug's stack
  const failed = new Promise<never>((_, reject) =>
    out.on('error', (err) =>
      reject(new OutputError(`a temporary run of the sort (${path})`, osReason(err), { cause: err })),
    ),
  );
  failed.catch(() => undefined);
  let text = '';
  for (const p of run) {
    text += `${JSON.stringify(p)}\n`;
    if (text.length > 65_536) {
      await writeAll(out, failed, text);
      text = '';
    }
  }
  await writeAll(out, failed, text);
  await Promise.race([new Promise<void>((resolve) => out.end(resolve)), failed]);
}

function tempDir(): string {
  try {
    return mkdtempSync(join(tmpdir(), 'callgate-sort-'));
  } catch (err) {
    throw new OutputError(`the sort's temporary runs under ${tmpdir()}`, osReason(err), { cause: err });
  }
}

/** The items of a spilled run, in order. */
async function* readRun<T>(path: string): AsyncGenerator<Placed<T>> {
  const lines = createInterface({ input: createReadStream(path), crlfDelay: Infinity });
  for await (const line of lines) yield JSON.parse(line) as Placed<T>;
}

export interface TimeOrderOptions {
  /** Items per run (default DEFAULT_RUN_ITEMS). */
  readonly chunkRows?: number;
  /** Called for each run spilled to disk. */
  readonly onSpill?: () => void;
}

/**
 * `items` in the order of `timeOf`, stable. Items must survive JSON (plain data). The temporary
 * files are removed when the sequence ends, fails or is left early.
 */
export async function* inTimeOrder<T>(
  items: AsyncIterable<T> | Iterable<T>,
  timeOf: (item: T) => number,
  opts: TimeOrderOptions = {},
): AsyncGenerator<T> {
  const chunkRows = opts.chunkRows ?? DEFAULT_RUN_ITEMS;
  let spill: string | undefined;
  const runs: AsyncGenerator<Placed<T>>[] = [];
  try {
    let chunk: Placed<T>[] = [];
    let seq = 0;
    for await (const item of items) {
      chunk.push([timeOf(item), seq++, item]);
      if (chunk.length >= chunkRows) {
        chunk.sort(byPlace);
        spill ??= tempDir();
        const path = join(spill, `run-${runs.length}.jsonl`);
        await spillRun(chunk, path);
        runs.push(readRun<T>(path));
        opts.onSpill?.();
        chunk = [];
      }
    }
    chunk.sort(byPlace);
    if (runs.length === 0) {
      for (const p of chunk) yield p[2];
      return;
    }
    // the last run stays in memory; the spilled ones are read back one item at a time
    let inMemory = 0;
    const next = async (i: number): Promise<Placed<T> | undefined> =>
      i === runs.length ? chunk[inMemory++] : ((await runs[i]!.next()).value ?? undefined);
    const heads: (Placed<T> | undefined)[] = [];
    for (let i = 0; i <= runs.length; i++) heads.push(await next(i));
    for (;;) {
      let k = -1;
      for (let i = 0; i < heads.length; i++) if (heads[i] && (k < 0 || byPlace(heads[i]!, heads[k]!) < 0)) k = i;
      if (k < 0) return;
      yield heads[k]![2];
      heads[k] = await next(k);
    }
  } finally {
    for (const r of runs) await r.return(undefined);
    // a directory that cannot be removed is left (under $TMPDIR): it must not replace the error
    // that ended the sort, nor fail a sort that is done
    try {
      if (spill) rmSync(spill, { recursive: true, force: true });
    } catch {}
  }
}
