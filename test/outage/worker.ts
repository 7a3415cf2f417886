/**
 * A routing process for test/gate-outage.test.ts: a CallGate on its own RedisStore connection,
 * through Redis outages the test makes, then closed.
 *
 *   node --import tsx test/outage/worker.ts <redis url>
 *
 * Prints one JSON line per phase and waits for a line on stdin before each outage step
 * ("down": Redis was killed, "up": Redis was restarted). Every timer, immediate and socket created
 * from the gate's creation on is tracked with async_hooks; after close() the last line lists those
 * still alive. The process must then exit on its own (no process.exit here).
 */
import { createHook } from 'node:async_hooks';
import { randomBytes } from 'node:crypto';
import { createInterface } from 'node:readline';
import type { AdmissionDecision } from '../../src/admission/admission.js';
import { CallGate } from '../../src/gate.js';
import { RedisStore } from '../../src/store/redis/redis-store.js';

const WATCHED = new Set([
  'Timeout',
  'Immediate',
  'TCPWRAP',
  'TCPCONNECTWRAP',
  'UDPWRAP',
  'PIPEWRAP',
  'GETADDRINFOREQWRAP',
]);
const live = new Map<number, string>();
const hook = createHook({
  init(id, type) {
    if (WATCHED.has(type)) live.set(id, type);
  },
  destroy(id) {
    live.delete(id);
  },
});

const lines = createInterface({ input: process.stdin });
const queued: string[] = [];
let waiting: ((l: string) => void) | undefined;
lines.on('line', (l) => {
  if (!waiting) {
    queued.push(l);
    return;
  }
  waiting(l);
  waiting = undefined;
});
const nextLine = () =>
  queued.length > 0 ? Promise.resolve(queued.shift()!) : new Promise<string>((r) => (waiting = r));
const say = (o: object) => process.stdout.write(`${JSON.stringify(o)}\n`);
const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

async function main(): Promise<void> {
  say({ phase: 'start' }); // stdout's pipe exists before the hook
  hook.enable();
  const gate = await CallGate.create({
    config: {
      inbound: { peers: { p: [{ limit: 1000, window: 'PT1S' }] } },
      outbound: { carriers: { A: { cps: 2, maxWait: 'PT2S' } } },
    },
    store: RedisStore.connect(process.argv[2]!, { prefix: `outage:${randomBytes(4).toString('hex')}:` }),
    timeoutMs: 200,
  });
  const errors: string[] = [];
  gate.on('error', (e) => errors.push(`${e.name}: ${e.message}`));
  let n = 0;
  const admit = () => gate.admit({ callId: `c${n++}`, peer: 'p' });
  const outcome = (d: AdmissionDecision) => (d.admitted ? 'admitted' : d.limitedBy!);
  /** Admit every 50 ms until one is admitted (bounded). */
  const recover = async () => {
    const until = Date.now() + 10_000;
    for (;;) {
      if ((await admit()).admitted) return true;
      if (Date.now() > until) return false;
      await sleep(50);
    }
  };

  say({ phase: 'up', first: outcome(await admit()), errors: errors.length });
  for (const outage of [1, 2]) {
    if ((await nextLine()) !== 'down') throw new Error('expected "down"');
    const decisions: string[] = [];
    for (let i = 0; i < 10; i++) {
      decisions.push(outcome(await admit()));
      await sleep(100);
    }
    const dispatched = await gate.dispatch({ callId: `o${outage}`, route: ['A'] }, () => undefined);
    say({
      phase: `down${outage}`,
      decisions,
      dispatch: `${dispatched.outcome}/${dispatched.reason}`,
      errors: errors.length,
    });
    if ((await nextLine()) !== 'up') throw new Error('expected "up"');
    say({ phase: `recovered${outage}`, recovered: await recover(), errors: errors.length });
  }
  // calls held for their slot when the gate closes: cancelled, their timers gone
  const held = [0, 1, 2].map((i) => gate.dispatch({ callId: `h${i}`, route: ['A'] }, () => undefined));
  await sleep(100);
  const heldBefore = gate.held;
  await gate.close({ mode: 'cancel' });
  const outcomes = (await Promise.all(held)).map((r) => r.outcome);
  lines.close();
  process.stdin.destroy();
  const atClose = [...live.keys()];
  await sleep(50); // let closed sockets report their destruction (this timer is not counted)
  await new Promise((r) => setImmediate(r));
  hook.disable();
  const leftovers = atClose.filter((id) => live.has(id)).map((id) => live.get(id));
  say({ phase: 'closed', heldBefore, outcomes, errors, leftovers });
}

main().catch((err: Error) => {
  process.stderr.write(`worker failed: ${err.stack}\n`);
  process.exitCode = 1;
  process.stdin.destroy();
});
