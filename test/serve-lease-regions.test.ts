/**
 * `callgate serve --leased-carriers x --lease-regions …`: a sidecar in each of two Redis
 * "regions", each reaching the other's Redis through a proxy adding 20 ms each way, each
 * running a coordinator candidate for the carrier. One leads; the carrier's CPS holds across
 * both regions from the decisions' slots; both regions put calls on it; the leader stopped, the
 * other sidecar takes over.
 */
import { expect } from 'chai';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startDelayProxy, type DelayProxy } from './helpers/delay-proxy.js';
import { startRegions, type Regions } from './helpers/regions.js';
import { runNode } from './helpers/run.js';
import { leaseGauges, startSidecarProcess, type SidecarProcess } from './helpers/sidecar.js';
import { maxInWindow } from './helpers/window.js';

const ROOT = new URL('..', import.meta.url).pathname;
const CPS = 10;
const leader = (level: string) => `callgate_lease_leader{level="${level}"}`;

/**
 * The calls shares of `level` the leader reports (with `pool`, and the pool), summed, once
 * exactly one sidecar leads it; else undefined.
 */
async function ledShares(sidecars: readonly SidecarProcess[], level = 'carrier:x', pool = false) {
  const all = await Promise.all(sidecars.map((s) => leaseGauges(s.url)));
  const leaders = all.filter((m) => m.get(leader(level)) === 1);
  if (leaders.length !== 1) return undefined;
  let calls = pool
    ? (leaders[0]!.get(`callgate_lease_unshared{level="${level}",part="pool",resource="calls"}`) ?? 0)
    : 0;
  for (const [k, v] of leaders[0]!)
    if (k.startsWith(`callgate_lease_share{level="${level}"`) && k.includes('resource="calls"')) calls += v;
  return calls;
}

async function until<T>(what: string, f: () => Promise<T | undefined>, ms = 5_000): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const v = await f();
    if (v !== undefined) return v;
    if (Date.now() > end) throw new Error(`not within ${ms} ms: ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

describe('callgate serve --lease-regions: a carrier leased across two regions by the sidecars', function () {
  this.timeout(60_000);
  let regions: Regions;
  let toA: DelayProxy;
  let dir: string;
  const sidecars: SidecarProcess[] = [];
  before(async () => {
    regions = await startRegions(20);
    toA = await startDelayProxy({ host: regions.a.host, port: regions.a.port }, 20);
    dir = mkdtempSync(join(tmpdir(), 'callgate-lease-regions-'));
  });
  after(async () => {
    await Promise.all(sidecars.splice(0).map((s) => s.stop('SIGKILL')));
    await toA?.close();
    await regions?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  /**
   * A sidecar in each region with `lease` flags, both listing the same regions in the same
   * order, each by the address its sidecar reaches it at (the other through its proxy).
   */
  const startPair = async (config: string, prefix: string, lease: string[]) => {
    const lists = [`${regions.a.url},${regions.farUrl}`, `redis://127.0.0.1:${toA.port},${regions.b.url}`];
    const pair = await Promise.all(
      [regions.a.url, regions.b.url].map((url, i) =>
        startSidecarProcess([
          ...['--config', config, '--store', 'redis', '--redis-url', url, '--prefix', prefix],
          ...[...lease, '--lease-regions', lists[i]!],
          ...['--lease-tick-ms', '50', '--lease-reply-timeout-ms', '200'],
        ]),
      ),
    );
    sidecars.push(...pair);
    return pair;
  };

  it('one leader; the CPS held across both regions, both on the carrier; the other takes over', async () => {
    const config = join(dir, 'carriers.json');
    writeFileSync(
      config,
      // y waits up to a second: requests bunched by a loaded machine (two within its 1 ms slot)
      // must all land there, not be refused by a maxWait of 0
      JSON.stringify({
        outbound: { carriers: { x: { cps: CPS, maxWait: 'PT0.3S' }, y: { cps: 1000, maxWait: 'PT1S' } } },
      }),
    );
    const prefix = `cglr:${randomBytes(4).toString('hex')}:`;
    const [a, b] = await startPair(config, prefix, ['--leased-carriers', 'x']);
    expect(
      await until('a leader sharing the CPS', async () => ((await ledShares([a!, b!])) === CPS ? CPS : undefined)),
    );

    // 40 calls a second offered for 1.5 s, half in each region: 4 times the CPS
    const rows: { region: number; carrier: string; slot: number }[] = [];
    const pending: Promise<void>[] = [];
    for (let i = 0; i < 60; i++) {
      const region = i % 2;
      pending.push(
        fetch(`${[a!, b!][region]!.url}/v1/reserve`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ call_id: `r${i}`, route: ['x', 'y'] }),
        })
          .then((r) => r.json() as Promise<{ carrier: string; slot_us: number }>)
          .then((j) => void rows.push({ region, carrier: j.carrier, slot: j.slot_us })),
      );
      await new Promise((r) => setTimeout(r, 25));
    }
    await Promise.all(pending);
    const onX = rows.filter((r) => r.carrier === 'x');
    expect(
      maxInWindow(
        onX.map((r) => r.slot),
        1_000_000,
      ),
      'slots on x in any 1 s, both regions',
    ).to.be.at.most(CPS);
    // the contract would give x about 18 of them (1.5 s and its maxWait at 10 a second)
    expect(onX.length).to.be.at.least(CPS);
    for (const region of [0, 1]) expect(onX.filter((r) => r.region === region).length).to.be.at.least(2);
    expect(rows.filter((r) => r.carrier === 'y').length).to.equal(60 - onX.length);

    // the leader stops (its candidate gives the leadership up): the other leads, the CPS still shared
    const lead = (await leaseGauges(a!.url)).get(leader('carrier:x')) === 1 ? a! : b!;
    const other = lead === a ? b! : a!;
    await lead.stop('SIGTERM');
    expect(
      await until('the other sidecar leading', async () => ((await ledShares([other])) === CPS ? CPS : undefined)),
    ).to.equal(CPS);
  });

  it('--lease-lanes: the global level leased over both regions, one leader, never over it across both', async () => {
    const config = join(dir, 'global.json');
    writeFileSync(
      config,
      JSON.stringify({
        inbound: { global: [{ limit: 30, window: 'PT60S' }], defaultPeer: [{ limit: 1000, window: 'PT60S' }] },
      }),
    );
    const prefix = `cglg:${randomBytes(4).toString('hex')}:`;
    const pair = await startPair(config, prefix, ['--lease-lanes', '2']);
    // one leader, whose four lanes (two per region) and pool make up the limit
    expect(await until('a leader of the global level', () => ledShares(pair, 'global', true))).to.equal(30);
    await new Promise((r) => setTimeout(r, 300)); // the first grants
    const answers = await Promise.all(
      Array.from({ length: 50 }, (_, i) =>
        fetch(`${pair[i % 2]!.url}/v1/admit`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ call_id: `g${i}`, peer: `p${i % 8}` }),
        }).then((r) => r.json() as Promise<{ outcome: string; limited_by?: string }>),
      ),
    );
    const admitted = answers.filter((j) => j.outcome === 'admitted');
    expect(admitted.length).to.be.at.most(30).and.at.least(15);
    for (const j of answers.filter((x) => x.outcome !== 'admitted')) expect(j.limited_by).to.equal('global');
  });

  it('--lease-regions: needs a lease, each entry a Redis URL, no region twice (exit 2, one line)', async () => {
    const config = join(dir, 'bad.json');
    writeFileSync(config, JSON.stringify({ outbound: { carriers: { x: { cps: CPS } } } }));
    const url = regions.a.url;
    for (const [extra, message] of [
      [['--lease-regions', url], /--lease-regions needs --lease-lanes or --leased-carriers/],
      [['--leased-carriers', 'x', '--lease-regions', `${url},`], /--lease-regions: an empty entry/],
      [['--leased-carriers', 'x', '--lease-regions', 'cluster:nope'], /invalid --lease-regions entry "nope"/],
      [['--leased-carriers', 'x', '--lease-regions', `${url},${url}`], /--lease-regions: a region is listed twice/],
      // the same Redis spelled another way: each counted its own share of one hash, the level halved
      [['--leased-carriers', 'x', '--lease-regions', `${url},${url}/`], /--lease-regions: a region is listed twice/],
      [['--leased-carriers', 'x', '--lease-tick-ms', '50'], /--lease-tick-ms needs --lease-lanes or --lease-regions/],
      [
        ['--leased-carriers', 'x', '--lease-regions', url, '--lease-tick-ms', '0'],
        /--lease-tick-ms: expected an integer from 1/,
      ],
    ] as const) {
      const r = await runNode(
        [join(ROOT, 'bin/callgate.js'), 'serve', '--config', config, '--listen', '127.0.0.1:0'].concat([
          '--store',
          'redis',
          '--redis-url',
          url,
          ...extra,
        ]),
        { cwd: ROOT, env: { CALLGATE_TOKEN: '' }, timeoutMs: 20_000 },
      );
      expect(r.code, r.stderr).to.equal(2);
      expect(r.stderr).to.match(message);
      expect(r.stderr.trim().split('\n')).to.have.length(1);
    }
  });
});
