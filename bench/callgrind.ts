/**
 * Talking to a redis-server run under valgrind's callgrind (bench/redis-instructions.ts,
 * bench/cluster-scaling.ts --instructions): its counts zeroed or dumped, and the instructions a
 * callgrind file counted.
 */
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';

/** `callgrind_control --zero` or `--dump` of the run `pid`; throws unless callgrind says it did. */
export function callgrindControl(action: 'zero' | 'dump', pid: number): void {
  const r = spawnSync('callgrind_control', [`--${action}`, String(pid)], { encoding: 'utf8', timeout: 60_000 });
  // callgrind_control exits 0 even when it finds no run: its words tell
  if (!new RegExp(`^PID ${pid}:`, 'm').test(r.stdout) || /error|not detected|no active/i.test(r.stdout))
    throw new Error(`callgrind_control --${action} ${pid} failed: ${r.stdout}${r.stderr}`);
}

/** Instructions counted in a callgrind output file (its `summary:` or `totals:` line). */
export function countedInstructions(file: string): number {
  const m = /^(?:summary|totals): (\d+)/m.exec(readFileSync(file, 'utf8'));
  if (!m) throw new Error(`no instruction count in ${file}`);
  return Number(m[1]);
}
