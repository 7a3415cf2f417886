/**
 * What the holds tests share (test/holds-*.test.ts): the routing-process worker started as a
 * child process, the configuration (channel limits at three levels) and the count of calls in
 * progress per level from every decision and hang-up time.
 */
import { fileURLToPath } from 'node:url';
import type { CallGateConfigInput } from '../../src/config/types.js';
import { startMessageWorker, type MessageWorker } from '../helpers/worker.js';
import type { HoldsDecided, HoldsWorkerArgs, HoldsWorkerReport } from './worker.js';

const WORKER = fileURLToPath(new URL('./worker.ts', import.meta.url));
const ROOT = fileURLToPath(new URL('../..', import.meta.url));
export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

export type HoldsWorker = MessageWorker;

export function startHoldsWorker(args: HoldsWorkerArgs): HoldsWorker {
  return startMessageWorker(WORKER, args, { cwd: ROOT, killAfterMs: 120_000, name: `worker ${args.id}` });
}

/** What differs between the holds tests' workers; the rest (configuration, callers, hold times) is shared. */
export type HoldsRunArgs = Pick<
  HoldsWorkerArgs,
  'url' | 'cluster' | 'prefix' | 'durationMs' | 'pauseMs' | 'policy' | 'localShare'
>;

/**
 * Starts `n` workers (w0, w1, ...) on HOLDS_CONFIG and HOLDS_CALLERS with calls of 2-5 s, pushed
 * into `into` at once so that the caller's cleanup kills them even if one fails to start; resolves
 * once all are ready and told to go.
 */
export async function startHoldsWorkers(n: number, args: HoldsRunArgs, into: HoldsWorker[]): Promise<void> {
  const started: HoldsWorker[] = [];
  for (let i = 0; i < n; i++) {
    const w = startHoldsWorker({
      id: `w${i}`,
      ...args,
      config: HOLDS_CONFIG,
      callers: HOLDS_CALLERS,
      lanes: 1,
      minHoldMs: 2_000,
      maxHoldMs: 5_000,
    });
    started.push(w);
    into.push(w);
  }
  await Promise.all(started.map((w) => w.next((m) => m.ready === true)));
  for (const w of started) w.send('go');
}

/** Waits until every worker's calls have ended, then ends them and returns their reports. */
export async function endHoldsWorkers(workers: readonly HoldsWorker[]): Promise<HoldsWorkerReport[]> {
  await Promise.all(workers.map((w) => w.next((m) => m.idle === true)));
  for (const w of workers) w.send('end');
  const done = await Promise.all(workers.map((w) => w.next((m) => m.report !== undefined)));
  return done.map((m) => m.report as HoldsWorkerReport);
}

/** Kills the workers (a test's cleanup, whatever state they are in), empties the list, waits for their exits. */
export async function killHoldsWorkers(workers: HoldsWorker[]): Promise<void> {
  const killed = workers.splice(0);
  for (const w of killed) w.kill();
  await Promise.all(killed.map((w) => w.exited));
}

/** The answer to the release of call `id`, from whichever worker released it. */
export function releaseOf(
  reports: readonly HoldsWorkerReport[],
  id: string,
): HoldsWorkerReport['released'][string] | undefined {
  return reports.flatMap((w) => (w.released[id] ? [w.released[id]!] : []))[0];
}

export interface Level {
  label: string;
  n: number;
  member: (d: HoldsDecided) => boolean;
}

/** Per level, the most calls in progress at any admission instant in [from, to) (µs). */
export function peaks(
  decided: readonly HoldsDecided[],
  levels: readonly Level[],
  from: number,
  to: number,
): Record<string, number> {
  const admitted = decided.filter((d) => d.admitted);
  const out: Record<string, number> = {};
  for (const level of levels) {
    const spans = admitted.filter(level.member).map((d) => [d.at, d.hangup ?? Infinity] as const);
    let max = 0;
    for (const [t] of spans) {
      if (t < from || t >= to) continue;
      let n = 0;
      for (const [s, e] of spans) if (s <= t && e > t) n++;
      if (n > max) max = n;
    }
    out[level.label] = max;
  }
  return out;
}

export const HOLDS_CONFIG: CallGateConfigInput = {
  maxCallDuration: 'PT60S',
  inbound: {
    global: [{ channels: 20 }],
    accounts: { acme: [{ channels: 12 }], beta: [{ channels: 8 }] },
    peers: { 'trunk 1': [{ channels: 6 }], 'trunk 2': [{ channels: 8 }], 'trunk 3': [{ channels: 6 }] },
  },
};
export const HOLDS_CALLERS = [
  { peer: 'trunk 1', account: 'acme' },
  { peer: 'trunk 2', account: 'acme' },
  { peer: 'trunk 3', account: 'beta' },
  { peer: 'trunk 2', account: 'beta' },
];
export const HOLDS_LEVELS: Level[] = [
  { label: 'global', n: 20, member: () => true },
  { label: 'account:acme', n: 12, member: (d) => d.account === 'acme' },
  { label: 'account:beta', n: 8, member: (d) => d.account === 'beta' },
  { label: 'peer:trunk 1', n: 6, member: (d) => d.peer === 'trunk 1' },
  { label: 'peer:trunk 2', n: 8, member: (d) => d.peer === 'trunk 2' },
  { label: 'peer:trunk 3', n: 6, member: (d) => d.peer === 'trunk 3' },
];
