/**
 * A file a user names (a configuration), read whole, where the file may be a named pipe: a
 * FIFO (`mkfifo`, or a shell's `<(…)`) is opened without blocking. A thread of Node's pool
 * stuck opening a FIFO that nobody writes to keeps the process from exiting, even on a signal
 * (process.exit waits for it), and a sidecar's reloads would each take one more thread. Opened
 * non-blocking, a FIFO with no writer reads as empty; one with a writer (the shell's `<(…)`)
 * reads until the writer closes it, within PIPE_WAIT_MS.
 */
import { closeSync, constants, openSync, readSync } from 'node:fs';
import { readFile, stat } from 'node:fs/promises';
import { Socket } from 'node:net';

/** How long a named pipe's writer may take to write the whole file and close it. */
export const PIPE_WAIT_MS = 10_000;

export async function readBytes(path: string): Promise<Buffer> {
  if (!(await stat(path)).isFIFO()) return readFile(path);
  const fd = openSync(path, constants.O_RDONLY | constants.O_NONBLOCK);
  const chunks: Buffer[] = [];
  // what is there now; 0 bytes is the end (no writer: epoll would never say so, hence no
  // pipe handle for that case), EAGAIN a writer still to write
  try {
    for (;;) {
      const buf = Buffer.alloc(65_536);
      const n = readSync(fd, buf);
      if (n === 0) {
        closeSync(fd);
        return Buffer.concat(chunks);
      }
      chunks.push(buf.subarray(0, n));
    }
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'EAGAIN') {
      closeSync(fd);
      throw e;
    }
  }
  // the rest as the writer writes it: the fd as a pipe of the event loop, as process.stdin is;
  // a writer that never closes it would hold a reload (and the sidecar's shutdown) for good
  return new Promise<Buffer>((resolve, reject) => {
    const pipe = new Socket({ fd, readable: true, writable: false });
    const timer = setTimeout(() => {
      pipe.destroy();
      reject(new Error(`its writer did not close it within ${PIPE_WAIT_MS / 1000} s`));
    }, PIPE_WAIT_MS);
    pipe.on('data', (c: Buffer) => chunks.push(c));
    pipe.on('error', (e) => {
      clearTimeout(timer);
      reject(e);
    });
    pipe.on('end', () => {
      clearTimeout(timer);
      pipe.destroy();
      resolve(Buffer.concat(chunks));
    });
  });
}
