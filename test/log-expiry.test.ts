/**
 * A sliding log's life on Redis TIME (lua/includes/log.lua, logWrite): a lone admit trims its logs
 * at a rounded bound (skipped when the process knows the log was trimmed there already) and sends
 * PEXPIRE only when the trim removed something, the log may be new, or the process does not yet
 * know the expiry was set for the bucket's current limits. These tests hold it to what that must
 * keep: every event lives at least its retention past its time (so no count is ever lost), the
 * log stays bounded, and the trims and PEXPIREs saved are real.
 */
import { expect } from 'chai';
import type { Redis } from 'ioredis';
import { RedisStore } from '../src/store/redis/redis-store.js';
import { trimBound } from '../src/store/redis/bucket-args.js';
import type { Bucket } from '../src/store/types.js';
import { newRedisClient, startRedisServer, type RedisServer } from './helpers/redis.js';

// these tests count the commands Redis ran: no background sync of the call ledger among them
const NO_SYNC = { syncMs: 0 };

const MS = 1_000;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

const logBucket = (name: string, limit: number, windowMs: number): readonly Bucket[] =>
  Object.freeze([
    Object.freeze({
      name,
      limits: Object.freeze([Object.freeze({ limit, windowUs: windowMs * MS, algorithm: 'sliding-log' as const })]),
    }),
  ]);

/** Milliseconds a log of retention r (µs) is kept after a write that sets its expiry: 2r + r/4 + 1 µs, whatever its trim's step (lua/includes/log.lua). */
const ttlMsOf = (r: number) => Math.ceil((2 * r + Math.floor(r / 4) + 1) / 1000) + 1;

/**
 * The PTTL of `key` right after `write`, and the bound it must meet if the write set the expiry
 * to ttlMs: ttlMs less the milliseconds the write and the read took (1 ms more for rounding),
 * measured rather than guessed, so that a loaded machine slows the test but never fails it.
 */
async function pttlAfter(raw: Redis, key: string, write: () => Promise<unknown>): Promise<[number, number]> {
  const started = Date.now();
  await write();
  const pttl = await raw.pttl(key);
  return [pttl, Date.now() - started + 1];
}

/**
 * How many times the trim's bound moved over these write times (Redis TIME, µs): a log is
 * trimmed at most once per bound by each process (and its expiry refreshed at most as often).
 * Counted from the times the writes really had, so that a run slowed down by a loaded machine
 * (more moves of the bound) is held to its own count.
 */
const boundsOf = (times: readonly number[], r: number, L: number) => new Set(times.map((t) => trimBound(t, r, L))).size;

async function calls(raw: Redis, cmd: string): Promise<number> {
  const m = new RegExp(`^cmdstat_${cmd}:calls=(\\d+)`, 'm').exec(await raw.info('commandstats'));
  return m ? Number(m[1]) : 0;
}

describe('RedisStore: a sliding log on Redis TIME keeps every event for its retention, with few trims and PEXPIREs, and decides as the memory store', function () {
  this.timeout(30_000);
  let server: RedisServer;
  let raw: Redis;
  let client: Redis;
  before(async () => {
    server = await startRedisServer();
    raw = newRedisClient(server);
    client = newRedisClient(server);
  });
  after(async () => {
    raw?.disconnect();
    client?.disconnect();
    await server?.stop();
  });

  it('lone admits every 20 ms for 1.6 s: after each, the log outlives the new event by its window; a trim and a PEXPIRE on a fraction of them; the log holds no more than r + r/4 of events', async () => {
    const store = new RedisStore({ redis: client, prefix: 'exp1:', holds: NO_SYNC });
    const buckets = logBucket('peer:a', 200, 400); // r = 400 ms, a step of r/4 (L <= 1,024)
    const key = 'exp1:peer:a:log';
    // the first call: sets the expiry (new log, and this process asks)
    const [pttl0, took] = await pttlAfter(raw, key, () => store.admit({ tag: 'in', buckets }));
    expect(pttl0).to.be.within(ttlMsOf(400 * MS) - took, ttlMsOf(400 * MS));
    await raw.config('RESETSTAT');
    const admitted: number[] = [];
    for (let i = 0; i < 80; i++) {
      await sleep(20);
      const r = await store.admit({ tag: 'in', buckets });
      expect(r.admitted, `call ${i}`).to.equal(true);
      admitted.push(r.now);
      // the event just written must be there for its whole window (400 ms) at least
      const pttl = await raw.pttl(key);
      expect(pttl, `pttl after call ${i}`).to.be.at.least(400);
      // trimmed below t - r rounded down to r/4 + 1 µs: nothing older than r + r/4 (+ 1 ms of rounding) is kept
      const held = await raw.zcard(key);
      const recent = admitted.filter((t) => t > r.now - 500 * MS - MS).length + 1; // + the first call's event
      expect(held, `events held after call ${i}`).to.be.at.most(recent);
    }
    const admits = await calls(raw, 'evalsha');
    const pexpires = await calls(raw, 'pexpire');
    const trims = await calls(raw, 'zremrangebyscore');
    expect(admits).to.equal(80);
    // the trim's bound moves once per r/4: one trim per move at most, plus one (~17 of 80 in 1.6 s)
    const bounds = boundsOf(admitted, 400 * MS, 200);
    expect(trims, `trims of 80 lone admits over ${bounds} bounds`).to.be.within(1, bounds + 1);
    // one refresh per r/4 (100 ms) at most, plus one
    expect(pexpires, `PEXPIREs of 80 lone admits over ${bounds} bounds`).to.be.within(1, bounds + 1);
    await store.close();
  });

  it('batches (three calls at once) every 20 ms for 1.6 s: the same life, bound and savings as lone calls', async () => {
    const store = new RedisStore({ redis: client, prefix: 'exp5:', holds: NO_SYNC });
    const buckets = logBucket('peer:e', 200, 400); // r = 400 ms, a step of r/4
    const key = 'exp5:peer:e:log';
    await Promise.all([1, 2, 3].map(() => store.admit({ tag: 'in', buckets })));
    await raw.config('RESETSTAT');
    const admitted: number[] = [];
    for (let i = 0; i < 80; i++) {
      await sleep(20);
      const rs = await Promise.all([1, 2, 3].map(() => store.admit({ tag: 'in', buckets })));
      for (const r of rs) expect(r.admitted, `batch ${i}`).to.equal(true);
      expect(new Set(rs.map((r) => r.now)).size, 'one script call, one time').to.equal(1);
      admitted.push(...rs.map((r) => r.now));
      expect(await raw.pttl(key), `pttl after batch ${i}`).to.be.at.least(400);
      const recent = admitted.filter((t) => t > rs[0]!.now - 500 * MS - MS).length + 3; // + the first batch
      expect(await raw.zcard(key), `events held after batch ${i}`).to.be.at.most(recent);
    }
    expect(await calls(raw, 'evalsha')).to.equal(80);
    const bounds = boundsOf(admitted, 400 * MS, 200);
    expect(await calls(raw, 'zremrangebyscore'), `trims of 80 batches over ${bounds} bounds`).to.be.within(
      1,
      bounds + 1,
    );
    expect(await calls(raw, 'pexpire'), `PEXPIREs of 80 batches over ${bounds} bounds`).to.be.within(1, bounds + 1);
    await store.close();
  });

  it("a log of a high limit is trimmed in steps of 256 events at the limit's pace, not a quarter of its window at once", async () => {
    // L = 5,120 per 400 ms: a step of 256 events at that pace is 20 ms (a quarter: 100 ms)
    const store = new RedisStore({ redis: client, prefix: 'exp7:', holds: NO_SYNC });
    const buckets = logBucket('peer:g', 5_120, 400);
    const key = 'exp7:peer:g:log';
    const admitted: number[] = [];
    for (let i = 0; i < 150; i++) {
      await sleep(4);
      const r = await store.admit({ tag: 'in', buckets });
      expect(r.admitted, `call ${i}`).to.equal(true);
      admitted.push(r.now);
      // kept: the window (400 ms) and at most one step (20 ms) more, once a window has passed
      if (r.now - admitted[0]! < 500 * MS) continue;
      const kept = await raw.zcard(key);
      const inStep = admitted.filter((t) => t > r.now - 420 * MS - 1).length;
      expect(kept, `events held after call ${i}`).to.be.at.most(inStep);
    }
    await store.close();
  });

  it('two processes whose limits give one log different trim steps: the expiry one sets outlasts what the other skips', async () => {
    // r = 1 s. Coarse: L = 10, a step of 250 ms. Fine: L = 100,000, a step of 2.56 ms. The fine
    // process sets the expiry last; the coarse one then writes for a quarter window without a
    // PEXPIRE (its trims remove nothing): the log must still hold each event for its window.
    const coarse = new RedisStore({ redis: client, prefix: 'exp8:', holds: NO_SYNC });
    const fine = new RedisStore({ redis: client, prefix: 'exp8:', holds: NO_SYNC });
    const key = 'exp8:peer:h:log';
    const expiryUs = async () => {
      const [[, pttl], [, time]] = (await raw.multi().pttl(key).time().exec()) as [[null, number], [null, string[]]];
      return Number(time[0]) * 1e6 + Number(time[1]) + pttl * 1000;
    };
    // (each process keeps its plan's buckets: what it knows of a log is per bucket)
    const coarseBuckets = logBucket('peer:h', 10, 1_000);
    try {
      await coarse.admit({ tag: 'in', buckets: coarseBuckets });
      await sleep(5);
      await fine.admit({ tag: 'in', buckets: logBucket('peer:h', 100_000, 1_000) });
      await sleep(1_000);
      for (let i = 0; i < 6; i++) {
        const r = await coarse.admit({ tag: 'in', buckets: coarseBuckets });
        expect(r.admitted, `call ${i}`).to.equal(true);
        // (PTTL is in whole ms: 1 ms of rounding)
        expect(await expiryUs(), `the log's end after call ${i}`).to.be.at.least(r.now + 1_000 * MS - MS);
        await sleep(50);
      }
    } finally {
      await coarse.close();
      await fine.close();
    }
  });

  it("the global level's log, named by every peer's plan: one trim per move of its bound, not one per plan", async () => {
    // r = 4,000 s: the bound does not move during this test; two peers' plans share the global bucket's limits
    const limits = Object.freeze([
      Object.freeze({ limit: 10, windowUs: 4_000_000 * MS, algorithm: 'sliding-log' as const }),
    ]);
    const planOf = (peer: string): readonly Bucket[] => [
      { name: 'global', limits },
      { name: peer, limits: Object.freeze([{ limit: 10, windowUs: 1_000 * MS, algorithm: 'sliding-log' as const }]) },
    ];
    const plans = [planOf('peer:x'), planOf('peer:y')];
    // loneUpTo 1: the batch of two below goes to admit.lua, whose writes this test checks (it
    // would otherwise go to admit-lone-run.lua)
    const store = new RedisStore({ redis: client, prefix: 'exp9:', holds: NO_SYNC, loneUpTo: 1 });
    const monitor = await raw.monitor();
    const trims: string[] = [];
    monitor.on('monitor', (_time: string, args: string[]) => {
      if (args[0]?.toLowerCase() === 'zremrangebyscore') trims.push(args[1]!);
    });
    try {
      for (let i = 0; i < 4; i++)
        expect((await store.admit({ tag: 'in', buckets: plans[i % 2]! })).admitted).to.equal(true);
      await sleep(50); // the monitor's last lines
      expect(
        trims.filter((k) => k === 'exp9:global:log'),
        'trims of the global log',
      ).to.have.length(1);
      expect(trims.filter((k) => k !== 'exp9:global:log').sort(), "each peer's own log once").to.deep.equal([
        'exp9:peer:x:log',
        'exp9:peer:y:log',
      ]);
      // a reload (configChanged) forgets it, even for limits that are the same objects again (A,
      // B, then A: another process may have set the log's expiry for B meanwhile). A batch sets
      // each log's expiry when that log is unknown (admit.lua): the two new plans' peer logs,
      // and the global log only if it was forgotten.
      const pexpires = await calls(raw, 'pexpire');
      store.configChanged();
      const batch = await Promise.all(
        ['peer:x', 'peer:y'].map((peer) => store.admit({ tag: 'in', buckets: planOf(peer) })),
      );
      expect(batch.map((r) => r.admitted)).to.deep.equal([true, true]);
      expect(batch[0]!.now, 'one batch').to.equal(batch[1]!.now);
      expect(await calls(raw, 'pexpire'), 'the global log and both peer logs get their expiry again').to.equal(
        pexpires + 3,
      );
    } finally {
      monitor.disconnect();
      await store.close();
    }
  });

  it('two processes writing one log in turn: each trims it once per move of the bound at most, and it stays bounded', async () => {
    const stores = [
      new RedisStore({ redis: client, prefix: 'exp4:', holds: NO_SYNC }),
      new RedisStore({ redis: client, prefix: 'exp4:', holds: NO_SYNC }),
    ];
    const buckets = logBucket('peer:d', 200, 400); // r = 400 ms, the bound moves every 100 ms
    const key = 'exp4:peer:d:log';
    for (const store of stores) await store.admit({ tag: 'in', buckets });
    await raw.config('RESETSTAT');
    const admitted: number[] = [];
    for (let i = 0; i < 60; i++) {
      await sleep(20);
      const r = await stores[i % 2]!.admit({ tag: 'in', buckets });
      expect(r.admitted, `call ${i}`).to.equal(true);
      admitted.push(r.now);
      expect(await raw.pttl(key), `pttl after call ${i}`).to.be.at.least(400);
      const recent = admitted.filter((t) => t > r.now - 500 * MS - MS).length + 2; // + the first two calls
      expect(await raw.zcard(key), `events held after call ${i}`).to.be.at.most(recent);
    }
    // 1.2 s: ~12 moves of the bound, each seen by both processes
    const bounds = boundsOf(admitted, 400 * MS, 200);
    expect(await calls(raw, 'zremrangebyscore'), `trims of 60 lone admits over ${bounds} bounds`).to.be.within(
      2,
      2 * (bounds + 1),
    );
    for (const store of stores) await store.close();
  });

  it("the process computes a trim's bound exactly as Lua does (so it can tell the script a trim would remove nothing)", async () => {
    // lua/includes/log.lua (logWrite): e = min(floor(r / 4), floor(r * 256 / L)) + 1; b = t - r; b = b - b % e
    const lua = `local out = {}
      for i = 1, #ARGV, 3 do
        local t, r, L = tonumber(ARGV[i]), tonumber(ARGV[i + 1]), tonumber(ARGV[i + 2])
        local e = math.floor(r / 4) + 1
        local byPace = math.floor(r * 256 / L) + 1
        if byPace < e then
          e = byPace
        end
        local b = t - r
        out[#out + 1] = string.format('%d', b - b % e)
      end
      return out`;
    let seed = 11;
    const rand = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;
    const cases: [number, number, number][] = [
      [2 ** 52, 1, 1],
      [2 ** 53 - 2, 2 ** 40, 7],
      [1_795_529_616_377_442, 250_001, 3],
      [1_795_529_616_377_442, 10_000_000, 100_000],
      [1_795_529_616_377_442, 1_000_000, 0],
    ];
    for (let i = 0; i < 3_000; i++) {
      const r = Math.max(1, Math.floor(rand() ** 4 * 86_400_000_000)); // 1 µs to a day, mostly small
      const t = 1_700_000_000_000_000 + Math.floor(rand() * 2 ** 40) + r;
      const L = Math.floor(rand() ** 3 * 2_000_000); // 0 to 2 M, mostly small
      cases.push([t, r, L]);
    }
    const got = (await raw.eval(lua, 0, ...cases.flatMap((c) => c.map(String)))) as string[];
    cases.forEach(([t, r, L], i) => {
      expect(String(trimBound(t, r, L)), `t ${t}, r ${r}, L ${L}`).to.equal(got[i]);
    });
  });

  it('a lost connection (a failover, a restart) makes the process forget what it knew: the next admit trims and sets the expiry again', async () => {
    const own = newRedisClient(server);
    const store = new RedisStore({ redis: own, prefix: 'exp6:', holds: NO_SYNC });
    try {
      // r = 4,000 s: the trim's bound moves every 1,000 s, so not during this test
      const buckets = logBucket('peer:f', 10, 4_000_000);
      const trims = () => calls(raw, 'zremrangebyscore');
      const pexpires = () => calls(raw, 'pexpire');
      await store.admit({ tag: 'in', buckets });
      const [t0, p0] = [await trims(), await pexpires()];
      await store.admit({ tag: 'in', buckets });
      expect([await trims(), await pexpires()], 'known: no trim, no PEXPIRE').to.deep.equal([t0, p0]);
      // the server drops the store's connection; ioredis reconnects
      const id = await own.client('ID');
      const back = new Promise((resolve) => own.once('close', () => own.once('ready', resolve)));
      await raw.client('KILL', 'ID', String(id));
      await back;
      await store.admit({ tag: 'in', buckets });
      expect([await trims(), await pexpires()], 'after the connection was lost: a trim and a PEXPIRE').to.deep.equal([
        t0 + 1,
        p0 + 1,
      ]);
      await store.admit({ tag: 'in', buckets });
      expect([await trims(), await pexpires()], 'known again').to.deep.equal([t0 + 1, p0 + 1]);
    } finally {
      await store.close();
      own.disconnect(); // its own client: a failed expect must not leave it reconnecting
    }
  });

  it('an idle log expires, and the next call (nothing in its window) sets the expiry again', async () => {
    const store = new RedisStore({ redis: client, prefix: 'exp2:', holds: NO_SYNC });
    const buckets = logBucket('peer:b', 10, 100); // r = 100 ms: kept ~227 ms
    const key = 'exp2:peer:b:log';
    await store.admit({ tag: 'in', buckets });
    await store.admit({ tag: 'in', buckets });
    await sleep(ttlMsOf(100 * MS) + 50);
    expect(await raw.exists(key), 'expired').to.equal(0);
    // this process knows the expiry: only "new log" sets it
    let admitted = false;
    const [pttl, took] = await pttlAfter(raw, key, async () => {
      admitted = (await store.admit({ tag: 'in', buckets })).admitted;
    });
    expect(admitted).to.equal(true);
    expect(pttl).to.be.within(ttlMsOf(100 * MS) - took, ttlMsOf(100 * MS));
    await store.close();
  });

  it('a reload that widens the window: the first lone admit with the new limits sets the expiry for them, in each process', async () => {
    const first = new RedisStore({ redis: client, prefix: 'exp3:', holds: NO_SYNC });
    const second = new RedisStore({ redis: client, prefix: 'exp3:', holds: NO_SYNC });
    const key = 'exp3:peer:c:log';
    const narrow = logBucket('peer:c', 100, 200);
    for (const store of [first, second]) await store.admit({ tag: 'in', buckets: narrow });
    await sleep(10);
    for (const store of [first, second]) await store.admit({ tag: 'in', buckets: narrow });
    expect(await raw.pttl(key)).to.be.at.most(ttlMsOf(200 * MS));
    // reloaded: the same bucket with a 20 s window (new objects, as a reload builds them); the
    // log holds events within 1 ms and far from r + r/4, so its trim removes nothing
    const wide = logBucket('peer:c', 100, 20_000);
    expect((await first.admit({ tag: 'in', buckets: wide })).admitted).to.equal(true);
    expect(await raw.pttl(key), 'after the first process').to.be.above(ttlMsOf(20_000 * MS) - 1_000);
    // the other process: the log was set for the new limits already, but this one does not know
    await raw.pexpire(key, 5_000);
    expect((await second.admit({ tag: 'in', buckets: wide })).admitted).to.equal(true);
    expect(await raw.pttl(key), 'after the second process').to.be.above(ttlMsOf(20_000 * MS) - 1_000);
    // and then both know: a further lone admit leaves the expiry as it is (nothing removed, log not new)
    await raw.pexpire(key, 30_000);
    for (const store of [first, second])
      expect((await store.admit({ tag: 'in', buckets: wide })).admitted).to.equal(true);
    expect(await raw.pttl(key), 'no PEXPIRE once known').to.be.within(29_000, 30_000);
    await first.close();
    await second.close();
  });

  it('lone and batched admits decide exactly as the memory store at the same times: three levels x two windows near their limits, one batch that fills each level then bursts of 1 to 4 calls at irregular times, 600 calls: every decision and retry-after equal', async () => {
    const { MemoryStore } = await import('../src/store/memory-store.js');
    const lim = (limit: number, windowMs: number) =>
      Object.freeze({ limit, windowUs: windowMs * MS, algorithm: 'sliding-log' as const });
    const level = (name: string, a: number, b: number) =>
      Object.freeze({ name, limits: Object.freeze([lim(a, 40), lim(b, 200)]) });
    // two accounts of two peers each; each level's 40 ms limit is below the sum of those under it
    const platform = level('g', 5, 15);
    const accounts = [level('acct:0', 3, 9), level('acct:1', 3, 9)];
    const peers = [0, 1, 2, 3].map((i) => level(`peer:${i}`, 2, 5));
    const listOf = (p: number) => Object.freeze([platform, accounts[p % 2]!, peers[p]!]);
    const store = new RedisStore({ redis: client, prefix: 'exact:', holds: NO_SYNC });
    const memory = new MemoryStore();
    let seed = 7;
    const rand = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;
    let admitted = 0;
    let batched = 0;
    const levels = new Set<number>();
    // first one batch (one script call, one Redis time) that fills each level in turn: the third
    // call of peer 0 is refused by its peer, the second of peer 2 by their account, peer 3's
    // calls by the platform; then bursts of random peers at irregular times
    const first = [0, 0, 0, 2, 2, 1, 1, 3, 3];
    for (let i = 0; i < 600; ) {
      if (i > 0 && rand() < 0.5) await sleep(Math.floor(rand() * 6));
      // a burst: issued in one tick, so the store sends it as one script call (one Redis time)
      const burst = i === 0 ? first.length : rand() < 0.5 ? 1 : 2 + Math.floor(rand() * 3);
      const lists = Array.from({ length: burst }, (_, j) => listOf(i === 0 ? first[j]! : Math.floor(rand() * 4)));
      const results = await Promise.all(lists.map((buckets) => store.admit({ tag: 'in', buckets })));
      if (burst > 1) batched += burst;
      for (let j = 0; j < burst; j++) {
        const live = results[j]!;
        const ref = await memory.admit({ tag: 'in', buckets: lists[j]!, now: live.now });
        expect(
          { admitted: live.admitted, limitedBy: live.limitedBy, retryAfterUs: live.retryAfterUs },
          `call ${i + j} at ${live.now}`,
        ).to.deep.equal({ admitted: ref.admitted, limitedBy: ref.limitedBy, retryAfterUs: ref.retryAfterUs });
        if (live.admitted) admitted++;
        else if (i === 0) levels.add(live.limitedBy);
      }
      i += burst;
    }
    // both outcomes, refusals at every level, and batches were exercised
    expect(admitted).to.be.above(20);
    expect([...levels].sort(), 'levels refused in the first batch').to.deep.equal([0, 1, 2]);
    expect(batched).to.be.above(200);
    await store.close();
  });
});
