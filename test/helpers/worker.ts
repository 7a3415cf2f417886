/**
 * A test worker in a child process with a tiny line protocol: it prints {"ready":true} when set
 * up, waits for "go" on stdin, and prints its report as one JSON line at the end. Killed after
 * `timeoutMs`.
 */
import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';

export interface Worker<R> {
  ready: Promise<void>;
  report: Promise<R>;
  go(): void;
  kill(): void;
}

export function startWorker<R>(
  script: string,
  args: unknown,
  opts: { cwd: string; timeoutMs: number; name: string },
): Worker<R> {
  const child = spawn(process.execPath, ['--import', 'tsx', script, JSON.stringify(args)], {
    cwd: opts.cwd,
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  let stderr = '';
  child.stderr.on('data', (d: Buffer) => (stderr = (stderr + d.toString()).slice(-4_000)));
  let onReady!: () => void;
  let onReport!: (r: R) => void;
  let failReady!: (e: Error) => void;
  let failReport!: (e: Error) => void;
  const ready = new Promise<void>((res, rej) => {
    onReady = res;
    failReady = rej;
  });
  const report = new Promise<R>((res, rej) => {
    onReport = res;
    failReport = rej;
  });
  ready.catch(() => {});
  report.catch(() => {});
  const fail = (e: Error) => {
    failReady(e);
    failReport(e);
  };
  createInterface({ input: child.stdout }).on('line', (line) => {
    const msg = JSON.parse(line) as { ready?: boolean };
    if (msg.ready) onReady();
    else onReport(msg as R);
  });
  const timer = setTimeout(() => {
    child.kill('SIGKILL');
    fail(new Error(`${opts.name} timed out; stderr: ${stderr}`));
  }, opts.timeoutMs);
  timer.unref();
  child.on('exit', (code) => {
    clearTimeout(timer);
    if (code !== 0) fail(new Error(`${opts.name} exited with ${code}; stderr: ${stderr}`));
  });
  return { ready, report, go: () => child.stdin.write('go\n'), kill: () => child.kill('SIGKILL') };
}

/** A worker that prints JSON messages as it goes and takes commands as lines on stdin. */
export interface MessageWorker {
  send(line: string): void;
  /** The first message, printed so far or later, that `pred` accepts; rejects if it exits first. */
  next(pred: (m: Record<string, unknown>) => boolean): Promise<Record<string, unknown>>;
  /** Called with every message printed from now on. */
  onMessage(fn: (m: Record<string, unknown>) => void): void;
  kill(): void;
  exited: Promise<number | null>;
}

/** `script` run with tsx on `args` (as JSON); killed with SIGKILL after `killAfterMs`. */
export function startMessageWorker(
  script: string,
  args: unknown,
  opts: { cwd: string; killAfterMs: number; name: string },
): MessageWorker {
  const child = spawn(process.execPath, ['--import', 'tsx', script, JSON.stringify(args)], {
    cwd: opts.cwd,
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  let stderr = '';
  child.stderr.on('data', (d: Buffer) => (stderr = (stderr + d.toString()).slice(-4_000)));
  const seen: Record<string, unknown>[] = [];
  const waiters: { pred: (m: Record<string, unknown>) => boolean; resolve: (m: Record<string, unknown>) => void }[] =
    [];
  const listeners: ((m: Record<string, unknown>) => void)[] = [];
  createInterface({ input: child.stdout }).on('line', (line) => {
    const m = JSON.parse(line) as Record<string, unknown>;
    seen.push(m);
    for (const l of listeners) l(m);
    for (const w of [...waiters]) {
      if (!w.pred(m)) continue;
      waiters.splice(waiters.indexOf(w), 1);
      w.resolve(m);
    }
  });
  // 'close', not 'exit': a worker can exit before its last lines are read off its stdout, and
  // next() must not reject for a message that was sent (CI failed once that way)
  const exited = new Promise<number | null>((resolve) => child.on('close', (code) => resolve(code)));
  const timer = setTimeout(() => child.kill('SIGKILL'), opts.killAfterMs);
  timer.unref();
  return {
    send: (line) => child.stdin.write(`${line}\n`),
    next: (pred) => {
      const found = seen.find(pred);
      if (found) return Promise.resolve(found);
      return Promise.race([
        new Promise<Record<string, unknown>>((resolve) => waiters.push({ pred, resolve })),
        exited.then((code) => Promise.reject(new Error(`${opts.name} exited (${code}); stderr: ${stderr}`))),
      ]);
    },
    onMessage: (fn) => listeners.push(fn),
    kill: () => child.kill('SIGKILL'),
    exited,
  };
}
