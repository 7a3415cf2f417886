/**
 * A routing process for the channel tests (test/channels-multiprocess.test.ts): its own ioredis
 * connection and CallGate on a RedisStore, live time (Redis TIME).
 *
 *   node --import tsx test/channels/worker.ts '<json ChannelWorkerArgs>'
 *
 * Prints {"ready":true}, waits for "go" on stdin, then admits calls of its peers (`concurrency`
 * in flight) for `durationMs`. Each admitted call lasts a random 20..`maxHoldMs` ms; then the
 * worker releases it itself, or (half of them) prints {"bye": id} so that the parent hands the
 * release to another worker ("release <id>" on that worker's stdin), as when the BYE reaches
 * another routing process. Some calls are offered twice at once and once more after their
 * decision (INVITE retransmissions). After its loop and its own hang-ups it prints
 * {"idle":true}; on "end" it finishes the releases it was handed and prints its report.
 *
 * mode "hold": admits `holdCalls` calls and keeps them (refreshing every `refreshMs` when set),
 * prints {"held": [...]} and waits to be killed or told "end".
 */
import { createInterface } from 'node:readline';
import { Redis } from 'ioredis';
import type { AdmissionDecision } from '../../src/admission/admission.js';
import type { CallGateConfigInput } from '../../src/config/types.js';
import { CallGate } from '../../src/gate.js';
import { RedisStore } from '../../src/store/redis/redis-store.js';

export interface ChannelWorkerArgs {
  id: string;
  url: string;
  prefix: string;
  config: CallGateConfigInput;
  /** Peer and account of each call, chosen in turn. */
  callers: { peer: string; account?: string }[];
  mode: 'traffic' | 'hold';
  durationMs?: number;
  concurrency?: number;
  maxHoldMs?: number;
  holdCalls?: number;
  refreshMs?: number;
}

export interface Decided {
  id: string;
  peer: string;
  account?: string;
  /** Redis TIME of the decision, µs. */
  at: number;
  admitted: boolean;
  limitedBy?: string;
  reason?: string;
}

export interface ChannelWorkerReport {
  id: string;
  decided: Decided[];
  /** Releases this worker made (its own calls and those handed to it): Redis TIME of each. */
  released: { id: string; at: number; outcome: string }[];
  /** Repeated admits: [what the first got, what the repeat got]. */
  repeats: { id: string; first: string; concurrent: string; after: string }[];
  errors: string[];
}

const args = JSON.parse(process.argv[2] ?? '{}') as ChannelWorkerArgs;
const redis = new Redis(args.url, { maxRetriesPerRequest: 1, connectTimeout: 2_000 });
const gate = await CallGate.create({
  config: args.config,
  store: new RedisStore({ redis, prefix: args.prefix }),
  timeoutMs: 2_000,
});
const report: ChannelWorkerReport = { id: args.id, decided: [], released: [], repeats: [], errors: [] };
gate.on('released', ({ callId, outcome, at }) => {
  if (at !== undefined) report.released.push({ id: callId, at, outcome });
  else report.errors.push(`release of ${callId}: ${outcome}`);
});
gate.on('error', (err) => report.errors.push(String(err)));
await redis.ping();
const print = (msg: unknown) => process.stdout.write(`${JSON.stringify(msg)}\n`);
print({ ready: true });

const inFlight = new Set<Promise<unknown>>();
const track = (p: Promise<unknown>) => {
  inFlight.add(p);
  void p.finally(() => inFlight.delete(p));
};
let started!: () => void;
const go = new Promise<void>((r) => (started = r));
let ended!: () => void;
const end = new Promise<void>((r) => (ended = r));
const rl = createInterface({ input: process.stdin });
rl.on('line', (line) => {
  const [cmd, ...rest] = line.trim().split(' ');
  if (cmd === 'go') started();
  else if (cmd === 'end') ended();
  else if (cmd === 'release') track(gate.release(rest.join(' ')).catch((e: unknown) => report.errors.push(String(e))));
});
await go;

const tag = (d: { admitted: boolean; duplicate?: boolean; limitedBy?: string; reason?: string }) =>
  d.admitted ? (d.duplicate ? 'duplicate' : 'admitted') : `${d.limitedBy}:${d.reason ?? ''}`;
const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));
let seq = 0;

if (args.mode === 'hold') {
  const held: Decided[] = [];
  for (let i = 0; i < (args.holdCalls ?? 1); i++) {
    const c = args.callers[i % args.callers.length]!;
    const id = `${args.id}-h${i}`;
    const d = await gate.admit({ callId: id, peer: c.peer, account: c.account });
    held.push({
      id,
      peer: c.peer,
      account: c.account,
      at: d.at,
      admitted: d.admitted,
      limitedBy: d.limitedBy,
      reason: d.reason,
    });
  }
  print({ held });
  const timer = args.refreshMs
    ? setInterval(() => {
        for (const h of held)
          if (h.admitted) track(gate.refresh(h.id).catch((e: unknown) => report.errors.push(String(e))));
      }, args.refreshMs)
    : undefined;
  await end;
  clearInterval(timer);
} else {
  const stop = Date.now() + (args.durationMs ?? 2_000);
  const lane = async () => {
    while (Date.now() < stop) {
      const c = args.callers[seq % args.callers.length]!;
      const id = `${args.id}-${seq++}`;
      const input = { callId: id, peer: c.peer, account: c.account };
      const retransmit = seq % 10 === 0;
      let d: AdmissionDecision;
      try {
        if (retransmit) {
          const [a, b] = await Promise.all([gate.admit(input), gate.admit(input)]);
          d = a;
          // once decided: again while it holds (a refused call would simply be offered anew)
          const after = a.admitted ? tag(await gate.admit(input)) : '';
          report.repeats.push({ id, first: tag(a), concurrent: tag(b), after });
        } else d = await gate.admit(input);
      } catch (err) {
        report.errors.push(String(err));
        continue;
      }
      report.decided.push({
        id,
        peer: c.peer,
        account: c.account,
        at: d.at,
        admitted: d.admitted,
        limitedBy: d.limitedBy,
        reason: d.reason,
      });
      if (!d.admitted) {
        await sleep(1 + Math.random() * 5);
        continue;
      }
      const holdMs = 20 + Math.random() * ((args.maxHoldMs ?? 200) - 20);
      track(
        sleep(holdMs).then(() => {
          if (Math.random() < 0.5) return gate.release(id);
          print({ bye: id });
          return undefined;
        }),
      );
    }
  };
  await Promise.all(Array.from({ length: args.concurrency ?? 4 }, lane));
  while (inFlight.size > 0) await Promise.all([...inFlight]);
  print({ idle: true });
  await end;
  while (inFlight.size > 0) await Promise.all([...inFlight]);
}
rl.close();
await gate.close();
redis.disconnect();
print({ report });
