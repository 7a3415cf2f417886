/**
 * Attribute levels at scale: bounded on Redis (docs/attributes.md, "Memory": a scanner cycling
 * through 100,000 caller numbers against a level with maxValues leaves at most that many
 * buckets); a mixed trace through every feature and the abuse trace on a Redis Cluster, decided
 * as the reference model decides them.
 */
import { expect } from 'chai';
import { Redis } from 'ioredis';
import { parseConfig } from '../src/config/load.js';
import { CallGate } from '../src/gate.js';
import { VirtualClock } from '../src/clock.js';
import { RedisStore } from '../src/store/redis/redis-store.js';
import { getRedis, newClusterClient, redisForSuite, startCluster, type RedisHandle } from './helpers/redis.js';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { replay, type DecisionLine } from '../src/replay/replay.js';
import { abuseConfig, abuseCsv, abuseRows } from '../scripts/gen-abuse-trace.js';
import { loadTraceForModel, runModel } from './reference/model.js';
import { prng } from '../scripts/make-fixtures.js';
import { MemoryStore } from '../src/store/memory-store.js';
import type { Store } from '../src/store/types.js';

const S = 1_000_000;

describe('attribute levels', () => {
  describe('bounded: a scanner cycling through 100,000 caller numbers', function () {
    this.timeout(120_000);
    const suite = redisForSuite();

    it('with maxValues 1,000 and a 1 h window, Redis holds at most 1,000 caller buckets', async () => {
      const config = parseConfig({
        inbound: {
          defaultPeer: [{ limit: 100_000, window: '1s' }],
          attributes: [
            {
              name: 'caller',
              key: 'caller',
              limits: [{ limit: 2, window: '1h' }],
              maxValues: 1000,
              ban: { over: 5, within: '1m', for: '10m' },
            },
          ],
        },
      });
      const prefix = `t:bound:${Date.now()}:`;
      const store = new RedisStore({ redis: suite.redis, prefix });
      const gate = new CallGate({
        config,
        store,
        clock: new VirtualClock(1_700_000_000 * S),
        policy: 'error',
        timeoutMs: 30_000,
      });
      const N = 100_000;
      const T = 1_700_000_000 * S;
      let admitted = 0;
      try {
        // 500 calls/s of virtual time, 512 in flight (batched by the store)
        for (let i = 0; i < N; i += 512) {
          const batch = [];
          for (let k = i; k < Math.min(N, i + 512); k++)
            batch.push(
              gate.admit({ callId: `s${k}`, peer: 'scan', caller: `+1${9_000_000_000 + k}`, at: T + k * 2_000 }),
            );
          for (const d of await Promise.all(batch)) if (d.admitted) admitted++;
        }
        const keys = await suite.redis.keys(`${prefix}*`);
        const callerKeys = keys.filter((k) => k.includes('attr:caller:'));
        // each shared bucket: its log, and at most its strikes and ban; the rest: the peer's log
        expect(new Set(callerKeys.map((k) => k.replace(/:(log|strikes|ban)$/, ''))).size).to.be.at.most(1000);
        expect(keys.length - callerKeys.length).to.be.at.most(2);
        // 1,000 buckets of 2 calls per hour: the scanner got about 2,000 calls in, not 100,000
        expect(admitted).to.be.within(1000, 2000);
      } finally {
        await gate.close();
        await store.clear();
      }
    });
  });

  describe('a mixed trace on one Redis', function () {
    this.timeout(120_000);
    let dir: string;
    let handle: RedisHandle;
    let redis: Redis;
    before(async () => {
      dir = mkdtempSync(join(tmpdir(), 'callgate-mixed-'));
      handle = await getRedis();
      redis = new Redis(handle.url);
    });
    after(async () => {
      rmSync(dir, { recursive: true, force: true });
      redis?.disconnect();
      await handle?.stop();
    });
    const contract = (d: DecisionLine) => {
      const { time_us: _t, retry_after_ms: _r, ...rest } = d as DecisionLine & { retry_after_ms?: number };
      return rest;
    };

    it('a mixed trace (every order, overrides, prefixes, digits, subnets, maxValues, channels, bans): memory = Redis = model', async () => {
      const rand = prng(11);
      const pick = <T>(xs: readonly T[]) => xs[Math.floor(rand() * xs.length)]!;
      const T = 1_764_000_000 * S;
      let t = T;
      let csv = 'time,call_id,direction,peer,account,caller,callee,source,duration\n';
      for (let i = 0; i < 3000; i++) {
        t += Math.floor(rand() * 20_000);
        const dur = rand() < 0.2 ? '' : (rand() * 3).toFixed(3);
        csv += `${(t / 1e6).toFixed(6)},m${i % 2900},in,${pick(['p1', 'p2', 'p3', 'x9'])},${pick(['', 'a1', 'a2'])},${pick(['+1555000', '+1555001', '+1555002', 'anon', '', '+1 555 003'])}${rand() < 0.3 ? Math.floor(rand() * 40) : ''},${pick(['+88212', '+8821', '+4420', '0049301', ''])}${Math.floor(rand() * 100)},${pick(['198.51.100.7', '198.51.100.8', '2001:db8::1', '2001:db8:0:1::5', '::ffff:203.0.113.9', 'sbc-1', ''])},${dur}\n`;
      }
      writeFileSync(join(dir, 'mixed.trace.csv'), csv);
      const raw = {
        maxCallDuration: 'PT5S',
        inbound: {
          global: [{ limit: 60, window: '1s' }],
          accounts: { a1: [{ limit: 20, window: '1s' }, { channels: 30 }] },
          peers: { p1: [{ limit: 15, window: '1s' }], p2: [{ limit: 10, window: '1s', algorithm: 'fixed-window' }] },
          defaultPeer: [{ limit: 8, window: '1s', algorithm: 'sliding-window' }],
          attributes: [
            {
              name: 'caller',
              key: 'caller',
              limits: [{ limit: 3, window: '1s' }, { channels: 4 }],
              overrides: { anon: [{ limit: 1, window: '2s' }] },
              maxValues: 7,
              ban: { over: 2, within: '1s', for: '3s' },
            },
            {
              name: 'dest',
              key: 'callee',
              match: { prefixes: ['+882', '+8821'] },
              limits: [{ limit: 4, window: '1s' }],
              order: 'first',
            },
            {
              name: 'cc',
              key: 'callee',
              match: { digits: 2 },
              limits: [{ limit: 5, window: '1s', algorithm: 'fixed-window' }],
              order: 'after-global',
            },
            {
              name: 'net',
              key: 'source',
              match: { subnet: { v4: 24, v6: 48 } },
              limits: [{ limit: 2, window: '1s' }],
              order: 'after-account',
              ban: { over: 1.5, within: '500ms', for: '1s' },
            },
          ],
        },
      } as const;
      const model = runModel(raw, loadTraceForModel(join(dir, 'mixed.trace.csv')));
      const config = parseConfig(raw);
      const run = async (store: Store) => {
        const out: DecisionLine[] = [];
        await replay({ config, tracePath: join(dir, 'mixed.trace.csv'), store, onDecision: (d) => void out.push(d) });
        return out.map(contract);
      };
      const mem = await run(new MemoryStore());
      const store = new RedisStore({ redis, prefix: `t:mixed:${Date.now()}:` });
      const red = await run(store);
      await store.clear();
      const levels = new Set(
        model.map((d) => ('limited_by' in d && d.limited_by ? `${d.limited_by.split(':')[0]} ${d.reason}` : '')),
      );
      for (const want of [
        'caller rate',
        'caller channels',
        'caller banned',
        'dest rate',
        'cc rate',
        'net rate',
        'net banned',
      ])
        expect([...levels], want).to.include(want);
      for (let i = 0; i < model.length; i++) {
        expect(mem[i], `memory, call ${i + 1}`).to.deep.equal(model[i]);
        expect(red[i], `redis, call ${i + 1}`).to.deep.equal(model[i]);
      }
    });
  });

  describe('the abuse trace on a Redis Cluster (three masters, hash tags)', function () {
    this.timeout(120_000);
    it('decides every call as the reference model does', async () => {
      const dir = mkdtempSync(join(tmpdir(), 'callgate-abuse-cluster-'));
      const cluster = await startCluster();
      const client = newClusterClient(cluster);
      try {
        const trace = join(dir, 'abuse.trace.csv');
        writeFileSync(trace, abuseCsv(abuseRows({ seed: 5 })));
        const store = new RedisStore({ redis: client, prefix: `t:abuse-cluster:${Date.now()}:` });
        const got: DecisionLine[] = [];
        await replay({
          config: parseConfig(abuseConfig()),
          tracePath: trace,
          store,
          onDecision: (d) => void got.push(d),
        });
        await store.clear();
        const model = runModel(abuseConfig(), loadTraceForModel(trace));
        expect(got).to.have.length(model.length);
        const banned = got.filter((d) => 'reason' in d && d.reason === 'banned').length;
        expect(banned).to.be.above(100);
        for (let i = 0; i < model.length; i++) {
          const { time_us: _t, retry_after_ms: _r, ...rest } = got[i] as DecisionLine & { retry_after_ms?: number };
          expect(rest, `call ${i + 1}`).to.deep.equal(model[i]);
        }
      } finally {
        client.disconnect();
        await cluster.stop();
        rmSync(dir, { recursive: true, force: true });
      }
    });
  });
});
