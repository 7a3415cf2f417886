/**
 * A routing process for the recording test (test/record-multiprocess.test.ts): its own ioredis
 * connection and CallGate on a RedisStore shared with the other process, live time (Redis TIME),
 * recording every decision's input into its own folder (small files, so they rotate).
 *
 *   node --import tsx test/record/worker.ts '<json RecordWorkerArgs>'
 *
 * Prints {"ready":true} once connected, waits for "go" on stdin, then admits inbound calls and
 * dispatches outbound ones as fast as it can (`concurrency` lanes of each) for `durationMs`,
 * hanging most calls up (release) a little later, and prints one JSON line: every decision it
 * got, as decision lines (time_us = decision time).
 */
import { createInterface } from 'node:readline';
import { Redis } from 'ioredis';
import type { CallGateConfigInput } from '../../src/config/types.js';
import { CallGate } from '../../src/gate.js';
import type { DecisionLine } from '../../src/replay/replay.js';
import { RedisStore } from '../../src/store/redis/redis-store.js';

export interface RecordWorkerArgs {
  id: string;
  url: string;
  prefix: string;
  config: CallGateConfigInput;
  dir: string;
  maxBytes: number;
  peers: { peer: string; account?: string }[];
  routes: string[][];
  durationMs: number;
  maxCalls: number;
  concurrency: number;
  /** A call that holds channels hangs up (release) after 0 to this many ms, but one in ten never. */
  maxHoldMs: number;
}

export interface RecordWorkerReport {
  id: string;
  decisions: DecisionLine[];
  files: string[];
  errors: string[];
}

const args = JSON.parse(process.argv[2] ?? '{}') as RecordWorkerArgs;
const redis = new Redis(args.url, { maxRetriesPerRequest: 1, connectTimeout: 2_000 });
const gate = await CallGate.create({
  config: args.config,
  store: new RedisStore({ redis, prefix: args.prefix }),
  timeoutMs: 5_000,
  // the replay must give every call's live decision, limited_by included: a shielded refusal
  // may name a later level than Redis would (src/admission/shield.ts), so no shield here
  shield: false,
  recordTrace: { dir: args.dir, prefix: args.id, maxBytes: args.maxBytes },
});
const report: RecordWorkerReport = { id: args.id, decisions: [], files: [], errors: [] };
gate.on('error', (e) => report.errors.push(String(e)));
await redis.ping();
process.stdout.write(`${JSON.stringify({ ready: true })}\n`);

const rl = createInterface({ input: process.stdin });
await new Promise<void>((resolve) => rl.on('line', (line) => line.trim() === 'go' && resolve()));
rl.close();

// hang-ups: released from this process after a while (one call in ten never: its hold lapses)
const hangups: Promise<unknown>[] = [];
const hangUpLater = (callId: string) => {
  if (seq % 10 === 0) return;
  hangups.push(
    new Promise((r) => setTimeout(r, Math.floor(Math.random() * args.maxHoldMs))).then(() =>
      gate.release(callId).then(
        (outcome) => outcome === 'deferred' && report.errors.push(`${callId}: release deferred`),
        (err) => report.errors.push(`${callId}: release ${String(err)}`),
      ),
    ),
  );
};
const end = Date.now() + args.durationMs;
let seq = 0;
const more = () => seq < args.maxCalls && Date.now() < end;
const inbound = async () => {
  while (more()) {
    const callId = `${args.id}-${seq++}`;
    const { peer, account } = args.peers[seq % args.peers.length]!;
    try {
      const d = await gate.admit({ callId, peer, account });
      if (d.admitted) hangUpLater(callId);
      report.decisions.push(
        d.admitted
          ? { call_id: callId, direction: 'in', outcome: 'admitted', time_us: d.at }
          : {
              call_id: callId,
              direction: 'in',
              outcome: 'rejected',
              limited_by: d.limitedBy!,
              ...(d.reason && { reason: d.reason }),
              time_us: d.at,
            },
      );
    } catch (err) {
      report.errors.push(String(err));
    }
  }
};
const outbound = async () => {
  while (more()) {
    const callId = `${args.id}-${seq++}`;
    const route = args.routes[seq % args.routes.length]!;
    const r = await gate.dispatch({ callId, route }, undefined, {
      onReserved: (x) => {
        const line: DecisionLine = {
          call_id: callId,
          direction: 'out',
          outcome: x.outcome,
          carrier: x.carrier,
          delay_ms: x.delayMs,
          rerouted_from: x.reroutedFrom,
          time_us: x.at,
        };
        if (x.reason) line.reason = x.reason;
        if (x.skipped) line.skipped = x.skipped;
        report.decisions.push(line);
      },
    });
    if (r.outcome === 'failed') report.errors.push(`${callId}: ${r.reason} ${r.error}`);
    // sent: it may hang up now (a hang-up before the slot would cancel it, see src/recording/trace-recorder.ts)
    if (r.outcome === 'dispatched') hangUpLater(callId);
  }
};
await Promise.all([
  ...Array.from({ length: args.concurrency }, inbound),
  ...Array.from({ length: args.concurrency }, outbound),
]);
await Promise.all(hangups);
await gate.close();
redis.disconnect();
report.files = gate.recorder!.files;
process.stdout.write(`${JSON.stringify(report)}\n`);
