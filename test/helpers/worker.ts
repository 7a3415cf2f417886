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
