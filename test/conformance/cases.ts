/**
 * The conformance cases: tables of operations with explicit times (µs) and the exact results
 * the normative semantics of src/store/types.ts demand. Every expected value is computed by hand
 * (the arithmetic is in the comments); nothing here is derived from a store.
 */
import type { Bucket, Carrier, Hold, Limit, Store } from '../../src/store/types.js';
import {
  GLOBAL_BUCKET,
  GLOBAL_TAG,
  OUTBOUND_TAG,
  accountBucket,
  accountTag,
  carrierName,
  peerBucket,
  peerTag,
} from '../../src/store/keys.js';

// ---------------------------------------------------------------------------
// Units and a base time aligned to the hour (T0 mod 3600 s = 0), so every window that divides
// an hour starts at T0. Realistic magnitude: fractional slots near T0 have an ulp of 0.25 µs.

export const MS = 1_000;
export const S = 1_000_000;
export const MIN = 60 * S;
export const T0 = 1_699_999_200_000_000;
/** 1e6 / 3: the interval of a 3 cps carrier (fractional). */
export const I3 = 1e6 / 3;

export const SL = (limit: number, windowUs: number): Limit => ({ limit, windowUs, algorithm: 'sliding-log' });
export const FW = (limit: number, windowUs: number): Limit => ({ limit, windowUs, algorithm: 'fixed-window' });
export const SW = (limit: number, windowUs: number): Limit => ({ limit, windowUs, algorithm: 'sliding-window' });
export const bucket = (name: string, ...limits: Limit[]): Bucket => ({ name, limits });
export const carrier = (id: string, intervalUs: number, maxWaitUs: number): Carrier => ({
  name: carrierName(id),
  intervalUs,
  maxWaitUs,
});

// ---------------------------------------------------------------------------
// Operations

export interface AdmitExpect {
  admitted: boolean;
  /** -1 when admitted (default then); required when refused. */
  limitedBy?: number;
  /** Checked exactly when given; 0 is always checked for admissions. */
  retryAfterUs?: number;
  /** On refusals: checked always ('rate' by default). */
  reason?: 'rate' | 'channels' | 'banned';
  /** On admissions: checked always (false by default). */
  duplicate?: boolean;
}

export type Op =
  | { op: 'admit'; tag: string; buckets: Bucket[]; now: number; times: number; expect: AdmitExpect; hold?: Hold }
  | { op: 'record'; tag: string; buckets: Bucket[]; now: number; times: number; hold?: Hold; duplicate?: boolean }
  | { op: 'count'; tag: string; bucket: string; windowUs: number; now: number; expect: number }
  | {
      op: 'reserve';
      route: Carrier[];
      now: number;
      hold?: Hold;
      expect: { index: number; waitUs: number; waits: number[]; full?: boolean[] };
    }
  | { op: 'wait'; carrier: Carrier; now: number; expect: number }
  | { op: 'release'; id: string; direction?: 'in' | 'out'; now: number; expect: number }
  | { op: 'refresh'; id: string; forUs: number; now: number; expect: number }
  | { op: 'holds'; tag: string; name: string; now: number; expect: number };

export interface Case {
  name: string;
  ops: Op[];
}

export const ok: AdmitExpect = { admitted: true, limitedBy: -1, retryAfterUs: 0 };
export const no = (limitedBy: number, retryAfterUs?: number): AdmitExpect => ({
  admitted: false,
  limitedBy,
  retryAfterUs,
});
/** Refused by a channel limit: no retry-after (a call's end is not known). */
export const noCh = (limitedBy: number): AdmitExpect => ({
  admitted: false,
  limitedBy,
  retryAfterUs: 0,
  reason: 'channels',
});
export const dup: AdmitExpect = { admitted: true, limitedBy: -1, retryAfterUs: 0, duplicate: true };

/** Operations on one tag and one list of buckets (the usual shape of a case). */
function on(tag: string, buckets: Bucket[]) {
  return {
    admit: (now: number, expect: AdmitExpect, times = 1): Op => ({ op: 'admit', tag, buckets, now, times, expect }),
    /** admit call `id`, holding its channels for `forUs` once admitted */
    call: (now: number, id: string, forUs: number, expect: AdmitExpect): Op => ({
      op: 'admit',
      tag,
      buckets,
      now,
      times: 1,
      expect,
      hold: { id, forUs },
    }),
    record: (now: number, times = 1): Op => ({ op: 'record', tag, buckets, now, times }),
    recordCall: (now: number, id: string, forUs: number, duplicate = false): Op => ({
      op: 'record',
      tag,
      buckets,
      now,
      times: 1,
      hold: { id, forUs },
      duplicate,
    }),
    /** calls in progress in bucket `i` at `now` */
    holds: (i: number, now: number, expect: number): Op => ({ op: 'holds', tag, name: buckets[i]!.name, now, expect }),
    /** count of bucket `i` (index in `buckets`) over window W at `now`. */
    count: (i: number, windowUs: number, now: number, expect: number): Op => ({
      op: 'count',
      tag,
      bucket: buckets[i]!.name,
      windowUs,
      now,
      expect,
    }),
  };
}
const reserve = (route: Carrier[], now: number, index: number, waitUs: number, waits: number[]): Op => ({
  op: 'reserve',
  route,
  now,
  expect: { index, waitUs, waits },
});
const wait = (c: Carrier, now: number, expect: number): Op => ({ op: 'wait', carrier: c, now, expect });
/** reserve for call `id` holding its carrier's channel until slot + forUs */
const reserveCall = (
  route: Carrier[],
  now: number,
  id: string,
  forUs: number,
  index: number,
  waitUs: number,
  waits: number[],
  full: boolean[],
): Op => ({
  op: 'reserve',
  route,
  now,
  hold: { id, forUs },
  expect: { index, waitUs, waits, full },
});
const release = (id: string, now: number, expect: number, direction?: 'in' | 'out'): Op => ({
  op: 'release',
  id,
  now,
  expect,
  direction,
});
const refresh = (id: string, forUs: number, now: number, expect: number): Op => ({
  op: 'refresh',
  id,
  forUs,
  now,
  expect,
});
const carrierHolds = (c: Carrier, now: number, expect: number): Op => ({
  op: 'holds',
  tag: OUTBOUND_TAG,
  name: c.name,
  now,
  expect,
});
const withChannels = (b: Bucket, channels: number): Bucket => ({ ...b, channels });
const carrierCh = (id: string, intervalUs: number, maxWaitUs: number, channels: number): Carrier => ({
  ...carrier(id, intervalUs, maxWaitUs),
  channels,
});

// ---------------------------------------------------------------------------
// Sliding log

const odd = 'p 1{x}'; // id with a space and braces
const b1 = bucket(peerBucket(odd), SL(10, S));
const p1 = on(peerTag(odd), [b1]);

const slidingLog: Case[] = [
  {
    // Window is (t - W, t]: an event at s leaves exactly at s + W.
    name: 'sliding log: (t-W, t] boundary, events at 0.999 s leave at 1.999 s',
    ops: [
      p1.admit(T0 + 999 * MS, ok, 10),
      // (T0, T0+1s] holds the ten at 0.999: n = 10 = L; oldest s = 0.999 -> 0.999 + 1 - 1.000 = 0.999 s.
      p1.admit(T0 + 1_000 * MS, no(0, 999_000), 10),
      p1.count(0, S, T0 + 1_000 * MS, 10), // the refusals recorded nothing
      // (0.998999, 1.998999] still holds 0.999: retry 0.999 + 1 - 1.998999 = 1 µs.
      p1.admit(T0 + 1_998_999, no(0, 1)),
      p1.count(0, S, T0 + 1_998_999, 10),
      // (0.999, 1.999] no longer holds 0.999.
      p1.count(0, S, T0 + 1_999_000, 0),
      p1.admit(T0 + 1_999_000, ok, 10),
      // n = 10 at 1.999: retry 1.999 + 1 - 1.999 = 1 s.
      p1.admit(T0 + 1_999_000, no(0, S)),
    ],
  },
  {
    name: 'sliding log: ten at 1.000 s refuse until 1.999999 s inclusive, admit at 2.000000 s',
    ops: [
      p1.admit(T0 + S, ok, 10),
      p1.admit(T0 + 1_500_000, no(0, 500_000)),
      p1.admit(T0 + 1_999_999, no(0, 1)),
      p1.count(0, S, T0 + 1_999_999, 10),
      p1.count(0, S, T0 + 2 * S, 0),
      p1.admit(T0 + 2 * S, ok),
    ],
  },
  (() => {
    const b = on(peerTag('same µs'), [bucket(peerBucket('same µs'), SL(30, S))]);
    return {
      name: 'sliding log: 50 calls in one microsecond -> exactly 30 admitted; members stay unique',
      ops: [
        b.admit(T0 + 5, ok, 30),
        b.admit(T0 + 5, no(0, S), 20), // oldest s = T0+5 -> s + W - t = 1 s
        b.count(0, S, T0 + 5, 30),
        b.record(T0 + 5, 5), // records in the same µs are distinct members too
        b.count(0, S, T0 + 5, 35),
        // n = 35, L = 30: the 6th oldest (all at T0+5) leaves at T0+5+1s.
        b.admit(T0 + 999_999, no(0, 6)),
        b.count(0, S, T0 + S + 4, 35),
        b.count(0, S, T0 + S + 5, 0),
        b.admit(T0 + S + 5, ok, 30),
        b.count(0, S, T0 + S + 5, 30),
      ],
    };
  })(),
  (() => {
    const b = on(accountTag('two:windows'), [bucket(accountBucket('two:windows'), SL(10, S), SL(15, MIN))]);
    const t1 = T0 + 100;
    const t2 = T0 + 1_500_000;
    const t4 = T0 + 60_000_100;
    return {
      name: 'sliding log: 10/1s + 15/1min on one bucket; the minute limit bites after the second burst',
      ops: [
        b.admit(t1, ok, 10),
        b.admit(t1, no(0, S)), // only the 1 s limit fails: t1 + 1s - t1
        b.admit(t2, ok, 5), // 1 s window (0.5, 1.5] is empty; minute 10 -> 15
        // 1 s: 5 < 10 room; minute: 15 = L, oldest t1 leaves at t1 + 60 s: T0+60_000_100 - t2 = 58_500_100.
        b.admit(t2, no(0, 58_500_100)),
        b.admit(T0 + 2_000_000, no(0, 58_000_100)),
        b.admit(T0 + 60_000_099, no(0, 1)),
        b.count(0, MIN, T0 + 60_000_099, 15),
        b.count(0, MIN, t4, 5),
        b.admit(t4, ok, 10), // minute 5 -> 15, second 0 -> 10
        // 1 s fails: t4 + 1s - t4 = 1_000_000; minute fails: oldest t2 + 60 s - t4 = 1_499_900. Max.
        b.admit(t4, no(0, 1_499_900)),
        b.count(0, S, t4, 10),
        b.count(0, MIN, t4, 15),
      ],
    };
  })(),
  (() => {
    const b = on(peerTag('nth'), [bucket(peerBucket('nth'), SL(3, S))]);
    return {
      name: 'sliding log: retry-after is s + W - t of the (n - L + 1)-th oldest',
      ops: [
        b.record(T0 + 100),
        b.record(T0 + 200),
        b.record(T0 + 300),
        b.record(T0 + 400),
        b.record(T0 + 500),
        // n = 5, L = 3: 3rd oldest = T0+300 -> T0+300 + 1s - (T0+600) = 999_700.
        b.admit(T0 + 600, no(0, 999_700)),
        // (T0+299, T0+1_000_299] still holds 300, 400, 500: n = 3, oldest 300 -> 1 µs.
        b.admit(T0 + 1_000_299, no(0, 1)),
        b.admit(T0 + 1_000_300, ok),
        b.count(0, S, T0 + 1_000_300, 3),
      ],
    };
  })(),
];

// ---------------------------------------------------------------------------
// Several buckets: all-or-nothing, limitedBy, max retry-after, isolation

const acct = 'acme:1';
const peer = 'p}2 {';
const gB = bucket(GLOBAL_BUCKET, SL(100, S));
const aB = bucket(accountBucket(acct), SL(50, S));
const pB = bucket(peerBucket(peer), SL(3, 2 * S));
const all3 = on(GLOBAL_TAG, [gB, aB, pB]);
const onlyAcct = on(GLOBAL_TAG, [aB]);

const buckets: Case[] = [
  {
    name: 'buckets: all-or-nothing across three buckets; limitedBy names the first bucket lacking room',
    ops: [
      all3.admit(T0 + 10, ok, 3),
      // peer: n = 3 = L (W = 2 s): T0+10 + 2s - (T0+10) = 2 s.
      all3.admit(T0 + 10, no(2, 2 * S)),
      all3.count(0, S, T0 + 10, 3),
      all3.count(1, S, T0 + 10, 3),
      all3.count(2, 2 * S, T0 + 10, 3),
      onlyAcct.record(T0 + 15, 47), // account: 50 = L
      // account fails first (index 1): oldest T0+10 + 1s - (T0+20) = 999_990;
      // peer fails too: T0+10 + 2s - (T0+20) = 1_999_990. Max over failing limits of every bucket.
      all3.admit(T0 + 20, no(1, 1_999_990)),
      all3.count(0, S, T0 + 20, 3),
      all3.count(1, S, T0 + 20, 50),
      all3.count(2, 2 * S, T0 + 20, 3),
      // At T0+1_000_010 the three at T0+10 left the account's 1 s window (47 left), peer still full.
      all3.admit(T0 + 1_000_010, no(2, S)),
      all3.count(0, S, T0 + 1_000_010, 0),
      all3.count(1, S, T0 + 1_000_010, 47),
      all3.admit(T0 + 2_000_010, ok),
      all3.count(0, S, T0 + 2_000_010, 1),
      all3.count(1, S, T0 + 2_000_010, 1),
      all3.count(2, 2 * S, T0 + 2_000_010, 1),
    ],
  },
  (() => {
    const g = bucket(GLOBAL_BUCKET, SL(1, S));
    const b = on(GLOBAL_TAG, [g, aB, pB]);
    return {
      name: 'buckets: a full first bucket is named (limitedBy 0) and nothing is recorded in the others',
      ops: [
        on(GLOBAL_TAG, [g]).admit(T0, ok),
        b.admit(T0 + 250_000, no(0, 750_000)),
        b.count(1, S, T0 + 250_000, 0),
        b.count(2, 2 * S, T0 + 250_000, 0),
        b.admit(T0 + S, ok),
        b.count(0, S, T0 + S, 1),
        b.count(1, S, T0 + S, 1),
      ],
    };
  })(),
  (() => {
    // Encoded ids must not collide: 'x y' encodes to 'x%0020y', while the literal id 'x%0020y'
    // encodes its '%' (-> 'x%00250020y'); 'x:y}' and 'x' must not reach into each other's keys.
    const tag = peerTag('x y');
    const ids = ['x y', 'x%0020y', 'x:y}', 'x', 'x:log'];
    const bs = ids.map((id) => on(tag, [bucket(peerBucket(id), SL(1, S))]));
    return {
      name: 'buckets: ids with {, }, :, %, spaces get distinct buckets that share no state',
      ops: [
        ...bs.map((b) => b.admit(T0, ok)),
        ...bs.map((b) => b.admit(T0, no(0, S))),
        ...bs.map((b) => b.count(0, S, T0, 1)),
      ],
    };
  })(),
];

// ---------------------------------------------------------------------------
// Fixed window and sliding window (two-window estimate)

// T0 mod 7 s = 4 s, so the 7 s windows on the epoch start at B = T0 + 3 s (B mod 7 s = 0).
const B7 = T0 + 3 * S;
const fixed = on(peerTag('fw'), [bucket(peerBucket('fw'), FW(2, 7 * S), SL(1_000, MIN))]);
const fixed1 = on(peerTag('fw1'), [bucket(peerBucket('fw1'), FW(1, 7 * S))]);

const sw = on(peerTag('sw'), [bucket(peerBucket('sw'), SW(10, S))]);

const windows: Case[] = [
  {
    name: 'fixed window: windows are [kW, (k+1)W) on the epoch, not on the first event; retry (k+1)W - t',
    ops: [
      fixed1.admit(B7 - 1, ok), // window [B7 - 7s, B7)
      fixed1.admit(B7 - 1, no(0, 1)),
      fixed1.admit(B7, ok), // a new window 1 µs later
      fixed1.admit(B7 + 6_999_999, no(0, 1)),
      fixed1.admit(B7 + 7 * S, ok),
    ],
  },
  {
    name: 'fixed window: counts per window, record counts over the limit, reset at the boundary',
    ops: [
      fixed.admit(B7 - 7 * S, ok, 2),
      fixed.admit(B7 - 3_500_000, no(0, 3_500_000)),
      fixed.admit(B7 - 1, no(0, 1)),
      fixed.admit(B7, ok, 2),
      fixed.admit(B7, no(0, 7 * S)),
      fixed.record(B7 + 1, 3), // c = 5 > L
      fixed.count(0, MIN, B7 + 1, 7), // the log saw them all: 2 + 2 + 3
      fixed.admit(B7 + 6_999_999, no(0, 1)),
      fixed.admit(B7 + 7 * S, ok, 2),
      fixed.admit(B7 + 7 * S, no(0, 7 * S)),
    ],
  },
  {
    // Windows of 1 s start at T0 + k s. p = 8 (admitted at 0.5 s), then c + 8(1 - f) < 10 in [1 s, 2 s).
    name: 'sliding window: c + p(1-f) < L with an exactly-equal case refused; both retry formulas',
    ops: [
      sw.admit(T0 + 500_000, ok, 8),
      // f = 0.25: 8 * 0.75 = 6; c = 0..3 -> 6..9 < 10 admitted; c = 4 -> 10, not < 10.
      sw.admit(T0 + 1_250_000, ok, 4),
      // c < L: r = floor(1e6 (1 - 6/8)) + 1 = 250001; kW + r - t = 1.
      sw.admit(T0 + 1_250_000, no(0, 1)),
      // f = 0.250001: 4 + 8 * 0.749999 = 9.999992 < 10.
      sw.admit(T0 + 1_250_001, ok),
      // c = 5: r = floor(1e6 (1 - 5/8)) + 1 = 375001 -> T0+1_375_001 - t = 125_000.
      sw.admit(T0 + 1_250_001, no(0, 125_000)),
      // f = 0.375: 5 + 8 * 0.625 = 10 exactly: refused, retry 1.
      sw.admit(T0 + 1_375_000, no(0, 1)),
      sw.admit(T0 + 1_375_001, ok), // 9.999992; c = 6
      sw.record(T0 + 1_400_000, 4), // c = 10
      // c >= L: r = floor(1e6 (1 - 10/10)) + 1 = 1; (k+1)W + r - t = 2_000_001 - 1_500_000.
      sw.admit(T0 + 1_500_000, no(0, 500_001)),
      sw.record(T0 + 1_600_000, 2), // c = 12
      // r = floor(1e6 (1 - 10/12)) + 1 = floor(166666.67) + 1 = 166667 -> 2_166_667 - 1_600_000.
      sw.admit(T0 + 1_600_000, no(0, 566_667)),
      // Next window: c = 0, p = 12, f = 0.166666: 12 * 0.833334 = 10.000008 -> refused,
      // r = 166667 again: kW + r - t = 1.
      sw.admit(T0 + 2_166_666, no(0, 1)),
      sw.admit(T0 + 2_166_667, ok), // 12 * 0.833333 = 9.999996
    ],
  },
  (() => {
    const b = on(peerTag('sw50'), [bucket(peerBucket('sw50'), SW(50, S))]);
    return {
      name: 'sliding window: an estimate of exactly L has no room, where doubles round it below L',
      ops: [
        b.admit(T0, ok, 50),
        // f = 0.34: 16 + 50 * 0.66 = 49 < 50: 17 admitted
        b.admit(T0 + S + 340_000, ok, 17),
        // 17 + 50 * 0.66 = 50 exactly (49.99999999999999 in doubles): refused until f > 0.34
        b.admit(T0 + S + 340_000, no(0, 1)),
        b.admit(T0 + S + 340_001, ok),
      ],
    };
  })(),
  (() => {
    // windows of 10 s from T0 (T0 is a whole 10 s); 10 calls at 0.5 s, then c = 1 in the next
    const b = on(peerTag('sw10'), [bucket(peerBucket('sw10'), SW(10, 10 * S))]);
    return {
      name: 'sliding window: the wait is where the test itself admits, though 1 - 0.9 rounds below 0.1',
      ops: [
        b.admit(T0 + 500_000, ok, 10),
        // f = 0.05: 10 * 0.95 = 9.5 < 10
        b.admit(T0 + 10_500_000, ok),
        // 1 + 10 (1 - f) < 10 iff f > 0.1, the first µs past T0 + 11 s; floor(1e7 (1 - 9/10)) + 1
        // in doubles is 1e6, where the test gives 1 + 10 * 0.9 = 10, not < 10
        b.admit(T0 + 10_600_000, no(0, 400_001)),
        b.admit(T0 + 11_000_000, no(0, 1)),
        b.admit(T0 + 11_000_001, ok),
      ],
    };
  })(),
  (() => {
    const b = on(peerTag('sw2'), [bucket(peerBucket('sw2'), SW(2, S))]);
    return {
      name: 'sliding window: p is window k-1 only (an empty window in between resets the estimate)',
      ops: [
        b.admit(T0 + 100, ok, 2),
        // k+1: c = 0, p = 2, f = 0.0001: 2 * 0.9999 = 1.9998 < 2.
        b.admit(T0 + S + 100, ok),
        // 1.9998 + 1 >= 2: r = floor(1e6 (1 - 1/2)) + 1 = 500001 -> T0+1_500_001 - (T0+1_000_100).
        b.admit(T0 + S + 100, no(0, 499_901)),
        b.record(T0 + S + 200), // window k+1 now holds 2
        // k+3: window k+2 is empty: c = 0, p = 0 (not the 2 of window k+1, the latest recorded).
        b.admit(T0 + 3 * S, ok, 2),
      ],
    };
  })(),
];

// ---------------------------------------------------------------------------
// record (add) is unconditional, in every bucket and every algorithm

const rTag = accountTag('acc 9:{}');
const r1 = bucket(accountBucket('acc 9:{}'), SL(2, S), FW(2, S), SW(2, S));
const r2 = bucket(peerBucket('x'), SL(1, S));
const r3 = bucket(peerBucket('y'), FW(1, S), SL(100, MIN));
const rAll = on(rTag, [r1, r2, r3]);

const records: Case[] = [
  {
    name: 'record: counts unconditionally over every limit, in all buckets and algorithms; count sees it',
    ops: [
      rAll.record(T0 + 1_000, 5),
      rAll.count(0, S, T0 + 1_000, 5),
      rAll.count(1, S, T0 + 1_000, 5),
      rAll.count(2, S, T0 + 1_000, 5),
      rAll.record(T0 + 2_000, 1),
      rAll.count(0, S, T0 + 2_000, 6),
      // Every limit fails. r1 SL: n = 6, L = 2: 5th oldest = T0+1000 -> 1s - 1000 + 1000... = 999_000;
      // r1 FW: (k+1)W - t = 1s - 2000 = 998_000; r1 SW: c = 6 >= 2, r = floor(1e6 (1 - 2/6)) + 1 =
      // 666667 -> 1_666_667 - 2000 = 1_664_667; r2 SL: 6th oldest... n = 6, L = 1: T0+2000 -> 1 s;
      // r3 FW: 998_000. Max = 1_664_667.
      rAll.admit(T0 + 2_000, no(0, 1_664_667)),
      rAll.count(0, S, T0 + 2_000, 6),
      // Each bucket alone: r3 at a new fixed window has room (FW c = 0; minute log 6 < 100).
      on(rTag, [r3]).admit(T0 + S, ok),
      on(rTag, [r3]).count(0, MIN, T0 + S, 7),
      // r2: (T0+1000, T0+1_001_000] holds T0+2000: n = 1 -> T0+2000 + 1 s - t = 1_000.
      on(rTag, [r2]).admit(T0 + 1_001_000, no(0, 1_000)),
      on(rTag, [r2]).admit(T0 + 1_002_000, ok),
      // r1 at 1.5 s: log empty, FW c = 0, SW p = 6, f = 0.5: 6 * 0.5 = 3 >= 2: refused by SW alone,
      // r = floor(1e6 (1 - 2/6)) + 1 = 666667 -> T0+1_666_667 - t = 166_667.
      on(rTag, [r1]).admit(T0 + 1_500_000, no(0, 166_667)),
      // f = 0.666666: 6 * 0.333334 = 2.000004 refused (retry 1); f = 0.666667: 1.999998 admitted.
      on(rTag, [r1]).admit(T0 + 1_666_666, no(0, 1)),
      on(rTag, [r1]).admit(T0 + 1_666_667, ok),
    ],
  },
];

// ---------------------------------------------------------------------------
// Leaky bucket

const A = carrier('A {1}:x', 400_000, 400_000); // 2.5 cps, maxWait = one interval
const Bc = carrier('B', I3, 900_000); // 3 cps
const C = carrier('C', 250_000, 0); // 4 cps, maxWait 0
const D = carrier('D', I3, 5 * S);
const E = carrier('E', 100_000, 0);
const F = carrier('F', 100_000, 0);
const t = T0 + 100_000;

/** 7 cps, maxWait 1 s: a burst's 8th call waits 7 intervals, exactly 1 s; its cps given, and not. */
const G7 = { ...carrier('G7', 1e6 / 7, S), cps: 7 };
const G7i = carrier('G7i', 1e6 / 7, S);
/** 0.7 cps (a decimal no double holds: k * 1e6 / 0.7 is 30,000,000.000000004 µs for k = 21), maxWait 30 s. */
const G07 = { ...carrier('G07', 1e6 / 0.7, 30 * S), cps: 0.7 };
/** 9 cps, one channel: slots 111,111.11 µs apart. */
const H9 = { ...carrierCh('H9', 1e6 / 9, 2 * S, 1), cps: 9 };

const leaky: Case[] = [
  {
    // a slot as one number of µs at this date steps in quarter-µs: each queued call rounded it,
    // and the 8th call's wait read as 1,000,000.25 µs > maxWait
    name: 'leaky bucket: exact slots at a real date: a burst at 7 cps, the 8th waits exactly maxWait and is taken',
    ops: [
      ...[G7, G7i].flatMap((c) => Array.from({ length: 8 }, (_, k) => reserve([c], T0, 0, (k * S) / 7, [(k * S) / 7]))),
      reserve([G7], T0, -1, 0, [(8 * S) / 7]),
      // the 22nd call at 0.7 cps waits 21 intervals, exactly 30 s
      ...Array.from({ length: 22 }, (_, k) => reserve([G07], T0, 0, (k * 10 * S) / 7, [(k * 10 * S) / 7])),
      reserve([G07], T0, -1, 0, [(22 * 10 * S) / 7]),
      wait(G7, T0, (8 * S) / 7),
      wait(G7, T0 + S, S / 7),
    ],
  },
  {
    // h2's slot is T0 + 111,111.11 µs and its hold ends 1,000 µs later: T0 + 112,111.11, which
    // counts at T0 + 112,111 (the slot rounded to a quarter-µs made it end there, freed)
    name: 'leaky bucket: an outbound hold ends at its exact slot plus its hold, rounded up to a whole µs',
    ops: [
      reserveCall([H9], T0, 'h1', 1, 0, 0, [0], [false]),
      reserveCall([H9], T0 + 1, 'h2', 1_000, 0, S / 9 - 1, [S / 9 - 1], [false]),
      carrierHolds(H9, T0 + 112_111, 1),
      reserveCall([H9], T0 + 112_111, 'h3', 1_000, -1, 0, [(2 * S) / 9 - 112_111], [true]),
      carrierHolds(H9, T0 + 112_112, 0),
      reserveCall([H9], T0 + 112_112, 'h3', 1_000, 0, (2 * S) / 9 - 112_112, [(2 * S) / 9 - 112_112], [false]),
    ],
  },
  {
    name: 'leaky bucket: 2.5 cps -> 400000 µs slots; wait == maxWait is taken, wait > maxWait is refused',
    ops: [
      reserve([A], T0, 0, 0, [0]),
      reserve([A], T0, 0, 400_000, [400_000]), // == maxWait: taken
      reserve([A], T0, -1, 0, [800_000]), // > maxWait: refused, state kept
      wait(A, T0, 800_000),
      wait(A, T0 + 700_000, 100_000),
      wait(A, T0 + 800_000, 0),
      wait(A, T0 + 900_000, 0), // max(0, …)
      reserve([A], T0 + 2 * S, 0, 0, [0]), // last + I in the past: slot = t
      wait(A, T0 + 2 * S, 400_000),
    ],
  },
  {
    name: 'leaky bucket: 3 cps -> fractional slots of 333333.33 µs',
    ops: [
      reserve([D], T0, 0, 0, [0]),
      reserve([D], T0, 0, I3, [I3]),
      reserve([D], T0, 0, 2 * I3, [2 * I3]),
      reserve([D], T0, 0, 3 * I3, [3 * I3]),
      wait(D, T0, 4 * I3),
      wait(D, T0 + 500_000, 4 * I3 - 500_000),
      reserve([D], T0 + 3 * S, 0, 0, [0]),
      reserve([D], T0 + 3 * S, 0, I3, [I3]),
      wait(D, T0 + 3 * S, 2 * I3),
    ],
  },
  {
    name: 'leaky bucket: reroute — first carrier within maxWait wins, waits lists each tried carrier',
    ops: [
      reserve([E, F], T0, 0, 0, [0]), // both free: the first wins, F not tried
      wait(F, T0, 0),
      reserve([E, F], T0, 1, 0, [100_000, 0]), // E would wait 100000 > 0
      reserve([E, F], T0, -1, 0, [100_000, 100_000]),
      wait(E, T0, 100_000),
      wait(F, T0, 100_000),
      reserve([A], T0, 0, 0, [0]),
      reserve([A], T0, 0, 400_000, [400_000]),
      // A: 800000 - 100000 = 700000 > 400000 -> B (fresh): 0.
      reserve([A, Bc], t, 1, 0, [700_000, 0]),
      reserve([A, Bc], t, 1, I3, [700_000, I3]),
      reserve([A, Bc], t, 1, 2 * I3, [700_000, 2 * I3]),
      // B: 3 * I3 = 1e6 > 900000: refused everywhere; nothing reserved.
      reserve([A, Bc], t, -1, 0, [700_000, 3 * I3]),
      wait(A, t, 700_000),
      wait(Bc, t, 3 * I3),
      reserve([C, A, Bc], t, 0, 0, [0]),
      reserve([C, A, Bc], t, -1, 0, [250_000, 700_000, 3 * I3]),
      wait(C, t, 250_000),
      wait(A, t, 700_000),
      wait(Bc, t, 3 * I3),
      // After A drains, A wins again ahead of C.
      reserve([A, C], T0 + 800_000, 0, 0, [0]),
      wait(A, T0 + 800_000, 400_000),
    ],
  },
];

// ---------------------------------------------------------------------------
// Channels (calls in progress). A hold counts at t iff its end > t.

const chPeer = withChannels(bucket(peerBucket('ch one')), 2);
const chGlobal = withChannels(bucket(GLOBAL_BUCKET, SL(10, S)), 2);
const chRate = bucket(peerBucket('ch rate'), SL(1, S));
const chBoth = withChannels(bucket(peerBucket('ch both'), SL(1, S)), 1);
const chOther = bucket(peerBucket('ch other'));
const chDup = withChannels(bucket(peerBucket('ch dup'), SL(2, S)), 5);
const chAcc = withChannels(bucket(accountBucket('ch {acc}'), SL(100, S)), 3);
const chFar = withChannels(bucket(peerBucket('ch far'), SL(100, S)), 5);
const chPeerA = withChannels(bucket(peerBucket('ch a:1')), 1);
const CA = carrierCh('chA', 100_000, S, 2); // 10 cps, maxWait 1 s, 2 channels
const CB = carrier('chB', 100_000, 0); // no channel limit
const CC = carrierCh('chC', S, 5 * S, 1); // 1 cps, maxWait 5 s, 1 channel

const channels: Case[] = [
  {
    name: 'channels: at most N in progress; a hold ending exactly at t has freed its channel',
    ops: [
      on(peerTag('ch one'), [chPeer]).call(T0, 'c1', 10 * S, ok), // holds until T0+10s
      on(peerTag('ch one'), [chPeer]).call(T0 + S, 'c2', 5 * S, ok), // until T0+6s
      on(peerTag('ch one'), [chPeer]).holds(0, T0 + S, 2),
      on(peerTag('ch one'), [chPeer]).call(T0 + 2 * S, 'c3', S, noCh(0)), // 2 >= 2
      on(peerTag('ch one'), [chPeer]).call(T0 + 6 * S - 1, 'c3', S, noCh(0)), // c2 still holds at T0+6s-1µs
      on(peerTag('ch one'), [chPeer]).holds(0, T0 + 6 * S, 1), // c2's end = t: freed
      on(peerTag('ch one'), [chPeer]).call(T0 + 6 * S, 'c3', 4 * S, ok), // until T0+10s
      on(peerTag('ch one'), [chPeer]).call(T0 + 9 * S, 'c4', S, noCh(0)),
      on(peerTag('ch one'), [chPeer]).holds(0, T0 + 10 * S, 0), // c1 and c3 both end at T0+10s
      on(peerTag('ch one'), [chPeer]).call(T0 + 10 * S, 'c4', 0, ok), // a call of duration 0 holds nothing
      on(peerTag('ch one'), [chPeer]).holds(0, T0 + 10 * S, 0),
    ],
  },
  {
    name: 'channels: rate limits first, then channels, bucket by bucket; a refusal holds nothing anywhere',
    ops: [
      // global: 10/s and 2 channels; peer 'ch rate': 1/s
      on(GLOBAL_TAG, [chGlobal, chRate]).call(T0, 'g1', 60 * S, ok),
      on(GLOBAL_TAG, [chGlobal, chRate]).call(T0, 'g2', 60 * S, no(1, S)), // peer rate: reason rate, global holds 1 only
      on(GLOBAL_TAG, [chGlobal, chRate]).holds(0, T0, 1),
      on(GLOBAL_TAG, [chGlobal, chOther]).call(T0, 'g3', 60 * S, ok), // global holds 2
      on(GLOBAL_TAG, [chGlobal, chOther]).call(T0 + 1, 'g4', 60 * S, noCh(0)), // global channels: the first bucket without room
      // peer rate full too: the global bucket is named, for channels; the retry-after is the peer rate's (g1 leaves at T0+1s)
      on(GLOBAL_TAG, [chGlobal, chRate]).call(T0 + 2, 'g5', 60 * S, {
        admitted: false,
        limitedBy: 0,
        retryAfterUs: S - 2,
        reason: 'channels',
      }),
      // one bucket short of both rate and channels: reason rate (its rate limits come first)
      on(peerTag('ch both'), [chBoth]).call(T0, 'b1', 60 * S, ok),
      on(peerTag('ch both'), [chBoth]).call(T0 + 1, 'b2', 60 * S, no(0, S - 1)),
      on(peerTag('ch both'), [chBoth]).call(T0 + S, 'b2', 60 * S, noCh(0)), // rate has room again; channels full
      on(GLOBAL_TAG, [chGlobal, chRate]).holds(0, T0 + 60 * S - 1, 2),
      on(GLOBAL_TAG, [chGlobal, chRate]).holds(0, T0 + 60 * S, 0),
      on(GLOBAL_TAG, [chGlobal, chOther]).call(T0 + 60 * S, 'g6', 60 * S, ok),
    ],
  },
  {
    name: 'channels: a repeated admit of a call still holding is admitted and counted nowhere; after its end it is a new call',
    ops: [
      on(peerTag('ch dup'), [chDup]).call(T0, 'd1', 3 * S, ok),
      on(peerTag('ch dup'), [chDup]).call(T0 + 100, 'd1', 3 * S, dup), // retransmission: not counted
      on(peerTag('ch dup'), [chDup]).call(T0 + 200, 'd2', 3 * S, ok), // rate 2/s: d1 + d2
      on(peerTag('ch dup'), [chDup]).call(T0 + 300, 'd3', 3 * S, no(0, S - 300)), // the duplicate took no rate slot
      on(peerTag('ch dup'), [chDup]).holds(0, T0 + 300, 2),
      on(peerTag('ch dup'), [chDup]).count(0, S, T0 + 300, 2),
      on(peerTag('ch dup'), [chDup]).call(T0 + 3 * S, 'd1', 3 * S, ok), // d1's hold ended at T0+3s: a new call
      on(peerTag('ch dup'), [chDup]).holds(0, T0 + 3 * S, 2), // d2 (until T0+3s+200) and the new d1
      on(peerTag('ch dup'), [chDup]).recordCall(T0 + 3 * S + 1, 'd1', 3 * S, true), // record of a call still holding: counted once
      on(peerTag('ch dup'), [chDup]).count(0, S, T0 + 3 * S + 1, 1),
      on(peerTag('ch dup'), [chDup]).recordCall(T0 + 3 * S + 2, 'd9', 3 * S), // an emergency call holds too
      on(peerTag('ch dup'), [chDup]).holds(0, T0 + 3 * S + 2, 3),
      on(peerTag('ch dup'), [chDup]).count(0, S, T0 + 3 * S + 2, 2),
    ],
  },
  {
    name: 'channels: release by id frees every level at once, refresh extends, a second release finds nothing',
    ops: [
      on(accountTag('ch {acc}'), [chAcc, chPeerA]).call(T0, 'r1 {x}: y', 60 * S, ok),
      on(accountTag('ch {acc}'), [chAcc, chPeerA]).call(T0 + 1, 'r2', 60 * S, noCh(1)), // peer: 1 channel
      release('r1 {x}: y', T0 + 2, 1),
      on(accountTag('ch {acc}'), [chAcc, chPeerA]).holds(0, T0 + 2, 0),
      on(accountTag('ch {acc}'), [chAcc, chPeerA]).holds(1, T0 + 2, 0),
      release('r1 {x}: y', T0 + 3, 0), // released already
      on(accountTag('ch {acc}'), [chAcc, chPeerA]).call(T0 + 4, 'r2', 10 * S, ok),
      refresh('r2', 60 * S, T0 + 5 * S, 1), // now until T0+65s
      on(accountTag('ch {acc}'), [chAcc, chPeerA]).holds(1, T0 + 30 * S, 1),
      on(accountTag('ch {acc}'), [chAcc, chPeerA]).call(T0 + 30 * S, 'r3', S, noCh(1)),
      refresh('r2', 60 * S, T0 + 65 * S, 0), // lapsed exactly at T0+65s: nothing to extend
      on(accountTag('ch {acc}'), [chAcc, chPeerA]).call(T0 + 65 * S, 'r3', S, ok),
      release('r2', T0 + 65 * S, 0), // its record lapsed: released nothing (and is dropped)
      release('nobody', T0 + 65 * S, 0),
      on(accountTag('ch {acc}'), [chAcc, chPeerA]).holds(0, T0 + 65 * S, 1),
    ],
  },
  {
    // past 2^53 µs an end minus 1 is the end itself: the memory store's release looked for the
    // hold from the first end above `end - 1`, passed it, and scanned on forever
    name: 'channels: a hold ending past 2^53 µs is released (two of them with one end)',
    ops: [
      on(peerTag('ch far'), [chFar]).call(T0, 'f1', Number.MAX_SAFE_INTEGER, ok),
      on(peerTag('ch far'), [chFar]).call(T0, 'f2', Number.MAX_SAFE_INTEGER, ok),
      on(peerTag('ch far'), [chFar]).holds(0, T0, 2),
      release('f2', T0 + 1, 1),
      release('f1', T0 + 2, 1),
      on(peerTag('ch far'), [chFar]).holds(0, T0 + 2, 0),
    ],
  },
  {
    name: 'leaky bucket channels: a full carrier is passed over like a long wait; holds from the decision to slot + duration',
    ops: [
      reserveCall([CA, CB], T0, 'o1', S, 0, 0, [0], [false]), // A until T0+1s
      reserveCall([CA, CB], T0, 'o2', S, 0, 100_000, [100_000], [false]), // slot T0+0.1s: until T0+1.1s
      reserveCall([CA, CB], T0, 'o3', S, 1, 0, [200_000, 0], [true, false]), // A: wait fits, 2 channels full -> B
      carrierHolds(CA, T0, 2),
      carrierHolds(CB, T0, 0), // B has no channel limit: nothing held there
      wait(CA, T0, 200_000), // the refused A kept its state
      carrierHolds(CA, T0 + S, 1), // o1's end = t
      reserveCall([CA, CB], T0 + S, 'o4', S, 0, 0, [0], [false]),
      // a call waiting for a later slot already holds: 1 cps, 1 channel
      reserveCall([CC], T0, 'o5', 0, 0, 0, [0], [false]), // slot = t and duration 0: holds nothing
      carrierHolds(CC, T0, 0),
      reserveCall([CC], T0, 'o6', 0, 0, S, [S], [false]), // slot T0+1s: holds until then
      carrierHolds(CC, T0, 1),
      reserveCall([CC], T0, 'o7', 0, -1, 0, [2 * S], [true]), // wait 2 s fits; channel full
      reserveCall([CC], T0 + S, 'o7', 0, 0, S, [S], [false]), // o6 ended at its slot
    ],
  },
  {
    name: 'leaky bucket channels: a call id reserved again drops its earlier hold; release by direction',
    ops: [
      reserveCall([CC], T0 + 20 * S, 'x1', 60 * S, 0, 0, [0], [false]),
      on(peerTag('ch one'), [chPeer]).call(T0 + 20 * S, 'x1', 60 * S, ok), // the same call inbound
      carrierHolds(CC, T0 + 20 * S, 1),
      reserveCall([CC, CA], T0 + 20 * S, 'x1', 60 * S, 1, 0, [S, 0], [true, false]), // again: CC is full (with x1 itself), A takes it
      carrierHolds(CC, T0 + 20 * S, 0), // x1's first hold went with its new reservation
      carrierHolds(CA, T0 + 20 * S, 1),
      release('x1', T0 + 21 * S, 1, 'out'),
      carrierHolds(CA, T0 + 21 * S, 0),
      on(peerTag('ch one'), [chPeer]).holds(0, T0 + 21 * S, 1), // the inbound hold stays
      release('x1', T0 + 21 * S, 1),
      on(peerTag('ch one'), [chPeer]).holds(0, T0 + 21 * S, 0),
    ],
  },
];

// ---------------------------------------------------------------------------
// Bans (attribute levels, BanRule in src/store/types.ts)

const bans: Case[] = [
  (() => {
    // caller bucket: 2 per 1 s; ban at 3 strikes within [k s, (k + 1) s), for 5 s. The peer is
    // first in the check order and refuses on its own past its limit of 4 per 1 s.
    const caller: Bucket = { ...bucket('attr:caller:x', SL(2, S)), ban: { threshold: 3, spanUs: S, forUs: 5 * S } };
    const peer = bucket(peerBucket('p'), SL(4, S));
    const b = on(GLOBAL_TAG, [peer, caller]);
    const callerOnly = on(GLOBAL_TAG, [caller]);
    return {
      name: 'bans: the strike that reaches the threshold bans; a ban refuses first, counts nowhere, ends on time',
      ops: [
        b.admit(T0 + 100, ok, 2),
        // strikes 1 and 2 (caller full: oldest T0+100 leaves at T0+100+1s)
        b.admit(T0 + 200, no(1, S - 100), 2),
        // the peer (index 0) has room (2 of 4); strike 3 bans the caller until T0+300+5s
        b.admit(T0 + 300, no(1, S - 200)),
        // banned: refused as such at once, retry = the ban's time left, counted nowhere
        b.admit(T0 + 400, { ...no(1, 5 * S - 100), reason: 'banned' }),
        b.count(0, S, T0 + 400, 2),
        // a new span: the caller has room again but is still banned
        b.admit(T0 + 2 * S, { ...no(1, 3 * S + 300), reason: 'banned' }),
        // record() counts whatever a ban says
        callerOnly.record(T0 + 2 * S, 1),
        callerOnly.count(0, S, T0 + 2 * S, 1),
        // the ban has ended at T0+300+5s exactly
        b.admit(T0 + 5 * S + 300, ok),
      ],
    };
  })(),
  (() => {
    // strikes count in fixed spans: 2 strikes at the end of one span and 2 at the start of the
    // next do not reach 3; refused by another bucket, a full banning bucket still strikes
    const caller: Bucket = { ...bucket('attr:caller:y', SL(1, 10 * S)), ban: { threshold: 3, spanUs: S, forUs: S } };
    const first = bucket(peerBucket('q'), SL(1, 10 * S));
    const b = on(GLOBAL_TAG, [first, caller]);
    return {
      name: 'bans: strikes per fixed span; a call refused first by another bucket still strikes',
      ops: [
        b.admit(T0 + S - 10, ok),
        // both full (retry T0+S-10 + 10 s - t); the peer is named, the caller strikes
        b.admit(T0 + S - 5, no(0, 10 * S - 5), 2),
        b.admit(T0 + S, no(0, 10 * S - 10), 2),
        // strike 3 of the second span: banned until T0 + 2 s - 1 + 1 s
        b.admit(T0 + 2 * S - 1, no(0, 9 * S - 9)),
        b.admit(T0 + 2 * S, { ...no(1, S - 1), reason: 'banned' }),
      ],
    };
  })(),
  (() => {
    // a ban starts the strikes afresh: once it ends (within the same span), the value is banned
    // again only by as many strikes again. Threshold 2, one 10 s span, bans of 500 ms
    const MS = 1_000;
    const caller: Bucket = {
      ...bucket('attr:caller:z', SL(1, S)),
      ban: { threshold: 2, spanUs: 10 * S, forUs: 500 * MS },
    };
    const b = on(GLOBAL_TAG, [caller]);
    return {
      name: 'bans: a ban starts the strikes afresh; once it ends, the threshold again bans',
      ops: [
        b.admit(T0, ok),
        b.admit(T0 + 100 * MS, no(0, 900 * MS)),
        // strike 2: banned until T0 + 700 ms
        b.admit(T0 + 200 * MS, no(0, 800 * MS)),
        b.admit(T0 + 300 * MS, { ...no(0, 400 * MS), reason: 'banned' }),
        // the ban over: strike 1 again, refused by the rate alone (not banned again)
        b.admit(T0 + 800 * MS, no(0, 200 * MS)),
        // strike 2 again: banned until T0 + 1.4 s
        b.admit(T0 + 900 * MS, no(0, 100 * MS)),
        b.admit(T0 + 1_000 * MS, { ...no(0, 400 * MS), reason: 'banned' }),
      ],
    };
  })(),
];

export const CASES: Case[] = [...slidingLog, ...buckets, ...windows, ...records, ...leaky, ...channels, ...bans];

// ---------------------------------------------------------------------------
// Invalid arguments: each call must be refused with InvalidArgumentError before any I/O.

const okB = bucket(peerBucket('valid'), SL(5, S));
const okTag = peerTag('valid');
const okC = carrier('valid', 100_000, 0);

export interface InvalidCase {
  name: string;
  call: (s: Store) => Promise<unknown>;
}

const adm =
  (buckets: Bucket[], now: number | undefined = T0) =>
  (s: Store) =>
    s.admit({ tag: okTag, buckets, now });
const lim = (limit: number, windowUs: number) => adm([okB, bucket(peerBucket('bad'), SL(limit, windowUs))]);

export const INVALID: InvalidCase[] = [
  { name: 'admit: limit 0', call: lim(0, S) },
  { name: 'admit: limit -1', call: lim(-1, S) },
  { name: 'admit: limit 1.5 (non-integer)', call: lim(1.5, S) },
  { name: 'admit: limit NaN', call: lim(NaN, S) },
  { name: 'admit: window 0', call: lim(5, 0) },
  { name: 'admit: window -1 s', call: lim(5, -S) },
  { name: 'admit: fixed-window limit 0', call: adm([okB, bucket(peerBucket('bad'), FW(0, S))]) },
  { name: 'admit: sliding-window window 0', call: adm([okB, bucket(peerBucket('bad'), SW(5, 0))]) },
  { name: 'admit: now NaN', call: adm([okB], NaN) },
  { name: 'admit: now Infinity', call: adm([okB], Infinity) },
  { name: 'admit: now -Infinity', call: adm([okB], -Infinity) },
  { name: 'admit: empty bucket list', call: adm([]) },
  { name: 'record: empty bucket list', call: (s) => s.record({ tag: okTag, buckets: [], now: T0 }) },
  { name: 'record: now NaN', call: (s) => s.record({ tag: okTag, buckets: [okB], now: NaN }) },
  { name: 'count: window 0', call: (s) => s.count({ tag: okTag, bucket: okB.name, windowUs: 0, now: T0 }) },
  { name: 'count: window -1', call: (s) => s.count({ tag: okTag, bucket: okB.name, windowUs: -1, now: T0 }) },
  { name: 'count: now NaN', call: (s) => s.count({ tag: okTag, bucket: okB.name, windowUs: S, now: NaN }) },
  { name: 'reserve: empty route', call: (s) => s.reserve({ route: [], now: T0 }) },
  { name: 'reserve: negative maxWait', call: (s) => s.reserve({ route: [okC, carrier('bad', 100_000, -1)], now: T0 }) },
  { name: 'reserve: interval 0', call: (s) => s.reserve({ route: [okC, carrier('bad', 0, 0)], now: T0 }) },
  { name: 'reserve: interval -5', call: (s) => s.reserve({ route: [okC, carrier('bad', -5, 0)], now: T0 }) },
  // slots count a rate in billionths: below one it counted as 0 (memory spun, Redis failed)
  {
    name: 'reserve: cps 2e-10',
    call: (s) => s.reserve({ route: [okC, { ...carrier('bad', 5e15, 0), cps: 2e-10 }], now: T0 }),
  },
  {
    name: 'reserve: interval 2e15 µs alone',
    call: (s) => s.reserve({ route: [okC, carrier('bad', 2e15, 0)], now: T0 }),
  },
  { name: 'reserve: now NaN', call: (s) => s.reserve({ route: [okC], now: NaN }) },
  { name: 'reserve: now Infinity', call: (s) => s.reserve({ route: [okC], now: Infinity }) },
  { name: 'wait: interval 0', call: (s) => s.wait({ carrier: carrier('bad', 0, 0), now: T0 }) },
  { name: 'wait: now NaN', call: (s) => s.wait({ carrier: okC, now: NaN }) },
  { name: 'admit: channels 0', call: adm([okB, withChannels(bucket(peerBucket('bad')), 0)]) },
  { name: 'admit: channels 1.5', call: adm([okB, withChannels(bucket(peerBucket('bad')), 1.5)]) },
  { name: 'admit: a channel limit without a hold', call: adm([okB, withChannels(bucket(peerBucket('bad')), 3)]) },
  {
    name: 'admit: hold with an empty id',
    call: (s) => s.admit({ tag: okTag, buckets: [withChannels(okB, 3)], now: T0, hold: { id: '', forUs: S } }),
  },
  {
    name: 'admit: hold for -1 µs',
    call: (s) => s.admit({ tag: okTag, buckets: [withChannels(okB, 3)], now: T0, hold: { id: 'x', forUs: -1 } }),
  },
  {
    name: 'admit: hold for 1.5 µs',
    call: (s) => s.admit({ tag: okTag, buckets: [okB], now: T0, hold: { id: 'x', forUs: 1.5 } }),
  },
  {
    name: 'record: a channel limit without a hold',
    call: (s) => s.record({ tag: okTag, buckets: [withChannels(okB, 3)], now: T0 }),
  },
  {
    name: 'reserve: channels -2',
    call: (s) => s.reserve({ route: [carrierCh('bad', 100_000, 0, -2)], now: T0, hold: { id: 'x', forUs: S } }),
  },
  {
    name: 'reserve: a channel limit without a hold',
    call: (s) => s.reserve({ route: [okC, carrierCh('bad', 100_000, 0, 2)], now: T0 }),
  },
  {
    name: 'reserve: hold for NaN µs',
    call: (s) => s.reserve({ route: [okC], now: T0, hold: { id: 'x', forUs: NaN } }),
  },
  { name: 'release: empty id', call: (s) => s.release({ id: '', now: T0 }) },
  { name: 'release: direction sideways', call: (s) => s.release({ id: 'x', now: T0, direction: 'sideways' as 'in' }) },
  { name: 'release: now NaN', call: (s) => s.release({ id: 'x', now: NaN }) },
  { name: 'refresh: forUs -1', call: (s) => s.refresh({ id: 'x', forUs: -1, now: T0 }) },
  { name: 'refresh: id 42 (not a string)', call: (s) => s.refresh({ id: 42 as unknown as string, forUs: S, now: T0 }) },
  { name: 'holds: a name with a brace', call: (s) => s.holds({ tag: okTag, name: 'peer:{x}', now: T0 }) },
  {
    name: 'inspect: now NaN',
    call: (s) => s.inspect({ buckets: [{ tag: okTag, bucket: okB }], carriers: [okC], now: NaN }),
  },
  {
    name: 'inspect: limit 0',
    call: (s) =>
      s.inspect({ buckets: [{ tag: okTag, bucket: bucket(peerBucket('bad'), SL(0, S)) }], carriers: [], now: T0 }),
  },
  {
    name: 'inspect: tag with a brace',
    call: (s) => s.inspect({ buckets: [{ tag: '{x', bucket: okB }], carriers: [], now: T0 }),
  },
  { name: 'inspect: interval 0', call: (s) => s.inspect({ buckets: [], carriers: [carrier('bad', 0, 0)], now: T0 }) },
];

/** What the invalid calls above must have left untouched (checked after all of them). */
export const AFTER_INVALID: Op[] = [
  on(okTag, [okB]).count(0, S, T0, 0),
  wait(okC, T0, 0),
  on(okTag, [okB]).admit(T0, ok, 5),
  reserve([okC], T0, 0, 0, [0]),
];

// ---------------------------------------------------------------------------
// Concurrency (store clock): one bucket, hammered from several clients at once.

export const CONC = {
  tag: peerTag('conc {c}: 1'),
  bucket: bucket(peerBucket('conc {c}: 1'), SL(20, 100 * MS), FW(50, 500 * MS), SL(1_000_000, MIN)),
  clients: 6,
  durationMs: 1_200,
  maxPerClient: 4_000,
};
