/**
 * `callgate serve` as an operator runs it: a child process on a real Redis, over real HTTP on
 * loopback. Limits shared by two sidecars, reload on SIGHUP and on file change, readiness
 * following Redis, a graceful stop that answers what is in flight, and the refusals to start.
 */
import { expect } from 'chai';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import { laneOf, laneTag } from '../src/lease/lanes.js';
import { rawCommand, startRedisServer, type RedisServer } from './helpers/redis.js';
import { runNode } from './helpers/run.js';
import { logScripts, scriptsRun, type Send, stopLoggingScripts } from './helpers/script-log.js';
import { leaseGauges, startSidecarProcess, type SidecarProcess } from './helpers/sidecar.js';

const ROOT = new URL('..', import.meta.url).pathname;

type Json = Record<string, unknown>;

async function call(url: string, body?: unknown): Promise<{ status: number; json: Json }> {
  const r = await fetch(
    url,
    body === undefined
      ? { method: 'GET' }
      : { method: 'POST', body: JSON.stringify(body), headers: { 'content-type': 'application/json' } },
  );
  return { status: r.status, json: (await r.json()) as Json };
}

const limits = (peerLimit: number) =>
  JSON.stringify({
    inbound: { peers: { p1: [{ limit: peerLimit, window: 'PT10S' }] } },
    outbound: { carriers: { A: { cps: 5, maxWait: 'PT1S' } } },
  });

describe('callgate serve (the command, on Redis)', function () {
  this.timeout(60_000);
  let redis: RedisServer;
  let dir: string;
  const sidecars: SidecarProcess[] = [];
  before(async () => {
    redis = await startRedisServer();
    dir = mkdtempSync(join(tmpdir(), 'callgate-serve-'));
  });
  afterEach(async () => {
    await Promise.all(sidecars.splice(0).map((s) => s.stop('SIGKILL')));
  });
  after(async () => {
    await redis?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  const start = async (
    config: string,
    more: string[] = [],
    prefix = `cgserve:${randomBytes(4).toString('hex')}:`,
    url = redis.url,
  ) => {
    const s = await startSidecarProcess([
      '--config',
      config,
      '--store',
      'redis',
      '--redis-url',
      url,
      '--prefix',
      prefix,
      '--timeout-ms',
      '3000',
      ...more,
    ]);
    sidecars.push(s);
    return s;
  };
  const file = (name: string, text: string) => {
    const p = join(dir, name);
    writeFileSync(p, text);
    return p;
  };

  it('two sidecars on one Redis share the limits: exactly the limit admitted across both', async () => {
    const config = file('shared.json', limits(5));
    const prefix = `cgserve:${randomBytes(4).toString('hex')}:`;
    const [a, b] = await Promise.all([start(config, [], prefix), start(config, [], prefix)]);
    const answers = await Promise.all(
      Array.from({ length: 16 }, (_, i) => call(`${(i % 2 ? a : b).url}/v1/admit`, { call_id: `c${i}`, peer: 'p1' })),
    );
    const outcomes = answers.map((r) => r.json.outcome);
    expect(outcomes.filter((o) => o === 'admitted')).to.have.length(5);
    expect(outcomes.filter((o) => o === 'rejected')).to.have.length(11);
    for (const r of answers.filter((x) => x.json.outcome === 'rejected')) {
      expect(r.json).to.deep.include({ limited_by: 'peer:p1' });
      expect((r.json.sip as Json).status).to.equal(503);
    }
    expect((await call(`${a.url}/readyz`)).json).to.deep.equal({ status: 'ready', store: 'redis' });
  });

  it('a body declared latin1 or sent gzipped is a 415 over HTTP, counted nowhere; UTF-8 as is decides', async () => {
    const s = await start(file('coding.json', limits(1)));
    const admit = async (body: Buffer, headers: Record<string, string>) => {
      const r = await fetch(`${s.url}/v1/admit`, { method: 'POST', body: new Uint8Array(body), headers });
      return { status: r.status, acceptEncoding: r.headers.get('accept-encoding'), json: (await r.json()) as Json };
    };
    const reads =
      'the sidecar reads application/json in UTF-8 (charset=utf-8 or none; an ASCII body in latin1 or us-ascii too) with no content-encoding';
    const refused = (message: string, acceptEncoding: string | null) => ({
      status: 415,
      acceptEncoding,
      json: { error: 'unsupported-media-type', message, problems: [message] },
    });
    // the latin1 bytes of `Ã©` are the UTF-8 bytes of `é`: read as UTF-8, they were the call `é`
    const latin1 = await admit(Buffer.from('{"call_id":"Ã©","peer":"p1"}', 'latin1'), {
      'content-type': 'application/json; charset=latin1',
    });
    expect(latin1).to.deep.equal(refused(`body: got content-type "application/json; charset=latin1"; ${reads}`, null));
    const gzip = await admit(gzipSync('{"call_id":"g","peer":"p1"}'), {
      'content-type': 'application/json',
      'content-encoding': 'gzip',
    });
    expect(gzip).to.deep.equal(refused(`body: got content-encoding "gzip"; ${reads}`, 'identity'));
    // p1 takes one call in 10 s: the refused ones took nothing
    const utf8 = await admit(Buffer.from('{"call_id":"é","peer":"p1"}'), {
      'content-type': 'application/json; charset="UTF-8"',
    });
    expect([utf8.status, utf8.json.call_id, utf8.json.outcome]).to.deep.equal([200, 'é', 'admitted']);
  });

  for (const overflow of [[], ['--lease-overflow']])
    it(`--lease-lanes${overflow.length ? ' --lease-overflow' : ''}: two sidecars lease the global level; never over it across both, and both admit`, async () => {
      const config = file(
        'leased.json',
        JSON.stringify({
          inbound: { global: [{ limit: 40, window: 'PT60S' }], defaultPeer: [{ limit: 1000, window: 'PT60S' }] },
        }),
      );
      const prefix = `cglease:${randomBytes(4).toString('hex')}:`;
      const [a, b] = await Promise.all([
        start(config, ['--lease-lanes', '4', ...overflow], prefix),
        start(config, ['--lease-lanes', '4', ...overflow], prefix),
      ]);
      await new Promise((r) => setTimeout(r, 500)); // the first shares
      // 16 peers over the lanes, 60 calls: the level admits at most 40, and a fair part of them
      const answers = await Promise.all(
        Array.from({ length: 60 }, (_, i) =>
          call(`${(i % 2 ? a : b).url}/v1/admit`, { call_id: `l${i}`, peer: `p${i % 16}` }),
        ),
      );
      const admitted = answers.filter((r) => r.json.outcome === 'admitted');
      expect(admitted.length).to.be.at.most(40).and.at.least(20);
      for (const r of answers.filter((x) => x.json.outcome === 'rejected'))
        expect(r.json).to.deep.include({ limited_by: 'global' });
      // the lanes' keys, not the one {in} tag
      expect(await rawCommand(redis.port, ['EXISTS', `${prefix}{in}:global:log`])).to.equal(0);
      // /metrics: one leader, whose lanes' shares and pool make up the level's limit
      const [ma, mb] = await Promise.all([leaseGauges(a.url), leaseGauges(b.url)]);
      const leaders = [ma, mb].filter((m) => m.get('callgate_lease_leader{level="global"}') === 1);
      expect(leaders).to.have.length(1);
      expect([ma, mb].map((m) => m.get('callgate_lease_leader{level="global"}')).sort()).to.deep.equal([0, 1]);
      const lead = leaders[0]!;
      let calls = lead.get('callgate_lease_unshared{level="global",part="pool",resource="calls"}')!;
      for (const [k, v] of lead)
        if (k.startsWith('callgate_lease_share{') && k.includes('resource="calls"')) calls += v;
      expect(calls).to.equal(40);
      expect(lead.get('callgate_lease_lanes_lost{level="global"}')).to.equal(0);
      // the overflow lane, by name (without --lease-overflow it is read and drained: no share),
      // and the calls it admitted (the lanes split the level evenly at first: 8 each of 5, fewer
      // than the calls on any one lane)
      const ovf = lead.get('callgate_lease_share{level="global",lane="overflow",resource="calls"}');
      if (overflow.length === 0) expect(ovf).to.equal(0);
      else expect(ovf).to.be.a('number');
      const spills = (ma.get('callgate_lease_spilled_total') ?? 0) + (mb.get('callgate_lease_spilled_total') ?? 0);
      if (overflow.length > 0) expect(spills).to.be.greaterThan(0);
      else expect(spills).to.equal(0);
    });

  it('--lease-pin: a pinned peer is decided on its lane; /v1/state finds it there', async () => {
    const config = file(
      'pinned.json',
      JSON.stringify({
        inbound: { global: [{ limit: 40, window: 'PT60S' }], defaultPeer: [{ limit: 1000, window: 'PT60S' }] },
      }),
    );
    const prefix = `cgpin:${randomBytes(4).toString('hex')}:`;
    // p0 hashes to lane 1 of 4: pinned to lane 2
    const g = { name: 'global', limits: [{ algorithm: 'sliding-log' as const, limit: 40, windowUs: 60e6 }] };
    expect(laneOf([g, { name: 'peer:p0', limits: [] }], 4)).to.equal(1);
    const s = await start(config, ['--lease-lanes', '4', '--lease-pin', 'peer:p0=2'], prefix);
    await new Promise((r) => setTimeout(r, 500)); // the first shares
    for (let i = 0; i < 3; i++)
      expect((await call(`${s.url}/v1/admit`, { call_id: `pin${i}`, peer: 'p0' })).json.outcome).to.equal('admitted');
    const keys = (await rawCommand(redis.port, ['KEYS', `${prefix}*peer:p0*`])) as string[];
    expect(keys.length).to.be.greaterThan(0);
    for (const k of keys) expect(k).to.include(`{${laneTag(2, 4)}}`);
    const state = (await call(`${s.url}/v1/state?peer=p0`)).json as {
      buckets: { bucket: string; limits: { count: number }[] }[];
    };
    expect(state.buckets.find((b) => b.bucket === 'peer:p0')?.limits[0]?.count).to.equal(3);
  });

  it('--leased-carriers: the carrier paces within its share (none yet: the next carrier), then within a grant', async () => {
    const config = file(
      'leased-carriers.json',
      JSON.stringify({
        outbound: { carriers: { x: { cps: 10, maxWait: 'PT0.5S' }, y: { cps: 100, maxWait: 'PT1S' } } },
      }),
    );
    const prefix = `cglc:${randomBytes(4).toString('hex')}:`;
    const s = await start(config, ['--leased-carriers', 'x'], prefix);
    // no coordinator has granted x a share: it refuses, the call goes to y
    expect((await call(`${s.url}/v1/reserve`, { call_id: 'lc1', route: ['x', 'y'] })).json.carrier).to.equal('y');
    // a share of 2 calls a second, as a coordinator's grant would write it (on the single Redis:
    // no hash tag); a third call would wait a second for room in it, past x's maxWait
    const [sec] = (await rawCommand(redis.port, ['TIME'])) as string[];
    await rawCommand(redis.port, [
      'HSET',
      `${prefix}carrier:x:share`,
      'c',
      '2',
      'h',
      '0',
      'e',
      String((Number(sec) + 60) * 1e6),
    ]);
    const carriers: unknown[] = [];
    for (const id of ['lc2', 'lc3', 'lc4'])
      carriers.push((await call(`${s.url}/v1/reserve`, { call_id: id, route: ['x', 'y'] })).json.carrier);
    expect(carriers).to.deep.equal(['x', 'x', 'y']);
  });

  it('--lease-lanes without --store redis, or out of range; a number option not a whole number: exit 2, one line', async () => {
    const config = file('lease-bad.json', limits(5));
    for (const [extra, message] of [
      [['--lease-lanes', '4'], /--lease-lanes needs --store redis/],
      [
        ['--store', 'redis', '--redis-url', redis.url, '--lease-lanes', '0'],
        /--lease-lanes: expected an integer from 1 to 1024/,
      ],
      [
        ['--store', 'redis', '--redis-url', redis.url, '--lease-wait-replicas', '1'],
        /--lease-wait-replicas needs --lease-lanes/,
      ],
      [['--store', 'redis', '--redis-url', redis.url, '--lease-overflow'], /--lease-overflow needs --lease-lanes/],
      [['--leased-carriers', 'x'], /--leased-carriers needs --store redis/],
      [
        ['--store', 'redis', '--redis-url', redis.url, '--leased-carriers', 'x,'],
        /--leased-carriers: an empty carrier id/,
      ],
      [
        ['--store', 'redis', '--redis-url', redis.url, '--leased-carriers', 'nope'],
        /a leased carrier must be configured/,
      ],
      // what was typed, quoted, not NaN
      [['--channels-status', '486.5'], /--channels-status: expected .* got "486\.5"/],
      [['--timeout-ms', '1e3'], /--timeout-ms: expected an integer from 1 to 60000, got "1e3"/],
      [
        ['--store', 'redis', '--redis-url', redis.url, '--lease-lanes', '4', '--lease-wait-replicas', '-1'],
        /--lease-wait-replicas: expected an integer from 0 to 16, got "-1"/,
      ],
    ] as const) {
      const r = await runNode(
        [join(ROOT, 'bin/callgate.js'), 'serve', '--config', config, '--listen', '127.0.0.1:0', ...extra],
        {
          cwd: ROOT,
          env: { CALLGATE_TOKEN: '' },
          timeoutMs: 20_000,
        },
      );
      expect(r.code, r.stderr).to.equal(2);
      expect(r.stderr).to.match(message);
      expect(r.stderr.trim().split('\n')).to.have.length(1);
    }
  });

  it('--max-batch, --max-in-flight, --lone-up-to: the script calls of a burst that waited, the limit exact', async () => {
    // Redis paused for scripts (CLIENT PAUSE WRITE): the first calls go out and wait there (one
    // per batch in flight), the other calls wait in the sidecar and leave together once the
    // first batch is back, split by --max-batch; a batch of up to --lone-up-to plain admissions
    // goes as one admit-lone-run call. The admission scripts Redis ran are read in order (the
    // holds keeper's, on a timer of their own, left out).
    const send: Send = (args) => rawCommand(redis.port, args);
    const admits = async () => (await scriptsRun(send)).filter((name) => name.startsWith('admit'));
    // p2 for a first decision, which connects the sidecar to Redis (its holds keeper's
    // scripts at the connection are not counted)
    const config = file(
      'batching.json',
      JSON.stringify({
        inbound: { peers: { p1: [{ limit: 5, window: 'PT10S' }], p2: [{ limit: 5, window: 'PT10S' }] } },
      }),
    );
    const lone = (n: number) => Array<string>(n).fill('admit-lone');
    const run = (n: number) => Array<string>(n).fill('admit-lone-run');
    for (const [flags, expected] of [
      [[], [...lone(2), 'admit']], // 1 and 1 in flight, then 10
      [
        ['--max-in-flight', '1'],
        [...lone(1), 'admit'],
      ], // 1, then 11
      [['--max-batch', '1'], lone(12)],
      [
        ['--max-batch', '4'],
        [...lone(2), ...run(3)],
      ], // 1, 1, then 4, 4, 2
      [
        ['--max-batch', '4', '--lone-up-to', '3'],
        [...lone(2), 'admit', 'admit', ...run(1)],
      ],
      [
        ['--max-batch', '4', '--lone-up-to', '1'],
        [...lone(2), 'admit', 'admit', 'admit'],
      ],
    ] as const) {
      const s = await start(config, [...flags]);
      expect((await call(`${s.url}/v1/admit`, { call_id: 'first', peer: 'p2' })).json.outcome).to.equal('admitted');
      await logScripts(send);
      await rawCommand(redis.port, ['CLIENT', 'PAUSE', '1500', 'WRITE']);
      // the first two alone (each in a batch of its own, waiting on Redis), then ten at once
      const admitB = (i: number) => call(`${s.url}/v1/admit`, { call_id: `b${i}`, peer: 'p1' });
      const first = [admitB(0)];
      await new Promise((r) => setTimeout(r, 150));
      first.push(admitB(1));
      await new Promise((r) => setTimeout(r, 150));
      const answers = [...(await Promise.all([...first, ...Array.from({ length: 10 }, (_, i) => admitB(i + 2))]))];
      expect(
        answers.filter((a) => a.json.outcome === 'admitted'),
        flags.join(' '),
      ).to.have.length(5);
      expect(await admits(), flags.join(' ')).to.deep.equal(expected);
      await s.stop('SIGKILL');
    }
    await stopLoggingScripts(send);
  });

  it('--max-batch, --max-in-flight, --lone-up-to: out of range or without --store redis, exit 2, one line', async () => {
    const config = file('batch-bad.json', limits(5));
    const onRedis = ['--store', 'redis', '--redis-url', redis.url];
    for (const [extra, message] of [
      [[...onRedis, '--max-batch', '0'], /--max-batch: expected an integer from 1 to 1000, got 0/],
      [[...onRedis, '--max-batch', '1001'], /--max-batch: expected an integer from 1 to 1000, got 1001/],
      [[...onRedis, '--max-in-flight', '65'], /--max-in-flight: expected an integer from 1 to 64, got 65/],
      [[...onRedis, '--lone-up-to', 'two'], /--lone-up-to: expected an integer from 1 to 1000, got "two"/],
      [['--lone-up-to', '2'], /--lone-up-to needs --store redis/],
    ] as const) {
      const r = await runNode(
        [join(ROOT, 'bin/callgate.js'), 'serve', '--config', config, '--listen', '127.0.0.1:0', ...extra],
        { cwd: ROOT, env: { CALLGATE_TOKEN: '' }, timeoutMs: 20_000 },
      );
      expect(r.code, r.stderr).to.equal(2);
      expect(r.stderr).to.match(message);
      expect(r.stderr.trim().split('\n')).to.have.length(1);
    }
  });

  it('reloads on SIGHUP (file watch off) and on file change; a bad file is logged and ignored', async () => {
    const hup = file('hup.json', limits(1));
    const s = await start(hup, ['--no-watch']);
    expect((await call(`${s.url}/v1/admit`, { call_id: 'h1', peer: 'p1' })).json.outcome).to.equal('admitted');
    expect((await call(`${s.url}/v1/admit`, { call_id: 'h2', peer: 'p1' })).json.outcome).to.equal('rejected');
    writeFileSync(hup, limits(3));
    s.child.kill('SIGHUP');
    await s.waitFor(/configuration reloaded/);
    expect((await call(`${s.url}/v1/admit`, { call_id: 'h3', peer: 'p1' })).json.outcome).to.equal('admitted');

    const watched = file('watched.json', limits(1));
    const w = await start(watched);
    expect((await call(`${w.url}/v1/admit`, { call_id: 'w1', peer: 'p1' })).json.outcome).to.equal('admitted');
    writeFileSync(watched, '{"inbound": {"peers": {"p1": [{"limit": -1, "window": "PT10S"}]}}}');
    const bad = await w.waitFor(/inbound\.peers\.p1\[0\]\.limit: expected a positive integer/);
    // said as a failed reload, as SIGHUP's is (it read "engine error (the configuration …)")
    expect(bad).to.match(/reload on file change failed; the configuration in force is unchanged/);
    expect(
      (await call(`${w.url}/v1/admit`, { call_id: 'w2', peer: 'p1' })).json.outcome,
      'the old limit (1) stays',
    ).to.equal('rejected');
    writeFileSync(watched, limits(4));
    await w.waitFor(/configuration reloaded/);
    expect((await call(`${w.url}/v1/admit`, { call_id: 'w3', peer: 'p1' })).json.outcome).to.equal('admitted');
  });

  it('a Redis that stalls: one line when a decision gives up on it, one when it answers again', async () => {
    const stalled = await startRedisServer();
    try {
      const config = file('stall.json', limits(100));
      // (the last --timeout-ms given wins)
      const s = await start(config, ['--timeout-ms', '200'], undefined, stalled.url);
      expect((await call(`${s.url}/v1/admit`, { call_id: 's0', peer: 'p1' })).json.outcome).to.equal('admitted');
      stalled.pause();
      for (let i = 1; i <= 3; i++)
        expect((await call(`${s.url}/v1/admit`, { call_id: `s${i}`, peer: 'p1' })).json.limited_by).to.equal(
          'store-unavailable',
        );
      await s.waitFor(/did not answer a decision within 200 ms; decisions follow policy fail-closed while it does not/);
      stalled.resume();
      expect((await call(`${s.url}/v1/admit`, { call_id: 's4', peer: 'p1' })).json.outcome).to.equal('admitted');
      await s.waitFor(/answers decisions again/);
      expect(s.lines.filter((l) => /did not answer a decision/.test(l))).to.have.length(1);
    } finally {
      stalled.resume();
      await stalled.stop();
    }
  });

  it('a SIGHUP while it starts is a reload once it is up; one while it stops is nothing; never its end', async () => {
    const stalled = await startRedisServer();
    try {
      stalled.pause(); // the start waits for Redis: a long window for signals
      const config = file('early.json', limits(1));
      const s = await startSidecarProcess(
        ['--config', config, '--store', 'redis', '--redis-url', stalled.url, '--no-watch'],
        {},
        20_000,
        (child) => {
          // while modules load (from 0.1 s, once Node runs the command), while Redis does not answer
          for (const ms of [300, 700, 1_200]) setTimeout(() => child.kill('SIGHUP'), ms);
          setTimeout(() => stalled.resume(), 1_800);
        },
      );
      await s.waitFor(/configuration reloaded/);
      expect((await call(`${s.url}/v1/admit`, { call_id: 'e1', peer: 'p1' })).json.outcome).to.equal('admitted');
      // a stop that takes a while (Redis stalls as the store closes): a SIGHUP meanwhile
      stalled.pause();
      s.child.kill('SIGTERM');
      await s.waitFor(/stopping: finishing requests in flight/);
      s.child.kill('SIGHUP');
      setTimeout(() => stalled.resume(), 300);
      expect(await s.exited, s.lines.join('\n')).to.equal(0);
      expect(s.lines.some((l) => /"msg":"stopped"/.test(l))).to.equal(true);
    } finally {
      stalled.resume();
      await stalled.stop();
    }
  });

  it('SIGTERM: requests in flight are answered with real decisions, then it exits 0, releasing no channel', async () => {
    const prefix = `cgserve:${randomBytes(4).toString('hex')}:`;
    const config = file(
      'term.json',
      JSON.stringify({ inbound: { peers: { p1: [{ limit: 5, window: 'PT10S' }, { channels: 100 }] } } }),
    );
    const s = await start(config, [], prefix);
    // Redis holds every command for 800 ms: the admissions below are in flight when SIGTERM comes
    await rawCommand(redis.port, ['CLIENT', 'PAUSE', '800', 'ALL']);
    const inFlight = Array.from({ length: 12 }, (_, i) => call(`${s.url}/v1/admit`, { call_id: `t${i}`, peer: 'p1' }));
    await new Promise((r) => setTimeout(r, 200));
    const code = s.stop('SIGTERM');
    const answers = await Promise.all(inFlight);
    const exitCode = await code;
    expect(exitCode, `${String(s.child.signalCode)}\n${s.lines.join('\n')}`).to.equal(0);
    expect(answers.map((a) => a.status)).to.deep.equal(Array(12).fill(200));
    expect(answers.filter((a) => a.json.outcome === 'admitted')).to.have.length(5);
    for (const a of answers) expect(a.json.degraded, JSON.stringify(a.json)).to.equal(undefined);
    await s.waitFor(/"msg":"stopped"/);
    // the port is closed
    let refused = false;
    await fetch(`${s.url}/healthz`).catch(() => (refused = true));
    expect(refused).to.equal(true);
    // the admitted calls still hold their channels for the next sidecar on this Redis
    const next = await start(config, [], prefix);
    const state = (await call(`${next.url}/v1/state`)).json as { buckets: { channels: unknown }[] };
    expect(state.buckets[0]!.channels).to.deep.equal({ limit: 100, in_use: 5 });
    expect(
      (
        await call(`${next.url}/v1/release`, {
          call_id: answers.find((a) => a.json.outcome === 'admitted')!.json.call_id,
        })
      ).json.outcome,
    ).to.equal('released');
  });

  it('readiness follows Redis; decisions while it is away follow the policy (fail-closed: 503)', async () => {
    const own = await startRedisServer();
    try {
      const s = await startSidecarProcess([
        '--config',
        file('ready.json', limits(5)),
        '--store',
        'redis',
        '--redis-url',
        own.url,
        '--timeout-ms',
        '300',
      ]);
      sidecars.push(s);
      const ready = async () => {
        const deadline = Date.now() + 10_000;
        while ((await call(`${s.url}/readyz`)).status !== 200 && Date.now() < deadline)
          await new Promise((r) => setTimeout(r, 100));
        return (await call(`${s.url}/readyz`)).status;
      };
      expect(await ready()).to.equal(200);
      await own.kill();
      const down = await call(`${s.url}/readyz`);
      expect(down.status).to.equal(503);
      expect(down.json.status).to.equal('unavailable');
      // in an operator's words, not ioredis' ("Stream isn't writeable and enableOfflineQueue …")
      expect(down.json.message).to.not.match(/enableOfflineQueue|Stream isn't writeable/);
      expect((await call(`${s.url}/healthz`)).status, 'the process itself is up').to.equal(200);
      const d = await call(`${s.url}/v1/admit`, { call_id: 'r1', peer: 'p1' });
      expect(d.json).to.deep.include({
        outcome: 'rejected',
        limited_by: 'store-unavailable',
        degraded: 'fail-closed',
        sip: { status: 503, reason: 'Service Unavailable', headers: {} },
      });
      const o = await call(`${s.url}/v1/reserve`, { call_id: 'o1', route: ['A'] });
      expect(o.json).to.deep.include({ outcome: 'failed', reason: 'store-unavailable' });
      await s.waitFor(/unreachable; decisions follow policy fail-closed/);
      // the operator's routes say the outage too: 503, never a 500 (a bug)
      for (const url of ['/v1/state', '/v1/holds?bucket=peer:p1', '/v1/bans']) {
        const r = await call(`${s.url}${url}`);
        expect([r.status, r.json.error], url).to.deep.equal([503, 'store-unavailable']);
        expect(r.json.message, url).to.not.match(/enableOfflineQueue|Stream isn't writeable/);
      }
      const reset = await call(`${s.url}/v1/reset`, { bucket: 'peer:p1' });
      expect([reset.status, reset.json.error], '/v1/reset').to.deep.equal([503, 'store-unavailable']);
      await own.restart();
      expect(await ready()).to.equal(200);
      expect((await call(`${s.url}/v1/admit`, { call_id: 'r2', peer: 'p1' })).json.outcome).to.equal('admitted');
      expect(
        s.lines.filter((l) => /unreachable/.test(l)),
        'one line per outage',
      ).to.have.length(1);
      // and no second, error-level line for it ("engine error (the configuration …)")
      expect(s.lines.filter((l) => /engine error|"level":50/.test(l))).to.deep.equal([]);
    } finally {
      await own.stop();
    }
  });

  it('a stalled Redis (SIGSTOP): the operator routes and /metrics answer in seconds, SIGTERM stops it', async () => {
    const own = await startRedisServer();
    try {
      const config = file(
        'stall.json',
        JSON.stringify({ inbound: { peers: { p1: [{ limit: 100, window: 'PT1S' }, { channels: 5 }] } } }),
      );
      const s = await startSidecarProcess(['--config', config, '--store', 'redis', '--redis-url', own.url]);
      sidecars.push(s);
      expect((await call(`${s.url}/v1/admit`, { call_id: 'c1', peer: 'p1' })).json.outcome).to.equal('admitted');
      own.pause();
      // each answers within its bound (2 s), where before none answered until Redis woke
      const timed = async (url: string, init?: RequestInit) => {
        const started = Date.now();
        const r = await fetch(`${s.url}${url}`, { ...init, signal: AbortSignal.timeout(6_000) });
        return { ms: Date.now() - started, status: r.status, text: await r.text() };
      };
      for (const url of ['/v1/state', '/v1/holds?bucket=peer:p1', '/v1/bans']) {
        const r = await timed(url);
        expect(r.ms, url).to.be.below(4_000);
        expect([r.status, (JSON.parse(r.text) as Json).error], url).to.deep.equal([503, 'store-unavailable']);
      }
      const reset = await timed('/v1/reset', {
        method: 'POST',
        body: JSON.stringify({ bucket: 'peer:p1' }),
        headers: { 'content-type': 'application/json' },
      });
      expect(reset.status, '/v1/reset').to.equal(503);
      expect((JSON.parse(reset.text) as Json).message).to.match(/the reset was sent and may still apply/);
      // a scrape gets the process' series, without the live ones, rather than timing out
      const metrics = await timed('/metrics');
      expect(metrics.ms, '/metrics').to.be.below(4_000);
      expect(metrics.status).to.equal(200);
      expect(metrics.text).to.match(/^callgate_decisions_total/m);
      expect(metrics.text).to.not.match(/^callgate_channels_in_use\{/m);
      // SIGTERM: it stops within seconds (it waited for Redis to answer its QUIT, forever under a cut)
      const started = Date.now();
      expect(await s.stop('SIGTERM', 15_000)).to.equal(0);
      expect(Date.now() - started, 'stopped while Redis still slept').to.be.below(8_000);
    } finally {
      own.resume();
      await own.stop();
    }
  });

  it('refuses to start, exit 2, one line: a non-loopback address without a token, a bad address, a bad file', async () => {
    const config = file('ok.json', limits(1));
    const run = (args: string[], env: NodeJS.ProcessEnv = {}) =>
      runNode([join(ROOT, 'bin/callgate.js'), 'serve', '--config', config, ...args], {
        cwd: ROOT,
        env: { CALLGATE_TOKEN: '', ...env },
        timeoutMs: 20_000,
      });
    const open = await run(['--listen', '0.0.0.0:0']);
    expect(open.code).to.equal(2);
    expect(open.stderr).to.match(
      /^error: --listen 0\.0\.0\.0:0 is not a loopback address: .*Set a token \(CALLGATE_TOKEN or --token\)/,
    );
    const short = await run(['--listen', '127.0.0.1:0'], { CALLGATE_TOKEN: 'short' });
    expect(short.code).to.equal(2);
    expect(short.stderr).to.equal('error: the token must be at least 16 characters long\n');
    // a token no client can send (Node reads a header as latin1 and trims its ends): a trailing
    // newline from a secret file, spaces at an end, a character past ASCII; each answered every
    // request with a 401 before
    for (const token of ['0123456789abcdef\n', ' 0123456789abcdef', '0123456789abcdéf']) {
      const unsendable = await run(['--listen', '127.0.0.1:0'], { CALLGATE_TOKEN: token });
      expect(unsendable.code).to.equal(2);
      expect(unsendable.stderr).to.match(/^error: the token must be printable ASCII without spaces at either end/);
    }
    // an empty --token beside a CALLGATE_TOKEN: refused, not the token turned off
    const empty = await run(['--listen', '127.0.0.1:0', '--token', ''], { CALLGATE_TOKEN: '0123456789abcdef' });
    expect(empty.code).to.equal(2);
    expect(empty.stderr).to.equal(
      'error: --token is empty: give a token of 16 characters or more, or leave the option out (no token)\n',
    );
    const addr = await run(['--listen', 'nowhere:99999']);
    expect(addr.code).to.equal(2);
    expect(addr.stderr).to.equal('error: --listen: expected PORT, HOST:PORT or [IPv6]:PORT, got "nowhere:99999"\n');
    // every bad option at once, one line each (it said the first alone)
    const many = await run(['--listen', '127.0.0.1:0', '--timeout-ms', '0', '--max-batch', '5000', '--prefix', 'a{b']);
    expect(many.code).to.equal(2);
    expect(many.stderr).to.equal(
      [
        'error: --timeout-ms: expected an integer from 1 to 60000, got 0',
        'error: --max-batch needs --store redis: it sets how decisions go to Redis',
        `error: --prefix must not contain '{' or '}', got "a{b"`,
        '',
      ].join('\n'),
    );
    const missing = await runNode(
      [join(ROOT, 'bin/callgate.js'), 'serve', '--config', join(dir, 'absent.json'), '--listen', '127.0.0.1:0'],
      { cwd: ROOT },
    );
    expect(missing.code).to.equal(2);
    expect(missing.stderr).to.match(/absent\.json: cannot read file: no such file or directory \(ENOENT\)/);
  });
});
