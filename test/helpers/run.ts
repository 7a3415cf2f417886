/** Run a command as a child process, as a user would, and collect what it printed. */
import { spawn } from 'node:child_process';

export interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

export interface RunOptions {
  cwd: string;
  env?: NodeJS.ProcessEnv;
  /** Killed (SIGKILL) after this long; 60 s unless told. */
  timeoutMs?: number;
  /** Run in a process group of its own and kill the whole group (a shell's background jobs too). */
  group?: boolean;
  /** On a timeout, say so at the end of stderr. */
  noteTimeout?: boolean;
}

/** `command` with `args`, killed after `timeoutMs`. */
export function runProcess(command: string, args: string[], opts: RunOptions): Promise<Run> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { cwd: opts.cwd, env: { ...process.env, ...opts.env }, detached: opts.group });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (b: Buffer) => (stdout += b));
    child.stderr.on('data', (b: Buffer) => (stderr += b));
    const timeoutMs = opts.timeoutMs ?? 60_000;
    const timer = setTimeout(() => {
      if (opts.noteTimeout) stderr += `\n(killed: still running after ${timeoutMs} ms)`;
      if (opts.group) process.kill(-child.pid!, 'SIGKILL');
      else child.kill('SIGKILL');
    }, timeoutMs);
    child.on('error', reject);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

/** Node with `args` (script first); killed after `timeoutMs`. */
export function runNode(args: string[], opts: RunOptions): Promise<Run> {
  return runProcess(process.execPath, args, opts);
}
