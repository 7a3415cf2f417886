/**
 * Attribute levels (docs/attributes.md): configuration, the value a level counts, where levels
 * sit in the check order, bans; and the abuse trace (scripts/gen-abuse-trace.ts) replayed on the
 * memory store and Redis, decided as the reference model decides it.
 */
import { expect } from 'chai';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { attributeValue, subnetOf, valueSlot } from '../src/admission/attributes.js';
import { PlanCache } from '../src/admission/plan.js';
import { ConfigError, InvalidArgumentError } from '../src/errors/index.js';
import { parseConfig } from '../src/config/load.js';
import type { AttributeLevelConfig, CallGateConfigInput } from '../src/config/types.js';
import { replay, type DecisionLine } from '../src/replay/replay.js';
import { reportJson, reportText } from '../src/replay/report.js';
import { compare } from '../src/replay/compare.js';
import { MemoryStore } from '../src/store/memory-store.js';
import { RedisStore } from '../src/store/redis/redis-store.js';
import type { Store } from '../src/store/types.js';
import { ABUSE_START_US, ATTACKS, abuseConfig, abuseCsv, abuseRows } from '../scripts/gen-abuse-trace.js';
import { getRedis, redisForSuite, type RedisHandle } from './helpers/redis.js';
import { Writable } from 'node:stream';
import { readFileSync } from 'node:fs';
import { VirtualClock } from '../src/clock.js';
import { TRACE_HEADER_ATTRIBUTES } from '../src/recording/trace-recorder.js';
import { readTrace } from '../src/replay/trace.js';
import { mergeTraces } from '../src/replay/trace-merge.js';
import { gateMetrics } from '../src/observe/metrics.js';
import { diffConfig } from '../src/config/diff.js';
import { CallGate } from '../src/gate.js';
import { buildApp } from '../src/server/app.js';
import { inspectGate, inspectState } from '../src/observe/inspect.js';
import { liftBan, listBans } from '../src/observe/bans.js';
import { runUnban, type UnbanArgs } from '../src/cli/unban.js';
import { loadTraceForModel, runModel } from './reference/model.js';

const S = 1_000_000;
const level = (raw: unknown): AttributeLevelConfig =>
  parseConfig({ inbound: { attributes: [raw] } }).inbound.attributes![0]!;

describe('attribute levels', () => {
  describe('configuration', () => {
    it('normalizes a level: defaults, durations, overrides', () => {
      const l = level({
        name: 'caller',
        key: 'caller',
        limits: [{ limit: 2, window: '1s' }, { channels: 4 }],
        overrides: { '+15551234567': [{ limit: 50, window: '1s' }] },
        ban: { over: 3, within: '10s', for: '5m' },
      });
      expect(l.order).to.equal('last');
      expect(l.limits).to.deep.equal({ limits: [{ limit: 2, windowUs: S, algorithm: 'sliding-log' }], channels: 4 });
      expect(l.overrides.get('+15551234567')!.limits[0]!.limit).to.equal(50);
      expect(l.ban).to.deep.equal({ over: 3, spanUs: 10 * S, forUs: 300 * S });
      expect(level({ name: 's', key: 'source', match: { subnet: 24 }, limits: [] }).match).to.deep.equal({
        subnet: { v4: 24, v6: 64 },
      });
    });

    it('refuses bad levels with the path and the problem', () => {
      const bad = (attributes: unknown, what: RegExp) => {
        expect(() => parseConfig({ inbound: { attributes } }))
          .to.throw(ConfigError)
          .with.property('message')
          .match(what);
      };
      bad([{ name: 'peer', key: 'caller', limits: [] }], /taken by another level/);
      bad([{ name: 'a b', key: 'caller', limits: [] }], /level name/);
      bad([{ name: 'x', key: 'ani', limits: [] }], /"caller", "callee", "source"/);
      bad(
        [
          { name: 'x', key: 'caller', limits: [] },
          { name: 'x', key: 'callee', limits: [] },
        ],
        /taken by \[0\]/,
      );
      bad([{ name: 'x', key: 'caller', limits: [], ban: { over: 2, within: '1s', for: '1m' } }], /needs a rate limit/);
      bad([{ name: 'x', key: 'caller', match: { subnet: 24 }, limits: [] }], /needs key "source"/);
      bad([{ name: 'x', key: 'caller', limits: [], maxValues: 0 }], /positive integer/);
      bad([{ name: 'x', key: 'callee', match: { prefixes: [] }, limits: [] }], /at least one prefix/);
    });
  });

  describe('values', () => {
    it('caller, callee, source and fields as given; absent or empty: the level does not apply', () => {
      const l = level({ name: 'c', key: 'caller', limits: [] });
      expect(attributeValue(l, { caller: '+1 555' })).to.equal('+1 555');
      expect(attributeValue(l, { caller: '' })).to.equal(undefined);
      expect(attributeValue(l, {})).to.equal(undefined);
      const f = level({ name: 'f', key: { field: 'tenant' }, limits: [] });
      expect(attributeValue(f, { fields: { tenant: 'blue' } })).to.equal('blue');
      expect(attributeValue(f, { fields: {} })).to.equal(undefined);
    });

    it('prefixes: the longest that matches, none: does not apply; digits: the first N digits', () => {
      const p = level({ name: 'p', key: 'callee', match: { prefixes: ['+88', '+882', '+8823'] }, limits: [] });
      expect(attributeValue(p, { callee: '+88234567' })).to.equal('+8823');
      expect(attributeValue(p, { callee: '+88212' })).to.equal('+882');
      expect(attributeValue(p, { callee: '+4420' })).to.equal(undefined);
      const d = level({ name: 'd', key: 'callee', match: { digits: 4 }, limits: [] });
      expect(attributeValue(d, { callee: '+44 20 7946' })).to.equal('4420');
      expect(attributeValue(d, { callee: 'alice' })).to.equal(undefined);
    });

    it('subnets of IPv4, IPv6 and IPv4-mapped addresses; other sources as given', () => {
      expect(subnetOf('203.0.113.77', 24, 64)).to.equal('203.0.113.0/24');
      expect(subnetOf('::ffff:203.0.113.77', 16, 64)).to.equal('203.0.0.0/16');
      // an IPv4-mapped address in any spelling is its IPv4 network (10.1.2.3 = a01:203)
      for (const a of ['::ffff:a01:203', '::FFFF:A01:203', '0:0:0:0:0:ffff:a01:203', '::ffff:10.1.2.3', '10.1.2.3'])
        expect(subnetOf(a, 24, 48), a).to.equal('10.1.2.0/24');
      // not mapped (::a01:203 is IPv4-compatible, deprecated, and stays IPv6)
      expect(subnetOf('::a01:203', 24, 48)).to.equal('0:0:0:0:0:0:0:0/48');
      expect(subnetOf('2001:db8:1:2:3:4:5:6', 24, 64)).to.equal('2001:db8:1:2:0:0:0:0/64');
      expect(subnetOf('2001:db8::1', 24, 48)).to.equal('2001:db8:0:0:0:0:0:0/48');
      expect(subnetOf('2001:db8:ffff::1', 24, 36)).to.equal('2001:db8:f000:0:0:0:0:0/36');
      const s = level({ name: 's', key: 'source', match: { subnet: 24 }, limits: [] });
      expect(attributeValue(s, { source: 'sbc-7' })).to.equal('sbc-7');
    });

    it('admit refuses attributes that are not strings', async () => {
      const gate = new CallGate({ config: parseConfig({ inbound: { defaultPeer: [] } }) });
      for (const bad of [{ caller: 5 }, { source: {} }, { fields: { a: 1 } }, { fields: 'x' }]) {
        const err = await gate.admit({ callId: 'c', peer: 'p', ...(bad as object) }).catch((e: Error) => e);
        expect(err, JSON.stringify(bad)).to.be.instanceOf(InvalidArgumentError);
      }
      await gate.close();
    });

    it('past maxValues, values share buckets by a stable hash; overrides keep their own', () => {
      expect(valueSlot('+15551234567', 1000)).to.equal(valueSlot('+15551234567', 1000));
      const slots = new Set<number>();
      for (let i = 0; i < 10_000; i++) slots.add(valueSlot(`+1555${i}`, 1000));
      expect(slots.size).to.be.within(990, 1000); // spread over every slot
      const config = parseConfig({
        inbound: {
          defaultPeer: [{ limit: 5, window: '1s' }],
          attributes: [
            {
              name: 'caller',
              key: 'caller',
              limits: [{ limit: 1, window: '1s' }],
              maxValues: 10,
              overrides: { vip: [{ limit: 9, window: '1s' }] },
            },
          ],
        },
      });
      const plans = new PlanCache(config);
      const bucketOf = (caller: string) => {
        const p = plans.forCall({ peer: 'p', caller });
        return typeof p === 'string' ? '' : p.buckets[1]!.name;
      };
      expect(bucketOf('vip')).to.equal('attr:caller:vip');
      expect(bucketOf('+1555')).to.match(/^attr:caller:#\d$/);
    });
  });

  describe('check order', () => {
    const config = parseConfig({
      inbound: {
        global: [{ limit: 100, window: '1s' }],
        accounts: { a: [{ limit: 10, window: '1s' }] },
        defaultPeer: [{ limit: 5, window: '1s' }],
        attributes: [
          { name: 'l1', key: 'caller', limits: [] },
          { name: 'f1', key: 'caller', order: 'first', limits: [] },
          { name: 'g1', key: 'caller', order: 'after-global', limits: [] },
          { name: 'a1', key: 'caller', order: 'after-account', limits: [] },
          { name: 'f2', key: 'caller', order: 'first', limits: [] },
          { name: 'c1', key: 'callee', order: 'after-global', limits: [] },
        ],
      },
    });
    const labels = (call: { peer: string; account?: string; caller?: string; callee?: string }) => {
      const p = new PlanCache(config).forCall(call);
      return typeof p === 'string' ? [] : p.labels.map((l) => l.replace(/:.*/, ''));
    };

    it('inserts each level where its order says, equals in configuration order', () => {
      expect(labels({ peer: 'p', account: 'a', caller: 'x', callee: 'y' })).to.deep.equal([
        'f1',
        'f2',
        'global',
        'g1',
        'c1',
        'account',
        'a1',
        'peer',
        'l1',
      ]);
      expect(labels({ peer: 'p', caller: 'x' })).to.deep.equal(['f1', 'f2', 'global', 'g1', 'a1', 'peer', 'l1']);
      expect(labels({ peer: 'p' })).to.deep.equal(['global', 'peer']);
    });

    it('levels that land at one place (no global, no account bucket) keep the order of their order values', () => {
      const none = parseConfig({
        inbound: {
          defaultPeer: [{ limit: 5, window: '1s' }],
          attributes: [
            { name: 'a1', key: 'callee', order: 'after-account', limits: [] },
            { name: 'l1', key: 'caller', limits: [] },
            { name: 'g1', key: 'caller', order: 'after-global', limits: [] },
            { name: 'f1', key: 'caller', order: 'first', limits: [] },
            { name: 'a2', key: 'caller', order: 'after-account', limits: [] },
          ],
        },
      });
      const p = new PlanCache(none).forCall({ peer: 'p', caller: 'x', callee: 'y' });
      expect(typeof p === 'string' ? [] : p.labels.map((l) => l.replace(/:.*/, ''))).to.deep.equal([
        'f1',
        'g1',
        'a1',
        'a2',
        'peer',
        'l1',
      ]);
      // with a global bucket and no account: after-global before after-account, both after global
      expect(labels({ peer: 'p', caller: 'x', callee: 'y' })).to.deep.equal([
        'f1',
        'f2',
        'global',
        'g1',
        'c1',
        'a1',
        'peer',
        'l1',
      ]);
    });

    it('every inbound call shares one tag when attribute levels exist (a caller spans peers)', () => {
      const cfg = parseConfig({
        inbound: { defaultPeer: [{ limit: 5, window: '1s' }], attributes: [{ name: 'c', key: 'caller', limits: [] }] },
      });
      const p1 = new PlanCache(cfg).forCall({ peer: 'p1' });
      const p2 = new PlanCache(cfg).forCall({ peer: 'p2', caller: 'x' });
      expect(typeof p1 !== 'string' && typeof p2 !== 'string' && p1.tag === p2.tag).to.equal(true);
    });
  });

  describe('bans (memory store)', () => {
    const config = parseConfig({
      inbound: {
        defaultPeer: [{ limit: 100, window: '1s' }],
        attributes: [
          {
            name: 'src',
            key: 'source',
            limits: [{ limit: 2, window: '1s' }],
            ban: { over: 2, within: '1s', for: '10s' },
          },
        ],
      },
    });
    it('the refusal that reaches over x limit bans the value; banned calls count nowhere; unban lifts it', async () => {
      const store = new MemoryStore();
      const plan = new PlanCache(config).forCall({ peer: 'p', source: '1.2.3.4' });
      if (typeof plan === 'string') throw new Error('plan');
      const T = 1_700_000_000 * S;
      const admit = (dt: number) => store.admitSync({ tag: plan.tag, buckets: plan.buckets, now: T + dt });
      expect([admit(0), admit(1)].map((r) => r.admitted)).to.deep.equal([true, true]);
      // threshold 2 x 2 = 4 refusals within the span [T, T + 1 s)
      for (let i = 0; i < 3; i++) expect(admit(10 + i).reason).to.equal('rate');
      const fourth = admit(20);
      expect(fourth.reason).to.equal('rate');
      const banned = admit(30);
      expect(banned).to.deep.include({ admitted: false, limitedBy: 1, reason: 'banned', retryAfterUs: 10 * S - 10 });
      // past the window the value would have room, but it is banned until T + 20 + 10 s
      expect(admit(5 * S).reason).to.equal('banned');
      expect(store.unbanSync({ tag: plan.tag, bucket: plan.buckets[1]!.name, now: T + 5 * S }).lifted).to.equal(true);
      expect(admit(5 * S + 1).admitted).to.equal(true);
    });
  });

  describe('metrics and reload', () => {
    const raw: CallGateConfigInput = {
      inbound: {
        peers: { p: [{ limit: 100, window: '1s' }] },
        attributes: [
          {
            name: 'src',
            key: 'source',
            limits: [{ limit: 1, window: '1s' }],
            ban: { over: 1, within: '1s', for: '1m' },
          },
        ],
      },
    };
    it('metrics name the level, never the value, also with perBucket; reason banned', async () => {
      const gate = await CallGate.create({ config: raw, clock: new VirtualClock(1_700_000_000 * S) });
      const m = gateMetrics(gate, { perBucket: true });
      try {
        for (let i = 0; i < 3; i++) await gate.admit({ callId: `c${i}`, peer: 'p', source: '198.51.100.7' });
        const text = await m.registry.metrics();
        expect(text).to.include(
          'callgate_decisions_total{direction="in",outcome="rejected",limited_by="src",reason="rate"} 1',
        );
        expect(text).to.include(
          'callgate_decisions_total{direction="in",outcome="rejected",limited_by="src",reason="banned"} 1',
        );
        expect(text).not.to.include('198.51.100.7');
      } finally {
        m.close();
        await gate.close();
      }
    });

    it('a reload reports attribute levels added, changed and removed, by name', () => {
      const a = parseConfig(raw);
      const b = parseConfig({
        inbound: {
          peers: { p: [{ limit: 100, window: '1s' }] },
          attributes: [
            {
              name: 'src',
              key: 'source',
              limits: [{ limit: 2, window: '1s' }],
              ban: { over: 1, within: '1s', for: '1m' },
            },
            { name: 'caller', key: 'caller', limits: [] },
          ],
        },
      });
      expect(diffConfig(a, b).map((c) => `${c.kind} ${c.path}`)).to.deep.equal([
        'changed inbound.attributes.src',
        'added inbound.attributes.caller',
      ]);
      expect(
        diffConfig(b, parseConfig({ inbound: { peers: { p: [{ limit: 100, window: '1s' }] } } })).map((c) => c.kind),
      ).to.deep.equal(['removed', 'removed']);
      expect(diffConfig(a, parseConfig(raw))).to.deep.equal([]);
    });
  });

  describe('recording and merging', () => {
    it('a gate with attribute levels records caller, callee and source; merge-traces keeps them', async () => {
      const dir = mkdtempSync(join(tmpdir(), 'callgate-rec-attr-'));
      try {
        const T = 1_700_000_000 * S;
        const config = parseConfig({
          inbound: {
            defaultPeer: [{ limit: 5, window: '1s' }],
            attributes: [{ name: 'c', key: 'caller', limits: [] }],
          },
        });
        const gate = new CallGate({ config, clock: new VirtualClock(T), recordTrace: { dir, prefix: 'rec' } });
        await gate.admit({
          callId: 'a',
          peer: 'p',
          caller: '+1 555, "x"',
          callee: '+882',
          source: '::1',
          durationUs: S,
        });
        await gate.admit({ callId: 'b', peer: 'p', at: T + 1, durationUs: 2 * S });
        await gate.close();
        const file = gate.recorder!.files[0]!;
        expect(readFileSync(file, 'utf8').split('\n')[0]).to.equal(TRACE_HEADER_ATTRIBUTES);
        const calls = [];
        for await (const c of readTrace(file)) calls.push(c);
        expect(calls.map((c) => [c.callId, c.caller, c.callee, c.source, c.durationUs])).to.deep.equal([
          ['a', '+1 555, "x"', '+882', '::1', S],
          ['b', undefined, undefined, undefined, 2 * S],
        ]);
        const merged = join(dir, 'merged.csv');
        await mergeTraces([file], merged);
        expect(readFileSync(merged, 'utf8')).to.equal(readFileSync(file, 'utf8').replace(/\.000000,\n/g, ',\n'));
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    });

    it('merge-traces finds the attribute columns past a BOM and comment lines, however many', async () => {
      // read as the first 64 KiB, and a BOM before a comment taken for the header: the columns
      // (and the values in them) were dropped without a word
      const dir = mkdtempSync(join(tmpdir(), 'callgate-merge-attr-'));
      try {
        const bom = join(dir, 'bom.csv');
        writeFileSync(bom, '\ufeff# exported\ntime,call_id,direction,peer,caller\n1700000002,x,in,p,+1555\n');
        const long = join(dir, 'long.csv');
        const comments = Array.from({ length: 2_000 }, (_, i) => `# comment ${i} ${'.'.repeat(40)}\n`).join('');
        writeFileSync(long, `${comments}time,call_id,direction,peer,source\n1700000003,y,in,p,10.0.0.1\n`);
        for (const [file, row] of [
          [bom, '1700000002.000000,x,in,p,,,+1555,,,'],
          [long, '1700000003.000000,y,in,p,,,,,10.0.0.1,'],
        ] as const) {
          const merged = join(dir, 'merged.csv');
          await mergeTraces([file], merged);
          expect(readFileSync(merged, 'utf8')).to.equal(`${TRACE_HEADER_ATTRIBUTES}\n${row}\n`);
        }
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    });
  });

  describe('operators: bans on Redis through the sidecar and the CLI', function () {
    this.timeout(30_000);
    const suite = redisForSuite();
    // (windows of 10 s: the calls of a case on live time must fall in one window, and on a
    // loaded CI machine five of them once spanned more than a second)
    const raw: CallGateConfigInput = {
      inbound: {
        defaultPeer: [{ limit: 100, window: '10s' }],
        attributes: [
          {
            name: 'src',
            key: 'source',
            match: { subnet: 24 },
            limits: [{ limit: 2, window: '10s' }],
            ban: { over: 1, within: '10s', for: '1h' },
          },
          { name: 'caller', key: 'caller', limits: [{ limit: 5, window: '10s' }] },
        ],
      },
    };

    for (const hashTags of [false, true]) {
      it(`admit with source and caller over HTTP, list the ban, lift it (HTTP and CLI)${hashTags ? ', hash tags' : ''}`, async () => {
        const prefix = `t:ban:${hashTags}:${Date.now()}:`;
        const store = new RedisStore({ redis: suite.redis, prefix, hashTags });
        const gate = await CallGate.create({ config: raw, store });
        const app = buildApp({
          gate,
          token: 'tok',
          ready: async () => {},
          reload: async () => [],
          state: (peers, values) => inspectGate(gate, { peers, values: values ?? [], bans: true }),
        });
        const auth = { authorization: 'Bearer tok' };
        try {
          const admit = async (n: number) =>
            (
              await app.inject({
                method: 'POST',
                url: '/v1/admit',
                headers: auth,
                payload: { call_id: `c${n}`, peer: 'p', source: '203.0.113.7', caller: '+15551234567' },
              })
            ).json() as { outcome: string; limited_by?: string; reason?: string };
          const got = [];
          for (let n = 0; n < 5; n++) got.push(await admit(n));
          expect(got.map((d) => d.outcome === 'admitted')).to.deep.equal([true, true, false, false, false]);
          // threshold 1 x 2 = 2 strikes: the 4th call bans the /24, the 5th is refused as banned
          expect(got[3]).to.include({ limited_by: 'src:203.0.113.0/24', reason: 'rate' });
          expect(got[4]).to.include({ limited_by: 'src:203.0.113.0/24', reason: 'banned' });
          // the state of two values, and the ban
          const shown = (
            await app.inject({
              method: 'GET',
              url: `/v1/state?value=${encodeURIComponent('src:203.0.113.0/24')}&value=${encodeURIComponent('caller:+15551234567')}`,
              headers: auth,
            })
          ).json() as { buckets: { bucket: string; limits: { count: number }[] }[]; bans: { value: string }[] };
          expect(shown.buckets.map((b) => [b.bucket, b.limits[0]!.count])).to.deep.equal([
            ['src:203.0.113.0/24', 2],
            ['caller:+15551234567', 2],
          ]);
          expect(shown.bans.map((b) => b.value)).to.deep.equal(['203.0.113.0/24']);
          const bad = await app.inject({ method: 'GET', url: '/v1/state?value=nope:x', headers: auth });
          expect([bad.statusCode, bad.json().problems]).to.deep.equal([
            400,
            ['query.value: expected <level>:<value> of a configured attribute level, got "nope:x"'],
          ]);
          const listed = (await app.inject({ method: 'GET', url: '/v1/bans', headers: auth })).json() as {
            bans: { level: string; value: string; remaining_ms: number }[];
          };
          expect(listed.bans.map((b) => `${b.level}:${b.value}`)).to.deep.equal(['src:203.0.113.0/24']);
          expect(listed.bans[0]!.remaining_ms).to.be.within(3_500_000, 3_600_000);
          expect((await app.inject({ method: 'DELETE', url: '/v1/bans/src/x' })).statusCode).to.equal(401);
          // no field beyond the path: a query or a body is a 400, not a filter or a level ignored;
          // an empty value a 400 (it was a 404, as if the request were right and the ban missing)
          const refusedWith = async (method: 'GET' | 'DELETE', url: string, payload?: object) => {
            const r = await app.inject({ method, url, headers: auth, ...(payload && { payload }) });
            return [r.statusCode, r.json().error];
          };
          expect(await refusedWith('GET', '/v1/bans?level=src')).to.deep.equal([400, 'bad-request']);
          expect(await refusedWith('GET', '/v1/bans', { level: 'src' })).to.deep.equal([400, 'bad-request']);
          expect(await refusedWith('DELETE', '/v1/bans/src/x?level=caller')).to.deep.equal([400, 'bad-request']);
          expect(await refusedWith('DELETE', '/v1/bans/src/x', { level: 'caller' })).to.deep.equal([
            400,
            'bad-request',
          ]);
          expect(await refusedWith('DELETE', '/v1/bans/src/')).to.deep.equal([400, 'bad-request']);
          // a value as long as an id may be (256) reaches the route, past find-my-way's default
          // of 100 for a path parameter (a 400 "exceeding the max param length" before): here
          // the level's own answer, it has no ban; one past 256 is still refused
          expect(
            (await app.inject({ method: 'DELETE', url: `/v1/bans/caller/${'9'.repeat(256)}`, headers: auth })).json(),
          ).to.deep.equal({ error: 'not-found', message: 'the attribute level "caller" has no ban' });
          expect(await refusedWith('DELETE', `/v1/bans/caller/${'9'.repeat(257)}`)).to.deep.equal([400, 'bad-request']);
          expect(
            (await app.inject({ method: 'DELETE', url: '/v1/bans/caller/x', headers: auth })).json(),
          ).to.deep.include({ error: 'not-found' });
          const lifted = await app.inject({
            method: 'DELETE',
            url: `/v1/bans/src/${encodeURIComponent('203.0.113.0/24')}`,
            headers: auth,
          });
          expect(lifted.json()).to.deep.equal({ level: 'src', value: '203.0.113.0/24', lifted: true });
          const state = await inspectState(gate.config, store, { bans: true });
          expect(state.bans).to.deep.equal([]);
          // banned again (the window is still full), then lifted by the CLI
          await admit(5);
          await admit(6);
          expect((await admit(7)).reason).to.equal('banned');
          const dir = mkdtempSync(join(tmpdir(), 'callgate-unban-'));
          try {
            writeFileSync(join(dir, 'limits.json'), JSON.stringify(raw));
            let out = '';
            const sink = new Writable({
              write(chunk, _enc, done) {
                out += String(chunk);
                done();
              },
            });
            if (!hashTags) {
              await runUnban(
                {
                  config: join(dir, 'limits.json'),
                  prefix,
                  level: 'src',
                  value: '203.0.113.0/24',
                  redisUrl: suite.handle.url,
                } as UnbanArgs,
                sink,
              );
              expect(out).to.equal('lifted the ban of src:203.0.113.0/24\n');
            } else await liftBan(gate.config, store, 'src', '203.0.113.0/24');
          } finally {
            rmSync(dir, { recursive: true, force: true });
          }
          expect(await listBans(store)).to.deep.equal([]);
        } finally {
          await app.close();
          await gate.close();
          await store.clear();
        }
      });
    }
  });

  describe('the abuse trace: normal traffic and three attacks', function () {
    this.timeout(120_000);
    let dir: string;
    let handle: RedisHandle;
    let redis: Redis;
    before(async () => {
      dir = mkdtempSync(join(tmpdir(), 'callgate-abuse-'));
      writeFileSync(join(dir, 'with.trace.csv'), abuseCsv(abuseRows({ seed: 3 })));
      writeFileSync(join(dir, 'without.trace.csv'), abuseCsv(abuseRows({ seed: 3, attacks: false })));
      handle = await getRedis();
      redis = new Redis(handle.url);
    });
    after(async () => {
      rmSync(dir, { recursive: true, force: true });
      redis?.disconnect();
      await handle?.stop();
    });

    async function decide(store: Store, trace: string): Promise<DecisionLine[]> {
      const out: DecisionLine[] = [];
      await replay({
        config: parseConfig(abuseConfig()),
        tracePath: join(dir, trace),
        store,
        onDecision: (d) => void out.push(d),
      });
      return out;
    }
    const contract = (d: DecisionLine) => {
      const { time_us: _t, retry_after_ms: _r, ...rest } = d as DecisionLine & { retry_after_ms?: number };
      return rest;
    };

    it('the report: refusals per attribute level by name, the values refused most; what-if groups by level', async () => {
      const r = await replay({
        config: parseConfig(abuseConfig()),
        tracePath: join(dir, 'with.trace.csv'),
        store: new MemoryStore(),
      });
      const j = reportJson(r);
      expect(Object.keys(j.inbound.rejected_by).sort()).to.deep.equal(['caller', 'premium', 'source']);
      const top = Object.fromEntries(j.attributes!.map((a) => [a.level, a.top[0]!.value]));
      expect(top).to.deep.equal({
        caller: ATTACKS.robocaller.caller,
        premium: ATTACKS.irsf.prefix,
        source: `${ATTACKS.scanner.source}/32`,
      });
      expect(j.attributes!.find((a) => a.level === 'source')!.banned).to.be.above(0);
      expect(reportText(r)).to.include('Attribute levels: the 10 values each refused most');
      const without = parseConfig(abuseConfig());
      delete (without.inbound as { attributes?: unknown }).attributes;
      const w = (
        await compare({
          config: parseConfig(abuseConfig()),
          baseline: without,
          configName: 'new',
          baselineName: 'old',
          tracePath: join(dir, 'with.trace.csv'),
          store: new MemoryStore(),
          baselineStore: new MemoryStore(),
        })
      ).whatif;
      expect(w.groups.map((g) => g.to).sort()).to.deep.equal([
        'rejected by caller:* (banned)',
        'rejected by caller:* (rate)',
        'rejected by premium:* (rate)',
        'rejected by source:* (banned)',
        'rejected by source:* (rate)',
      ]);
    });

    it('memory, Redis and the reference model decide alike; every attack is cut, normal traffic untouched', async () => {
      const model = runModel(abuseConfig(), loadTraceForModel(join(dir, 'with.trace.csv')));
      const mem = await decide(new MemoryStore(), 'with.trace.csv');
      const store = new RedisStore({ redis, prefix: `t:abuse:${Date.now()}:` });
      const red = await decide(store, 'with.trace.csv');
      await store.clear();
      expect(mem).to.have.length(model.length);
      expect(red).to.have.length(model.length);
      for (let i = 0; i < model.length; i++) {
        expect(contract(mem[i]!), `memory, call ${i + 1}`).to.deep.equal(model[i]);
        expect(contract(red[i]!), `redis, call ${i + 1}`).to.deep.equal(model[i]);
      }
      const rows = new Map(abuseRows({ seed: 3 }).map((r) => [r.callId, r]));
      const of = (attack: string) => mem.filter((d) => rows.get(d.call_id)!.attack === attack);
      const admittedTimes = (attack: string) =>
        of(attack)
          .filter((d) => d.outcome === 'admitted')
          .map((d) => d.time_us);
      // robocaller: at most 2 a second and 10 a minute of its one caller number, across 40 trunks
      const robo = admittedTimes('robocaller');
      expect(robo.length).to.be.at.most(10);
      expect(
        of('robocaller').some(
          (d) =>
            d.outcome === 'rejected' && 'limited_by' in d && d.limited_by === `caller:${ATTACKS.robocaller.caller}`,
        ),
      ).to.equal(true);
      // IRSF: the premium range gets its 10 per 10 minutes, not 300
      expect(admittedTimes('irsf').length).to.be.at.most(10);
      // scanner: banned within one second of its start; then nothing more admitted
      const scan = of('scanner');
      const firstBan = scan.find((d) => d.outcome === 'rejected' && 'reason' in d && d.reason === 'banned')!;
      expect(firstBan.time_us - (ABUSE_START_US + ATTACKS.scanner.fromUs)).to.be.below(S);
      expect(scan.filter((d) => d.outcome === 'admitted' && d.time_us > firstBan.time_us)).to.have.length(0);
      expect(admittedTimes('scanner').length).to.be.at.most(50);
      // normal traffic: the same admissions as without the attacks
      const without = await decide(new MemoryStore(), 'without.trace.csv');
      const normal = mem.filter((d) => rows.get(d.call_id)!.attack === '');
      expect(normal.map(contract)).to.deep.equal(without.map(contract));
    });
  });
});
