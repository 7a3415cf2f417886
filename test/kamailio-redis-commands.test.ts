/**
 * `callgate kamailio` (src/kamailio/redis-commands.ts): the ndb_redis command templates decide
 * as the library does, on the same keys. A sequence of calls from one peer, each decided either
 * by a template (filled as hiredis fills it, run on Redis as Kamailio runs it) or by a CallGate
 * on a RedisStore, gets the same outcomes, levels and reasons as the library alone; releases
 * from either side give the other's channels back. Also: what a template can and cannot say.
 */
import { expect } from 'chai';
import { Redis } from 'ioredis';
import { parseConfig } from '../src/config/index.js';
import { CallGate } from '../src/gate.js';
import {
  type AdmitTemplate,
  cfgString,
  type KamailioCommands,
  kamailioCommands,
  kamailioInclude,
} from '../src/kamailio/redis-commands.js';
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

  /** Runs the steps for `peer` with prefix `prefix`; `mixed`: K steps through the templates, else the library. */
  async function run(prefix: string, mixed: boolean, peer = 'p1'): Promise<string[]> {
    const cmds = kamailioCommands(config, prefix);
    await loadAll(redis, cmds);
    const template = cmds.templates.find((t) => t.peer === peer && t.account === 'acct')!;
    const client = new Redis(server.url);
    const store = new RedisStore({ redis: client, prefix });
    const gate = await CallGate.create({ config, store, policy: 'error' });
    const out: string[] = [];
    try {
      for (const step of steps) {
        if (step[0] === 'release') {
          const [, who, callId] = step;
          if (mixed && who === 'K') {
            const r = (await redis.call(
              ...(hiredisArgs(cmds.release.command, [callId, '', callId]) as [string]),
            )) as number[];
            out.push(`release ${r[0]}`);
          } else out.push(`release ${(await gate.release(callId)) === 'released' ? 1 : 0}`);
          continue;
        }
        const [who, callId] = step;
        if (mixed && who === 'K') {
          const r = (await redis.call(
            ...(hiredisArgs(template.command, valuesOf(template, callId)) as [string]),
          )) as number[];
          const [limitedBy, retryUs, , flags] = r as [number, number, number, number];
          if (limitedBy === 0) out.push(flags === 2 ? 'dup' : 'A');
          else {
            expect(flags === 1 || retryUs > 0, 'a rate refusal has a wait').to.equal(true);
            out.push(`${template.labels[limitedBy - 1]}:${flags === 1 ? 'channels' : 'rate'}`);
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
