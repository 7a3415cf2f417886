/**
 * `callgate serve` as a child process on a free loopback port (it binds port 0 and says where
 * in its log), its log lines kept for the test to wait on. SIGKILLed on process exit.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';

const ROOT = new URL('../..', import.meta.url).pathname;
const BIN = join(ROOT, 'bin/callgate.js');

const live = new Set<ChildProcess>();
process.on('exit', () => {
  for (const c of live) c.kill('SIGKILL');
});

export interface SidecarProcess {
  readonly url: string;
  readonly child: ChildProcess;
  /** Every log line so far (stdout and stderr). */
  readonly lines: string[];
  /** Resolves with the first line (from the start) matching `re`; rejects after `timeoutMs`. */
  waitFor(re: RegExp, timeoutMs?: number): Promise<string>;
  /** Resolves with the exit code. */
  readonly exited: Promise<number | null>;
  /** SIGTERM (or `signal`), then the exit code; SIGKILL after `timeoutMs`. */
  stop(signal?: NodeJS.Signals, timeoutMs?: number): Promise<number | null>;
}

/** A sidecar's lease series from its /metrics (`callgate_lease_…{labels}` → value). */
export async function leaseGauges(url: string): Promise<Map<string, number>> {
  const text = await (await fetch(`${url}/metrics`)).text();
  const values = new Map<string, number>();
  for (const m of text.matchAll(/^(callgate_lease_[a-z_]+(?:\{[^}]*\})?) (\S+)$/gm)) values.set(m[1]!, Number(m[2]));
  return values;
}

/**
 * Run `callgate serve ARGS --listen 127.0.0.1:0` and wait until it listens (or fails);
 * `onSpawn` gets the process at once (signals while it starts).
 */
export async function startSidecarProcess(
  args: string[],
  env: NodeJS.ProcessEnv = {},
  timeoutMs = 20_000,
  onSpawn?: (child: ChildProcess) => void,
): Promise<SidecarProcess> {
  const child = spawn(process.execPath, [BIN, 'serve', '--listen', '127.0.0.1:0', ...args], {
    cwd: ROOT,
    env: { ...process.env, ...env },
  });
  live.add(child);
  onSpawn?.(child);
  const lines: string[] = [];
  const waiters: { re: RegExp; resolve: (l: string) => void }[] = [];
  const onText = (() => {
    let rest = '';
    return (chunk: Buffer) => {
      rest += chunk.toString();
      const parts = rest.split('\n');
      rest = parts.pop()!;
      for (const line of parts) {
        lines.push(line);
        for (const w of [...waiters]) {
          if (!w.re.test(line)) continue;
          waiters.splice(waiters.indexOf(w), 1);
          w.resolve(line);
        }
      }
    };
  })();
  child.stdout.on('data', onText);
  child.stderr.on('data', onText);
  const exited = new Promise<number | null>((resolve) =>
    child.on('exit', (code) => {
      live.delete(child);
      resolve(code);
    }),
  );
  const waitFor = (re: RegExp, ms = 10_000): Promise<string> => {
    const seen = lines.find((l) => re.test(l));
    if (seen !== undefined) return Promise.resolve(seen);
    return new Promise((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new Error(`no log line matching ${re} within ${ms} ms; log:\n${lines.join('\n')}`)),
        ms,
      );
      waiters.push({
        re,
        resolve: (l) => {
          clearTimeout(timer);
          resolve(l);
        },
      });
    });
  };
  const listening = waitFor(/callgate sidecar listening at /, timeoutMs);
  const first = await Promise.race([listening, exited.then((code) => ({ code }))]);
  if (typeof first !== 'string')
    throw new Error(`callgate serve exited with ${String(first.code)} before listening:\n${lines.join('\n')}`);
  const url = /listening at (http:\/\/[^"\s]+)/.exec(first)![1]!;
  const stop = async (signal: NodeJS.Signals = 'SIGTERM', ms = 10_000): Promise<number | null> => {
    if (child.exitCode !== null || child.signalCode !== null) return exited;
    child.kill(signal);
    const timer = setTimeout(() => child.kill('SIGKILL'), ms);
    const code = await exited;
    clearTimeout(timer);
    return code;
  };
  return { url, child, lines, waitFor, exited, stop };
}
