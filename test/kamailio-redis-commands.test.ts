/**
 * `callgate kamailio` (src/kamailio/redis-commands.ts): the ndb_redis command templates decide
 * as the library does, on the same keys. A sequence of calls from one peer, each decided either
 * by a template (filled as hiredis fills it, run on Redis as Kamailio runs it) or by a CallGate
 * on a RedisStore, gets the same outcomes, levels and reasons as the library alone; releases
 * from either side give the other's channels back. Also: what a template can and cannot say.
 */
import { expect } from 'chai';
import { Redis } from 'ioredis';
import { planFor } from '../src/admission/plan.js';
import { parseConfig } from '../src/config/index.js';
import type { CallGateConfig } from '../src/config/types.js';
import { CallGate } from '../src/gate.js';
import {
  type AdmitTemplate,
  cfgString,
  type KamailioCommands,
  type KamailioKeyLayout,
  kamailioCommands,
  kamailioInclude,
  recordsPattern,
} from '../src/kamailio/redis-commands.js';
import { laneOf, laneTag } from '../src/lease/lanes.js';
import { RedisStore } from '../src/store/redis/redis-store.js';
import { getRedis, type RedisHandle } from './helpers/redis.js';

/**
 * A template filled as kamailio-redis.cfg and hiredis fill it: the deadline (µs) spliced in at
 * '|' (default: 10 s from now), then redisvFormatCommand: split on spaces, %s a value, %% a '%'.
 */
function hiredisArgs(template: string, values: readonly string[], deadline = Date.now() * 1000 + 10_000_000): string[] {
  const [head, tail = ''] = template.split('|');
  const format = template.includes('|') ? `${head}${deadline}${tail}` : template;
  let next = 0;
  return format.split(' ').map((token) =>
    token.replace(/%[s%]/g, (m) => {
      if (m === '%%') return '%';
      const v = values[next++];
      if (v === undefined) throw new Error(`format ${format} wants more values`);
      return v;
    }),
  );
}

const hex = (s: string) => Buffer.from(s).toString('hex');

/** The buckets a call of `peer` and `account` is decided on (a plan's). */
function planBuckets(config: CallGateConfig, peer: string, account: string) {
  const plan = planFor(config, peer, account);
  if (plan === 'unknown-peer') throw new Error(`no peer ${peer}`);
  return plan.buckets;
}

/** The three values kamailio-redis.cfg passes a template (AdmitTemplate.values). */
const valuesOf = (t: AdmitTemplate, callId: string) =>
  t.values === 'iii' ? [callId, callId, callId] : [callId, '', callId];

/** Every script a template may name, and the release, loaded as route[CALLGATE_LOAD] does. */
async function loadAll(redis: Redis, cmds: KamailioCommands): Promise<void> {
  for (const s of [...cmds.admitScripts, cmds.release]) expect(await redis.script('LOAD', s.lua)).to.equal(s.sha);
}

const config = parseConfig({
  maxCallDuration: 'PT60S',
  inbound: {
    global: [{ limit: 1000, window: 'PT1S' }, { channels: 100 }],
    accounts: { acct: [{ limit: 50, window: 'PT1S' }, { channels: 4 }] },
    peers: {
      p1: [{ limit: 5, window: 'PT1S' }, { limit: 100, window: 'PT1M' }, { channels: 3 }],
      // the same limits with a fixed window: not a lone script's, so its template is admit.lua's;
      // an hour long, so that a sequence almost never straddles a window's start on the real
      // clock (a 1 s window made the sequences differ when a loaded machine ran one across a second)
      p2: [{ limit: 5, window: 'PT1H', algorithm: 'fixed-window' }, { limit: 100, window: 'PT1M' }, { channels: 3 }],
      'odd peer%{x}': [{ limit: 2, window: 'PT1S' }],
    },
  },
});

describe('callgate kamailio: ndb_redis templates decide as the library', function () {
  this.timeout(20_000);
  let server: RedisHandle;
  let redis: Redis;

  before(async () => {
    server = await getRedis();
    redis = new Redis(server.url);
  });
  after(async () => {
    redis?.disconnect();
    await server?.stop();
  });

  // call ids as Kamailio sends them: the Call-ID in hex (key-safe as it is)
  const id = (n: string) => hex(`${n}@127.0.0.1`);
  /** Steps: [who decides, call id] for admits, ['release', who, call id] for releases. */
  type Step = ['K' | 'L', string] | ['release', 'K' | 'L', string];
  const steps: Step[] = [
    ['K', id('c1')],
    ['L', id('c2')],
    ['K', id('c3')],
    ['L', id('c4')], // peer channels (3)
    ['K', id('c5')], // peer channels
    ['release', 'K', id('c1')],
    ['L', id('c6')],
    ['release', 'L', id('c2')],
    ['K', id('c7')], // the fifth in the window (p1: a second, p2: an hour): admitted
    ['L', id('c8')], // peer rate (5 per window)
    ['K', id('c9')], // peer rate
  ];

  /**
   * Runs `steps` for `peer` with prefix `prefix`; `mixed`: K steps through the templates, else the
   * library. `layout`: keys with hash tags, or a leased global level (the store alike), with
   * every lane's share set by `share` before the first step.
   */
  async function run(
    prefix: string,
    mixed: boolean,
    peer = 'p1',
    opts: { limits?: CallGateConfig; layout?: KamailioKeyLayout; share?: () => Promise<void>; steps?: Step[] } = {},
  ): Promise<string[]> {
    const limits = opts.limits ?? config;
    const layout = opts.layout ?? {};
    const cmds = kamailioCommands(limits, prefix, 1, layout);
    await loadAll(redis, cmds);
    await opts.share?.();
    const template = cmds.templates.find((t) => t.peer === peer && t.account === 'acct')!;
    const client = new Redis(server.url);
    const store = new RedisStore({
      redis: client,
      prefix,
      ...(layout.hashTags && { hashTags: true }),
      ...(layout.lease && { lease: { ...layout.lease, overflow: layout.lease.overflow === true }, hashTags: true }),
    });
    const gate = await CallGate.create({ config: limits, store, policy: 'error' });
    const out: string[] = [];
    try {
      for (const step of opts.steps ?? steps) {
        if (step[0] === 'release') {
          const [, who, callId] = step;
          if (mixed && who === 'K') {
            const r = (await redis.call(
              ...(hiredisArgs(cmds.release.command, [template.record + callId, '', callId]) as [string]),
            )) as number[];
            out.push(`release ${r[0]}`);
          } else out.push(`release ${(await gate.release(callId)) === 'released' ? 1 : 0}`);
          continue;
        }
        const [who, callId] = step;
        if (mixed && who === 'K') {
          const call = async (command: string, values: 'iii' | 'ini') =>
            (await redis.call(
              ...(hiredisArgs(command, valuesOf({ values } as AdmitTemplate, callId)) as [string]),
            )) as [number, number, number, number];
          let r = await call(template.command, template.values);
          let labels = template.labels;
          // kamailio-redis.cfg's route[SPILL]: refused for lack of calls share alone, with an overflow lane
          if (r[0] !== 0 && r[3] === 16 && template.spill !== undefined) {
            const spilled = await call(template.spill.overflow, 'iii');
            if (spilled[0] === 0 && template.spill.again === undefined) r = spilled;
            else if (spilled[0] === 0 && template.spill.again !== undefined) {
              r = await call(template.spill.again.command, template.spill.again.values);
              labels = template.spill.again.labels;
            }
          }
          const [limitedBy, retryUs, , flags] = r;
          if (limitedBy === 0) out.push(flags === 2 ? 'dup' : 'A');
          else {
            expect(flags === 1 || retryUs > 0, 'a rate refusal has a wait').to.equal(true);
            out.push(`${labels[limitedBy - 1]}:${flags === 1 ? 'channels' : 'rate'}`);
          }
        } else {
          const d = await gate.admit({ callId, peer, account: 'acct' });
          out.push(d.admitted ? 'A' : `${d.limitedBy}:${d.reason}`);
        }
      }
    } finally {
      await gate.close({ mode: 'cancel' });
      await store.close();
      client.disconnect();
    }
    return out;
  }

  for (const peer of ['p1', 'p2']) {
    it(`a sequence mixing template and library calls decides as the library alone, on shared keys (${peer})`, async () => {
      const alone = await run(`cgk-alone-${Date.now()}:`, false, peer);
      const mixed = await run(`cgk-mixed-${Date.now()}:`, true, peer);
      expect(alone).to.deep.equal([
        'A',
        'A',
        'A',
        `peer:${peer}:channels`,
        `peer:${peer}:channels`,
        'release 1',
        'A',
        'release 1',
        'A',
        `peer:${peer}:rate`,
        `peer:${peer}:rate`,
      ]);
      expect(mixed).to.deep.equal(alone);
    });
  }

  it('the write-back after Redis lost its state: the include’s reassert call brings a call’s holds back as the library holds them', async () => {
    const limits = parseConfig({
      maxCallDuration: 'PT60S',
      inbound: {
        accounts: { acct: [{ channels: 4 }] },
        peers: { 'odd%peer': [{ limit: 5, window: 'PT1S' }, { channels: 3 }] },
      },
    });
    const prefix = `cgk-back-${Date.now()}:`;
    const cmds = kamailioCommands(limits, prefix);
    // the include's table as route[CALLGATE_TABLES] fills it: `$var(cg_key) = "k"` then its value,
    // or `$sht(callgate=>k) = ...` (a string, or a number)
    const table = new Map<string, string>();
    let name = '';
    const unquote = (v: string) => (v.startsWith('"') ? (JSON.parse(v) as string) : v);
    for (const line of kamailioInclude(cmds, 'test').split('\n')) {
      const m = /^\t\$(var\(cg_key\)|sht\(callgate=>(\$var\(cg_key\)|[^)]*)\)) = (.*);$/.exec(line);
      if (m === null) continue;
      if (m[1] === 'var(cg_key)') name = unquote(m[3]!);
      else table.set(m[2] === '$var(cg_key)' ? name : m[2]!, unquote(m[3]!));
    }
    const template = cmds.templates.find((t) => t.peer === 'odd%peer' && t.account === 'acct')!;
    const hold = table.get('hold:acct:odd%peer')!;
    expect(hold, 'the holds sets in a format (its % doubled)').to.equal(
      `2 ${prefix}account:acct:ch ${prefix}peer:odd%%0025peer:ch`,
    );
    await loadAll(redis, cmds);
    expect(await redis.script('LOAD', cmds.reassert!.lua)).to.equal(cmds.reassert!.sha);
    const callId = id('held');
    const admitted = (await redis.call(
      ...(hiredisArgs(template.command, valuesOf(template, callId)) as [string]),
    )) as number[];
    expect(admitted[0], 'admitted').to.equal(0);
    const sets = template.holdKeys;
    const snapshot = async () => ({
      ends: await Promise.all(sets.map((k) => redis.zscore(k, callId))),
      record: await redis.get(`${template.record}${callId}`),
    });
    const before = await snapshot();
    expect(before.ends.every((e) => e !== null)).to.equal(true);
    // Redis loses it all (scripts stay: FLUSHDB)
    for (const k of [...sets, `${template.record}${callId}`]) await redis.del(k);
    // route[CALLGATE_HOLD_NOTE]'s entry and route[CALLGATE_HOLDS_BACK]'s call, with the end it noted
    const end = before.ends[0]!;
    const [n, ...keys] = hold.split(' ');
    const format = [
      table.get('reassert'),
      String(1 + 2 + Number(n)),
      table.get('marker'),
      `${table.get('recf')}${callId}`,
      `${table.get('tombf')}${callId}`,
      ...keys,
      '%s 0 lost none tok1 2000000 86400000 kamailio 15000000 0',
      callId,
      end,
      n,
    ].join(' ');
    const reply = (await redis.call(...(hiredisArgs(format, ['']) as [string]))) as unknown[];
    expect(reply.slice(2), 'marker missing, no other process, the call written').to.deep.equal([1, 0, 2]);
    expect(await snapshot(), 'its holds and record as before').to.deep.equal(before);
    // and the library releases it
    const client = new Redis(server.url);
    const store = new RedisStore({ redis: client, prefix });
    const gate = await CallGate.create({ config: limits, store, policy: 'error' });
    try {
      expect(await gate.release(callId)).to.equal('released');
      expect(await Promise.all(sets.map((k) => redis.exists(k)))).to.deep.equal([0, 0]);
    } finally {
      await gate.close({ mode: 'cancel' });
      await store.close();
      client.disconnect();
    }
    // with hash tags (a marker per tag) there is no write-back in the include
    const tagged = kamailioCommands(limits, prefix, 1, { hashTags: true });
    expect(tagged.reassert).to.equal(undefined);
    expect(kamailioInclude(tagged, 'test')).to.not.match(/hold:|callgate=>reassert/);
  });

  it('with hash tags: the keys a Cluster store names, each call’s record on its tag, deciding as the library', async () => {
    const cmds = kamailioCommands(config, 'cgk:', 1, { hashTags: true });
    const of = (peer: string, account = 'acct') =>
      cmds.templates.find((t) => t.peer === peer && t.account === account)!;
    // a global level: every inbound key on {in}
    expect(hiredisArgs(of('p1').command, valuesOf(of('p1'), 'id1'))).to.include('cgk:{in}:peer:p1:log');
    expect(of('p1').record).to.equal('cgk:{in}:call:in:');
    expect(cmds.release.command).to.equal(`EVALSHA ${cmds.release.sha} 1 %s %s %s`);
    // and the same decisions as the library on a store with hash tags, sharing its keys
    const layout = { hashTags: true };
    const alone = await run(`cgk-tags-alone-${Date.now()}:`, false, 'p1', { layout });
    const mixed = await run(`cgk-tags-mixed-${Date.now()}:`, true, 'p1', { layout });
    expect(mixed).to.deep.equal(alone);
    expect(alone).to.include('release 1');
  });

  it('with hash tags and no global level: each call on its account’s tag, else its peer’s; its release finds it', async () => {
    const apart = parseConfig({
      maxCallDuration: 'PT60S',
      inbound: {
        accounts: { acct: [{ limit: 50, window: 'PT1H' }, { channels: 4 }] },
        peers: {
          p1: [{ limit: 5, window: 'PT1H' }, { channels: 3 }],
          q2: [{ limit: 5, window: 'PT1H' }, { channels: 1 }],
        },
      },
    });
    const prefix = `cgk-apart-${Date.now()}:`;
    const spread = kamailioCommands(apart, prefix, 1, { hashTags: true });
    const named = Object.fromEntries(spread.templates.map((t) => [`${t.account}:${t.peer}`, t.record]));
    expect(named).to.deep.equal({
      ':p1': `${prefix}{p:p1}:call:in:`,
      'acct:p1': `${prefix}{a:acct}:call:in:`,
      ':q2': `${prefix}{p:q2}:call:in:`,
      'acct:q2': `${prefix}{a:acct}:call:in:`,
    });
    const include = kamailioInclude(spread, 'limits.json');
    expect(include.split('\n')[0]).to.equal(
      '# callgate "limits.json": generated by `callgate kamailio`; do not edit, generate again',
    );
    // a line break in the file's name stays inside the comment: nothing of it is configuration
    const odd = kamailioInclude(spread, 'x\nloadmodule "evil.so"\n#.json').split('\n');
    expect(odd[0]).to.equal(
      '# callgate "x\\nloadmodule \\"evil.so\\"\\n#.json": generated by `callgate kamailio`; do not edit, generate again',
    );
    expect(odd.filter((l) => l.includes('evil.so'))).to.have.length(1);
    expect(include).to.include(`$var(cg_key) = ${cfgString('rec:acct:q2')};`);
    expect(include).to.include(`$sht(callgate=>$var(cg_key)) = ${cfgString(`${prefix}{a:acct}:call:in:`)};`);
    // decided by the template, released by the release on the record the template names: the
    // peer's one channel back (a record named on another tag would leave it held)
    await loadAll(redis, spread);
    const t = spread.templates.find((x) => x.peer === 'q2' && x.account === '')!;
    const admit = (callId: string) =>
      redis.call(...(hiredisArgs(t.command, valuesOf(t, callId)) as [string])) as Promise<number[]>;
    const release = (record: string, callId: string) =>
      redis.call(...(hiredisArgs(spread.release.command, [record + callId, '', callId]) as [string])) as Promise<
        number[]
      >;
    expect((await admit('k1'))[0]).to.equal(0);
    expect((await admit('k2'))[0], 'the peer’s one channel').to.equal(1);
    expect((await release(spread.templates[0]!.record, 'k1'))[0], 'another tag’s record: nothing').to.equal(0);
    expect((await admit('k3'))[0]).to.equal(1);
    expect((await release(t.record, 'k1'))[0]).to.equal(1);
    expect((await admit('k4'))[0]).to.equal(0);
    expect(await redis.exists(`${prefix}{p:q2}:peer:q2:ch`, `${prefix}{p:q2}:call:in:k4`)).to.equal(2);
  });

  it("two peer/account pairs that would share one table key (':' in an id) are refused", () => {
    // account "a:b" with peer "c", account "a" with peer "b:c": both "a:b:c"; the later template
    // silently replaced the earlier, and one peer's calls were decided on the other's keys
    const colliding = parseConfig({
      inbound: {
        peers: { 'b:c': [{ limit: 10, window: 'PT1S' }], c: [{ limit: 10, window: 'PT1S' }] },
        accounts: { a: [{ limit: 50, window: 'PT1S' }], 'a:b': [{ limit: 7, window: 'PT1S' }] },
      },
    });
    expect(() => kamailioInclude(kamailioCommands(colliding), 'limits.json')).to.throw(/table key "a:b:c" names both/);
  });

  it('the records pattern matches a record key prefix of its prefix, and nothing else', () => {
    const re = new RegExp(recordsPattern('cg.x:').replace('[:space:]', '\\s'));
    for (const ok of ['cg.x:call:in:', 'cg.x:{in:2.1}:call:in:', 'cg.x:{p:odd%0020peer}:call:in:'])
      expect(re.test(ok), ok).to.equal(true);
    for (const bad of [
      'cgAx:call:in:',
      'other:call:in:',
      'cg.x:{in}:peer:p1:log',
      'cg.x:{in}:call:in:x',
      'cg.x:{}:call:in:',
      'cg.x:{a}{b}:call:in:',
      '',
    ])
      expect(re.test(bad), bad).to.equal(false);
  });

  describe('a leased global level: the templates decide on the lanes, as a leased RedisStore', () => {
    const LANES = 4;
    const leased = parseConfig({
      maxCallDuration: 'PT60S',
      inbound: {
        // an hour long, as p2's window above: a sequence never straddles the share's window
        global: [{ limit: 1000, window: 'PT1H' }, { channels: 100 }],
        accounts: { acct: [{ limit: 50, window: 'PT1H' }, { channels: 40 }], other: [] },
        peers: {
          p1: [{ limit: 20, window: 'PT1H' }, { channels: 10 }],
          // a fixed window: its template is admit.lua's
          p2: [{ limit: 20, window: 'PT1H', algorithm: 'fixed-window' }, { channels: 10 }],
          p9: [{ limit: 20, window: 'PT1S' }],
        },
      },
    });
    /** Every lane's share of the level: 5 calls a window and 3 channels, for an hour. */
    const shareOf = (prefix: string) => async () => {
      const [s, us] = (await redis.time()) as unknown as [string, string];
      const end = String((Number(s) + 3600) * 1_000_000 + Number(us));
      for (let k = 0; k < LANES; k++)
        await redis.hset(`${prefix}{${laneTag(k, LANES)}}:global:share`, 'c', '5', 'h', '3', 'e', end);
    };
    // the share refuses: its 3 channels, then its 5 calls in the window (the peer's own limits are wider)
    const shareSteps: Step[] = [
      ['K', id('c1')],
      ['L', id('c2')],
      ['K', id('c3')],
      ['L', id('c4')], // the lane's channels (3)
      ['K', id('c5')], // the lane's channels
      ['release', 'K', id('c1')],
      ['L', id('c6')],
      ['release', 'L', id('c2')],
      ['K', id('c7')], // the fifth call in the window: the share's last
      ['L', id('c8')], // the share's calls
      ['K', id('c9')], // the share's calls
    ];

    it('on its lane’s tag, with the share’s key; an account’s peers share its lane', () => {
      const layout = { lease: { lanes: LANES } };
      const cmds = kamailioCommands(leased, 'cgk:', 1, layout);
      const of = (peer: string, account: string) =>
        cmds.templates.find((t) => t.peer === peer && t.account === account)!;
      const lane = laneTag(laneOf(planBuckets(leased, 'p1', 'acct'), LANES), LANES);
      const args = hiredisArgs(of('p1', 'acct').command, valuesOf(of('p1', 'acct'), 'id1'));
      expect(args).to.include(`cgk:{${lane}}:peer:p1:log`);
      expect(args).to.include(`cgk:{${lane}}:global:share`);
      expect(hiredisArgs(of('p9', 'acct').command, valuesOf(of('p9', 'acct'), 'id1'))).to.include(
        `cgk:{${lane}}:global:share`,
      );
      expect(of('p1', 'acct').record).to.equal(`cgk:{${lane}}:call:in:`);
      // a pin moves an account's calls, with their release
      const pinned = kamailioCommands(leased, 'cgk:', 1, { lease: { lanes: LANES, pin: { accounts: { acct: 2 } } } });
      const p = pinned.templates.find((t) => t.peer === 'p1' && t.account === 'acct')!;
      expect(hiredisArgs(p.command, valuesOf(p, 'id1'))).to.include(`cgk:{${laneTag(2, LANES)}}:global:share`);
      expect(p.record).to.equal(`cgk:{${laneTag(2, LANES)}}:call:in:`);
      // what cannot be leased is refused as the store refuses it
      const two = parseConfig({
        inbound: {
          global: [
            { limit: 9, window: 'PT1S' },
            { limit: 90, window: 'PT10S' },
          ],
          peers: { p: [] },
        },
      });
      expect(() => kamailioCommands(two, 'cgk:', 1, layout)).to.throw(/exactly one sliding-log limit/);
    });

    for (const peer of ['p1', 'p2'])
      it(`a sequence mixing template and library calls decides as the library alone: the lane’s share refuses (${peer})`, async () => {
        const layout = { lease: { lanes: LANES } };
        const a = `cgk-lease-alone-${Date.now()}:`;
        const m = `cgk-lease-mixed-${Date.now()}:`;
        const alone = await run(a, false, peer, { limits: leased, layout, share: shareOf(a), steps: shareSteps });
        const mixed = await run(m, true, peer, { limits: leased, layout, share: shareOf(m), steps: shareSteps });
        expect(alone).to.deep.equal([
          'A',
          'A',
          'A',
          'global:channels',
          'global:channels',
          'release 1',
          'A',
          'release 1',
          'A',
          'global:rate',
          'global:rate',
        ]);
        expect(mixed).to.deep.equal(alone);
        // the calls not released (c3, c6, c7) hold the level's channels on the lane, whoever decided them
        const lane = laneTag(laneOf(planBuckets(leased, peer, 'acct'), LANES), LANES);
        expect(await redis.zrange(`${m}{${lane}}:global:ch`, '0', '-1')).to.have.members([
          id('c3'),
          id('c6'),
          id('c7'),
        ]);
      });
  });

  describe('with an overflow lane: a call its lane’s share refuses spills to it, as a RedisStore spills it', () => {
    const LANES = 4;
    const spilling = parseConfig({
      maxCallDuration: 'PT60S',
      inbound: {
        global: [{ limit: 1000, window: 'PT1H' }, { channels: 100 }],
        accounts: { acct: [{ limit: 50, window: 'PT1H' }, { channels: 40 }] },
        peers: {
          p1: [{ limit: 20, window: 'PT1H' }, { channels: 10 }],
          // no limit of its own, the account named by no call: the global level alone
          p0: [],
        },
      },
    });
    const end = async () => {
      const [s, us] = (await redis.time()) as unknown as [string, string];
      return String((Number(s) + 3600) * 1_000_000 + Number(us));
    };
    /** Every lane: 3 calls and 10 channels; the overflow lane: 2 calls. */
    const shares = (prefix: string) => async () => {
      const e = await end();
      for (let k = 0; k < LANES; k++)
        await redis.hset(`${prefix}{${laneTag(k, LANES)}}:global:share`, 'c', '3', 'h', '10', 'e', e);
      await redis.hset(`${prefix}{in:overflow}:global:share`, 'c', '2', 'h', '0', 'e', e);
    };
    const spillSteps: Step[] = [
      ['K', id('s1')],
      ['L', id('s2')],
      ['K', id('s3')], // the lane's share used up
      ['L', id('s4')], // spilled: the overflow lane's first
      ['K', id('s5')], // spilled: its second
      ['L', id('s6')], // the overflow lane refuses too: the lane's refusal
      ['K', id('s7')],
      // Kamailio ends the library's call and its own (with hash tags the library finds a call
      // by a locator its own admissions write: not Kamailio's, docs/kamailio.md)
      ['release', 'K', id('s4')],
      ['release', 'K', id('s5')],
    ];
    const layout = { lease: { lanes: LANES, overflow: true } };

    it('the templates: the overflow lane’s step, then the rest on the lane', () => {
      const cmds = kamailioCommands(spilling, 'cgk:', 1, layout);
      const t = cmds.templates.find((x) => x.peer === 'p1' && x.account === 'acct')!;
      expect(hiredisArgs(t.spill!.overflow, ['id1', 'id1', 'id1'])).to.include('cgk:{in:overflow}:global:share');
      // on the lane again: the level's channels (against the lane's share), no log of the level
      const again = hiredisArgs(t.spill!.again!.command, valuesOf(t.spill!.again as AdmitTemplate, 'id1'));
      const lane = laneTag(laneOf(planBuckets(spilling, 'p1', 'acct'), LANES), LANES);
      expect(again).to.include(`cgk:{${lane}}:global:ch`).and.not.include(`cgk:{${lane}}:global:log`);
      expect(t.spill!.again!.labels).to.deep.equal(t.labels);
      // a peer without limits of its own: on the lane again, the level's channels alone
      expect(cmds.templates.find((x) => x.peer === 'p0' && x.account === '')!.spill!.again!.labels).to.deep.equal([
        'global',
        'peer:p0',
      ]);
      // without an overflow lane, nothing to spill to
      expect(kamailioCommands(spilling, 'cgk:', 1, { lease: { lanes: LANES } }).templates[0]!.spill).to.equal(
        undefined,
      );
      const include = kamailioInclude(cmds, 'x');
      expect(include).to.include(`$var(cg_key) = ${cfgString('spill:acct:p1')};`);
      expect(include).to.include(`$var(cg_key) = ${cfgString('againlabels:acct:p1')};`);
    });

    it('a sequence mixing template and library calls decides as the library alone', async () => {
      const a = `cgk-spill-alone-${Date.now()}:`;
      const m = `cgk-spill-mixed-${Date.now()}:`;
      const opts = { limits: spilling, layout, steps: spillSteps };
      const alone = await run(a, false, 'p1', { ...opts, share: shares(a) });
      const mixed = await run(m, true, 'p1', { ...opts, share: shares(m) });
      expect(alone).to.deep.equal(['A', 'A', 'A', 'A', 'A', 'global:rate', 'global:rate', 'release 1', 'release 1']);
      expect(mixed).to.deep.equal(alone);
      // the level counted the spilled calls on the overflow lane, their channels on their lane
      expect(await redis.zcard(`${m}{in:overflow}:global:log`)).to.equal(2);
      const lane = laneTag(laneOf(planBuckets(spilling, 'p1', 'acct'), LANES), LANES);
      expect(await redis.zrange(`${m}{${lane}}:global:ch`, '0', '-1')).to.have.members([id('s1'), id('s2'), id('s3')]);
    });
  });

  it('a call a RedisStore sends alone to a lone script gets that script as its template', () => {
    const cmds = kamailioCommands(config, 'cgk:');
    const [admit, lone, held] = cmds.admitScripts.map((s) => s.sha);
    const of = (peer: string) => cmds.templates.find((t) => t.peer === peer && t.account === 'acct')!;
    // sliding logs with channels: admit-lone-held.lua, the call's id as each value, now '-'
    expect(of('p1').command.startsWith(`EVALSHA ${held} `)).to.equal(true);
    expect(of('p1').values).to.equal('iii');
    expect(hiredisArgs(of('p1').command, valuesOf(of('p1'), 'id9'))).to.include('-');
    // a fixed window: admit.lua, the id, now ('') and the id
    expect(of('p2').command.startsWith(`EVALSHA ${admit} `)).to.equal(true);
    expect(of('p2').values).to.equal('ini');
    // no channel limit anywhere: admit-lone.lua
    const plain = kamailioCommands(parseConfig({ inbound: { peers: { q: [{ limit: 5, window: 'PT1S' }] } } }), 'cgk:')
      .templates[0]!;
    expect(plain.command.startsWith(`EVALSHA ${lone} `)).to.equal(true);
    expect(plain.values).to.equal('iii');
  });

  it('a level without limits and no channel anywhere: admit.lua, deciding as the library', async () => {
    const bare = parseConfig({ inbound: { global: [{ limit: 5, window: 'PT1S' }], peers: { q: [] } } });
    const prefix = `cgk-bare-${Date.now()}:`;
    const cmds = kamailioCommands(bare, prefix);
    await loadAll(redis, cmds);
    const t = cmds.templates.find((x) => x.peer === 'q' && x.account === '')!;
    expect(t.command.startsWith(`EVALSHA ${cmds.admit.sha} `)).to.equal(true);
    expect(t.values).to.equal('ini');
    const decided: number[] = [];
    for (let i = 0; i < 6; i++) {
      const r = (await redis.call(...(hiredisArgs(t.command, valuesOf(t, `b${i}`)) as [string]))) as number[];
      decided.push(r[0]!);
    }
    // five in the second, then the global level (the first bucket) refuses
    expect(decided).to.deep.equal([0, 0, 0, 0, 0, 1]);
  });

  it('an admit Redis runs past its deadline is skipped: decided nowhere, counted nowhere', async () => {
    const prefix = `cgk-late-${Date.now()}:`;
    const cmds = kamailioCommands(config, prefix);
    await loadAll(redis, cmds);
    const template = cmds.templates.find((t) => t.peer === 'p1' && t.account === '')!;
    const late = hiredisArgs(template.command, valuesOf(template, 'late'), Date.now() * 1000 - 1_000);
    const r = (await redis.call(...(late as [string]))) as number[];
    expect(r[3], 'flags: skipped').to.equal(4);
    expect(await redis.exists(`${prefix}peer:p1:log`, `${prefix}peer:p1:ch`, `${prefix}call:in:late`)).to.equal(0);
  });

  it('keys of any peer name are the library’s; what a template cannot say is refused', async () => {
    const cmds = kamailioCommands(config, 'cgk:');
    const odd = cmds.templates.find((t) => t.peer === 'odd peer%{x}' && t.account === '')!;
    // %XXXX escapes of the peer name reach Redis as the library writes them
    const args = hiredisArgs(odd.command, valuesOf(odd, 'id1'));
    expect(args).to.include('cgk:peer:odd%0020peer%0025%007Bx%007D:log');
    expect(odd.labels).to.deep.equal(['global', 'peer:odd peer%{x}']);
    expect(() => kamailioCommands(config, 'a b:')).to.throw(/prefix/);
    expect(() => kamailioCommands(config, 'a%:')).to.throw(/prefix/);
    expect(() => kamailioCommands(config, 'a|:')).to.throw(/prefix/);
    // the include: one table entry per peer and account, the scripts to load after a NOSCRIPT
    const text = kamailioInclude(cmds, 'limits.json');
    expect(text).to.include('route[CALLGATE_TABLES]');
    expect(text).to.include(`$var(cg_key) = ${cfgString('admit:acct:odd peer%{x}')};`);
    expect(text).to.include(`#!define CALLGATE_ADMIT_SHA "${cmds.admit.sha}"`);
    expect(cfgString('a"b\\c\nd')).to.equal('"a\\"b\\\\c\\nd"');
    expect(text).to.include(`$var(cg_key) = ${cfgString('values:acct:odd peer%{x}')};`);
    // the SHA-1s Kamailio runs are the ones Redis gives the scripts
    await loadAll(redis, cmds);
  });
});
