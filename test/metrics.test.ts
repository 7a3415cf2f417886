/**
 * Prometheus metrics (src/observe/metrics.ts): exact counts for known decisions on a VirtualClock, the
 * bounded labels, store errors and degraded decisions from a Redis that is not there, and the
 * sidecar's /metrics.
 */
import { expect } from 'chai';
import { Redis } from 'ioredis';
import type { Registry } from 'prom-client';
import { VirtualClock } from '../src/clock.js';
import { CallGate } from '../src/gate.js';
import { gateMetrics, inspectLive } from '../src/observe/metrics.js';
import { buildApp } from '../src/server/app.js';
import { MemoryStore } from '../src/store/memory-store.js';
import { RECOMMENDED_REDIS_OPTIONS, RedisStore } from '../src/store/redis/redis-store.js';
import { freePort } from './helpers/redis.js';

const T0 = 1_700_000_000_000_000;
const CONFIG = {
  inbound: {
    global: [{ limit: 100, window: 'PT1S' }],
    accounts: { acme: [{ limit: 2, window: 'PT1S' }] },
    peers: { p1: [{ limit: 1, window: 'PT1S' }] },
    defaultPeer: [{ limit: 1, window: 'PT1S' }],
  },
  outbound: { carriers: { A: { cps: 10, maxWait: '150ms' }, B: { cps: 10 } } },
};

/** metric name + sorted labels -> value, from the registry's JSON. */
async function values(registry: Registry): Promise<Map<string, number>> {
  const out = new Map<string, number>();
  for (const m of await registry.getMetricsAsJSON()) {
    for (const v of m.values as { value: number; labels: Record<string, string | number>; metricName?: string }[]) {
      const labels = Object.entries(v.labels)
        .sort(([a], [b]) => a.localeCompare(b))
        .map(([k, x]) => `${k}=${x}`)
        .join(',');
      out.set(`${v.metricName ?? m.name}{${labels}}`, v.value);
    }
  }
  return out;
}

async function gateOn(clock = new VirtualClock(T0)) {
  return CallGate.create({ config: CONFIG, store: new MemoryStore(), clock });
}

describe('metrics (prom-client)', () => {
  it('counts every decision by direction, outcome and level kind; carriers by outcome; latency per operation', async () => {
    const gate = await gateOn();
    const { registry } = gateMetrics(gate);
    await gate.admit({ callId: 'c1', peer: 'p1' }); // admitted
    await gate.admit({ callId: 'c2', peer: 'p1' }); // peer
    await gate.admit({ callId: 'c3', peer: 'x', account: 'acme' }); // admitted (default peer)
    await gate.admit({ callId: 'c4', peer: 'y', account: 'acme' }); // admitted
    await gate.admit({ callId: 'c5', peer: 'z', account: 'acme' }); // account
    await gate.record({ callId: 'e1', peer: 'p1' }); // recorded
    const route = ['A', 'B'];
    await gate.reserve({ callId: 'o1', route }); // A, 0
    await gate.reserve({ callId: 'o2', route }); // A, 100 ms
    await gate.reserve({ callId: 'o3', route }); // B (A passed over)
    await gate.reserve({ callId: 'o4', route }); // rejected (A, B passed over)
    await gate.reserve({ callId: 'o5', route: ['nowhere'] }); // rejected, no carrier tried
    const v = await values(registry);
    const d = (direction: string, outcome: string, limitedBy: string, reason: string) =>
      v.get(
        `callgate_decisions_total{direction=${direction},limited_by=${limitedBy},outcome=${outcome},reason=${reason}}`,
      );
    expect(d('in', 'admitted', 'none', 'none')).to.equal(3);
    expect(d('in', 'rejected', 'peer', 'rate')).to.equal(1);
    expect(d('in', 'rejected', 'account', 'rate')).to.equal(1);
    expect(d('in', 'recorded', 'none', 'none')).to.equal(1);
    expect(d('out', 'dispatched', 'none', 'none')).to.equal(3);
    expect(d('out', 'rejected', 'none', 'all-routes-congested')).to.equal(2);
    const c = (carrier: string, outcome: string) =>
      v.get(`callgate_carrier_decisions_total{carrier=${carrier},outcome=${outcome}}`);
    expect([
      c('A', 'dispatched'),
      c('A', 'rerouted'),
      c('A', 'rejected'),
      c('B', 'dispatched'),
      c('B', 'rejected'),
    ]).to.deep.equal([2, 1, 1, 1, 1]);
    expect(v.get('callgate_carrier_wait_seconds_count{carrier=A}')).to.equal(2);
    expect(v.get('callgate_carrier_wait_seconds_sum{carrier=A}')).to.be.closeTo(0.1, 1e-9);
    expect(v.get('callgate_carrier_wait_seconds_bucket{carrier=A,le=0.05}')).to.equal(1);
    expect(v.get('callgate_decision_duration_seconds_count{operation=admit}')).to.equal(5);
    expect(v.get('callgate_decision_duration_seconds_count{operation=record}')).to.equal(1);
    expect(v.get('callgate_decision_duration_seconds_count{operation=reserve}')).to.equal(5);
    expect(v.get('callgate_calls_held{}')).to.equal(0);
    // every label value is bounded: no call id, no unconfigured peer id anywhere
    const text = await registry.metrics();
    for (const id of ['c1', 'o1', '"x"', '"y"', '"z"', 'p1', 'acme', 'nowhere']) expect(text, id).not.to.include(id);
    await gate.close();
  });

  it('perBucket: refusals name the configured account or peer; peers on defaultPeer stay "peer"', async () => {
    const gate = await gateOn();
    const { registry } = gateMetrics(gate, { perBucket: true });
    await gate.admit({ callId: 'c1', peer: 'p1' });
    await gate.admit({ callId: 'c2', peer: 'p1' });
    await gate.admit({ callId: 'c3', peer: 'q' });
    await gate.admit({ callId: 'c4', peer: 'q' });
    const text = await registry.metrics();
    expect(text).to.include(
      'callgate_decisions_total{direction="in",outcome="rejected",limited_by="peer:p1",reason="rate"} 1',
    );
    expect(text).to.include(
      'callgate_decisions_total{direction="in",outcome="rejected",limited_by="peer",reason="rate"} 1',
    );
    expect(text).not.to.include('peer:q');
    await gate.close();
  });

  it('dispatch: decisions counted at the reservation, calls held while they wait', async () => {
    const clock = new VirtualClock(T0);
    const gate = await gateOn(clock);
    const { registry } = gateMetrics(gate);
    const a = gate.dispatch({ callId: 'o1', route: ['A'] });
    const b = gate.dispatch({ callId: 'o2', route: ['A'] });
    await new Promise((r) => setImmediate(r));
    expect((await values(registry)).get('callgate_calls_held{}')).to.equal(1); // o2 waits 100 ms
    clock.advance(T0 + 100_000);
    await Promise.all([a, b]);
    const v = await values(registry);
    expect(v.get('callgate_decisions_total{direction=out,limited_by=none,outcome=dispatched,reason=none}')).to.equal(2);
    expect(v.get('callgate_decision_duration_seconds_count{operation=dispatch}')).to.equal(2);
    expect(v.get('callgate_calls_held{}')).to.equal(0);
    await gate.close();
  });

  it('store errors and degraded decisions by policy, from a Redis that is not there', async () => {
    const port = await freePort();
    const redis = new Redis(`redis://127.0.0.1:${port}`, {
      ...RECOMMENDED_REDIS_OPTIONS,
      lazyConnect: true,
      retryStrategy: () => 200,
    });
    redis.on('error', () => undefined);
    const gate = await CallGate.create({
      config: CONFIG,
      store: new RedisStore({ redis }),
      policy: 'fail-open',
      timeoutMs: 50,
    });
    gate.on('error', () => undefined);
    const { registry } = gateMetrics(gate);
    for (let i = 0; i < 3; i++)
      expect((await gate.admit({ callId: `c${i}`, peer: 'p1' })).degraded).to.equal('fail-open');
    await gate.reserve({ callId: 'o1', route: ['A'] }).then(
      () => expect.fail('reserve should fail'),
      () => undefined,
    );
    const r = await gate.dispatch({ callId: 'o2', route: ['A'] });
    expect(r.outcome).to.equal('failed');
    const v = await values(registry);
    expect(v.get('callgate_degraded_decisions_total{policy=fail-open}')).to.equal(3);
    expect(v.get('callgate_store_errors_total{operation=admit}')).to.equal(3);
    expect(v.get('callgate_store_errors_total{operation=reserve}')).to.equal(1);
    expect(v.get('callgate_store_errors_total{operation=dispatch}')).to.equal(1);
    expect(v.get('callgate_decisions_total{direction=in,limited_by=none,outcome=admitted,reason=none}')).to.equal(3);
    expect(
      v.get('callgate_decisions_total{direction=out,limited_by=none,outcome=failed,reason=store-unavailable}'),
    ).to.equal(2);
    await gate.close();
    redis.disconnect();
  });

  it('channels: live gauges for the buckets and carriers with a channel limit only; releases by outcome', async () => {
    const config = {
      inbound: {
        peers: { p1: [{ limit: 100, window: 'PT1S' }, { channels: 5 }], p2: [{ limit: 100, window: 'PT1S' }] },
      },
      outbound: { carriers: { K: { cps: 1000, channels: 4 }, L: { cps: 1000 } } },
    };
    const gate = await CallGate.create({ config, store: new MemoryStore(), clock: new VirtualClock(T0) });
    const { registry } = gateMetrics(gate, { live: inspectLive(gate) });
    for (const [id, peer] of [
      ['c1', 'p1'],
      ['c2', 'p1'],
      ['c3', 'p2'],
    ])
      expect((await gate.admit({ callId: id!, peer: peer! })).admitted).to.equal(true);
    await gate.reserve({ callId: 'o1', route: ['K'] });
    await gate.reserve({ callId: 'o2', route: ['L'] });
    expect(await gate.release('c1')).to.equal('released');
    expect(await gate.release('c1')).to.equal('not-held');
    const v = await values(registry);
    expect(v.get('callgate_channels_in_use{bucket=peer:p1}')).to.equal(1);
    expect(v.get('callgate_carrier_channels_in_use{carrier=K}')).to.equal(1);
    expect([...v.keys()].filter((k) => /channels_in_use/.test(k)).sort()).to.deep.equal([
      'callgate_carrier_channels_in_use{carrier=K}',
      'callgate_channels_in_use{bucket=peer:p1}',
    ]);
    expect(v.get('callgate_releases_total{outcome=released}')).to.equal(1);
    expect(v.get('callgate_releases_total{outcome=not-held}')).to.equal(1);
    await gate.close();
  });

  it('the sidecar serves them at /metrics in the exposition format, counting what it answered', async () => {
    const gate = await gateOn();
    const { registry } = gateMetrics(gate);
    const app = buildApp({ gate, ready: async () => {}, reload: async () => [], metrics: registry });
    for (let i = 0; i < 7; i++) await app.inject({ method: 'GET', url: `/v1/admit?call_id=c${i}&peer=p${i % 2}` });
    await app.inject({ method: 'GET', url: '/v1/admit?call_id=bad' }); // a 400 decides nothing
    const r = await app.inject({ method: 'GET', url: '/metrics' });
    expect(r.headers['content-type']).to.match(/^text\/plain; version=0\.0\.4/);
    const counted = [...r.payload.matchAll(/^callgate_decisions_total\{[^}]*\} (\d+)$/gm)].reduce(
      (n, m) => n + Number(m[1]),
      0,
    );
    expect(counted).to.equal(7);
    await app.close();
    await gate.close();
  });
});
