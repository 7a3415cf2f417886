/**
 * A routing process for the four-process flood-shield test (test/shield.test.ts): its own ioredis
 * connection and CallGate on a RedisStore (shield on, the default), live time (Redis TIME).
 *
 *   node --import tsx test/shield/worker.ts '<json ShieldWorkerArgs>'
 *
 * Prints {"ready":true}, waits for "go" on stdin, then offers calls on a fixed schedule for
 * `durationMs`: the flood peer every `floodEveryMs`, a normal peer every `normalEveryMs`; prints
 * one JSON line with every decision and the offset of Redis' clock to its own.
 */
import { createInterface } from 'node:readline';
import { Redis } from 'ioredis';
import { systemClockUs } from '../../src/clock.js';
import type { LimitInput } from '../../src/config/types.js';
import { CallGate } from '../../src/gate.js';
import { RedisStore } from '../../src/store/redis/redis-store.js';

export interface ShieldWorkerArgs {
  id: string;
  url: string;
  prefix: string;
  limits: LimitInput[];
  durationMs: number;
  floodEveryMs: number;
  normalEveryMs: number;
}

export interface ShieldDecision {
  peer: string;
  admitted: boolean;
  /** Decision time (Redis µs; for a shielded refusal, the process clock at the call + offset). */
  at: number;
  shielded: boolean;
  limitedBy?: string;
  /** The process clock when the call was offered, µs. */
  issuedUs: number;
}

export interface ShieldWorkerReport {
  id: string;
  decisions: ShieldDecision[];
  /** Redis TIME minus the process clock, µs, and the uncertainty of that (half a round trip). */
  offsetUs: number;
  offsetErrUs: number;
  errors: string[];
}

const args = JSON.parse(process.argv[2] ?? '{}') as ShieldWorkerArgs;
const redis = new Redis(args.url, { maxRetriesPerRequest: 1, connectTimeout: 2_000 });
const gate = await CallGate.create({
  config: { inbound: { defaultPeer: args.limits } },
  store: new RedisStore({ redis, prefix: args.prefix }),
  timeoutMs: 2_000,
});
await redis.ping();
// the offset of Redis' clock to this process' one, from the fastest of 20 TIME round trips
let offsetUs = 0;
let offsetErrUs = Infinity;
for (let i = 0; i < 20; i++) {
  const p0 = systemClockUs();
  const [s, us] = await redis.time();
  const p1 = systemClockUs();
  if ((p1 - p0) / 2 < offsetErrUs) {
    offsetErrUs = (p1 - p0) / 2;
    offsetUs = Number(s) * 1e6 + Number(us) - (p0 + p1) / 2;
  }
}
process.stdout.write(`${JSON.stringify({ ready: true })}\n`);
const rl = createInterface({ input: process.stdin });
await new Promise<void>((resolve) => rl.on('line', (line) => line.trim() === 'go' && resolve()));
rl.close();

const decisions: ShieldDecision[] = [];
const errors: string[] = [];
const pending: Promise<void>[] = [];
let n = 0;
const offer = (peer: string) => {
  const callId = `${args.id}-${n++}`;
  const issuedUs = systemClockUs();
  pending.push(
    gate.admit({ callId, peer }).then(
      (d) =>
        void decisions.push({
          peer,
          admitted: d.admitted,
          at: d.at,
          shielded: d.shielded === true,
          limitedBy: d.limitedBy,
          issuedUs,
        }),
      (e: Error) => void errors.push(e.message),
    ),
  );
};
const start = Date.now();
let flood = 0;
let normal = 0;
while (Date.now() - start < args.durationMs) {
  const elapsed = Date.now() - start;
  for (; flood * args.floodEveryMs <= elapsed; flood++) offer('dialer');
  for (; normal * args.normalEveryMs <= elapsed; normal++) offer(`p${normal % 5}`);
  await new Promise((r) => setTimeout(r, 1));
}
await Promise.all(pending);
await gate.close();
redis.disconnect();
process.stdout.write(
  `${JSON.stringify({ id: args.id, decisions, offsetUs, offsetErrUs, errors } satisfies ShieldWorkerReport)}\n`,
);
