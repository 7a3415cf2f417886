/**
 * runConformance: the one Store conformance suite (cases.ts), registered against any store.
 * Each test gets a fresh store from `makeStore` (a fresh prefix on Redis).
 */
import { expect } from 'chai';
import { InvalidArgumentError } from '../../src/errors/index.js';
import type { Store } from '../../src/store/types.js';
import { AFTER_INVALID, CASES, CONC, INVALID, MIN, S, SL, bucket, carrier, type Op } from './cases.js';
import { peerBucket, peerTag } from '../../src/store/keys.js';
import { inspectCase } from './inspect.js';
import { operationsCase } from './operations.js';
import { reassertCase } from './reassert.js';

export interface StoreHandle {
  store: Store;
  cleanup(): Promise<void>;
  /**
   * `n` stores over this store's data, each through its own connection (concurrency test).
   * Default: `store` itself n times (concurrent promises on one store).
   */
  siblings?(n: number): Promise<{ stores: Store[]; close(): Promise<void> }>;
  /** Commands sent to the backend so far (to prove that invalid calls do no I/O). */
  ioCount?(): number;
}

/**
 * Fractional waits: within a millionth of a µs. Slots are exact (src/store/slots.ts: a base and k
 * intervals); a wait is one division and a subtraction from them, where a slot written as one
 * number of µs since 1970 stepped in quarter-µs and drifted by one at every queued call.
 */
const close = (actual: number, expected: number) => Math.abs(actual - expected) <= 1e-6;

function describeOp(op: Op): string {
  const { op: kind, now } = op;
  switch (op.op) {
    case 'admit':
    case 'record':
      return `${kind}×${op.times} [${op.buckets.map((b) => b.name).join(', ')}] @T0${fmt(now)}`;
    case 'count':
      return `count ${op.bucket} W=${op.windowUs} @T0${fmt(now)}`;
    case 'reserve':
      return `reserve [${op.route.map((c) => c.name).join(', ')}]${op.hold ? ` ${op.hold.id}` : ''} @T0${fmt(now)}`;
    case 'wait':
      return `wait ${op.carrier.name} @T0${fmt(now)}`;
    case 'release':
      return `release ${op.id}${op.direction ? ` ${op.direction}` : ''} @T0${fmt(now)}`;
    case 'refresh':
      return `refresh ${op.id} +${op.forUs} @T0${fmt(now)}`;
    case 'holds':
      return `holds ${op.name} @T0${fmt(now)}`;
  }
}
const fmt = (now: number) => {
  const d = now - 1_699_999_200_000_000;
  return d >= 0 ? `+${d}` : `${d}`;
};

export async function runOps(store: Store, ops: readonly Op[]): Promise<void> {
  for (let i = 0; i < ops.length; i++) {
    const op = ops[i]!;
    const at = `op #${i} ${describeOp(op)}`;
    switch (op.op) {
      case 'admit':
        for (let k = 0; k < op.times; k++) {
          const r = await store.admit({
            tag: op.tag,
            buckets: op.buckets,
            now: op.now,
            ...(op.hold && { hold: op.hold }),
          });
          const { admitted, limitedBy, retryAfterUs } = op.expect;
          const kind = admitted ? { duplicate: op.expect.duplicate ?? false } : { reason: op.expect.reason ?? 'rate' };
          const exp = {
            admitted,
            limitedBy: limitedBy ?? -1,
            now: op.now,
            ...kind,
            ...(retryAfterUs === undefined ? {} : { retryAfterUs }),
          };
          const actKind = admitted ? { duplicate: r.duplicate ?? false } : { reason: r.reason };
          const act = {
            admitted: r.admitted,
            limitedBy: r.limitedBy,
            now: r.now,
            ...actKind,
            ...(retryAfterUs === undefined ? {} : { retryAfterUs: r.retryAfterUs }),
          };
          expect(act, `${at} (call ${k + 1})`).to.deep.equal(exp);
        }
        break;
      case 'record':
        for (let k = 0; k < op.times; k++) {
          const r = await store.record({
            tag: op.tag,
            buckets: op.buckets,
            now: op.now,
            ...(op.hold && { hold: op.hold }),
          });
          expect(r.now, `${at} (call ${k + 1}) now`).to.equal(op.now);
          expect(r.duplicate ?? false, `${at} (call ${k + 1}) duplicate`).to.equal(op.duplicate ?? false);
        }
        break;
      case 'release': {
        const r = await store.release({ id: op.id, now: op.now, ...(op.direction && { direction: op.direction }) });
        expect({ released: r.released, now: r.now }, at).to.deep.equal({ released: op.expect, now: op.now });
        break;
      }
      case 'refresh': {
        const r = await store.refresh({ id: op.id, forUs: op.forUs, now: op.now });
        expect({ refreshed: r.refreshed, now: r.now }, at).to.deep.equal({ refreshed: op.expect, now: op.now });
        break;
      }
      case 'holds': {
        const r = await store.holds({ tag: op.tag, name: op.name, now: op.now });
        expect({ holds: r.holds, now: r.now }, at).to.deep.equal({ holds: op.expect, now: op.now });
        break;
      }
      case 'count': {
        const r = await store.count({ tag: op.tag, bucket: op.bucket, windowUs: op.windowUs, now: op.now });
        expect({ count: r.count, now: r.now }, at).to.deep.equal({ count: op.expect, now: op.now });
        break;
      }
      case 'reserve': {
        const r = await store.reserve({ route: op.route, now: op.now, ...(op.hold && { hold: op.hold }) });
        const e = op.expect;
        const msg = `${at}: got ${JSON.stringify(r)}, expected ${JSON.stringify(e)}`;
        expect(r.index, msg).to.equal(e.index);
        expect(r.full, msg).to.deep.equal(e.full ?? e.waits.map(() => false));
        expect(r.now, msg).to.equal(op.now);
        expect(r.waits.length, msg).to.equal(e.waits.length);
        r.waits.forEach((w, j) => {
          expect(close(w, e.waits[j]!), `${msg} (waits[${j}])`).to.equal(true);
        });
        if (e.index < 0) {
          expect([r.waitUs, r.slotUs], msg).to.deep.equal([0, 0]);
        } else {
          expect(close(r.waitUs, e.waitUs), `${msg} (waitUs)`).to.equal(true);
          expect(Math.abs(r.slotUs - (op.now + e.waitUs)) <= 1, `${msg} (slotUs = now + wait)`).to.equal(true);
        }
        break;
      }
      case 'wait': {
        const r = await store.wait({ carrier: op.carrier, now: op.now });
        const msg = `${at}: got ${JSON.stringify(r)}, expected waitUs ${op.expect}`;
        expect(close(r.waitUs, op.expect), msg).to.equal(true);
        expect(r.now, msg).to.equal(op.now);
        break;
      }
    }
  }
}

/** The largest number of times in any window (t - W, t] (times sorted ascending). */
function maxInSlidingWindow(times: readonly number[], W: number): number {
  let max = 0;
  for (let i = 0, j = 0; i < times.length; i++) {
    while (times[j]! <= times[i]! - W) j++;
    max = Math.max(max, i - j + 1);
  }
  return max;
}

function maxInFixedWindow(times: readonly number[], W: number): number {
  const per = new Map<number, number>();
  for (const t of times) {
    const k = Math.floor(t / W);
    per.set(k, (per.get(k) ?? 0) + 1);
  }
  return Math.max(0, ...per.values());
}

export function runConformance(name: string, makeStore: () => Promise<StoreHandle>): void {
  describe(`Store conformance: ${name}`, function () {
    this.timeout(20_000);
    let h: StoreHandle | undefined;
    beforeEach(async () => {
      h = await makeStore();
    });
    afterEach(async () => {
      await h?.cleanup();
      h = undefined;
    });

    for (const c of CASES) {
      it(c.name, async () => runOps(h!.store, c.ops));
    }

    it('inspect: counts and retry-after per limit, queue waits, read-only', async () => inspectCase(h!.store));

    it('operator operations: list holds with their ends, reset a bucket, free one call', async () =>
      operationsCase(h!.store));

    it('reassert: lost holds come back with their end, present ones are not counted twice', async () =>
      reassertCase(h!.store));

    it('invalid arguments are refused with InvalidArgumentError before any I/O, and change nothing', async () => {
      const { store, ioCount } = h!;
      for (const c of INVALID) {
        const before = ioCount?.();
        let err: unknown;
        try {
          await c.call(store);
        } catch (e) {
          err = e;
        }
        expect(err, `${c.name}: ${String(err)}`).to.be.instanceOf(InvalidArgumentError);
        if (ioCount) expect(ioCount(), `${c.name}: commands sent`).to.equal(before);
      }
      const sent = ioCount?.();
      await runOps(store, AFTER_INVALID);
      // the counter does see the store's commands (so the no-I/O checks above are not vacuous)
      if (ioCount) expect(ioCount(), 'commands sent by valid calls').to.be.above(sent!);
    });

    it('times omitted: the store uses its own clock and reports it', async () => {
      const { store } = h!;
      const near = (now: number, what: string) => {
        expect(Number.isSafeInteger(now), `${what}: now ${now} is an integer`).to.equal(true);
        expect(Math.abs(now - Date.now() * 1000), `${what}: now ${now} vs Date.now()`).to.be.below(5 * S);
      };
      const tag = peerTag('clock');
      const b = bucket(peerBucket('clock'), SL(2, MIN));
      const a1 = await store.admit({ tag, buckets: [b] });
      near(a1.now, 'admit');
      expect([a1.admitted, a1.limitedBy, a1.retryAfterUs]).to.deep.equal([true, -1, 0]);
      near((await store.record({ tag, buckets: [b] })).now, 'record');
      const a2 = await store.admit({ tag, buckets: [b] });
      near(a2.now, 'admit');
      expect([a2.admitted, a2.limitedBy]).to.deep.equal([false, 0]);
      // the oldest event (a1) leaves at a1.now + 60 s
      expect(a2.retryAfterUs).to.equal(a1.now + MIN - a2.now);
      const c = await store.count({ tag, bucket: b.name, windowUs: MIN });
      near(c.now, 'count');
      expect(c.count).to.equal(2);

      const k = carrier('clock', 100_000, S);
      const r1 = await store.reserve({ route: [k] });
      near(r1.now, 'reserve');
      expect([r1.index, r1.waitUs, r1.slotUs, r1.waits]).to.deep.equal([0, 0, r1.now, [0]]);
      const r2 = await store.reserve({ route: [k] });
      near(r2.now, 'reserve');
      expect(r2.index).to.equal(0);
      expect(r2.slotUs).to.equal(r1.now + 100_000);
      expect(r2.waitUs).to.equal(r1.now + 100_000 - r2.now);
      const w = await store.wait({ carrier: k });
      near(w.now, 'wait');
      expect(w.waitUs).to.equal(Math.max(0, r2.slotUs + 100_000 - w.now));
    });

    it(`concurrency: ${CONC.clients} clients admit at once on the store clock; no window ever holds more than its limit`, async () => {
      const { store, siblings } = h!;
      const sib = siblings
        ? await siblings(CONC.clients)
        : { stores: Array(CONC.clients).fill(store) as Store[], close: async () => {} };
      const admitted: number[] = [];
      let refused = 0;
      try {
        const deadline = Date.now() + CONC.durationMs;
        await Promise.all(
          sib.stores.map(async (s) => {
            for (let i = 0; i < CONC.maxPerClient && Date.now() < deadline; i++) {
              const r = await s.admit({ tag: CONC.tag, buckets: [CONC.bucket] });
              if (r.admitted) admitted.push(r.now);
              else refused++;
              // an in-process store resolves at once: let timers and I/O run now and then
              if (i % 64 === 63) await new Promise((res) => setImmediate(res));
            }
          }),
        );
      } finally {
        await sib.close();
      }
      admitted.sort((a, b) => a - b);
      expect(admitted.length, 'some calls admitted').to.be.above(0);
      expect(refused, 'some calls refused (the limits were reached)').to.be.above(0);
      for (const lim of CONC.bucket.limits) {
        const max =
          lim.algorithm === 'fixed-window'
            ? maxInFixedWindow(admitted, lim.windowUs)
            : maxInSlidingWindow(admitted, lim.windowUs);
        expect(max, `most admitted in one window of ${lim.algorithm} ${lim.limit}/${lim.windowUs}µs`).to.be.at.most(
          lim.limit,
        );
      }
      const c = await store.count({ tag: CONC.tag, bucket: CONC.bucket.name, windowUs: MIN });
      expect(c.count, 'count (60 s) = admitted').to.equal(admitted.length);
    });
  });
}
