/**
 * The reference model (test/reference/model.ts) against hand-computed answers from the
 * contract, and the committed fixtures' stories under the model.
 */
import { expect } from 'chai';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { dirname, join } from 'node:path';
import {
  durationUs,
  modelFixture,
  runModel,
  simpleTimeUs,
  type Decision,
  type InDecision,
  type ModelCall,
  type OutDecision,
} from './reference/model.js';

const FIXTURES = join(dirname(fileURLToPath(import.meta.url)), '..', 'fixtures');
const S = 1_000_000;
const T = 1_700_000_000 * S; // a whole second, a multiple of every window used below

let seq = 0;
const inCall = (t: number, peer: string, account?: string): ModelCall => {
  const c: ModelCall = { time: t, callId: `c${++seq}`, direction: 'in', peer };
  if (account !== undefined) c.account = account;
  return c;
};
const outCall = (t: number, route: string[]): ModelCall => ({ time: t, callId: `c${++seq}`, direction: 'out', route });
const outcomes = (ds: Decision[]): string[] =>
  ds.map((d) => (d.direction === 'in' ? (d.outcome === 'admitted' ? 'A' : `R:${d.limited_by}`) : d.outcome));

describe('reference model', () => {
  describe('durations and times', () => {
    it('parses ISO and short durations', () => {
      expect(durationUs('PT1S')).to.equal(S);
      expect(durationUs('PT0.5S')).to.equal(500_000);
      expect(durationUs('PT30M')).to.equal(1800 * S);
      expect(durationUs('PT1H')).to.equal(3600 * S);
      expect(durationUs('PT1M30S')).to.equal(90 * S);
      expect(durationUs('500ms')).to.equal(500_000);
      expect(durationUs('1s')).to.equal(S);
      expect(durationUs('1m')).to.equal(60 * S);
      expect(durationUs('1h')).to.equal(3600 * S);
      expect(() => durationUs('PT')).to.throw();
      expect(() => durationUs('1 s')).to.throw();
    });

    it('has its own exact time parser', () => {
      expect(simpleTimeUs('2018-08-28T12:20:25.374375Z')).to.equal(1535458825374375);
      expect(simpleTimeUs('2018-08-28T14:20:25.374375+02:00')).to.equal(1535458825374375);
      expect(simpleTimeUs('2018-08-28T14:20:25.374375999+0200')).to.equal(1535458825374375);
      expect(simpleTimeUs('1535458825.374375')).to.equal(1535458825374375);
      expect(simpleTimeUs('1535458825')).to.equal(1535458825000000);
    });
  });

  describe('sliding log (default)', () => {
    it('the boundary: 10 at x.999 admitted, 10 at (x+1).000 refused, the window is (t - W, t]', () => {
      const config = { inbound: { peers: { p: [{ limit: 10, window: 'PT1S' }] } } };
      const calls: ModelCall[] = [];
      for (let i = 0; i < 10; i++) calls.push(inCall(T + 999_000, 'p'));
      for (let i = 0; i < 10; i++) calls.push(inCall(T + S, 'p'));
      calls.push(inCall(T + S + 998_999, 'p')); // x.999 still inside (t - W = x.998999 < x.999)
      for (let i = 0; i < 10; i++) calls.push(inCall(T + S + 999_000, 'p')); // x.999 leaves: t - W = x.999, excluded
      calls.push(inCall(T + S + 999_001, 'p'));
      const got = outcomes(runModel(config, calls));
      expect(got.slice(0, 10)).to.deep.equal(Array(10).fill('A'));
      expect(got.slice(10, 21)).to.deep.equal(Array(11).fill('R:peer:p'));
      expect(got.slice(21, 31)).to.deep.equal(Array(10).fill('A'));
      expect(got[31]).to.equal('R:peer:p');
    });

    it('every window of a bucket must have room (10/s and 12 per 10 s)', () => {
      const config = {
        inbound: {
          peers: {
            p: [
              { limit: 3, window: 'PT1S' },
              { limit: 5, window: 'PT10S' },
            ],
          },
        },
      };
      const calls = [0, 0.1, 0.2, 0.3, 1.5, 1.6, 1.7, 9.9, 10.1, 10.2].map((s) => inCall(T + s * S, 'p'));
      // 0,0.1,0.2 A; 0.3 R(1s); 1.5,1.6 A (5 in 10 s); 1.7 R(10s); 9.9 R; 10.1: (0.1, 10.1] holds 0.2,1.5,1.6 -> A (4); 10.2: 0.2 left -> 1.5,1.6,10.1 -> A
      expect(outcomes(runModel(config, calls))).to.deep.equal([
        'A',
        'A',
        'A',
        'R:peer:p',
        'A',
        'A',
        'R:peer:p',
        'R:peer:p',
        'A',
        'A',
      ]);
    });
  });

  describe('fixed window', () => {
    it('counts the admitted calls in [kW, (k+1)W): a double burst at the boundary gets through', () => {
      const config = { inbound: { peers: { p: [{ limit: 2, window: 'PT1S', algorithm: 'fixed-window' }] } } };
      const calls = [0.8, 0.9, 0.95, 1.0, 1.1, 1.2, 1.999999, 2.0].map((s) => inCall(T + Math.round(s * S), 'p'));
      expect(outcomes(runModel(config, calls))).to.deep.equal([
        'A',
        'A',
        'R:peer:p',
        'A',
        'A',
        'R:peer:p',
        'R:peer:p',
        'A',
      ]);
    });

    it('windows are aligned on the epoch, not on the first call', () => {
      const config = { inbound: { peers: { p: [{ limit: 1, window: 'PT10S', algorithm: 'fixed-window' }] } } };
      // T is a multiple of 10 s: T+9.9 is in window k, T+10.0 in k+1
      const calls = [9.9, 10.0, 19.99].map((s) => inCall(T + Math.round(s * S), 'p'));
      expect(outcomes(runModel(config, calls))).to.deep.equal(['A', 'A', 'R:peer:p']);
    });
  });

  describe('sliding window (two-window estimate)', () => {
    it('admits iff c + p(1 - f) < L, on hand-computed numbers', () => {
      const config = { inbound: { peers: { p: [{ limit: 10, window: 'PT1S', algorithm: 'sliding-window' }] } } };
      const calls: ModelCall[] = [];
      for (let i = 1; i <= 8; i++) calls.push(inCall(T + i * 100_000, 'p')); // p = 8 in window k-1
      // t = T+1.25: f = 0.25, p(1-f) = 6: c = 0,1,2,3 admitted (6,7,8,9 < 10), c = 4 -> 10, refused
      for (let i = 0; i < 5; i++) calls.push(inCall(T + 1_250_000, 'p'));
      // t = T+1.5: f = 0.5, p(1-f) = 4: c = 4 -> 8 A, c = 5 -> 9 A, c = 6 -> 10 R
      for (let i = 0; i < 3; i++) calls.push(inCall(T + 1_500_000, 'p'));
      // t = T+2.0: new window; p = 6 (admitted in [T+1, T+2)), f = 0: 0 + 6 < 10 A ... c = 3: 3 + 6 = 9 A, c = 4: 10 R
      for (let i = 0; i < 5; i++) calls.push(inCall(T + 2 * S, 'p'));
      const got = outcomes(runModel(config, calls));
      expect(got.slice(0, 8)).to.deep.equal(Array(8).fill('A'));
      expect(got.slice(8, 13)).to.deep.equal(['A', 'A', 'A', 'A', 'R:peer:p']);
      expect(got.slice(13, 16)).to.deep.equal(['A', 'A', 'R:peer:p']);
      expect(got.slice(16)).to.deep.equal(['A', 'A', 'A', 'A', 'R:peer:p']);
    });
  });

  describe('hierarchy', () => {
    const config = {
      inbound: {
        global: [{ limit: 3, window: 'PT1S' }],
        accounts: { acme: [{ limit: 2, window: 'PT1S' }] },
        peers: { a: [{ limit: 1, window: 'PT1S' }], b: [{ limit: 5, window: 'PT1S' }] },
      },
    };

    it('a rejected call counts nowhere', () => {
      const t = T + S;
      const calls = [inCall(t, 'a'), inCall(t, 'a'), inCall(t, 'a'), inCall(t, 'b'), inCall(t, 'b'), inCall(t, 'b')];
      // a: 1 admitted, 2 refused by its peer limit (not counted globally); b: 2 admitted, the third meets global 3
      expect(outcomes(runModel(config, calls))).to.deep.equal(['A', 'R:peer:a', 'R:peer:a', 'A', 'A', 'R:global']);
    });

    it('global, then account (when configured), then peer; limited_by names the first full bucket', () => {
      const t = T + S;
      const calls = [
        inCall(t, 'b', 'acme'),
        inCall(t, 'b', 'acme'),
        inCall(t, 'b', 'acme'), // account full
        inCall(t, 'b', 'nobody'), // unconfigured account: skipped, admitted (global 3rd)
        inCall(t, 'a', 'acme'), // global full, account full, peer has room: global is named
      ];
      expect(outcomes(runModel(config, calls))).to.deep.equal(['A', 'A', 'R:account:acme', 'A', 'R:global']);
    });

    it('unknown-peer comes first; defaultPeer gives each peer its own bucket', () => {
      expect(outcomes(runModel(config, [inCall(T, 'zed')]))).to.deep.equal(['R:unknown-peer']);
      const withDefault = {
        inbound: {
          ...config.inbound,
          global: [{ limit: 100, window: 'PT1S' }],
          defaultPeer: [{ limit: 1, window: '1s' }],
        },
      };
      const calls = [inCall(T, 'x'), inCall(T, 'x'), inCall(T, 'y'), inCall(T, 'a')];
      expect(outcomes(runModel(withDefault, calls))).to.deep.equal(['A', 'R:peer:x', 'A', 'A']);
    });

    it('unknown-peer even when the global bucket is full', () => {
      const calls = [inCall(T, 'b'), inCall(T, 'b'), inCall(T, 'b'), inCall(T, 'zed'), inCall(T, 'b')];
      expect(outcomes(runModel(config, calls))).to.deep.equal(['A', 'A', 'A', 'R:unknown-peer', 'R:global']);
    });

    it('ids that are Object.prototype names are plain ids', () => {
      const calls = [inCall(T, 'constructor'), inCall(T, '__proto__'), inCall(T, 'toString', 'hasOwnProperty')];
      expect(outcomes(runModel(config, calls))).to.deep.equal(['R:unknown-peer', 'R:unknown-peer', 'R:unknown-peer']);
    });

    it('no inbound section at all: every peer is unknown', () => {
      expect(outcomes(runModel({}, [inCall(T, 'p')]))).to.deep.equal(['R:unknown-peer']);
    });

    it('decisions have exactly the contract fields', () => {
      const [ok, ko] = runModel(config, [inCall(T, 'a'), inCall(T, 'a')]) as InDecision[];
      expect(ok).to.deep.equal({ call_id: `c${seq - 1}`, direction: 'in', outcome: 'admitted' });
      expect(ko).to.deep.equal({
        call_id: `c${seq}`,
        direction: 'in',
        outcome: 'rejected',
        limited_by: 'peer:a',
        reason: 'rate',
      });
    });
  });

  describe('leaky bucket', () => {
    const carriers = {
      A: { cps: 4, maxWait: 'PT1S' },
      B: { cps: 2.5, maxWait: 'PT0.8S' },
      C: { cps: 3, maxWait: 'PT2S' },
      D: { cps: 1 }, // maxWait 0
    };
    const config = { outbound: { carriers } };

    it('cps 2.5: I = 400 ms; wait == maxWait is taken, beyond is refused', () => {
      const calls = [outCall(T, ['B']), outCall(T, ['B']), outCall(T, ['B']), outCall(T, ['B']), outCall(T + S, ['B'])];
      const ds = runModel(config, calls) as OutDecision[];
      expect(ds.map((d) => d.delay_ms)).to.deep.equal([0, 400, 800, null, 200]);
      expect(ds[3]).to.deep.equal({
        call_id: calls[3]!.callId,
        direction: 'out',
        outcome: 'rejected',
        carrier: null,
        delay_ms: null,
        rerouted_from: ['B'],
        reason: 'all-routes-congested',
      });
      expect(ds[0]).to.deep.equal({
        call_id: calls[0]!.callId,
        direction: 'out',
        outcome: 'dispatched',
        carrier: 'B',
        delay_ms: 0,
        rerouted_from: [],
      });
    });

    it('cps 3: fractional intervals, delay_ms rounded to the µs', () => {
      const calls = [0, 1, 2, 3].map(() => outCall(T, ['C']));
      const ds = runModel(config, calls) as OutDecision[];
      expect(ds.map((d) => d.delay_ms)).to.deep.equal([0, 333.333, 666.667, 1000]);
    });

    it('a slot is max(t, last + I): an idle carrier gives no delay', () => {
      const calls = [outCall(T, ['A']), outCall(T + 100_000, ['A']), outCall(T + 2 * S, ['A'])];
      expect((runModel(config, calls) as OutDecision[]).map((d) => d.delay_ms)).to.deep.equal([0, 150, 0]);
    });

    it('maxWait defaults to 0: the call goes at once or moves on', () => {
      const calls = [outCall(T, ['D', 'A']), outCall(T, ['D', 'A']), outCall(T + S, ['D'])];
      const ds = runModel(config, calls) as OutDecision[];
      expect(ds.map((d) => [d.carrier, d.delay_ms, d.rerouted_from])).to.deep.equal([
        ['D', 0, []],
        ['A', 0, ['D']],
        ['D', 0, []],
      ]);
    });

    it('reroutes in route order; unconfigured carriers are skipped and not listed', () => {
      const calls = [outCall(T, ['D']), outCall(T, ['X', 'D', 'Y', 'A']), outCall(T, ['X', 'Y']), outCall(T, [])];
      const ds = runModel(config, calls) as OutDecision[];
      expect(ds[1]).to.include({ outcome: 'dispatched', carrier: 'A', delay_ms: 0 });
      expect(ds[1]!.rerouted_from).to.deep.equal(['D']);
      expect(ds[2]).to.deep.include({
        outcome: 'rejected',
        carrier: null,
        rerouted_from: [],
        reason: 'all-routes-congested',
      });
      expect(ds[3]).to.deep.include({ outcome: 'rejected', rerouted_from: [] });
    });

    it('a refused carrier keeps its state', () => {
      // B: slots T, T+0.4, T+0.8 taken; a 4th refused (wait 1.2 s) and goes to A; at T+0.5 B's wait is 0.7 s (last = T+0.8)
      const calls = [0, 0, 0, 0].map(() => outCall(T, ['B', 'A']));
      calls.push(outCall(T + 500_000, ['B']));
      const ds = runModel(config, calls) as OutDecision[];
      expect(ds.map((d) => [d.carrier, d.delay_ms])).to.deep.equal([
        ['B', 0],
        ['B', 400],
        ['B', 800],
        ['A', 0],
        ['B', 700],
      ]);
    });

    it('all routes congested lists every configured carrier tried', () => {
      const calls = [outCall(T, ['D', 'X']), outCall(T, ['D', 'X', 'D'])];
      const ds = runModel(config, calls) as OutDecision[];
      expect(ds[1]).to.deep.include({ outcome: 'rejected', rerouted_from: ['D', 'D'] });
    });
  });
});

describe('reference model: channels', () => {
  const inD = (t: number, peer: string, durationUs?: number, account?: string, callId?: string): ModelCall => {
    const c = inCall(t, peer, account);
    if (durationUs !== undefined) c.durationUs = durationUs;
    if (callId !== undefined) c.callId = callId;
    return c;
  };
  const outD = (t: number, route: string[], durationUs?: number): ModelCall => {
    const c = outCall(t, route);
    if (durationUs !== undefined) c.durationUs = durationUs;
    return c;
  };
  const reasons = (ds: Decision[]): string[] =>
    ds.map((d) =>
      d.direction === 'in'
        ? d.outcome === 'admitted'
          ? 'A'
          : `R:${d.limited_by}:${d.reason ?? '-'}`
        : d.outcome === 'dispatched'
          ? `${d.carrier}+${d.delay_ms}`
          : 'congested',
    );

  it('a call ending exactly at t has freed its channel; one ending later still holds', () => {
    const config = { inbound: { peers: { p: [{ channels: 2 }] } } };
    const calls = [
      inD(T, 'p', 5 * S),
      inD(T + S, 'p', 4 * S),
      inD(T + 5 * S - 1, 'p', S),
      inD(T + 5 * S, 'p', S),
      inD(T + 5 * S, 'p', S),
    ];
    // at T+5s-1µs both hold (ends T+5s, T+5s); at T+5s both have ended: two calls fit, the call at T+5s (4th) and (5th)
    expect(reasons(runModel(config, calls))).to.deep.equal(['A', 'A', 'R:peer:p:channels', 'A', 'A']);
  });

  it('no duration: the call holds maxCallDuration (default PT4H)', () => {
    const short = { maxCallDuration: 'PT10S', inbound: { peers: { p: [{ channels: 1 }] } } };
    expect(reasons(runModel(short, [inD(T, 'p'), inD(T + 10 * S - 1, 'p'), inD(T + 10 * S, 'p')]))).to.deep.equal([
      'A',
      'R:peer:p:channels',
      'A',
    ]);
    const dflt = { inbound: { peers: { p: [{ channels: 1 }] } } };
    expect(
      reasons(runModel(dflt, [inD(T, 'p'), inD(T + 4 * 3600 * S - 1, 'p'), inD(T + 4 * 3600 * S, 'p')])),
    ).to.deep.equal(['A', 'R:peer:p:channels', 'A']);
  });

  it('rate first, then channels, level by level; a refused call holds nothing', () => {
    const config = {
      inbound: {
        global: [{ limit: 100, window: 'PT1S' }, { channels: 2 }],
        peers: { a: [{ limit: 1, window: 'PT1S' }], b: [{ limit: 1, window: 'PT1S' }, { channels: 1 }] },
      },
    };
    const calls = [
      inD(T, 'a', 60 * S), // A: global holds 1
      inD(T, 'a', 60 * S), // peer a rate: R rate (holds nothing)
      inD(T, 'b', 60 * S), // A: global holds 2, b holds 1
      inD(T + 1, 'a', 60 * S), // global channels full: named first, though a's rate is full too
      inD(T + S, 'b', 60 * S), // global channels full
      inD(T + 60 * S, 'b', 60 * S), // both ended at T+60s: A
      inD(T + 60 * S + 1, 'b', 60 * S), // b: rate (1/s) first, though its channel is full too
    ];
    expect(reasons(runModel(config, calls))).to.deep.equal([
      'A',
      'R:peer:a:rate',
      'A',
      'R:global:channels',
      'R:global:channels',
      'A',
      'R:peer:b:rate',
    ]);
  });

  it("an account channel limit is shared by the account's peers", () => {
    const config = { inbound: { accounts: { acme: [{ channels: 2 }] }, defaultPeer: [] } };
    const calls = [
      inD(T, 'p1', 10 * S, 'acme'),
      inD(T, 'p2', 10 * S, 'acme'),
      inD(T, 'p3', 10 * S, 'acme'),
      inD(T, 'p3', 10 * S),
    ];
    expect(reasons(runModel(config, calls))).to.deep.equal(['A', 'A', 'R:account:acme:channels', 'A']);
  });

  it('a call id given again is a call of its own: each counts and each holds', () => {
    const config = { inbound: { peers: { p: [{ limit: 2, window: 'PT1S' }, { channels: 5 }] } } };
    const calls = [
      inD(T, 'p', 3 * S, undefined, 'x'),
      inD(T + 100, 'p', 3 * S, undefined, 'x'),
      inD(T + 200, 'p', 3 * S),
      inD(T + 300, 'p', 3 * S),
      inD(T + 3 * S, 'p', S, undefined, 'x'),
    ];
    // x twice takes two rate slots: the third and fourth calls are refused
    expect(reasons(runModel(config, calls))).to.deep.equal(['A', 'A', 'R:peer:p:rate', 'R:peer:p:rate', 'A']);
    // and two channels: with one channel, x's second call is refused while its first holds
    const one = { inbound: { peers: { p: [{ channels: 1 }] } } };
    expect(reasons(runModel(one, calls.slice(0, 2)))).to.deep.equal(['A', 'R:peer:p:channels']);
  });

  it('outbound: a full carrier is passed over like a long wait; a call holds from its decision to slot + duration', () => {
    const config = {
      outbound: {
        carriers: {
          A: { cps: 10, maxWait: 'PT1S', channels: 2 },
          B: { cps: 10 },
          C: { cps: 1, maxWait: 'PT5S', channels: 1 },
        },
      },
    };
    const calls = [
      outD(T, ['A', 'B'], S), // A now, until T+1s
      outD(T, ['A', 'B'], S), // A at +100 ms, until T+1.1s
      outD(T, ['A', 'B'], S), // A full (wait 200 ms fits) -> B
      outD(T + S, ['A', 'B'], S), // the first ended exactly: A
      outD(T, ['C'], 0), // C now, duration 0: holds nothing
      outD(T, ['C'], 0), // C at +1 s: holds from now until its slot
      outD(T, ['C'], 0), // C full: congested
      outD(T + S, ['C'], 0), // the held one went out at T+1s: C at +1 s
    ];
    const ds = runModel(config, calls) as OutDecision[];
    expect(reasons(ds)).to.deep.equal(['A+0', 'A+100', 'B+0', 'A+0', 'C+0', 'C+1000', 'congested', 'C+1000']);
    expect(ds[2]!.rerouted_from).to.deep.equal(['A']);
    expect(ds[6]!.rerouted_from).to.deep.equal(['C']);
  });
});

// --------------------------------------------------------------------------- fixture stories

/** Count of admitted calls per sliding-log window never exceeds the limit (a self-check). */
function assertSlidingLogHolds(
  calls: ModelCall[],
  ds: Decision[],
  peer: string,
  limit: number,
  windowUs: number,
): void {
  const admitted = calls.filter((c, i) => c.peer === peer && ds[i]!.outcome === 'admitted').map((c) => c.time);
  let lo = 0;
  for (let hi = 0; hi < admitted.length; hi++) {
    while (admitted[lo]! <= admitted[hi]! - windowUs) lo++;
    expect(hi - lo + 1, `${peer} ${limit}/${windowUs}µs at ${admitted[hi]}`).to.be.at.most(limit);
  }
}

function tally(ds: Decision[], pick: (d: Decision) => string | undefined): Map<string, number> {
  const m = new Map<string, number>();
  for (const d of ds) {
    const k = pick(d);
    if (k !== undefined) m.set(k, (m.get(k) ?? 0) + 1);
  }
  return m;
}

describe('fixture stories under the reference model', () => {
  it('boundary', () => {
    const { calls, decisions } = modelFixture(FIXTURES, 'boundary');
    expect(calls).to.have.length(35);
    const got = outcomes(decisions);
    expect(got).to.deep.equal([
      'A',
      ...Array(10).fill('A'), // x.999
      ...Array(10).fill('R:peer:gw-1'), // (x+1).000
      'R:peer:gw-1', // (x+1).998999
      ...Array(10).fill('A'), // (x+1).999
      'R:peer:gw-1',
      'R:unknown-peer',
      'A',
    ]);
  });

  it('autodialer', () => {
    const { calls, decisions } = modelFixture(FIXTURES, 'autodialer');
    const rate = (peer: string): number => {
      const idx = calls.map((c, i) => (c.peer === peer ? i : -1)).filter((i) => i >= 0);
      return idx.filter((i) => decisions[i]!.outcome === 'admitted').length / idx.length;
    };
    expect(rate('dialer-9')).to.be.below(0.5);
    expect(rate('pbx-acme-1')).to.be.above(0.95);
    const by = tally(decisions, (d) => (d.direction === 'in' ? d.limited_by : undefined));
    expect(by.get('account:globex') ?? 0).to.be.above(5);
    expect(by.get('global') ?? 0).to.be.above(5);
    assertSlidingLogHolds(calls, decisions, 'dialer-9', 5, S);
    assertSlidingLogHolds(calls, decisions, 'dialer-9', 100, 60 * S);
  });

  it('event-types', () => {
    const { calls, decisions } = modelFixture(FIXTURES, 'event-types');
    const by = tally(decisions, (d) => (d.direction === 'in' ? d.limited_by : undefined));
    expect(by.get('global') ?? 0).to.be.above(10);
    expect([...by.keys()].filter((k) => k.startsWith('peer:evt-')).length).to.be.at.least(3);
    for (let i = 1; i <= 20; i++)
      assertSlidingLogHolds(calls, decisions, `evt-${String(i).padStart(2, '0')}`, 10, 1800 * S);
    const span = calls[calls.length - 1]!.time - calls[0]!.time;
    expect(span).to.be.above(2 * 3600 * S);
  });

  it('user-windows: each of 10/s, 120/min and 240/h refuses calls somewhere', () => {
    const config = JSON.parse(readFileSync(join(FIXTURES, 'user-windows.config.json'), 'utf8')) as {
      inbound: { peers: Record<string, { limit: number; window: string }[]> };
    };
    const { calls, decisions } = modelFixture(FIXTURES, 'user-windows');
    const limits = config.inbound.peers['user-42']!;
    expect(limits).to.have.length(3);
    for (let drop = 0; drop < 3; drop++) {
      const fewer = { inbound: { peers: { 'user-42': limits.filter((_, i) => i !== drop) } } };
      const other = runModel(fewer, calls);
      const changed = other.some((d, i) => d.outcome !== decisions[i]!.outcome);
      expect(changed, `limit ${limits[drop]!.limit}/${limits[drop]!.window} is binding`).to.equal(true);
    }
    assertSlidingLogHolds(calls, decisions, 'user-42', 240, 3600 * S);
  });

  it('campaign', () => {
    const { calls, decisions } = modelFixture(FIXTURES, 'campaign');
    expect(calls.length).to.be.within(1000, 3000);
    const outs = decisions.filter((d): d is OutDecision => d.direction === 'out');
    const ins = decisions.filter((d): d is InDecision => d.direction === 'in');
    expect(outs.filter((d) => d.outcome === 'dispatched' && d.delay_ms! > 0).length).to.be.above(100);
    expect(outs.filter((d) => d.outcome === 'dispatched' && d.rerouted_from.length > 0).length).to.be.above(20);
    expect(outs.filter((d) => d.reason === 'all-routes-congested').length).to.be.above(20);
    expect(outs.some((d) => d.rerouted_from.includes('legacy-X') || d.carrier === 'legacy-X')).to.equal(false);
    for (const c of ['A', 'B', 'C', 'D', 'E'])
      expect(
        outs.some((d) => d.carrier === c),
        c,
      ).to.equal(true);
    expect(ins.some((d) => d.outcome === 'admitted')).to.equal(true);
    expect(ins.some((d) => d.limited_by === 'peer:sbc-callbacks')).to.equal(true);
    expect(ins.some((d) => d.limited_by === 'unknown-peer')).to.equal(true);
  });

  it("trunks: channel refusals at every level, a channel freed exactly at a call's end, full carriers passed over", () => {
    const { calls, decisions } = modelFixture(FIXTURES, 'trunks');
    const ins = decisions.filter((d): d is InDecision => d.direction === 'in');
    const outs = decisions.filter((d): d is OutDecision => d.direction === 'out');
    for (const level of ['global', 'account:acme', 'peer:pbx-acme-1']) {
      expect(ins.filter((d) => d.limited_by === level && d.reason === 'channels').length, level).to.be.above(3);
    }
    expect(ins.some((d) => d.reason === 'rate')).to.equal(true);
    // a call id given twice (an INVITE recorded again, 200 ms later): two calls, each counted
    expect(ins.filter((d) => d.call_id === 'i-0197').map((d) => d.outcome)).to.deep.equal(['admitted', 'admitted']);
    // small-9: admitted, admitted, refused 1 µs before the first ends, admitted as it ends
    const nine = calls.map((c, i) => [c, decisions[i]!] as const).filter(([c]) => c.peer === 'small-9');
    expect(nine.map(([, d]) => (d.outcome === 'admitted' ? 'A' : (d as InDecision).reason))).to.deep.equal([
      'A',
      'A',
      'channels',
      'A',
    ]);
    // carriers: A and B fill up; calls pass over them to C or are refused
    expect(outs.filter((d) => d.carrier === 'C' && d.rerouted_from.includes('A')).length).to.be.above(10);
    expect(outs.some((d) => d.reason === 'all-routes-congested')).to.equal(true);
    // calls in progress never above the limits, computed here from decisions and durations
    const maxCallUs = 90 * S;
    const peakOf = (
      pick: (c: ModelCall, d: Decision) => boolean,
      start: (c: ModelCall, d: Decision) => number,
    ): number => {
      const spans = calls.flatMap((c, i) =>
        pick(c, decisions[i]!) ? [[c.time, start(c, decisions[i]!) + (c.durationUs ?? maxCallUs)] as const] : [],
      );
      let peak = 0;
      for (const [t] of spans) peak = Math.max(peak, spans.filter(([s, e]) => s <= t && e > t).length);
      return peak;
    };
    const inStart = (c: ModelCall) => c.time;
    const outStart = (c: ModelCall, d: Decision) => c.time + Math.round((d as OutDecision).delay_ms! * 1000);
    expect(peakOf((c, d) => c.direction === 'in' && d.outcome === 'admitted', inStart)).to.equal(70);
    expect(peakOf((c, d) => c.account === 'acme' && d.outcome === 'admitted', inStart)).to.equal(35);
    expect(peakOf((c, d) => c.peer === 'pbx-acme-1' && d.outcome === 'admitted', inStart)).to.equal(12);
    expect(peakOf((_c, d) => d.direction === 'out' && d.carrier === 'A', outStart)).to.equal(8);
    expect(peakOf((_c, d) => d.direction === 'out' && d.carrier === 'B', outStart)).to.equal(10);
  });

  it('algorithms: fixed-window admits most, sliding-log least, on the same traffic', () => {
    const { calls, decisions } = modelFixture(FIXTURES, 'algorithms');
    const admitted = (peer: string): number =>
      calls.filter((c, i) => c.peer === peer && decisions[i]!.outcome === 'admitted').length;
    const fixed = admitted('{fixed} trunk:1');
    const sliding = admitted('{sliding} trunk:1');
    const log = admitted('{log} trunk:1');
    expect(fixed).to.be.above(sliding);
    expect(sliding).to.be.above(log);
    assertSlidingLogHolds(calls, decisions, '{log} trunk:1', 5, S);
    // equal times exist, and the odd ids with commas and quotes survive CSV
    expect(calls.some((c, i) => i > 0 && c.time === calls[i - 1]!.time)).to.equal(true);
    expect(calls.some((c) => c.peer === 'sip:"east", gw{2}')).to.equal(true);
    const by = tally(decisions, (d) => (d.direction === 'in' ? d.limited_by : undefined));
    expect(by.get('account:acct {blue}: one') ?? 0).to.be.above(0);
  });
});
