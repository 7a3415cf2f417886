/**
 * Attribute levels on Redis at scale: bounded (docs/attributes.md, "Memory": a scanner cycling
 * through 100,000 caller numbers against a level with maxValues leaves at most that many
 * buckets), and the abuse trace decided on a Redis Cluster as the reference model decides it.
 */
import { expect } from 'chai';
import { Redis } from 'ioredis';
import { parseConfig } from '../src/config/load.js';
import { CallGate } from '../src/gate.js';
import { VirtualClock } from '../src/clock.js';
import { RedisStore } from '../src/store/redis/redis-store.js';
import { getRedis, newClusterClient, startCluster, type RedisHandle } from './helpers/redis.js';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { replay, type DecisionLine } from '../src/replay/replay.js';
import { abuseConfig, abuseCsv, abuseRows } from '../scripts/gen-abuse-trace.js';
import { loadTraceForModel, runModel } from './reference/model.js';

const S = 1_000_000;

describe('attribute levels', () => {
  describe('bounded: a scanner cycling through 100,000 caller numbers', function () {
    this.timeout(120_000);
    let handle: RedisHandle;
    let redis: Redis;
    before(async () => {
      handle = await getRedis();
      redis = new Redis(handle.url);
    });
    after(async () => {
      redis?.disconnect();
      await handle?.stop();
    });

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
      const store = new RedisStore({ redis, prefix });
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
        const keys = await redis.keys(`${prefix}*`);
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
