/**
 * The conformance case of the read-only "inspect" operation (InspectRequest in types.ts): every
 * algorithm, limits listed out of the scripts' order, a bucket named twice, a fractional
 * sliding-window estimate, carriers used and unused. Expected values are computed by hand (the
 * arithmetic is in the comments) and checked against the refusal an admission then gets.
 */
import { expect } from 'chai';
import type { Store } from '../../src/store/types.js';
import { FW, MS, S, SL, SW, T0, bucket, carrier } from './cases.js';

// limits listed narrow window first: the scripts order sliding-log limits widest first
const b1 = bucket('peer:insp1', SL(3, S), SL(5, 10 * S));
const b2 = bucket('peer:insp2', FW(2, S), SW(4, 10 * S));
const b3 = bucket('peer:insp3', SW(2, S));
const c1 = carrier('insp1', 100 * MS, 10 * S);
const c2 = carrier('insp2', 100 * MS, 10 * S);
// channel limits: a bucket of 3 and a carrier of 2
const b4 = { ...bucket('peer:insp4', SL(10, S)), channels: 3 };
const c3 = { ...carrier('insp3', 100 * MS, 10 * S), channels: 2 };
const tag = 'p:insp';

export async function inspectCase(store: Store): Promise<void> {
  const admit = async (buckets: (typeof b1)[], now: number) => {
    const r = await store.admit({ tag, buckets, now });
    expect(r.admitted, `admit at T0${now - T0 >= 0 ? '+' : ''}${now - T0}`).to.equal(true);
  };
  for (const dt of [0, 100 * MS, 200 * MS]) await admit([b1], T0 + dt);
  for (const dt of [100 * MS, 300 * MS]) await admit([b2], T0 + dt);
  // b3: two events in the window before T0's (SW 2/1 s: c 0 then 1, p 0), one in T0's
  // (c 0, p 2, f 0.1: 2 * 0.9 = 1.8 < 2)
  for (const dt of [-500 * MS, -400 * MS, 100 * MS]) await admit([b3], T0 + dt);
  await store.reserve({ route: [c1], now: T0 }); // slot T0
  await store.reserve({ route: [c1], now: T0 }); // slot T0 + 100 ms
  // b4: two calls hold until T0 + 1 s; c3: one call holds from its slot T0 until T0 + 2 s
  for (const id of ['h1', 'h2'])
    expect((await store.admit({ tag, buckets: [b4], now: T0, hold: { id, forUs: S } })).admitted).to.equal(true);
  expect((await store.reserve({ route: [c3], now: T0, hold: { id: 'h3', forUs: 2 * S } })).index).to.equal(0);
  const channels = async (now: number) => {
    const r = await store.inspect({ buckets: [{ tag, bucket: b4 }], carriers: [c3, c2], now });
    return [r.buckets[0]!.channels, r.carriers[0]!.channels, r.carriers[1]!.channels];
  };
  expect(await channels(T0 + 50 * MS), 'calls in progress: b4, c3, c2 (no channel limit)').to.deep.equal([
    2,
    1,
    undefined,
  ]);
  // a hold ending exactly at t has freed its channel
  expect(await channels(T0 + S)).to.deep.equal([0, 1, undefined]);
  expect(await channels(T0 + 2 * S)).to.deep.equal([0, 0, undefined]);

  const req = (now: number) => ({
    buckets: [b1, b2, b3, b1].map((b) => ({ tag, bucket: b })),
    carriers: [c1, c2],
    now,
  });

  // At T0 + 50 ms. b1: only T0 is in (T0 - 950 ms, T0 + 50 ms] (later events are after t).
  // b2 FW: window [T0, T0 + 1 s) holds 2 = L: retry T0 + 1 s - t = 950 ms; SW 10 s: c 2, p 0: 2 < 4.
  // b3: c 1, p 2, f 0.05: 1 + 2 * 0.95 = 2.9 >= 2; c < L: T0 + floor(1 s * (1 - 1 / 2)) + 1 - t = 450,001.
  // c1: last T0 + 100 ms, I 100 ms: wait T0 + 200 ms - t = 150 ms; c2 never used: 0.
  const early = await store.inspect(req(T0 + 50 * MS));
  const f1 = (50 * MS) / S;
  expect(early).to.deep.equal({
    buckets: [
      { counts: [1, 1], retryAfterUs: [0, 0] },
      { counts: [2, 2], retryAfterUs: [950 * MS, 0] },
      { counts: [1 + 2 * (1 - f1)], retryAfterUs: [450 * MS + 1] },
      { counts: [1, 1], retryAfterUs: [0, 0] },
    ],
    carriers: [{ waitUs: 150 * MS }, { waitUs: 0 }],
    now: T0 + 50 * MS,
  });

  // At T0 + 400 ms. b1: 3 events in 1 s = L: the oldest (T0) leaves at T0 + 1 s: 600 ms; 3 < 5 in 10 s.
  // b2 FW: 2 = L: 600 ms. b3: f 0.4: 1 + 2 * 0.6 = 2.2 >= 2: T0 + 500,001 - t = 100,001 µs.
  // c1: T0 + 200 ms < t: 0.
  const t = T0 + 400 * MS;
  const late = await store.inspect(req(t));
  expect(late).to.deep.equal({
    buckets: [
      { counts: [3, 3], retryAfterUs: [600 * MS, 0] },
      { counts: [2, 2], retryAfterUs: [600 * MS, 0] },
      { counts: [1 + 2 * (1 - (400 * MS) / S)], retryAfterUs: [100 * MS + 1] },
      { counts: [3, 3], retryAfterUs: [600 * MS, 0] },
    ],
    carriers: [{ waitUs: 0 }, { waitUs: 0 }],
    now: t,
  });
  // read-only: the same again, and admissions get the refusals inspect announced
  expect(await store.inspect(req(t))).to.deep.equal(late);
  for (const [b, retry] of [
    [b1, 600 * MS],
    [b2, 600 * MS],
    [b3, 100 * MS + 1],
  ] as const) {
    const r = await store.admit({ tag, buckets: [b], now: t });
    expect({ admitted: r.admitted, retryAfterUs: r.retryAfterUs }, b.name).to.deep.equal({
      admitted: false,
      retryAfterUs: retry,
    });
  }
  // nothing asked, nothing read; the store's clock when no time is given
  const none = await store.inspect({ buckets: [], carriers: [] });
  expect(none.buckets).to.deep.equal([]);
  expect(Math.abs(none.now - Date.now() * 1000)).to.be.below(5 * S);
}
