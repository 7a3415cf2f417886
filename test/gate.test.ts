/**
 * CallGate as a whole: events (and listeners that throw), reload and watch (counts survive, a
 * bad configuration is refused), the clocks, and the cost of a decision on Redis (one round
 * trip whatever the number of levels and windows).
 */
import { expect } from 'chai';
import { mkdirSync, mkdtempSync, renameSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Redis } from 'ioredis';
import type { AdmissionDecision } from '../src/admission/admission.js';
import { systemClockUs, VirtualClock } from '../src/clock.js';
import { ConfigError, type CallGateConfigInput, type ConfigChange } from '../src/config/index.js';
import { CallGate } from '../src/gate.js';
import { MemoryStore } from '../src/store/memory-store.js';
import { RedisStore } from '../src/store/redis/redis-store.js';
import { scripts } from '../src/store/redis/scripts.js';
import { newRedisClient } from './helpers/redis.js';
import { runNode } from './helpers/run.js';
import { orAfter } from './helpers/wait.js';
import { forEachStore, S, T0, uniquePrefix, type StoreKind } from './admission/stores.js';

const outcome = (d: AdmissionDecision): string => (d.admitted ? 'A' : d.limitedBy!);
const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** Resolves with the first event's arguments, rejects after `ms`. */
function nextEvent<T extends unknown[]>(gate: CallGate, event: 'reloaded' | 'error', ms: number): Promise<T> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      gate.off(event, handler);
      reject(new Error(`no '${event}' event within ${ms} ms`));
    }, ms);
    const handler = (...args: unknown[]) => {
      clearTimeout(timer);
      gate.off(event, handler);
      resolve(args as T);
    };
    gate.on(event, handler);
  });
}

describe('CallGate events', () => {
  const config: CallGateConfigInput = { inbound: { peers: { p: [{ limit: 1, window: 'PT1S' }] } } };

  it('emits admitted and rejected with the decision', async () => {
    const gate = await CallGate.create({ config, clock: new VirtualClock(T0) });
    const admitted: AdmissionDecision[] = [];
    const rejected: AdmissionDecision[] = [];
    gate.on('admitted', (d) => admitted.push(d));
    gate.on('rejected', (d) => d.direction === 'in' && rejected.push(d));
    const a = await gate.admit({ callId: 'a', peer: 'p' });
    const b = await gate.admit({ callId: 'b', peer: 'p' });
    const c = await gate.admit({ callId: 'c', peer: 'nobody' });
    const r = await gate.record({ callId: 'r', peer: 'p' });
    expect(admitted).to.deep.equal([a, r]);
    expect(rejected).to.deep.equal([b, c]);
    expect(rejected.map((d) => d.limitedBy)).to.deep.equal(['peer:p', 'unknown-peer']);
    await gate.close();
  });

  it("every admitted and rejected payload says its direction: 'in' for inbound, 'out' for outbound", async () => {
    const gate = await CallGate.create({
      config: { ...config, outbound: { carriers: { c1: { cps: 1 } } } },
      clock: new VirtualClock(T0),
    });
    const seen: string[] = [];
    // narrowing by `direction` type-checks: the fields of each side are reachable
    gate.on('rejected', (d) => seen.push(d.direction === 'in' ? `in:${d.limitedBy}` : `out:${d.reason}`));
    gate.on('admitted', (d) => seen.push(`${d.direction}:admitted`));
    await gate.admit({ callId: 'a', peer: 'p' });
    await gate.admit({ callId: 'b', peer: 'p' });
    await gate.admit({ callId: 'u', peer: 'nobody' });
    await gate.reserve({ callId: 'o1', route: ['c1'] });
    await gate.dispatch({ callId: 'o2', route: ['nope'] });
    expect(seen).to.deep.equal(['in:admitted', 'in:peer:p', 'in:unknown-peer', 'out:all-routes-congested']);
    expect((await gate.admit({ callId: 'z', peer: 'p' })).direction).to.equal('in');
    await gate.close();
  });

  it('a listener that throws does not break admission: the decision is returned, error is emitted', async () => {
    const gate = await CallGate.create({ config, clock: new VirtualClock(T0) });
    const errors: Error[] = [];
    const seen: string[] = [];
    gate.on('admitted', () => {
      throw new Error('boom in admitted');
    });
    gate.on('admitted', (d) => seen.push(d.callId)); // a later listener still runs
    gate.on('rejected', () => {
      throw 'not even an Error';
    });
    gate.on('error', (e) => errors.push(e));
    const a = await gate.admit({ callId: 'a', peer: 'p' });
    const b = await gate.admit({ callId: 'b', peer: 'p' });
    expect(outcome(a)).to.equal('A');
    expect(outcome(b)).to.equal('peer:p');
    expect(seen).to.deep.equal(['a']);
    expect(errors.map((e) => e.message)).to.deep.equal(['boom in admitted', 'not even an Error']);
    expect(errors.every((e) => e instanceof Error)).to.equal(true);
    await gate.close();
  });

  it('an error listener that throws, or no error listener at all, breaks nothing either', async () => {
    const gate = await CallGate.create({ config, clock: new VirtualClock(T0) });
    gate.on('admitted', () => {
      throw new Error('boom');
    });
    expect(outcome(await gate.admit({ callId: 'a', peer: 'p' }))).to.equal('A'); // no error listener
    gate.on('error', () => {
      throw new Error('error listener fails too');
    });
    gate.on('rejected', () => {
      throw new Error('boom');
    });
    expect(outcome(await gate.admit({ callId: 'b', peer: 'p' }))).to.equal('peer:p');
    await gate.close();
  });

  it('a listener whose promise rejects is handled as one that throws: on error, never an unhandled rejection', async () => {
    const unhandled: unknown[] = [];
    const onUnhandled = (reason: unknown) => unhandled.push(reason);
    process.on('unhandledRejection', onUnhandled);
    const gate = await CallGate.create({ config, clock: new VirtualClock(T0) });
    try {
      const seen: string[] = [];
      gate.on('admitted', async () => {
        throw new Error('async boom in admitted');
      });
      gate.on('admitted', (d) => seen.push(d.callId)); // a later listener still runs
      gate.on('rejected', () => Promise.reject('not even an Error'));
      const errors: Error[] = [];
      const twoErrors = new Promise<void>((resolve) =>
        gate.on('error', (e) => {
          errors.push(e);
          if (errors.length === 2) resolve();
        }),
      );
      // an 'error' listener whose promise rejects is dropped, as one that throws is
      gate.on('error', async () => {
        throw new Error('error listener fails too');
      });
      expect(outcome(await gate.admit({ callId: 'a', peer: 'p' }))).to.equal('A');
      expect(outcome(await gate.admit({ callId: 'b', peer: 'p' }))).to.equal('peer:p');
      expect(seen).to.deep.equal(['a']);
      await orAfter(twoErrors, 5_000, undefined);
      expect(errors.map((e) => e.message)).to.deep.equal(['async boom in admitted', 'not even an Error']);
      expect(errors.every((e) => e instanceof Error)).to.equal(true);
      // Node reports an unhandled rejection once the microtasks of the turn have run
      await new Promise<void>((resolve) => setImmediate(resolve));
      expect(unhandled).to.deep.equal([]);
    } finally {
      process.off('unhandledRejection', onUnhandled);
      await gate.close();
    }
  });

  it('emits reloaded with the diff', async () => {
    const gate = await CallGate.create({ config, clock: new VirtualClock(T0) });
    const events: ConfigChange[][] = [];
    gate.on('reloaded', (c) => events.push(c));
    const changes = await gate.reload({
      inbound: { global: [{ limit: 9, window: 'PT1S' }], peers: { p: [{ limit: 2, window: 'PT1S' }], 'q r': [] } },
    });
    const expected = [
      { path: 'inbound.global', kind: 'added', section: 'global' },
      { path: 'inbound.peers.p', kind: 'changed', section: 'peer', id: 'p' },
      { path: 'inbound.peers["q r"]', kind: 'added', section: 'peer', id: 'q r' },
    ];
    expect(changes).to.deep.equal(expected);
    expect(events).to.deep.equal([expected]);
    await gate.reload({ inbound: { peers: { p: [{ limit: 2, window: 'PT1S' }] } } });
    expect(events[1]).to.deep.equal([
      { path: 'inbound.global', kind: 'removed', section: 'global' },
      { path: 'inbound.peers["q r"]', kind: 'removed', section: 'peer', id: 'q r' },
    ]);
    await gate.close();
  });
});

forEachStore('CallGate reload', (kind: () => StoreKind) => {
  let gate: CallGate;
  let n = 0;
  const admit = (peer: string, at: number) => gate.admit({ callId: `c${n++}`, peer, at }).then(outcome);
  afterEach(() => gate?.close());

  it('counts survive a reload and new limits apply from the next call', async () => {
    gate = await CallGate.create({
      store: kind().make(),
      config: { inbound: { peers: { p: [{ limit: 3, window: 'PT1S' }] } } },
    });
    expect([await admit('p', T0), await admit('p', T0 + 1)]).to.deep.equal(['A', 'A']);
    await gate.reload({ inbound: { peers: { p: [{ limit: 3, window: 'PT1S' }], q: [] } } }); // p unchanged
    expect([await admit('p', T0 + 2), await admit('p', T0 + 3)]).to.deep.equal(['A', 'peer:p']); // 2 before + 1 after
    await gate.reload({ inbound: { peers: { p: [{ limit: 2, window: 'PT1S' }] } } }); // tighter
    expect(await admit('p', T0 + 4)).to.equal('peer:p');
    await gate.reload({ inbound: { peers: { p: [{ limit: 5, window: 'PT1S' }] } } }); // looser
    expect([await admit('p', T0 + 5), await admit('p', T0 + 6), await admit('p', T0 + 7)]).to.deep.equal([
      'A',
      'A',
      'peer:p',
    ]);
    // a wider window sees the calls admitted under the old configuration
    await gate.reload({ inbound: { peers: { p: [{ limit: 6, window: 'PT10S' }] } } });
    expect([await admit('p', T0 + 2 * S), await admit('p', T0 + 2 * S + 1)]).to.deep.equal(['A', 'peer:p']);
    // a level added by reload starts from what it has recorded (nothing yet)
    await gate.reload({
      inbound: { global: [{ limit: 1, window: 'PT1S' }], peers: { p: [{ limit: 100, window: 'PT10S' }] } },
    });
    expect([await admit('p', T0 + 2 * S + 2), await admit('p', T0 + 2 * S + 3)]).to.deep.equal(['A', 'global']);
  });

  it('a bad configuration is refused with every problem listed, and the old one stays in force', async () => {
    gate = await CallGate.create({
      store: kind().make(),
      config: { inbound: { peers: { p: [{ limit: 1, window: 'PT1S' }] } } },
    });
    const before = gate.config;
    const reloaded: unknown[] = [];
    gate.on('reloaded', (c) => reloaded.push(c));
    let err: unknown;
    try {
      await gate.reload({
        inbound: { peers: { p: [{ limit: -1, window: 'abc' }], q: [{ limit: 2 } as never] }, bogus: 1 } as never,
      });
    } catch (e) {
      err = e;
    }
    expect(err).to.be.instanceOf(ConfigError);
    const problems = (err as ConfigError).problems;
    expect(problems.length).to.be.at.least(3);
    expect(problems.some((p) => p.startsWith('inbound.peers.p[0].limit'))).to.equal(true);
    expect(problems.some((p) => p.startsWith('inbound.peers.p[0].window'))).to.equal(true);
    expect(problems.some((p) => p.startsWith('inbound.peers.q[0].window'))).to.equal(true);
    expect(gate.config).to.equal(before);
    expect(reloaded).to.have.length(0);
    expect([await admit('p', T0), await admit('p', T0 + 1), await admit('q', T0 + 2)]).to.deep.equal([
      'A',
      'peer:p',
      'unknown-peer',
    ]);
    // a missing file, too
    let err2: unknown;
    try {
      await gate.reload('/nonexistent/callgate-limits.json');
    } catch (e) {
      err2 = e;
    }
    expect(err2).to.be.instanceOf(ConfigError);
    expect(gate.config).to.equal(before);
  });
});

describe('CallGate: a configuration object with Maps', () => {
  it('is validated like any other: a bad one refused, a good one applied, on create and reload', async () => {
    // peers as a Map was taken for a parsed configuration: never validated, every call then failed
    let err: unknown;
    try {
      await CallGate.create({
        config: { inbound: { peers: new Map([['p', [{ limit: 0, window: 'nonsense' }]]]) } } as never,
      });
    } catch (e) {
      err = e;
    }
    expect(err).to.be.instanceOf(ConfigError);
    expect((err as ConfigError).problems.some((p) => p.startsWith('inbound.peers.p[0]'))).to.equal(true);
    const gate = await CallGate.create({
      config: { inbound: { peers: new Map([['p', [{ limit: 1, window: 'PT1S' }]]]) } },
    });
    try {
      const decide = async (id: string, at: number) => (await gate.admit({ callId: id, peer: 'p', at })).admitted;
      expect([await decide('m1', T0), await decide('m2', T0 + 1)]).to.deep.equal([true, false]);
      const changes = await gate.reload({
        inbound: { peers: new Map([['p', [{ limit: 2, window: 'PT1S' }]]]) },
        outbound: { carriers: new Map([['c', { cps: 5 }]]) },
      });
      expect(changes.map((c) => c.path)).to.deep.equal(['inbound.peers.p', 'outbound.carriers.c']);
      expect(await decide('m3', T0 + 2 * S)).to.equal(true);
      // a parsed configuration is still taken as it is
      await gate.reload(gate.config);
    } finally {
      await gate.close();
    }
  });
});

describe('CallGate watch(path)', function () {
  this.timeout(15_000);
  let dir: string;
  let gate: CallGate | undefined;
  beforeEach(() => {
    dir = mkdtempSync(path.join(os.tmpdir(), 'callgate-watch-'));
  });
  afterEach(async () => {
    await gate?.close();
    gate = undefined;
    rmSync(dir, { recursive: true, force: true });
  });
  const limits = (limit: number) => JSON.stringify({ inbound: { peers: { p: [{ limit, window: 'PT1S' }] } } });
  let n = 0;
  const admitted = async (g: CallGate, calls: number, at: number) => {
    let k = 0;
    for (let i = 0; i < calls; i++) if ((await g.admit({ callId: `w${n++}`, peer: 'p', at: at + i })).admitted) k++;
    return k;
  };

  it('writing a new file applies it; a broken file emits error and keeps the old config', async () => {
    const file = path.join(dir, 'limits.json');
    writeFileSync(file, limits(1));
    gate = await CallGate.create({ config: file });
    gate.watch(file, 50);
    expect(await admitted(gate, 3, T0)).to.equal(1);

    let reloaded = nextEvent<[ConfigChange[]]>(gate, 'reloaded', 3_000);
    writeFileSync(file, limits(3));
    const [changes] = await reloaded;
    expect(changes).to.deep.equal([{ path: 'inbound.peers.p', kind: 'changed', section: 'peer', id: 'p' }]);
    expect(await admitted(gate, 5, T0 + 10 * S)).to.equal(3);

    const errored = nextEvent<[Error]>(gate, 'error', 3_000);
    writeFileSync(file, '{"inbound": {"peers": {"p": [{"limit": 0, "window": "PT1S"}]');
    const [err] = await errored;
    expect(err).to.be.instanceOf(ConfigError);
    expect(err.message).to.include(file);
    expect(await admitted(gate, 5, T0 + 20 * S)).to.equal(3); // old (3/s) still in force

    // and it keeps watching: a good file afterwards applies
    reloaded = nextEvent<[ConfigChange[]]>(gate, 'reloaded', 3_000);
    writeFileSync(file, limits(2));
    await reloaded;
    expect(await admitted(gate, 5, T0 + 30 * S)).to.equal(2);
  });

  it('a file replaced by rename (how editors and config maps write) is still watched', async () => {
    const file = path.join(dir, 'limits.json');
    writeFileSync(file, limits(1));
    gate = await CallGate.create({ config: file });
    gate.watch(file, 50);
    for (const [i, limit] of [4, 2].entries()) {
      const reloaded = nextEvent<[ConfigChange[]]>(gate, 'reloaded', 3_000);
      const tmp = path.join(dir, `.limits.json.tmp${i}`);
      writeFileSync(tmp, limits(limit));
      renameSync(tmp, file);
      await reloaded;
      expect(await admitted(gate, 6, T0 + (i + 1) * 10 * S)).to.equal(limit);
    }
  });

  it('a file deleted and written again does not crash the process and is picked up', async () => {
    const file = path.join(dir, 'limits.json');
    writeFileSync(file, limits(1));
    gate = await CallGate.create({ config: file });
    gate.watch(file, 50);
    const errors: Error[] = [];
    gate.on('error', (e) => errors.push(e));
    rmSync(file);
    await sleep(300);
    const reloaded = nextEvent<[ConfigChange[]]>(gate, 'reloaded', 3_000);
    writeFileSync(file, limits(2));
    await reloaded;
    expect(await admitted(gate, 4, T0)).to.equal(2);
  });
});

describe('CallGate.watch: a link to a file in another directory', () => {
  let dir: string;
  let gate: CallGate | undefined;
  beforeEach(() => {
    dir = mkdtempSync(path.join(os.tmpdir(), 'callgate-watch-link-'));
  });
  afterEach(async () => {
    await gate?.close();
    gate = undefined;
    rmSync(dir, { recursive: true, force: true });
  });

  it('an edit of the file the link points to applies; so does one after the link points elsewhere', async () => {
    const limits = (n: number) => JSON.stringify({ inbound: { peers: { p: [{ limit: n, window: 'PT1S' }] } } });
    for (const d of ['etc', 'real', 'other']) mkdirSync(path.join(dir, d));
    const [link, real, other] = [
      path.join(dir, 'etc', 'limits.json'),
      path.join(dir, 'real', 'limits.json'),
      path.join(dir, 'other', 'l.json'),
    ];
    writeFileSync(real, limits(1));
    writeFileSync(other, limits(5));
    symlinkSync(real, link);
    gate = await CallGate.create({ config: link });
    gate.watch(link, 50);
    let reloaded = nextEvent<[ConfigChange[]]>(gate, 'reloaded', 3_000);
    writeFileSync(real, limits(3));
    await reloaded;
    expect(gate.config.inbound.peers.get('p')!.limits[0]!.limit).to.equal(3);
    // the link now names another file, elsewhere: its edits count, the old target's do not
    reloaded = nextEvent<[ConfigChange[]]>(gate, 'reloaded', 3_000);
    const tmp = path.join(dir, 'etc', '.tmp-link');
    symlinkSync(other, tmp);
    renameSync(tmp, link);
    await reloaded;
    expect(gate.config.inbound.peers.get('p')!.limits[0]!.limit).to.equal(5);
    reloaded = nextEvent<[ConfigChange[]]>(gate, 'reloaded', 3_000);
    writeFileSync(other, limits(7));
    await reloaded;
    expect(gate.config.inbound.peers.get('p')!.limits[0]!.limit).to.equal(7);
  });
});

describe('CallGate clocks', () => {
  it('memory store, live: the process clock', async () => {
    const gate = await CallGate.create({ config: { inbound: { defaultPeer: [] } } });
    const before = systemClockUs();
    const d = await gate.admit({ callId: 'a', peer: 'p' });
    const after = systemClockUs();
    expect(d.at).to.be.within(before, after);
    await gate.close();
  });

  it('injected VirtualClock: its time, and windows move only when it does', async () => {
    const clock = new VirtualClock(T0);
    const gate = await CallGate.create({ config: { inbound: { defaultPeer: [{ limit: 1, window: 'PT1S' }] } }, clock });
    const a = await gate.admit({ callId: 'a', peer: 'p' });
    expect(a).to.include({ admitted: true, at: T0 });
    clock.advance(T0 + S - 1);
    const b = await gate.admit({ callId: 'b', peer: 'p' });
    expect(b).to.include({ admitted: false, at: T0 + S - 1 });
    clock.advance(T0 + S);
    expect(await gate.admit({ callId: 'c', peer: 'p' })).to.include({ admitted: true, at: T0 + S });
    expect((await gate.record({ callId: 'r', peer: 'p' })).at).to.equal(T0 + S);
    expect(await gate.admit({ callId: 'u', peer: 'nobody', account: 'x' })).to.include({ admitted: true, at: T0 + S });
    // an explicit `at` wins over the clock
    expect((await gate.admit({ callId: 'd', peer: 'q', at: T0 + 5 * S })).at).to.equal(T0 + 5 * S);
    await gate.close();
  });

  describe('on Redis', function () {
    this.timeout(20_000);
    let client: Redis;
    let stopRedis: () => Promise<void>;
    before(async () => {
      const { getRedis } = await import('./helpers/redis.js');
      const handle = await getRedis();
      stopRedis = () => handle.stop();
      client = newRedisClient(handle);
    });
    after(async () => {
      client?.disconnect();
      await stopRedis?.();
    });

    const redisTimeUs = async (): Promise<number> => {
      const [s, us] = await client.time();
      return Number(s) * 1e6 + Number(us);
    };

    it('live (no clock, no at): the decision time is Redis TIME', async () => {
      const gate = await CallGate.create({
        config: { inbound: { global: [{ limit: 1000, window: 'PT1S' }], defaultPeer: [{ limit: 2, window: 'PT1S' }] } },
        store: new RedisStore({ redis: client, prefix: uniquePrefix('clock') }),
      });
      for (let i = 0; i < 3; i++) {
        const before = await redisTimeUs();
        const d = await gate.admit({ callId: `a${i}`, peer: 'p' });
        const after = await redisTimeUs();
        expect(d.at).to.be.within(before, after);
        expect(Math.abs(d.at - Date.now() * 1000)).to.be.below(1_000_000); // same machine: close to the process clock
        expect(outcome(d)).to.equal(i < 2 ? 'A' : 'peer:p');
      }
      const before = await redisTimeUs();
      const r = await gate.record({ callId: 'r', peer: 'p' });
      expect(r.at).to.be.within(before, await redisTimeUs());
      await gate.close();
    });

    it('with a VirtualClock on Redis: the virtual time, not Redis TIME', async () => {
      const clock = new VirtualClock(T0);
      const gate = await CallGate.create({
        config: { inbound: { defaultPeer: [{ limit: 1, window: 'PT1S' }] } },
        store: new RedisStore({ redis: client, prefix: uniquePrefix('vclock') }),
        clock,
      });
      expect(await gate.admit({ callId: 'a', peer: 'p' })).to.include({ admitted: true, at: T0 });
      clock.advance(T0 + S - 1);
      expect(await gate.admit({ callId: 'b', peer: 'p' })).to.include({ admitted: false, at: T0 + S - 1 });
      clock.advance(T0 + S);
      expect(await gate.admit({ callId: 'c', peer: 'p' })).to.include({ admitted: true, at: T0 + S });
      await gate.close();
    });

    describe('one decision = one round trip to Redis', () => {
      const config: CallGateConfigInput = {
        inbound: {
          global: [
            { limit: 100, window: 'PT1S' },
            { limit: 1000, window: 'PT1M' },
          ],
          accounts: {
            acme: [
              { limit: 50, window: 'PT1S' },
              { limit: 500, window: 'PT1M', algorithm: 'fixed-window' },
            ],
          },
          peers: {
            p1: [
              { limit: 1, window: 'PT1S' },
              { limit: 100, window: 'PT1M', algorithm: 'sliding-window' },
            ],
          },
        },
      };

      const commandStats = async (): Promise<Map<string, number>> => {
        const info = await client.info('commandstats');
        const stats = new Map<string, number>();
        for (const m of info.matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)) stats.set(m[1]!, Number(m[2]));
        return stats;
      };

      it('3 levels × 2 windows: one EVALSHA per admit and per record (commandstats and MONITOR)', async () => {
        const storeClient = newRedisClient({ url: `redis://${client.options.host}:${client.options.port}` });
        const monitorClient = newRedisClient({ url: `redis://${client.options.host}:${client.options.port}` });
        const gate = await CallGate.create({
          config,
          store: new RedisStore({ redis: storeClient, prefix: uniquePrefix('rtt') }),
        });
        let mon: Redis | undefined;
        try {
          await gate.admit({ callId: 'warm', peer: 'p9', account: 'zzz' }); // unknown peer: no store call
          // ioredis sends a script's first call on a connection as EVAL (the source, one round
          // trip), then EVALSHA: warm both scripts up
          await gate.admit({ callId: 'warm', peer: 'p1', account: 'other' });
          await gate.record({ callId: 'warm', peer: 'p1', account: 'other' });
          await storeClient.ping();
          const source = `${(storeClient as unknown as { stream: { localAddress: string; localPort: number } }).stream.localAddress}:${
            (storeClient as unknown as { stream: { localPort: number } }).stream.localPort
          }`;
          mon = await monitorClient.monitor(); // a connection of its own
          const seen: { args: string[]; source: string }[] = [];
          mon.on('monitor', (_time: string, args: string[], src: string) => seen.push({ args, source: src }));
          await sleep(50);

          const s0 = await commandStats();
          const rounds: [string, () => Promise<AdmissionDecision>][] = [
            ['A', () => gate.admit({ callId: 'x1', peer: 'p1', account: 'acme', at: T0 })],
            ['peer:p1', () => gate.admit({ callId: 'x2', peer: 'p1', account: 'acme', at: T0 + 1 })],
            ['A', () => gate.record({ callId: 'x3', peer: 'p1', account: 'acme', at: T0 + 2 })],
          ];
          for (const [expected, decide] of rounds) {
            const fromStore = () => seen.filter((e) => e.source === source);
            const k = fromStore().length;
            expect(outcome(await decide())).to.equal(expected);
            await sleep(100);
            const cmds = fromStore()
              .slice(k)
              .map((e) => e.args[0]!.toLowerCase());
            expect(cmds, expected).to.deep.equal(['evalsha']);
          }
          const s1 = await commandStats();
          const delta = (cmd: string) => (s1.get(cmd) ?? 0) - (s0.get(cmd) ?? 0);
          expect(delta('evalsha')).to.equal(3);
          expect(delta('script|load') + delta('script')).to.equal(0);
          expect(delta('eval')).to.equal(0);
          // the script did the work inside Redis (commands run by Lua are counted there too)
          expect(delta('zcount') + delta('hmget')).to.be.at.least(6);
          // every key of the call was in that one EVALSHA: 3 buckets' logs + 2 window hashes
          const evalsha = seen.find((e) => e.source === source && e.args[0]!.toLowerCase() === 'evalsha')!;
          expect(Number(evalsha.args[2])).to.equal(5);
          expect(evalsha.args[1]).to.match(/^[0-9a-f]{40}$/);
          expect(scripts().admit.command).to.match(/^callgate_admit_/);

          // a fresh connection: its first decision is one command too (EVAL with the source)
          const fresh = newRedisClient({ url: `redis://${client.options.host}:${client.options.port}` });
          const gate2 = await CallGate.create({
            config,
            store: new RedisStore({ redis: fresh, prefix: uniquePrefix('rtt2') }),
          });
          await fresh.ping();
          const src2 = `${(fresh as unknown as { stream: { localAddress: string } }).stream.localAddress}:${
            (fresh as unknown as { stream: { localPort: number } }).stream.localPort
          }`;
          await sleep(50);
          const k = seen.length;
          expect(outcome(await gate2.admit({ callId: 'y', peer: 'p1', account: 'acme', at: T0 }))).to.equal('A');
          await sleep(100);
          expect(
            seen
              .slice(k)
              .filter((e) => e.source === src2)
              .map((e) => e.args[0]!.toLowerCase()),
          ).to.deep.equal(['eval']);
          await gate2.close();
          fresh.disconnect();
        } finally {
          mon?.disconnect();
          monitorClient.disconnect();
          await gate.close();
          storeClient.disconnect();
        }
      });
    });
  });
});

describe('CallGate default store and close', () => {
  it('defaults to a MemoryStore and closes cleanly', async () => {
    const gate = await CallGate.create({ config: { inbound: { defaultPeer: [] } } });
    expect(gate.store).to.be.instanceOf(MemoryStore);
    expect(gate.store.kind).to.equal('memory');
    await gate.close();
  });

  it('a script that ends with a draining close() on the memory store lives until its held calls are sent', async function () {
    this.timeout(60_000);
    // nothing but the gate keeps this process alive: the hold timers do not, and a memory store
    // has no socket (on Redis the connection did, until close() closes it)
    const script = `
      import { CallGate } from ${JSON.stringify(new URL('../src/index.ts', import.meta.url).href)};
      const gate = await CallGate.create({ config: { outbound: { carriers: { A: { cps: 5, maxWait: '2s' } } } } });
      const calls = ['o1', 'o2', 'o3'].map((callId) => gate.dispatch({ callId, route: ['A'] }, () => console.log('sent', callId)));
      await gate.close();
      console.log('closed', (await Promise.all(calls)).map((r) => r.outcome).join(' '));
    `;
    const run = await runNode(['--import', 'tsx', '--input-type=module', '-e', script], {
      cwd: fileURLToPath(new URL('..', import.meta.url)),
      timeoutMs: 30_000,
    });
    expect({ code: run.code, stdout: run.stdout, stderr: run.stderr }).to.deep.equal({
      code: 0,
      stdout: 'sent o1\nsent o2\nsent o3\nclosed dispatched dispatched dispatched\n',
      stderr: '',
    });
  });

  it('create() from a bad source throws ConfigError', async () => {
    let err: unknown;
    try {
      await CallGate.create({ config: { inbound: { peers: { p: [{ limit: 0, window: 'x' }] } } } });
    } catch (e) {
      err = e;
    }
    expect(err).to.be.instanceOf(ConfigError);
  });
});
