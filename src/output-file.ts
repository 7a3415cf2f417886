/**
 * An output file of the command line (`--decisions`, `--html`, `merge-traces --out`), written
 * without ever damaging what its name points at:
 *
 * - `-` (where the option allows it), or a name of standard output (`/dev/stdout` …): standard
 *   output; the report then goes to standard error.
 * - a regular file, or no file yet: written beside it under a temporary name and renamed over it
 *   only when the replay succeeded, so it is never left half written. The file's mode (and owner,
 *   where allowed) is kept; a symbolic link keeps pointing at the file, which is replaced.
 * - a device or a FIFO (`/dev/stdout`, `/dev/null`, a named pipe): written in place, as a shell's
 *   `>` would; nothing is renamed over it.
 * - a directory (or a link to nothing): refused.
 *
 * Every failure (missing directory, no permission, device full, reader gone) is an OutputError
 * naming the output, raised by open() when the target cannot be opened (so before any work). The
 * temporary file is removed on any failure and at process exit.
 */
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import {
  closeSync,
  constants,
  createWriteStream,
  fchmodSync,
  fchownSync,
  fstatSync,
  lstatSync,
  open,
  openSync,
  realpathSync,
  renameSync,
  rmSync,
  statSync,
  type Stats,
  type WriteStream,
} from 'node:fs';
import { basename, dirname, resolve as resolvePath } from 'node:path';
import { promisify } from 'node:util';
import { OutputError } from './errors/output-error.js';
import { osReason } from './os-reason.js';

const openAsync = promisify(open);

/** Names an output in messages, from its target as shown: `decisions to out.jsonl`. */
export type OutputName = (shown: string) => string;

/** Lines go out in blocks (one write call each) of this many, or this many characters. */
const BLOCK_LINES = 512;
const BLOCK_CHARS = 1 << 16;

export class OutputFile {
  private buffer: string[] = [];
  private buffered = 0;
  private lastWrite: Promise<void> = Promise.resolve();
  private failed?: OutputError;
  private readonly removeAtExit = (): void => this.removeTemporary();

  private constructor(
    private readonly target: string,
    private readonly name: OutputName,
    private readonly out: WriteStream | NodeJS.WriteStream,
    /** The temporary file and the path it is renamed to, for a regular file. */
    private readonly temporary?: { path: string; finalPath: string },
  ) {
    out.on('error', (err: Error) => this.fail(err));
    if (temporary) process.on('exit', this.removeAtExit);
  }

  /** Whether this output is standard output (the report should then go elsewhere). */
  get toStdout(): boolean {
    return this.out === process.stdout;
  }

  /**
   * Opens the target (see the module comment); waits for a reader on a FIFO, unless `signal`
   * aborts. `dash`: `-` means standard output (else it is a file named `-`).
   */
  static async open(
    target: string,
    name: OutputName,
    opts: { signal?: AbortSignal; dash?: boolean } = {},
  ): Promise<OutputFile> {
    const { signal } = opts;
    if (target === '-' && opts.dash) return new OutputFile(target, name, process.stdout);
    const fail = (reason: string, cause?: unknown): never => {
      throw outputError(target, name, reason, cause);
    };
    if (target === '') fail('an empty file name');
    const stats = statOrNone(target, fail);
    // /dev/stdout, /dev/fd/1…: renaming over the file standard output was redirected to would
    // leave the report in a deleted file, and a second open would overwrite it
    if (stats && isStdout(stats)) return new OutputFile(target, name, process.stdout);
    if (stats?.isDirectory()) fail('it is a directory');
    if (stats && !stats.isFile()) {
      // no O_CREAT, no O_TRUNC: a device or pipe is written in place, never created nor replaced
      const opening = openAsync(target, constants.O_WRONLY);
      const fd = await untilAborted(opening, signal).catch((e: unknown) => {
        if (signal?.aborted) {
          if (stats.isFIFO()) releaseOpen(target, opening);
          throw signal.reason;
        }
        return fail(osReason(e), e);
      });
      const now = fstatSync(fd);
      if (now.isFile() || now.isDirectory()) {
        closeSync(fd);
        fail('it changed while being opened');
      }
      return new OutputFile(target, name, createWriteStream('', { fd }));
    }
    if (!stats && isSymlink(target)) fail('it is a symbolic link to a missing file');
    // a link is followed: the file it names is replaced, the link stays
    const finalPath = stats ? realpathSync(target) : target;
    const path = `${finalPath}.tmp-${process.pid}-${randomBytes(3).toString('hex')}`;
    const fd = await openAsync(path, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL, 0o666).catch(
      (e: unknown) => fail(osReason(e), e),
    );
    if (stats) {
      fchmodSync(fd, stats.mode & 0o7777);
      try {
        fchownSync(fd, stats.uid, stats.gid);
      } catch {
        // only root may give a file away; others keep their own
      }
    }
    return new OutputFile(target, name, createWriteStream('', { fd }), { path, finalPath });
  }

  /** Adds `value` as one line of JSON (see write). */
  writeLine(value: unknown): Promise<void> | undefined {
    return this.write(`${JSON.stringify(value)}\n`);
  }

  /**
   * Adds `text`; returns a promise only when the output is full: the caller then waits (flat
   * memory). Throws (or rejects) once the output has failed.
   */
  write(text: string): Promise<void> | undefined {
    if (this.failed) throw this.failed;
    this.buffer.push(text);
    this.buffered += text.length;
    if ((this.buffer.length >= BLOCK_LINES || this.buffered >= BLOCK_CHARS) && !this.flush()) return this.drained();
    return undefined;
  }

  private flush(): boolean {
    if (this.buffer.length === 0) return true;
    let ok = true;
    // writes complete in order: the last one's callback means all are done (or one failed)
    this.lastWrite = new Promise<void>((resolve) => {
      ok = this.out.write(this.buffer.join(''), (err) => {
        if (err) this.fail(err);
        resolve();
      });
    });
    this.buffer = [];
    this.buffered = 0;
    return ok;
  }

  private fail(err: Error): void {
    this.failed ??= outputError(this.target, this.name, osReason(err), err);
  }

  private async drained(): Promise<void> {
    if (this.failed) throw this.failed;
    try {
      await once(this.out, 'drain'); // rejects when the stream fails meanwhile
    } catch {
      // recorded by the 'error' listener
    }
    if (this.failed) throw this.failed;
  }

  /** Writes what is buffered and closes the output (standard output stays open). */
  private async end(): Promise<void> {
    this.flush();
    await this.lastWrite;
    if (this.out !== process.stdout) {
      const out = this.out as WriteStream;
      await new Promise<void>((resolve) => out.end(resolve)).catch(() => undefined);
      if (!out.closed) await once(out, 'close').catch(() => undefined);
    }
    if (this.failed) throw this.failed;
  }

  /** The replay succeeded: everything written, and the temporary file renamed into place. */
  async commit(): Promise<void> {
    await this.end();
    const t = this.temporary;
    if (!t) return;
    try {
      // only a regular file is ever replaced: a name that became something else is left alone
      const now = lstatOrNone(t.finalPath);
      if (now && !now.isFile())
        throw outputError(this.target, this.name, 'it is no longer a regular file; left as it is');
      try {
        renameSync(t.path, t.finalPath);
      } catch (e) {
        throw outputError(this.target, this.name, osReason(e), e);
      }
    } finally {
      this.removeTemporary();
    }
  }

  /** The replay failed or was interrupted: nothing is left behind, nor waited for (a stalled reader). */
  abort(): void {
    this.buffer = [];
    this.buffered = 0;
    if (this.out !== process.stdout) this.out.destroy();
    this.removeTemporary();
  }

  /** Removes the temporary file if it is still there (also at process exit); synchronous. */
  removeTemporary(): void {
    if (!this.temporary) return;
    rmSync(this.temporary.path, { force: true });
    process.off('exit', this.removeAtExit);
  }
}

function outputError(target: string, name: OutputName, reason: string, cause?: unknown): OutputError {
  const shown = target === '-' ? 'standard output' : target === '' ? '""' : target;
  return new OutputError(name(shown), reason, { cause });
}

/** `work`, or the signal's reason as soon as it aborts (an open cannot be cancelled; it is left behind). */
function untilAborted<T>(work: Promise<T>, signal: AbortSignal | undefined): Promise<T> {
  if (!signal) return work;
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal.reason);
    if (signal.aborted) onAbort();
    signal.addEventListener('abort', onAbort, { once: true });
    work.then(resolve, reject).finally(() => signal.removeEventListener('abort', onAbort));
  });
}

/**
 * Ends an open of a FIFO still waiting for a reader: the thread it blocks would otherwise hold
 * the process at exit. A reader opening (and closing) the FIFO is what the writer's open waits for.
 */
function releaseOpen(fifo: string, opening: Promise<number>): void {
  opening.then(closeSync, () => undefined);
  try {
    closeSync(openSync(fifo, constants.O_RDONLY | constants.O_NONBLOCK));
  } catch {
    // gone meanwhile: nothing waits on it any more
  }
}

/** stat (following links), undefined when nothing is there; other failures (EACCES, ENOTDIR, ELOOP) refused. */
function statOrNone(path: string, fail: (reason: string, cause?: unknown) => never): Stats | undefined {
  try {
    return statSync(path);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    return fail(osReason(e), e);
  }
}

function lstatOrNone(path: string): Stats | undefined {
  try {
    return lstatSync(path);
  } catch {
    return undefined;
  }
}

function isStdout(stats: Stats): boolean {
  try {
    const out = fstatSync(1);
    return out.dev === stats.dev && out.ino === stats.ino;
  } catch {
    return false; // no standard output
  }
}

/** Whether output `path` is standard output: `-` (where `dash`), or the file standard output is. */
function writesStdout(path: string, dash: boolean): boolean {
  if (dash && path === '-') return true;
  try {
    return isStdout(statSync(path));
  } catch {
    return false;
  }
}

function isSymlink(path: string): boolean {
  return lstatOrNone(path)?.isSymbolicLink() ?? false;
}

/**
 * What a path names as a file to read or replace: its device and inode when it is a regular file,
 * its absolute path in its real directory when it does not exist yet; undefined for standard
 * output (`-` where `dash`) and for a device or FIFO, which is written in place (two outputs to
 * /dev/null are no mistake).
 */
function fileIdentity(path: string, dash: boolean): string | undefined {
  if (path === '' || (dash && path === '-')) return undefined;
  try {
    const stats = statSync(path);
    return stats.isFile() ? `${stats.dev}:${stats.ino}` : undefined;
  } catch {
    try {
      return resolvePath(realpathSync(dirname(path)), basename(path));
    } catch {
      return resolvePath(path);
    }
  }
}

/**
 * Problems, one line each, where an output names the file of an input or of another output: the
 * output would replace the input (a trace replaced by its own decisions), or one output the
 * other. `outputs` and `inputs`: [option, path] (path undefined: not given); `dash` outputs take
 * `-` for standard output.
 */
export function sameFileProblems(
  outputs: readonly (readonly [option: string, path: string | undefined, dash: boolean])[],
  inputs: readonly (readonly [option: string, path: string | undefined])[],
): string[] {
  const problems: string[] = [];
  const seen: [option: string, id: string][] = [];
  for (const [option, path] of inputs) {
    const id = path === undefined ? undefined : fileIdentity(path, false);
    if (id !== undefined) seen.push([option, id]);
  }
  const outputsFrom = seen.length;
  // standard output, by `-` or by a name of its file (/dev/stdout, a redirection's target)
  const toStdout = outputs.filter(([, path, dash]) => path !== undefined && writesStdout(path, dash));
  if (toStdout.length > 1)
    problems.push(
      `${toStdout.map(([option, path]) => `${option} ${path === '-' ? '-' : JSON.stringify(path)}`).join(' and ')}: both would go to standard output, mixed; name a file for one`,
    );
  for (const [option, path, dash] of outputs) {
    const id = path === undefined ? undefined : fileIdentity(path, dash);
    if (id === undefined) continue;
    const other = seen.find((s) => s[1] === id);
    if (other !== undefined)
      problems.push(
        seen.indexOf(other) < outputsFrom
          ? `${option} ${JSON.stringify(path)} is the file of ${other[0]}: an output never replaces an input`
          : `${option} ${JSON.stringify(path)} is the file of ${other[0]} too: one output would replace the other`,
      );
    else seen.push([option, id]);
  }
  return problems;
}
