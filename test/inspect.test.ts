/**
 * Live inspection (src/observe/inspect.ts): the exact state after known decisions on a VirtualClock,
 * GET /v1/state and the live metrics in the sidecar, and `callgate inspect` on a real Redis
 * shared with a routing process.
 */
import { expect } from 'chai';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { VirtualClock } from '../src/clock.js';
import { CallGate } from '../src/gate.js';
import { inspectGate, stateText } from '../src/observe/inspect.js';
import { gateMetrics } from '../src/observe/metrics.js';
import { buildApp } from '../src/server/app.js';
import { MemoryStore } from '../src/store/memory-store.js';
import { RedisStore } from '../src/store/redis/redis-store.js';
import { getRedis, type RedisHandle } from './helpers/redis.js';
import { runNode } from './helpers/run.js';

const ROOT = new URL('..', import.meta.url).pathname;
const T0 = 1_700_000_000_000_000;
const CONFIG = {
  inbound: {
    accounts: { acme: [{ limit: 2, window: 'PT1S' }] },
    peers: {
      p1: [
        { limit: 3, window: 'PT10S' },
        { limit: 2, window: 'PT1S', algorithm: 'fixed-window' as const },
      ],
    },
    defaultPeer: [{ limit: 1, window: 'PT1S' }],
  },
  outbound: { carriers: { A: { cps: 4, maxWait: 'PT1S' }, B: { cps: 2, maxWait: '0s' } } },
};

describe('inspect', function () {
  this.timeout(60_000);

  it('the state after known decisions, exactly; peers on defaultPeer only when asked', async () => {
    const clock = new VirtualClock(T0);
    const gate = await CallGate.create({ config: CONFIG, store: new MemoryStore(), clock });
    await gate.admit({ callId: 'c1', peer: 'p1', account: 'acme' });
    clock.advance(T0 + 200_000);
    await gate.admit({ callId: 'c2', peer: 'p1' });
    await gate.admit({ callId: 'c3', peer: 'p1' }); // refused by the fixed window (2 in [T0, T0 + 1 s))
    await gate.admit({ callId: 'c4', peer: 'q', account: 'acme' });
    for (let i = 0; i < 3; i++) await gate.reserve({ callId: `o${i}`, route: ['A'] }); // slots T0+200, +450, +700 ms
    clock.advance(T0 + 300_000);
    const s = await inspectGate(gate, { peers: ['q', 'p1'] });
    expect(s).to.deep.equal({
      time_us: T0 + 300_000,
      store: 'memory',
      buckets: [
        // c1 at T0 and c4 at T0 + 200 ms: full; c1 leaves at T0 + 1 s
        {
          bucket: 'account:acme',
          limits: [{ limit: 2, window: '1s', algorithm: 'sliding-log', count: 2, retry_after_ms: 700 }],
          retry_after_ms: 700,
        },
        {
          bucket: 'peer:p1',
          limits: [
            { limit: 3, window: '10s', algorithm: 'sliding-log', count: 2, retry_after_ms: 0 },
            { limit: 2, window: '1s', algorithm: 'fixed-window', count: 2, retry_after_ms: 700 },
          ],
          retry_after_ms: 700,
        },
        {
          bucket: 'peer:q',
          default_peer: true,
          limits: [{ limit: 1, window: '1s', algorithm: 'sliding-log', count: 1, retry_after_ms: 900 }],
          retry_after_ms: 900,
        },
      ],
      // A: last slot T0 + 700 ms, I 250 ms: T0 + 950 ms - now = 650 ms; B never used
      carriers: [
        { carrier: 'A', cps: 4, max_wait_ms: 1000, queue_wait_ms: 650 },
        { carrier: 'B', cps: 2, max_wait_ms: 0, queue_wait_ms: 0 },
      ],
    });
    expect((await inspectGate(gate)).buckets.map((b) => b.bucket)).to.deep.equal(['account:acme', 'peer:p1']);
    const text = stateText(s);
    expect(text).to.match(/^callgate state at 2023-11-14T22:13:20\.300Z \(memory store\)/);
    expect(text).to.match(/^peer:q \(default\)\s+1\s+1s\s+sliding-log\s+1\s+900 ms\s+-$/m);
    expect(text).to.match(/^A\s+4\s+1000 ms\s+650 ms\s+-$/m);
    await gate.close();
  });

  it('GET /v1/state and the live metrics of the sidecar', async () => {
    const clock = new VirtualClock(T0);
    const gate = await CallGate.create({ config: CONFIG, store: new MemoryStore(), clock });
    const state = (peers: string[] = []) => inspectGate(gate, { peers });
    const { registry } = gateMetrics(gate, {
      live: async () => {
        const s = await state();
        return {
          buckets: s.buckets,
          carriers: s.carriers.map((c) => ({ carrier: c.carrier, waitMs: c.queue_wait_ms })),
        };
      },
    });
    const app = buildApp({ gate, ready: async () => {}, reload: async () => [], metrics: registry, state });
    for (let i = 0; i < 2; i++) await app.inject({ method: 'GET', url: `/v1/reserve?call_id=o${i}&route=A` });
    const r = await app.inject({ method: 'GET', url: '/v1/state?peer=zz' });
    expect(r.statusCode).to.equal(200);
    const s = r.json() as { buckets: { bucket: string }[]; carriers: { carrier: string; queue_wait_ms: number }[] };
    expect(s.buckets.map((b) => b.bucket)).to.deep.equal(['account:acme', 'peer:p1', 'peer:zz']);
    expect(s.carriers[0]).to.deep.include({ carrier: 'A', queue_wait_ms: 500 });
    const bad = await app.inject({ method: 'GET', url: '/v1/state?peers=zz' });
    expect(bad.json().problems).to.deep.equal(['query.peers: unknown field']);
    const m = await app.inject({ method: 'GET', url: '/metrics' });
    expect(m.payload).to.include('callgate_carrier_queue_wait_seconds{carrier="A"} 0.5');
    expect(m.payload).to.include('callgate_carrier_queue_wait_seconds{carrier="B"} 0');
    await app.close();
    await gate.close();
  });

  describe('callgate inspect (the command) on a live Redis', () => {
    let redis: RedisHandle;
    let dir: string;
    before(async () => {
      redis = await getRedis();
      dir = mkdtempSync(join(tmpdir(), 'callgate-inspect-'));
    });
    after(async () => {
      await redis?.stop();
      rmSync(dir, { recursive: true, force: true });
    });

    it('reads what a routing process on the same Redis decided, read-only', async () => {
      const prefix = `cginspect:${randomBytes(4).toString('hex')}:`;
      const configPath = join(dir, 'limits.json');
      const config = {
        ...CONFIG,
        inbound: { peers: { p1: [{ limit: 3, window: 'PT10S' }] } },
        outbound: { carriers: { A: { cps: 1, maxWait: 'PT5S' } } },
      };
      writeFileSync(configPath, JSON.stringify(config));
      const client = new Redis(redis.url);
      const gate = await CallGate.create({ config, store: new RedisStore({ redis: client, prefix }) });
      for (let i = 0; i < 5; i++) await gate.admit({ callId: `c${i}`, peer: 'p1' });
      for (let i = 0; i < 3; i++) await gate.reserve({ callId: `o${i}`, route: ['A'] });
      const keys = async () => (await client.keys(`${prefix}*`)).sort();
      const before = await keys();
      const started = Date.now();
      const run = (...more: string[]) =>
        runNode(
          [
            join(ROOT, 'bin/callgate.js'),
            'inspect',
            '--config',
            configPath,
            '--redis-url',
            redis.url,
            '--prefix',
            prefix,
            ...more,
          ],
          { cwd: ROOT },
        );
      const r = await run('--json');
      const elapsed = Date.now() - started;
      expect(r.code, r.stderr).to.equal(0);
      const s = JSON.parse(r.stdout) as {
        store: string;
        buckets: { bucket: string; limits: { count: number; retry_after_ms: number }[] }[];
        carriers: { queue_wait_ms: number }[];
      };
      expect(s.store).to.equal('redis');
      expect(s.buckets[0]!.bucket).to.equal('peer:p1');
      expect(s.buckets[0]!.limits[0]!.count).to.equal(3);
      const retry = s.buckets[0]!.limits[0]!.retry_after_ms;
      expect(retry).to.be.within(10_000 - elapsed - 100, 10_000);
      // three slots 1 s apart from the first: the next free one is ~3 s after it
      expect(s.carriers[0]!.queue_wait_ms).to.be.within(3000 - elapsed - 100, 3000);
      // inspect created nothing (keys may expire meanwhile: the carrier's lives ~3 s)
      for (const k of await keys()) expect(before, `inspect created ${k}`).to.include(k);
      const text = await run();
      expect(text.stdout).to.match(/^peer:p1\s+3\s+10s\s+sliding-log\s+3\s+\d+ ms\s+-$/m);
      // told A is leased (as the sidecars' --leased-carriers): its share, here none granted
      const leased = await run('--json', '--leased-carriers', 'A');
      expect(leased.code, leased.stderr).to.equal(0);
      expect(JSON.parse(leased.stdout).carriers[0].lease).to.deep.equal({
        calls_share: 0,
        channels_share: 0,
        used: 0,
        lease_left_ms: 0,
      });
      expect((await run('--leased-carriers', 'B')).stderr).to.match(/a leased carrier must be configured/);
      const down = await runNode(
        [join(ROOT, 'bin/callgate.js'), 'inspect', '--config', configPath, '--redis-url', 'redis://127.0.0.1:1'],
        { cwd: ROOT },
      );
      expect(down.code).to.equal(1);
      expect(down.stderr).to.match(/^error: cannot reach Redis at redis:\/\/127\.0\.0\.1:1: /);
      await gate.close();
      client.disconnect();
    });
  });
});
