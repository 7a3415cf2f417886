/**
 * The offered load (one seeded sequence of peers, Zipf-skewed so hot peers hit their limit and
 * cold ones do not) and the drivers: a closed loop with N calls in flight for async APIs, a
 * plain loop for sync ones. Latency goes to an HDR histogram in nanoseconds.
 */
import * as hdr from 'hdr-histogram-js';
import { performance } from 'node:perf_hooks';
import { prng } from '../scripts/make-fixtures.js';

/** A Redis server's own CPU time (user + system, s) from the text of its INFO cpu section. */
export function cpuSecondsOf(info: string): number {
  const field = (name: string) => {
    const m = new RegExp(`^${name}:([\\d.]+)`, 'm').exec(info);
    if (!m) throw new Error(`INFO has no ${name}`);
    return Number(m[1]);
  };
  return field('used_cpu_user') + field('used_cpu_sys');
}

/** A Redis server's own CPU time so far (user + system, s). */
export async function redisCpuSeconds(node: { info(section: 'cpu'): Promise<string> }): Promise<number> {
  return cpuSecondsOf(await node.info('cpu'));
}

/** mulberry32: small, fast, seeded (the fixtures' generator). */
export const rng = prng;

/** `n` peer indices in [0, peers), P(i) proportional to 1 / (i + 1)^s. */
export function zipfSequence(n: number, peers: number, s: number, seed: number): Uint16Array {
  const cdf = new Float64Array(peers);
  let sum = 0;
  for (let i = 0; i < peers; i++) cdf[i] = sum += 1 / (i + 1) ** s;
  for (let i = 0; i < peers; i++) cdf[i]! /= sum;
  const rand = rng(seed);
  const out = new Uint16Array(n);
  for (let k = 0; k < n; k++) {
    const u = rand();
    let lo = 0;
    let hi = peers - 1;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (cdf[mid]! < u) lo = mid + 1;
      else hi = mid;
    }
    out[k] = lo;
  }
  return out;
}

export type Histogram = ReturnType<typeof hdr.build>;

export function histogram(): Histogram {
  return hdr.build({
    bitBucketSize: 32,
    autoResize: true,
    lowestDiscernibleValue: 1,
    numberOfSignificantValueDigits: 3,
  });
}

export interface LoopResult {
  /** Calls completed. */
  readonly done: number;
  readonly seconds: number;
  readonly hist: Histogram;
  /** Node process CPU (user + system) over the run, in cores (1.0 = one core busy). */
  readonly nodeCores: number;
}

/**
 * Closed loop: `concurrency` workers, each issuing call i (a shared counter) and awaiting it,
 * until `calls` were issued or `seconds` passed. Every call's latency is recorded.
 */
export async function closedLoop(
  calls: number,
  seconds: number,
  concurrency: number,
  op: (i: number) => Promise<void>,
): Promise<LoopResult> {
  const hist = histogram();
  let next = 0;
  const start = performance.now();
  const deadline = start + seconds * 1000;
  const cpu0 = process.cpuUsage();
  const worker = async (): Promise<void> => {
    while (next < calls && performance.now() < deadline) {
      const i = next++;
      const t0 = performance.now();
      await op(i);
      hist.recordValue(Math.max(1, Math.round((performance.now() - t0) * 1e6)));
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
  const elapsed = (performance.now() - start) / 1000;
  const cpu = process.cpuUsage(cpu0);
  return { done: next, seconds: elapsed, hist, nodeCores: (cpu.user + cpu.system) / 1e6 / elapsed };
}

/** Sync loop without per-call timing (throughput); `op` is called for i = 0, 1, ... */
export function syncLoop(calls: number, seconds: number, op: (i: number) => void): { done: number; seconds: number } {
  const start = performance.now();
  const deadline = start + seconds * 1000;
  let i = 0;
  while (i < calls) {
    op(i++);
    if ((i & 1023) === 0 && performance.now() > deadline) break;
  }
  return { done: i, seconds: (performance.now() - start) / 1000 };
}

/** Sync loop timing every call (latency; slower than syncLoop by the cost of the clock reads). */
export function syncLatency(calls: number, seconds: number, op: (i: number) => void): Histogram {
  const hist = histogram();
  const deadline = performance.now() + seconds * 1000;
  for (let i = 0; i < calls; i++) {
    const t0 = performance.now();
    op(i);
    hist.recordValue(Math.max(1, Math.round((performance.now() - t0) * 1e6)));
    if ((i & 1023) === 0 && performance.now() > deadline) break;
  }
  return hist;
}

/** Wall clock in integer µs (for clients whose results carry no store time). */
export function wallUs(): number {
  return Math.round((performance.timeOrigin + performance.now()) * 1000);
}
