/**
 * Inbound admission at the CallGate level: every rule of the contract (DESIGN.md, "Sliding
 * log", hierarchy, unknown-peer, limited_by) with exact decisions at explicit times (`at`, µs),
 * on the memory store and on a real Redis.
 */
import { expect } from 'chai';
import type { AdmissionDecision } from '../src/admission/admission.js';
import type { CallGateConfigInput } from '../src/config/index.js';
import { CallGate } from '../src/gate.js';
import { forEachStore, MS, S, T0, type StoreKind } from './admission/stores.js';

type Call = { peer: string; account?: string; at: number };

/** 'A' for admitted, else the limitedBy value. */
const outcome = (d: AdmissionDecision): string => (d.admitted ? 'A' : d.limitedBy!);

forEachStore('admission contract', (kind: () => StoreKind, storeName) => {
  let gates: CallGate[] = [];
  let n = 0;
  const gate = async (config: CallGateConfigInput): Promise<CallGate> => {
    const g = await CallGate.create({ config, store: kind().make() });
    gates.push(g);
    return g;
  };
  const admit = (g: CallGate, c: Call) => g.admit({ callId: `c${n++}`, ...c });
  const outcomes = async (g: CallGate, calls: Call[]): Promise<string[]> => {
    const out: string[] = [];
    for (const c of calls) out.push(outcome(await admit(g, c)));
    return out;
  };
  afterEach(async () => {
    await Promise.all(gates.map((g) => g.close()));
    gates = [];
  });

  describe('calls in flight', () => {
    const config: CallGateConfigInput = {
      inbound: { global: [{ limit: 3, window: 'PT1S' }], defaultPeer: [{ limit: 100, window: 'PT1S' }] },
    };

    it('a repeat of a call still being decided gets the same decision, counted once; after it, a new one', async () => {
      const g = await gate(config);
      const first = g.admit({ callId: 'same', peer: 'p', at: T0 });
      const again = g.admit({ callId: 'same', peer: 'p', at: T0 });
      const [a, b] = await Promise.all([first, again]);
      expect(b, 'the very same decision').to.equal(a);
      expect(a).to.include({ admitted: true });
      expect(
        await outcomes(g, [
          { peer: 'p', at: T0 + 1 },
          { peer: 'p', at: T0 + 2 },
          { peer: 'p', at: T0 + 3 },
        ]),
      ).to.deep.equal(['A', 'A', 'global']);
      // decided: the same call id is a new call (no channel limit, so no hold to find it by)
      expect(await g.admit({ callId: 'same', peer: 'p', at: T0 + 4 })).to.include({
        admitted: false,
        limitedBy: 'global',
      });
    });

    it('a clock that throws gives a rejected promise, not a throw', async () => {
      const clock = {
        now: (): number => {
          throw new Error('clock broken');
        },
        setTimer: () => () => {},
      };
      const g = await CallGate.create({ config, store: kind().make(), clock });
      gates.push(g);
      let p: Promise<unknown> | undefined;
      expect(() => (p = g.admit({ callId: 'x', peer: 'p' }))).to.not.throw();
      const err = await p!.then(
        () => undefined,
        (e: unknown) => e,
      );
      expect((err as Error | undefined)?.message).to.equal('clock broken');
      // a release too: rejected with the clock's error, not deferred and retried every second
      // as if the store were out of reach
      const released = await g.release('x').then(
        (outcome) => outcome,
        (e: unknown) => (e as Error).message,
      );
      expect(released).to.equal('clock broken');
      expect(g.deferredReleases).to.equal(0);
    });
  });

  describe('unknown-peer', () => {
    const config: CallGateConfigInput = {
      inbound: { global: [{ limit: 2, window: 'PT1S' }], peers: { p1: [{ limit: 5, window: 'PT1S' }] } },
    };

    it('rejects a peer with neither own limits nor defaultPeer, retryAfterMs 0', async () => {
      const g = await gate(config);
      const d = await admit(g, { peer: 'stranger', at: T0 });
      expect(d).to.include({ admitted: false, limitedBy: 'unknown-peer', retryAfterMs: 0, at: T0 });
    });

    it('is decided before anything else (even with global full) and counts nowhere', async () => {
      const g = await gate(config);
      // unknown peers first: they must not eat global room
      expect(
        await outcomes(
          g,
          [0, 1, 2].map((i) => ({ peer: 'stranger', at: T0 + i })),
        ),
      ).to.deep.equal(['unknown-peer', 'unknown-peer', 'unknown-peer']);
      expect(
        await outcomes(
          g,
          [3, 4, 5].map((i) => ({ peer: 'p1', at: T0 + i })),
        ),
      ).to.deep.equal(['A', 'A', 'global']);
      // global full: an unknown peer is still unknown-peer, not global
      expect(outcome(await admit(g, { peer: 'stranger', at: T0 + 6 }))).to.equal('unknown-peer');
    });

    it('a configured account does not make an unknown peer known', async () => {
      const g = await gate({ inbound: { accounts: { acme: [{ limit: 5, window: 'PT1S' }] }, peers: { p1: [] } } });
      expect(outcome(await admit(g, { peer: 'p2', account: 'acme', at: T0 }))).to.equal('unknown-peer');
    });

    it('with defaultPeer, every peer is known', async () => {
      const g = await gate({ inbound: { defaultPeer: [{ limit: 1, window: '1s' }] } });
      expect(
        await outcomes(g, [
          { peer: 'x', at: T0 },
          { peer: 'y', at: T0 },
          { peer: 'x', at: T0 + 1 },
        ]),
      ).to.deep.equal(['A', 'A', 'peer:x']);
    });
  });

  describe('hierarchy: global → account → peer', () => {
    const config: CallGateConfigInput = {
      inbound: {
        global: [{ limit: 5, window: 'PT1S' }],
        accounts: { acme: [{ limit: 3, window: 'PT1S' }] },
        peers: { p1: [{ limit: 2, window: 'PT1S' }] },
        defaultPeer: [{ limit: 1, window: 'PT1S' }],
      },
    };

    it('names the first level lacking room, in contract order', async () => {
      const g = await gate(config);
      const calls: Call[] = [
        { peer: 'p1', account: 'acme', at: T0 + 1 }, // A  g1 a1 p1:1
        { peer: 'p1', account: 'acme', at: T0 + 2 }, // A  g2 a2 p1:2
        { peer: 'p1', account: 'acme', at: T0 + 3 }, // peer full (account has room)
        { peer: 'p2', account: 'acme', at: T0 + 4 }, // A  g3 a3 p2:1 (defaultPeer, own bucket)
        { peer: 'p3', account: 'acme', at: T0 + 5 }, // account full (p3 has room): account before peer
        { peer: 'p2', account: 'acme', at: T0 + 6 }, // account and peer full: account named first
        { peer: 'p3', at: T0 + 7 }, //                  A  g4 p3:1 (no account named)
        { peer: 'p4', account: 'other', at: T0 + 8 }, // A g5 (account not configured: level skipped)
        { peer: 'p5', at: T0 + 9 }, //                  global full
        { peer: 'p1', account: 'acme', at: T0 + 10 }, // all three full: global named first
        { peer: 'p6', account: '', at: T0 + 11 }, //   '' counts as no account; global full
      ];
      expect(await outcomes(g, calls)).to.deep.equal([
        'A',
        'A',
        'peer:p1',
        'A',
        'account:acme',
        'account:acme',
        'A',
        'A',
        'global',
        'global',
        'global',
      ]);
      // one second after the first call, everything has room again
      expect(await outcomes(g, [{ peer: 'p1', account: 'acme', at: T0 + S + 1 }])).to.deep.equal(['A']);
    });

    it('defaultPeer is a bucket per peer, not one shared bucket', async () => {
      const g = await gate({ inbound: { defaultPeer: [{ limit: 2, window: 'PT1S' }] } });
      const calls = ['a', 'b', 'c', 'a', 'b', 'c', 'a'].map((peer, i) => ({ peer, at: T0 + i }));
      expect(await outcomes(g, calls)).to.deep.equal(['A', 'A', 'A', 'A', 'A', 'A', 'peer:a']);
    });

    it('a peer with its own limits does not use defaultPeer', async () => {
      const g = await gate({
        inbound: { peers: { big: [{ limit: 4, window: 'PT1S' }] }, defaultPeer: [{ limit: 1, window: 'PT1S' }] },
      });
      const calls = [0, 1, 2, 3, 4].map((i) => ({ peer: 'big', at: T0 + i }));
      expect(await outcomes(g, calls)).to.deep.equal(['A', 'A', 'A', 'A', 'peer:big']);
    });

    it('an account without global, a global without accounts', async () => {
      const g1 = await gate({ inbound: { accounts: { acme: [{ limit: 1, window: 'PT1S' }] }, peers: { p: [] } } });
      expect(
        await outcomes(g1, [
          { peer: 'p', account: 'acme', at: T0 },
          { peer: 'p', account: 'acme', at: T0 + 1 },
          { peer: 'p', at: T0 + 2 },
        ]),
      ).to.deep.equal(['A', 'account:acme', 'A']);
      const g2 = await gate({ inbound: { global: [{ limit: 1, window: 'PT1S' }], peers: { p: [] } } });
      expect(
        await outcomes(g2, [
          { peer: 'p', at: T0 },
          { peer: 'p', account: 'acme', at: T0 + 1 },
        ]),
      ).to.deep.equal(['A', 'global']);
    });
  });

  describe('rejected calls are recorded nowhere', () => {
    it('refusals at the peer level leave global room for exactly the right number', async () => {
      const g = await gate({
        inbound: {
          global: [{ limit: 10, window: 'PT1S' }],
          peers: { p1: [{ limit: 2, window: 'PT1S' }], p2: [{ limit: 100, window: 'PT1S' }] },
        },
      });
      const p1 = await outcomes(
        g,
        [0, 1, 2, 3, 4, 5, 6].map((i) => ({ peer: 'p1', at: T0 + i })),
      );
      expect(p1).to.deep.equal(['A', 'A', 'peer:p1', 'peer:p1', 'peer:p1', 'peer:p1', 'peer:p1']);
      // 2 admitted so far: global has room for exactly 8 more
      const p2 = await outcomes(
        g,
        Array.from({ length: 10 }, (_, i) => ({ peer: 'p2', at: T0 + 10 + i })),
      );
      expect(p2).to.deep.equal([...Array(8).fill('A'), 'global', 'global']);
    });

    it('refusals at the peer level do not count at the account level', async () => {
      const g = await gate({
        inbound: {
          accounts: { acme: [{ limit: 3, window: 'PT1S' }] },
          peers: { p1: [{ limit: 1, window: 'PT1S' }], p2: [{ limit: 100, window: 'PT1S' }] },
        },
      });
      expect(
        await outcomes(
          g,
          [0, 1, 2, 3].map((i) => ({ peer: 'p1', account: 'acme', at: T0 + i })),
        ),
      ).to.deep.equal(['A', 'peer:p1', 'peer:p1', 'peer:p1']);
      expect(
        await outcomes(
          g,
          [4, 5, 6].map((i) => ({ peer: 'p2', account: 'acme', at: T0 + i })),
        ),
      ).to.deep.equal(['A', 'A', 'account:acme']);
    });

    it('refusals at the account or global level do not count at the peer level', async () => {
      const g = await gate({
        inbound: {
          global: [{ limit: 2, window: 'PT1S' }],
          accounts: { acme: [{ limit: 1, window: 'PT1S' }] },
          peers: { p1: [{ limit: 2, window: 'PT1S' }], p9: [] },
        },
      });
      expect(
        await outcomes(
          g,
          [0, 1, 2].map((i) => ({ peer: 'p1', account: 'acme', at: T0 + i })),
        ),
      ).to.deep.equal(['A', 'account:acme', 'account:acme']);
      expect(outcome(await admit(g, { peer: 'p9', at: T0 + 3 }))).to.equal('A'); // global now full (2)
      expect(outcome(await admit(g, { peer: 'p1', at: T0 + 4 }))).to.equal('global');
      // a second later (calls at T0 and T0+3 gone): p1 has had exactly one admitted call, so it
      // has room for one more in (T0+4, T0+S+4] — if refusals had counted it would have none
      const t = T0 + S + 3;
      expect(
        await outcomes(g, [
          { peer: 'p1', at: t },
          { peer: 'p1', at: t + 1 },
        ]),
      ).to.deep.equal(['A', 'A']);
    });
  });

  describe('windows', () => {
    it('the window is (t − W, t]: a call leaves exactly W after it was admitted', async () => {
      const g = await gate({ inbound: { peers: { p: [{ limit: 1, window: 'PT1S' }] } } });
      const a = await admit(g, { peer: 'p', at: T0 });
      const b = await admit(g, { peer: 'p', at: T0 + S - 1 });
      const c = await admit(g, { peer: 'p', at: T0 + S });
      expect(outcome(a)).to.equal('A');
      expect(b).to.include({ admitted: false, limitedBy: 'peer:p', retryAfterMs: 1 }); // 1 µs, rounded up to 1 ms
      expect(outcome(c)).to.equal('A');
    });

    it('several windows per bucket, each checked, retryAfterMs the longest wait', async () => {
      const g = await gate({
        inbound: {
          peers: {
            p: [
              { limit: 2, window: 'PT1S' },
              { limit: 3, window: 'PT10S' },
            ],
          },
        },
      });
      const ds: AdmissionDecision[] = [];
      for (const at of [T0, T0 + 1, T0 + 2, T0 + S, T0 + 2 * S, T0 + 10 * S, T0 + 10 * S + 1, T0 + 10 * S + 2])
        ds.push(await admit(g, { peer: 'p', at }));
      expect(ds.map(outcome)).to.deep.equal(['A', 'A', 'peer:p', 'A', 'peer:p', 'A', 'A', 'peer:p']);
      expect(ds[2]!.retryAfterMs).to.equal(Math.ceil((S - 2) / MS)); // 1 s window: T0 leaves at T0+S
      expect(ds[4]!.retryAfterMs).to.equal(8_000); // 10 s window only: T0 leaves at T0+10S
      // at T0+10S+2: 1 s window holds T0+10S, T0+10S+1 (full, wait S-2 µs); 10 s window holds
      // T0+1, T0+S, T0+10S, T0+10S+1 (full, the 2nd oldest T0+S leaves at T0+11S): max = 1 s - 2 µs
      expect(ds[7]!.retryAfterMs).to.equal(Math.ceil((S - 2) / MS));
      expect(ds.every((d) => d.at !== undefined)).to.equal(true);
      expect(ds.map((d) => d.at)).to.deep.equal([
        T0,
        T0 + 1,
        T0 + 2,
        T0 + S,
        T0 + 2 * S,
        T0 + 10 * S,
        T0 + 10 * S + 1,
        T0 + 10 * S + 2,
      ]);
    });

    it('retryAfterMs is exact for a sliding log: the (n − L + 1)-th oldest call leaves', async () => {
      const g = await gate({ inbound: { peers: { p: [{ limit: 3, window: 'PT2S' }] } } });
      for (const at of [T0, T0 + 250 * MS, T0 + 700 * MS])
        expect(outcome(await admit(g, { peer: 'p', at }))).to.equal('A');
      const d = await admit(g, { peer: 'p', at: T0 + 1_000 * MS });
      expect(d).to.include({ limitedBy: 'peer:p', retryAfterMs: 1_000 }); // T0 leaves at T0+2S
      const d2 = await admit(g, { peer: 'p', at: T0 + 2_100 * MS });
      expect(outcome(d2)).to.equal('A');
      const d3 = await admit(g, { peer: 'p', at: T0 + 2_100 * MS + 1 });
      expect(d3).to.include({ limitedBy: 'peer:p', retryAfterMs: 150 }); // T0+250ms leaves at T0+2.25 s
    });
  });

  describe('per-limit algorithm through config', () => {
    // 10 calls in the second half of window k-1, then 12 calls at the middle of window k
    const K = T0 + 10 * S; // a window boundary
    const scenario = async (algorithm?: 'sliding-log' | 'sliding-window' | 'fixed-window') => {
      const g = await gate({
        inbound: { peers: { p: [{ limit: 10, window: 'PT1S', ...(algorithm && { algorithm }) }] } },
      });
      const before = await outcomes(
        g,
        Array.from({ length: 11 }, (_, i) => ({ peer: 'p', at: K - S + 600 * MS + i })),
      );
      const mid: AdmissionDecision[] = [];
      for (let i = 0; i < 12; i++) mid.push(await admit(g, { peer: 'p', at: K + 500 * MS }));
      return { before, mid };
    };

    it('sliding-log (the default): nothing at mid-window, the old calls are still inside', async () => {
      const { before, mid } = await scenario();
      expect(before).to.deep.equal([...Array(10).fill('A'), 'peer:p']);
      expect(mid.filter((d) => d.admitted)).to.have.length(0);
      expect(mid[0]!.retryAfterMs).to.equal(100); // the first old call (K-400ms) leaves at K+600ms
    });

    it('fixed-window: a fresh count in window k', async () => {
      const { before, mid } = await scenario('fixed-window');
      expect(before).to.deep.equal([...Array(10).fill('A'), 'peer:p']);
      expect(mid.map(outcome)).to.deep.equal([...Array(10).fill('A'), 'peer:p', 'peer:p']);
      expect(mid[10]!.retryAfterMs).to.equal(500); // window k ends at K+1s
    });

    it('sliding-window: c + p·(1 − f) < L with f = 0.5 admits 5', async () => {
      const { before, mid } = await scenario('sliding-window');
      expect(before).to.deep.equal([...Array(10).fill('A'), 'peer:p']);
      expect(mid.map(outcome)).to.deep.equal([...Array(5).fill('A'), ...Array(7).fill('peer:p')]);
      // c = 5, p = 10: room again once 5 + 10(1 − f) < 10, i.e. f > 0.5: 1 µs later
      expect(mid[5]!.retryAfterMs).to.equal(1);
    });

    it('mixed algorithms in one bucket and across levels', async () => {
      const g = await gate({
        inbound: {
          global: [{ limit: 3, window: 'PT1S', algorithm: 'fixed-window' }],
          peers: {
            p: [
              { limit: 2, window: 'PT1S' },
              { limit: 4, window: 'PT10S', algorithm: 'fixed-window' },
            ],
            q: [],
          },
        },
      });
      // window k of global ends at K; p's sliding log of 2/s; p's fixed 10 s window [T0, T0+10S)
      const calls: Call[] = [
        { peer: 'p', at: K - 300 * MS }, // A (global k-1: 1)
        { peer: 'p', at: K - 200 * MS }, // A (global k-1: 2)
        { peer: 'q', at: K - 100 * MS }, // A (global k-1: 3)
        { peer: 'q', at: K - 50 * MS }, //  global (fixed window k-1 full)
        { peer: 'p', at: K }, //            peer (sliding log: 2 in (K-1s, K]); global has room in window k
        { peer: 'q', at: K + 1 }, //        A (global k: 1)
        { peer: 'p', at: K + 800 * MS }, // A (log: K-300ms left; fixed 10 s window of p is [K, K+10S): 1)
      ];
      expect(await outcomes(g, calls)).to.deep.equal(['A', 'A', 'A', 'global', 'peer:p', 'A', 'A']);
    });
  });

  describe('identifiers with { } : and spaces', () => {
    const weird = ['a{b}:c d', '{in}', '}{', 'x:y', 'x%003Ay', 'peer:x', ' ', '{', 'ünï cödé'];

    it('each id is its own bucket (no collision) and limitedBy carries the raw id', async () => {
      const peers = Object.fromEntries(weird.map((id) => [id, [{ limit: 1, window: 'PT1S' }]]));
      const g = await gate({ inbound: { accounts: { '{acme}: x': [{ limit: 100, window: 'PT1S' }] }, peers } });
      const first = await outcomes(
        g,
        weird.map((peer, i) => ({ peer, account: '{acme}: x', at: T0 + i })),
      );
      expect(first).to.deep.equal(weird.map(() => 'A'));
      const second = await outcomes(
        g,
        weird.map((peer, i) => ({ peer, account: '{acme}: x', at: T0 + 100 + i })),
      );
      expect(second).to.deep.equal(weird.map((id) => `peer:${id}`));
    });

    it('account ids too', async () => {
      const accounts = Object.fromEntries(['{a}', 'a', 'b c:d', '}'].map((id) => [id, [{ limit: 1, window: 'PT1S' }]]));
      const g = await gate({ inbound: { accounts, defaultPeer: [{ limit: 100, window: 'PT1S' }] } });
      const ids = Object.keys(accounts);
      expect(
        await outcomes(
          g,
          ids.map((account, i) => ({ peer: 'p', account, at: T0 + i })),
        ),
      ).to.deep.equal(ids.map(() => 'A'));
      expect(
        await outcomes(
          g,
          ids.map((account, i) => ({ peer: 'p', account, at: T0 + 10 + i })),
        ),
      ).to.deep.equal(ids.map((id) => `account:${id}`));
    });

    // hash tags exist on Redis only
    if (storeName === 'redis')
      it('on Redis with hash tags, every key has exactly one well-formed tag', async () => {
        const store = kind().make({ hashTags: true });
        const g = await CallGate.create({
          store,
          config: {
            inbound: {
              accounts: {
                '{acme}: x': [
                  { limit: 5, window: 'PT1S' },
                  { limit: 5, window: 'PT1M', algorithm: 'fixed-window' },
                ],
              },
              peers: Object.fromEntries(weird.map((id) => [id, [{ limit: 1, window: 'PT1S' }]])),
            },
          },
        });
        gates.push(g);
        for (const [i, peer] of weird.entries())
          await admit(g, { peer, account: i % 2 ? '{acme}: x' : undefined, at: T0 + i });
        const prefix = (store as unknown as { prefix: string }).prefix;
        const keys = await kind().client!.keys(`${prefix}*`);
        expect(keys.length).to.be.greaterThan(weird.length);
        for (const key of keys) expect(key.slice(prefix.length), key).to.match(/^\{[^{}]+\}[^{}]*$/);
      });
  });

  describe('record()', () => {
    const config: CallGateConfigInput = {
      inbound: {
        global: [{ limit: 3, window: 'PT1S' }],
        accounts: { acme: [{ limit: 2, window: 'PT1S' }] },
        peers: { p1: [{ limit: 1, window: 'PT1S' }], p2: [] },
      },
    };

    it('counts a call that must pass, even over every limit, and the next admit sees it', async () => {
      const g = await gate(config);
      expect(outcome(await admit(g, { peer: 'p1', account: 'acme', at: T0 }))).to.equal('A');
      const r1 = await g.record({ callId: 'emergency-1', peer: 'p1', account: 'acme', at: T0 + 1 }); // over p1's limit
      expect(r1).to.include({ admitted: true, forced: true, retryAfterMs: 0, at: T0 + 1 });
      expect(outcome(await admit(g, { peer: 'p2', account: 'acme', at: T0 + 2 }))).to.equal('account:acme'); // acme: 2
      const r2 = await g.record({ callId: 'emergency-2', peer: 'p1', account: 'acme', at: T0 + 3 }); // over all three
      expect(r2).to.include({ admitted: true, forced: true });
      expect(outcome(await admit(g, { peer: 'p2', at: T0 + 4 }))).to.equal('global'); // global: 3
      // a second after the first call it left, but the recorded calls still count at the peer
      expect(outcome(await admit(g, { peer: 'p1', at: T0 + S }))).to.equal('peer:p1');
      // global at T0+S+1: (T0+1, T0+S+1] holds the record at T0+3 only: room for 2 more
      expect(
        await outcomes(
          g,
          [1, 2, 2].map((d) => ({ peer: 'p2', at: T0 + S + d })),
        ),
      ).to.deep.equal(['A', 'A', 'global']);
    });

    it('an unknown peer is counted at the levels that exist', async () => {
      const g = await gate(config);
      for (let i = 0; i < 3; i++)
        expect(await g.record({ callId: `e${i}`, peer: 'nobody', at: T0 + i })).to.include({
          admitted: true,
          forced: true,
        });
      expect(outcome(await admit(g, { peer: 'p2', at: T0 + 10 }))).to.equal('global');
      expect(outcome(await admit(g, { peer: 'nobody', at: T0 + 11 }))).to.equal('unknown-peer');
    });
  });

  describe('decision fields', () => {
    it('admitted: retryAfterMs 0, at as given, no limitedBy, no degraded', async () => {
      const g = await gate({ inbound: { defaultPeer: [{ limit: 1, window: 'PT1S' }] } });
      const d = await g.admit({ callId: 'k1', peer: 'p', at: T0 + 123 });
      expect(d).to.deep.equal({ callId: 'k1', direction: 'in', admitted: true, retryAfterMs: 0, at: T0 + 123 });
      const r = await g.admit({ callId: 'k2', peer: 'p', at: T0 + 124 });
      expect(r).to.deep.equal({
        callId: 'k2',
        direction: 'in',
        admitted: false,
        limitedBy: 'peer:p',
        reason: 'rate',
        retryAfterMs: 1_000,
        at: T0 + 124,
      });
    });

    it('rejects bad input with InvalidArgumentError', async () => {
      const g = await gate({ inbound: { defaultPeer: [] } });
      for (const bad of [
        { callId: '', peer: 'p' },
        { callId: 'c', peer: '' },
        { callId: 'c', peer: 'p', at: -1 },
        { callId: 'c', peer: 'p', at: 1.5 },
      ]) {
        let err: unknown;
        try {
          await g.admit(bad);
        } catch (e) {
          err = e;
        }
        expect((err as Error)?.name, JSON.stringify(bad)).to.match(/InvalidArgument/);
      }
    });
  });
});
