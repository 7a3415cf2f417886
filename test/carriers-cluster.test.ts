/**
 * Carriers spread over a Redis Cluster (issue 28): each carrier lives on a hash tag of its own,
 * so the carriers of one route land on different masters, and a route is tried one carrier (one
 * shard) at a time. On a local three-master Cluster: the keys of three carriers of one route sit
 * on three different masters (CLUSTER KEYSLOT and which node holds them); a deterministic
 * sequence of reservations that reroutes across the shards, with channel limits, re-reserved ids
 * and releases, gets exactly the MemoryStore's decisions, both issued one by one and issued
 * together in one tick; a release from another store (process) finds an outbound call on the
 * carrier that took it, and the holds keeper's re-assertion brings back a lost outbound hold and
 * its locator on the carrier's tag: the keeper's own sync sees the marker of that carrier's tag
 * change when its master loses its keys, and of that tag only.
 */
import { randomBytes } from 'node:crypto';
import { expect } from 'chai';
import type { Cluster } from 'ioredis';
import { carrierTag, OUTBOUND_TAG } from '../src/store/keys.js';
import { MemoryStore } from '../src/store/memory-store.js';
import { RedisStore } from '../src/store/redis/redis-store.js';
import type { Carrier, ReserveRequest, ReserveResult } from '../src/store/types.js';
import { masterOfSlot, newClusterClient, startCluster, type RedisClusterHandle } from './helpers/redis.js';

const S = 1_000_000;
const T0 = 1_700_000_000_000_000;

/** Deterministic: three carrier names, of the form `carrier:<base><n>`, whose tags hash to three different masters. */
async function spreadCarriers(client: Cluster, prefix: string, base: string): Promise<string[]> {
  const byMaster = new Map<number, string>();
  for (let n = 0; byMaster.size < 3; n++) {
    if (n > 200) throw new Error('no three carriers on three masters');
    const name = `carrier:${base}${n}`;
    const slot = Number(await client.cluster('KEYSLOT', `${prefix}{${carrierTag(name)}}:${name}`));
    const master = await masterOfSlot(client, slot);
    if (!byMaster.has(master)) byMaster.set(master, name);
  }
  return [...byMaster.values()];
}

const reference = () =>
  new MemoryStore({
    sweep: false,
    clock: () => {
      throw new Error('the reference is only given explicit times');
    },
  });

describe('carriers spread over a Redis Cluster (three masters): a tag per carrier', function () {
  this.timeout(60_000);
  let handle: RedisClusterHandle;
  let client: Cluster;
  const stores: RedisStore[] = [];
  const newStore = (prefix: string, redis: Cluster = client) => {
    const s = new RedisStore({ redis, prefix });
    stores.push(s);
    return s;
  };

  before(async function () {
    this.timeout(60_000);
    handle = await startCluster();
    client = newClusterClient(handle);
  });
  afterEach(async () => {
    for (const s of stores.splice(0)) {
      await s.clear();
      await s.close();
    }
  });
  after(async () => {
    client?.disconnect();
    await handle?.stop();
  });

  it("the carriers of one route land on three different masters, each carrier's keys on its own", async () => {
    const prefix = `cgcar:${randomBytes(4).toString('hex')}:`;
    const store = newStore(prefix);
    const names = await spreadCarriers(client, prefix, 'm');
    // every carrier with a channel limit and no patience: each call takes the next carrier
    const route: Carrier[] = names.map((name) => ({ name, intervalUs: S, maxWaitUs: 0, channels: 5 }));
    for (let i = 0; i < 3; i++) {
      const r = await store.reserve({ route, now: T0, hold: { id: `m${i}`, forUs: 10 * S } });
      expect(r.index).to.equal(i);
    }
    const masters = client.nodes('master');
    const holders: number[] = [];
    for (const name of names) {
      const tag = carrierTag(name);
      const keys = [`${prefix}{${tag}}:${name}`, `${prefix}{${tag}}:${name}:ch`];
      const slots = await Promise.all(keys.map((k) => client.cluster('KEYSLOT', k)));
      expect(new Set(slots).size, `${name}: one slot`).to.equal(1);
      const found: number[] = [];
      for (const node of masters) {
        // KEYS on each master (EXISTS on a node not serving the slot answers MOVED)
        const n = (await Promise.all(keys.map((k) => node.keys(k)))).reduce((a, b) => a + b.length, 0);
        if (n > 0) {
          expect(n, `${name}: both keys on one node`).to.equal(2);
          found.push(node.options.port!);
        }
      }
      expect(found, `${name}: on exactly one master`).to.have.length(1);
      holders.push(found[0]!);
    }
    expect(new Set(holders).size, 'three carriers on three masters').to.equal(3);
    // the operator's listing (`callgate holds --carrier`, which names OUTBOUND_TAG) finds each carrier's call
    for (let i = 0; i < 3; i++) {
      const listed = await store.listHolds({ tag: OUTBOUND_TAG, name: names[i]!, now: T0 + S });
      expect(
        listed.holds.map((h) => h.id),
        `holds on ${names[i]}`,
      ).to.deep.equal([`m${i}`]);
    }
    // the old single tag holds nothing
    for (const node of masters)
      expect(await node.keys(`${prefix}{${OUTBOUND_TAG}}:*`), 'no key on {out}').to.deep.equal([]);
    // the outbound records sit on the tags of the carriers that took the calls
    for (let i = 0; i < 3; i++) {
      const node = masters.find((m) => m.options.port === holders[i]);
      const record = `${prefix}{${carrierTag(names[i]!)}}:call:out:m${i}`;
      expect(await node!.keys(record), `record of m${i}`).to.deep.equal([record]);
    }
  });

  /** A deterministic sequence over routes across the three shards: pacing, channels, repeats, releases. */
  function sequence(
    names: string[],
  ): ({ kind: 'reserve'; req: ReserveRequest } | { kind: 'release'; id: string; now: number })[] {
    const [a, b, c] = names as [string, string, string];
    const A: Carrier = { name: a, intervalUs: 200_000, maxWaitUs: 300_000, channels: 3 };
    const B: Carrier = { name: b, intervalUs: 333_333.33333333337, maxWaitUs: 600_000 };
    const C: Carrier = { name: c, intervalUs: 100_000, maxWaitUs: 100_000, channels: 2 };
    const routes = [
      [A, B, C],
      [B, C],
      [C, A, B],
      [A, C],
      [B, A, C],
    ];
    const ops: ({ kind: 'reserve'; req: ReserveRequest } | { kind: 'release'; id: string; now: number })[] = [];
    let t = T0;
    let seed = 7;
    const rand = () => {
      seed = (seed * 1_103_515_245 + 12_345) % 2_147_483_648;
      return seed / 2_147_483_648;
    };
    for (let k = 0; k < 160; k++) {
      t += Math.floor(rand() * 120_000);
      const id = `x${Math.floor(rand() * 12)}`;
      if (rand() < 0.15) ops.push({ kind: 'release', id, now: t });
      else
        ops.push({
          kind: 'reserve',
          req: {
            route: routes[Math.floor(rand() * routes.length)]!,
            now: t,
            hold: { id, forUs: Math.floor(rand() * 3 * S) },
          },
        });
    }
    return ops;
  }

  it('rerouting across shards: exactly the MemoryStore decisions, issued one by one and in one tick', async () => {
    const prefix = `cgcar:${randomBytes(4).toString('hex')}:`;
    const names = await spreadCarriers(client, prefix, 's');
    const ops = sequence(names);
    const mem = reference();
    const expected: unknown[] = [];
    for (const op of ops)
      expected.push(op.kind === 'reserve' ? await mem.reserve(op.req) : await mem.release({ id: op.id, now: op.now }));
    const reroutes = expected.filter((r, i) => ops[i]!.kind === 'reserve' && (r as ReserveResult).index > 0).length;
    const refusals = expected.filter((r, i) => ops[i]!.kind === 'reserve' && (r as ReserveResult).index < 0).length;
    const fullSeen = expected.filter((r, i) => ops[i]!.kind === 'reserve' && (r as ReserveResult).full.some(Boolean));
    expect(reroutes, 'reroutes').to.be.above(10);
    expect(refusals, 'refusals').to.be.above(5);
    expect(fullSeen.length, 'carriers passed over full').to.be.above(3);

    // one by one
    const one = newStore(prefix);
    for (let i = 0; i < ops.length; i++) {
      const op = ops[i]!;
      const got = op.kind === 'reserve' ? await one.reserve(op.req) : await one.release({ id: op.id, now: op.now });
      expect(got, `op ${i} (${op.kind})`).to.deep.equal(expected[i]);
    }

    // in one tick, releases last (a release is ordered after what was issued before it)
    const tickPrefix = `cgcar:${randomBytes(4).toString('hex')}:`;
    const tickNames = await spreadCarriers(client, tickPrefix, 's');
    expect(tickNames, 'same carriers for the second prefix').to.deep.equal(names);
    const reserves = ops.filter((op) => op.kind === 'reserve');
    const mem2 = reference();
    const expected2: ReserveResult[] = [];
    for (const op of reserves) expected2.push(await mem2.reserve(op.req));
    const tick = newStore(tickPrefix);
    const got2 = await Promise.all(reserves.map((op) => tick.reserve(op.req)));
    got2.forEach((r, i) => {
      expect(r, `reserve ${i} in one tick`).to.deep.equal(expected2[i]);
    });
    const last = reserves[reserves.length - 1]!.req.now!;
    const releases = await Promise.all(
      [...new Set(reserves.map((op) => op.req.hold!.id))].map((id) => tick.release({ id, now: last })),
    );
    const memReleases = await Promise.all(
      [...new Set(reserves.map((op) => op.req.hold!.id))].map((id) => mem2.release({ id, now: last })),
    );
    expect(releases).to.deep.equal(memReleases);
    for (const name of names)
      expect((await tick.holds({ tag: OUTBOUND_TAG, name, now: last })).holds, `${name} empty`).to.equal(0);
  });

  it("live time: a reroute's later attempt that runs late still finds the carrier's last slot (its key outlives the lag)", async () => {
    const prefix = `cgcar:${randomBytes(4).toString('hex')}:`;
    const [a, b] = await spreadCarriers(client, prefix, 'g');
    const A: Carrier = { name: a!, intervalUs: 10 * S, maxWaitUs: 0 };
    const B: Carrier = { name: b!, intervalUs: 0.2 * S, maxWaitUs: S };
    const route = [A, B];
    const store = newStore(prefix);
    const mem = reference();
    const got: ReserveResult[] = [];
    const reqs: ReserveRequest[] = [{ route: [A] }, { route }];
    for (const req of reqs) got.push(await store.reserve(req));
    // B's master stops for 0.5 s: the next call's attempt there runs ~0.5 s after its time (the
    // Redis time of its attempt on A), when B's last slot (t1, I = 0.2 s) would be expired by
    // Redis' clock were its life counted from the call's time
    const slot = Number(await client.cluster('KEYSLOT', `${prefix}{${carrierTag(B.name)}}:${B.name}`));
    const port = await masterOfSlot(client, slot);
    await client
      .nodes('master')
      .find((n) => n.options.port === port)!
      .client('PAUSE', 500);
    reqs.push({ route });
    got.push(await store.reserve(reqs[2]!));
    const want = reqs.map((req, i) => mem.reserveSync({ ...req, now: got[i]!.now }));
    expect(got).to.deep.equal(want);
    expect(got.map((r) => r.index)).to.deep.equal([0, 1, 1]);
    const late = got[2]!.now - got[1]!.now;
    expect(late, 'the third call was decided within I of the second').to.be.below(B.intervalUs);
    expect(got[2]!.waitUs, "B's slot taken by the second call").to.equal(B.intervalUs - late);

    // B first in a route of its own (Redis TIME on B's shard), then a reroute to B that runs late
    const masterOf = async (c: string) =>
      masterOfSlot(client, Number(await client.cluster('KEYSLOT', `${prefix}{${carrierTag(c)}}:${c}`)));
    let cPort = 0;
    let cName = '';
    for (const name of await spreadCarriers(client, prefix, 'h'))
      if ((cPort = await masterOf(name)) !== (await masterOf(A.name))) {
        cName = name;
        break;
      }
    const C: Carrier = { ...B, name: cName };
    const mixed: ReserveRequest[] = [{ route: [C] }, { route: [A, C] }];
    const first = await store.reserve(mixed[0]!);
    await client
      .nodes('master')
      .find((n) => n.options.port === cPort)!
      .client('PAUSE', 500);
    const second = await store.reserve(mixed[1]!);
    expect([first, second]).to.deep.equal([
      mem.reserveSync({ ...mixed[0]!, now: first.now }),
      mem.reserveSync({ ...mixed[1]!, now: second.now }),
    ]);
    expect(second.index).to.equal(1);
    expect(second.waitUs, "C's slot taken by the call on C alone").to.equal(C.intervalUs - (second.now - first.now));
  });

  it("the holds keeper: a carrier's shard loses its keys, the sync sees that tag's marker change and the hold comes back", async () => {
    const prefix = `cgcar:${randomBytes(4).toString('hex')}:`;
    const names = await spreadCarriers(client, prefix, 'k');
    const route: Carrier[] = names.map((name) => ({ name, intervalUs: 10 * S, maxWaitUs: 0, channels: 3 }));
    const store = new RedisStore({ redis: client, prefix, holds: { syncMs: 200, graceMs: 300 } });
    stores.push(store);
    // live time (the keeper keeps live calls only): the first call on carrier 0, the second rerouted to 1
    const first = await store.reserve({ route, hold: { id: 'k1', forUs: 60 * S } });
    const second = await store.reserve({ route, hold: { id: 'k2', forUs: 60 * S } });
    expect([first.index, second.index]).to.deep.equal([0, 1]);
    await new Promise((resolve) => setTimeout(resolve, 600)); // a sync learns every tag's marker
    const losses: string[] = [];
    store.events.on('storeLoss', (e) => losses.push(e.tag));
    const onCarrier = (i: number) => store.holds({ tag: OUTBOUND_TAG, name: names[i]! }).then((r) => r.holds);
    // the master of carrier 1's tag loses everything (no reconnect)
    const slot = Number(await client.cluster('KEYSLOT', `${prefix}{${carrierTag(names[1]!)}}:gen`));
    const port = await masterOfSlot(client, slot);
    await client
      .nodes('master')
      .find((n) => n.options.port === port)!
      .flushall();
    for (let i = 0; i < 60 && !losses.includes(carrierTag(names[1]!)); i++)
      await new Promise((resolve) => setTimeout(resolve, 50));
    expect(losses, "the loss is seen on carrier 1's tag").to.include(carrierTag(names[1]!));
    expect(losses, "and not on carrier 0's").to.not.include(carrierTag(names[0]!));
    for (let i = 0; i < 40 && (await onCarrier(1)) === 0; i++) await new Promise((resolve) => setTimeout(resolve, 50));
    expect(await onCarrier(1), 'carrier 1 holds its call again').to.equal(1);
    expect(await onCarrier(0), 'carrier 0 untouched').to.equal(1);
    // a release from another process finds it (the locator is back wherever it was lost)
    const other = newClusterClient(handle);
    try {
      const theirs = new RedisStore({ redis: other, prefix });
      expect((await theirs.release({ id: 'k2' })).released).to.equal(1);
      await theirs.close();
    } finally {
      other.disconnect();
    }
    expect(await onCarrier(1)).to.equal(0);
  });

  it('a release from another process finds the call on the carrier that took it; a lost hold comes back with its locator', async () => {
    const prefix = `cgcar:${randomBytes(4).toString('hex')}:`;
    const names = await spreadCarriers(client, prefix, 'r');
    const route: Carrier[] = names.map((name) => ({ name, intervalUs: S, maxWaitUs: 0, channels: 1 }));
    const mine = newStore(prefix);
    const other = newClusterClient(handle);
    try {
      const theirs = newStore(prefix, other);
      const first = await mine.reserve({ route, now: T0, hold: { id: 'call-1', forUs: 60 * S } });
      const second = await mine.reserve({ route, now: T0, hold: { id: 'call-2', forUs: 60 * S } });
      expect([first.index, second.index]).to.deep.equal([0, 1]);
      // released from the other process: found on the second carrier's tag
      expect((await theirs.release({ id: 'call-2', direction: 'out', now: T0 + S })).released).to.equal(1);
      expect((await mine.holds({ tag: OUTBOUND_TAG, name: names[1]!, now: T0 + S })).holds).to.equal(0);
      // the shard of the first carrier loses its hold, its record and the locator's shard the locator
      const tag = carrierTag(names[0]!);
      await client.del(`${prefix}{${tag}}:${names[0]}:ch`);
      await client.del(`${prefix}{${tag}}:call:out:call-1`);
      await client.del(`${prefix}{c:call-1}:loc:out`);
      expect((await mine.holds({ tag: OUTBOUND_TAG, name: names[0]!, now: T0 + S })).holds).to.equal(0);
      // re-asserted on the carrier's tag (as the holds keeper does): the hold and the locator come back
      const back = await mine.reassert({
        tag,
        calls: [{ id: 'call-1', direction: 'out', names: [names[0]!], end: T0 + 60 * S }],
        now: T0 + 2 * S,
      });
      expect(back.statuses).to.deep.equal(['written']);
      expect((await mine.holds({ tag: OUTBOUND_TAG, name: names[0]!, now: T0 + 2 * S })).holds).to.equal(1);
      expect((await theirs.release({ id: 'call-1', now: T0 + 3 * S })).released).to.equal(1);
      expect((await mine.holds({ tag: OUTBOUND_TAG, name: names[0]!, now: T0 + 3 * S })).holds).to.equal(0);
    } finally {
      await Promise.all(stores.splice(1).map((s) => s.close()));
      other.disconnect();
    }
  });
});
