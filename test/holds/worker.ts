/**
 * A routing process for the holds tests (test/holds-restart.test.ts): its own ioredis connection
 * (or Cluster client) and CallGate on a RedisStore, live time (Redis TIME).
 *
 *   node --import tsx test/holds/worker.ts '<json HoldsWorkerArgs>'
 *
 * Prints {"ready":true}, waits for "go" on stdin, then offers calls of its callers for
 * `durationMs`, `lanes` at a time, each lane pausing `pauseMs` between offers. An admitted call
 * lasts a random `minHoldMs`..`maxHoldMs`, then hangs up: released by this process (the time of
 * the hang-up, process clock, is the call's real end). After its loop it waits for its calls to
 * end and every deferred release to land, prints {"idle":true}, and on "end" its report.
 */
import { createInterface } from 'node:readline';
import { Cluster, Redis } from 'ioredis';
import type { CallGateConfigInput } from '../../src/config/types.js';
import { CallGate } from '../../src/gate.js';
import type { StorePolicy } from '../../src/admission/admission.js';
import { RECOMMENDED_REDIS_OPTIONS, RedisStore } from '../../src/store/redis/redis-store.js';

export interface HoldsWorkerArgs {
  id: string;
  /** A single Redis URL, or the nodes of a Cluster. */
  url?: string;
  cluster?: { host: string; port: number }[];
  prefix: string;
  config: CallGateConfigInput;
  callers: { peer: string; account?: string }[];
  durationMs: number;
  lanes: number;
  pauseMs: number;
  minHoldMs: number;
  maxHoldMs: number;
  policy?: StorePolicy;
  localShare?: number;
}

export interface HoldsDecided {
  id: string;
  peer: string;
  account?: string;
  /** The decision's time, µs (Redis TIME; process clock when decided by policy). */
  at: number;
  admitted: boolean;
  degraded?: string;
  limitedBy?: string;
  /** When the call hung up (process clock, µs): its real end. */
  hangup?: number;
}

export interface HoldsWorkerReport {
  id: string;
  decided: HoldsDecided[];
  /** Final outcome of each release: released / not-held (deferred ones once they landed). */
  released: Record<string, { outcome: string; at?: number; deferred: boolean }>;
  /** Re-assertions and losses seen, with the process clock (ms). */
  reasserted: { at: number; tag: string; reasserted: number; gone: number; checked: number }[];
  losses: { at: number; tag: string; cause: string }[];
  errors: string[];
}

const args = JSON.parse(process.argv[2] ?? '{}') as HoldsWorkerArgs;
// as `callgate serve` and docs/redis.md make them: no command queued while Redis is away nor
// re-sent after a break (a decision re-sent on reconnect would land before this process's holds
// are back)
const redis = args.cluster
  ? new Cluster(args.cluster, {
      redisOptions: { ...RECOMMENDED_REDIS_OPTIONS, connectTimeout: 2_000 },
      enableOfflineQueue: false,
    })
  : new Redis(args.url!, { ...RECOMMENDED_REDIS_OPTIONS, connectTimeout: 2_000 });
const store = new RedisStore({ redis, prefix: args.prefix });
const gate = await CallGate.create({
  config: args.config,
  store,
  timeoutMs: 500,
  policy: args.policy,
  localShare: args.localShare,
});
const report: HoldsWorkerReport = { id: args.id, decided: [], released: {}, reasserted: [], losses: [], errors: [] };
gate.on('released', ({ callId, outcome, at }) => {
  const prev = report.released[callId];
  report.released[callId] = { outcome, at, deferred: prev?.deferred === true || outcome === 'deferred' };
});
gate.on('error', (err) => report.errors.push(String(err)));
store.events.on('holdsReasserted', (e) => report.reasserted.push({ at: Date.now(), ...e }));
store.events.on('storeLoss', (e) => report.losses.push({ at: Date.now(), ...e }));
const print = (msg: unknown) => process.stdout.write(`${JSON.stringify(msg)}\n`);
print({ ready: true });

let started!: () => void;
const go = new Promise<void>((r) => (started = r));
let ended!: () => void;
const end = new Promise<void>((r) => (ended = r));
const rl = createInterface({ input: process.stdin });
rl.on('line', (line) => {
  const cmd = line.trim();
  if (cmd === 'go') started();
  else if (cmd === 'end') ended();
});
await go;

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));
const calls: Promise<void>[] = [];
let seq = 0;
const stop = Date.now() + args.durationMs;
const lane = async () => {
  while (Date.now() < stop) {
    const c = args.callers[seq % args.callers.length]!;
    const id = `${args.id}-${seq++}`;
    try {
      const d = await gate.admit({ callId: id, peer: c.peer, account: c.account });
      const row: HoldsDecided = { id, peer: c.peer, account: c.account, at: d.at, admitted: d.admitted };
      if (d.degraded) row.degraded = d.degraded;
      if (d.limitedBy) row.limitedBy = d.limitedBy;
      report.decided.push(row);
      if (d.admitted) {
        const holdMs = args.minHoldMs + Math.random() * (args.maxHoldMs - args.minHoldMs);
        calls.push(
          sleep(holdMs).then(async () => {
            row.hangup = Date.now() * 1000;
            await gate.release(id);
          }),
        );
      }
    } catch (err) {
      report.errors.push(String(err));
    }
    await sleep(args.pauseMs * (0.5 + Math.random()));
  }
};
await Promise.all(Array.from({ length: args.lanes }, lane));
await Promise.all(calls);
// deferred releases land in the background: wait for them (bounded)
for (let i = 0; i < 100 && gate.deferredReleases > 0; i++) await sleep(100);
print({ idle: true });
await end;
rl.close();
await gate.close();
redis.disconnect();
print({ report });
