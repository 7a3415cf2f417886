/**
 * Moving a busy account's hash slot to another master while its calls flow (docs/redis.md,
 * "Moving a busy account or carrier to another master"), by Redis Cluster's own procedure:
 * IMPORTING on the new master, MIGRATING on the old, MIGRATE of the slot's keys, then SETSLOT
 * NODE on every master. On a local three-master Cluster, with the keys moved one at a time
 * and a pause between them (a slot holding many keys takes a while), so that decisions arrive
 * while the slot is split between two masters (Redis answers them ASK or TRYAGAIN, and ioredis
 * follows or retries): every decision is still taken by Redis in time (none degraded), the
 * account's counts move with its keys (a limit of 100 calls a minute admits exactly 100 of the
 * calls offered before, during and after the move), and the account's keys end on the new
 * master only. The same for a carrier's slot and its channels. And the same account move by
 * examples/redis/move-slot.sh, the script docs/redis.md gives operators (keys in batches, call
 * records last); with calls held before it, then released, refreshed and recorded while it
 * runs: every release lands (deferred, it is sent again), every refresh holds (one that met its
 * holds moved fails as Redis out of reach, and holds once sent again), no record is degraded.
 * The script refuses a master that does not own the slot and leaves nothing importing then.
 */
import { expect } from 'chai';
import { Cluster } from 'ioredis';
import type { CallGateConfigInput } from '../src/config/types.js';
import { CallGate } from '../src/gate.js';
import { accountBucket, accountTag, carrierTag } from '../src/store/keys.js';
import { RECOMMENDED_REDIS_OPTIONS, RedisStore } from '../src/store/redis/redis-store.js';
import { clusterRig, masterOfSlot, rawCommand } from './helpers/redis.js';
import { runProcess } from './helpers/run.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * The procedure of docs/redis.md, step by step, as redis-cli would send it: `pauseMs` between
 * keys so that calls meet the slot half moved.
 */
async function moveSlot(ports: number[], slot: number, from: number, to: number, pauseMs: number): Promise<number> {
  const id = async (port: number) => String(await rawCommand(port, ['CLUSTER', 'MYID']));
  const [fromId, toId] = [await id(from), await id(to)];
  await rawCommand(to, ['CLUSTER', 'SETSLOT', String(slot), 'IMPORTING', fromId]);
  await rawCommand(from, ['CLUSTER', 'SETSLOT', String(slot), 'MIGRATING', toId]);
  let moved = 0;
  for (;;) {
    // call records first, the logs and holds last: the order that leaves a call's declared keys
    // on the old master longest while its new record would be on the new one
    const keys = (await rawCommand(from, ['CLUSTER', 'GETKEYSINSLOT', String(slot), '1000'])) as string[];
    if (keys.length === 0) break;
    keys.sort((a, b) => Number(b.includes(':call:')) - Number(a.includes(':call:')));
    for (const key of keys) {
      await rawCommand(from, ['MIGRATE', '127.0.0.1', String(to), '', '0', '5000', 'KEYS', key]);
      moved++;
      await sleep(pauseMs);
    }
  }
  // the new owner first, then the old one, then the rest (as redis-cli --cluster does)
  for (const port of [to, from, ...ports.filter((p) => p !== to && p !== from)])
    await rawCommand(port, ['CLUSTER', 'SETSLOT', String(slot), 'NODE', toId]);
  return moved;
}

describe('moving a busy slot to another master while calls flow (three masters)', function () {
  this.timeout(60_000);
  const rig = clusterRig(3);
  const ports = () => rig.handle.nodes.map((n) => n.port);
  const clients: Cluster[] = [];
  // a Cluster client as docs/redis.md makes one
  const newClient = async (maxRedirections?: number) => {
    const c = new Cluster(rig.handle.nodes, {
      redisOptions: RECOMMENDED_REDIS_OPTIONS,
      enableOfflineQueue: false,
      ...(maxRedirections && { maxRedirections }),
    });
    clients.push(c);
    await new Promise((resolve) => c.once('ready', resolve));
    return c;
  };
  after(() => {
    for (const c of clients) c.disconnect();
  });

  /** A gate on a Cluster client of its own (store prefix `prefix`), calls held up to a minute. */
  async function gateOn(
    prefix: string,
    inbound: CallGateConfigInput['inbound'],
    timeoutMs?: number,
    maxRedirections?: number,
  ) {
    const client = await newClient(maxRedirections);
    const store = new RedisStore({ redis: client, prefix });
    const config = { maxCallDuration: 'PT60S', inbound };
    const gate = await CallGate.create({ config, store, shield: false, ...(timeoutMs && { timeoutMs }) });
    return { client, store, gate };
  }

  /**
   * An account's calls across a move of its slot by `move` (from the old master's port to the
   * new one's, resolving to the keys moved), started after 60 calls; what the test asserts.
   */
  async function accountAcrossMove(
    prefix: string,
    move: (slot: number, from: number, to: number) => Promise<number>,
  ): Promise<{ moved: number; slowest: number }> {
    const { client, store, gate } = await gateOn(
      prefix,
      {
        accounts: {
          hot: [{ limit: 100, window: 'PT60S' }, { channels: 1000 }],
          cold: [{ limit: 1000, window: 'PT60S' }],
        },
        defaultPeer: [{ limit: 1000, window: 'PT1S' }],
      },
      // a call that meets the move waits, TRYAGAIN retried every 100 ms, up to ioredis'
      // maxRedirections (16 by default: 1.6 s). On a loaded 2-core machine calls met it for
      // longer and were decided by the policy; docs/redis.md tells operators to raise both
      // bounds while moving, and so does this test (64 redirections, a gate bound of 8 s)
      8_000,
      64,
    );
    try {
      const slot = Number(await client.cluster('KEYSLOT', `${prefix}{${accountTag('hot')}}:x`));
      const from = await masterOfSlot(client, slot);
      const to = ports().find((p) => p !== from)!;
      let admitted = 0;
      // the calls admitted and not hung up: calls met by the move are decided once it ends, so
      // which 100 of the offered calls are admitted, and how many of them hold, is not fixed
      let held = 0;
      let coldAdmitted = 0;
      let slowest = 0;
      const degraded: string[] = [];
      const calls: Promise<unknown>[] = [];
      let moving: Promise<number> | undefined;
      for (let i = 0; i < 300; i++) {
        const began = performance.now();
        // five calls at once every 20 ms (batches: admit.lua) from 10 peers, every other admitted
        // one hung up at once (a release that may meet the slot half moved), the others holding
        // (their records move too); another account's calls beside, on another slot
        calls.push(
          gate.admit({ callId: `h${i}`, peer: `p${i % 10}`, account: 'hot' }).then((d) => {
            slowest = Math.max(slowest, performance.now() - began);
            if (d.degraded) degraded.push(`h${i}`);
            else if (d.admitted) {
              admitted++;
              if (i % 2 === 1) return gate.release(`h${i}`);
              held++;
            }
          }),
          gate.admit({ callId: `c${i}`, peer: `q${i % 10}`, account: 'cold' }).then((d) => {
            if (d.degraded) degraded.push(`c${i}`);
            else if (d.admitted) coldAdmitted++;
          }),
        );
        // the move starts after 60 calls (none refused yet), while calls go on arriving
        if (i === 60) moving = move(slot, from, to);
        if (i % 5 === 4) await sleep(20);
      }
      await Promise.all(calls);
      const moved = await moving!;
      expect(degraded, 'decisions that Redis did not take in time').to.deep.equal([]);
      expect(admitted, "the hot account's limit, across the move").to.equal(100);
      expect(coldAdmitted).to.equal(300);
      expect(await masterOfSlot(client, slot)).to.equal(to);
      expect(await rawCommand(from, ['CLUSTER', 'COUNTKEYSINSLOT', String(slot)])).to.equal(0);
      // the counts are on the new master: the next call is still refused there
      const next = await gate.admit({ callId: 'after', peer: 'p0', account: 'hot' });
      expect(next.degraded).to.equal(undefined);
      expect(next.admitted).to.equal(false);
      // every release landed (one that met the move is retried in the background): the calls
      // held are left, exactly
      const holds = () => store.holds({ tag: accountTag('hot'), name: accountBucket('hot') });
      for (let i = 0; i < 50 && (await holds()).holds > held; i++) await sleep(100);
      expect((await holds()).holds, 'channels held on the account').to.equal(held);
      return { moved, slowest };
    } finally {
      await gate.close();
    }
  }

  it("keeps an account's counts and holds: exactly its limit admitted, none degraded, every release landed", async () => {
    const { moved, slowest } = await accountAcrossMove('mv:', (slot, from, to) => moveSlot(ports(), slot, from, to, 3));
    expect(moved, 'keys moved one by one').to.be.greaterThan(10);
    // calls met the slot half moved: Redis answered TRYAGAIN, ioredis retried 100 ms later
    expect(slowest, 'the slowest decision, ms').to.be.greaterThan(90);
  });

  it('the same through examples/redis/move-slot.sh, the procedure of docs/redis.md', async () => {
    const script = new URL('../examples/redis/move-slot.sh', import.meta.url).pathname;
    const { moved } = await accountAcrossMove('mvs:', async (_slot, from, to) => {
      // the tag as docs/redis.md gives it; keys in batches of 50: a few batches while the calls
      // flow, well within ioredis' wait for a call that meets the move (16 x 100 ms,
      // docs/redis.md). In batches of 5 (over 20 redis-cli runs) the move took longer than that
      // on a slower machine, and the calls that met it were decided by the policy.
      const r = await runProcess('bash', [script, `{${accountTag('hot')}}`, `127.0.0.1:${from}`, `127.0.0.1:${to}`], {
        cwd: process.cwd(),
        env: { BATCH: '50' },
        timeoutMs: 30_000,
      });
      expect(r.stderr).to.equal('');
      expect(r.code, r.stderr).to.equal(0);
      const m = /^slot \d+: (\d+) keys moved from 127\.0\.0\.1:\d+ to 127\.0\.0\.1:\d+\n$/.exec(r.stdout);
      expect(m, r.stdout).to.not.equal(null);
      return Number(m![1]);
    });
    expect(moved).to.be.greaterThan(10);
  });

  it('move-slot.sh: calls held before the move, released, refreshed and recorded while it runs, counted right', async () => {
    const script = new URL('../examples/redis/move-slot.sh', import.meta.url).pathname;
    const { client, store, gate } = await gateOn(
      'mvh:',
      {
        accounts: { hot: [{ limit: 10_000, window: 'PT1S' }, { channels: 1000 }] },
        defaultPeer: [{ limit: 1000, window: 'PT1S' }],
      },
      // the bounds raised while moving, as in accountAcrossMove
      8_000,
      64,
    );
    try {
      const slot = Number(await client.cluster('KEYSLOT', `mvh:{${accountTag('hot')}}:x`));
      const from = await masterOfSlot(client, slot);
      const to = ports().find((p) => p !== from)!;
      for (let i = 0; i < 100; i++) {
        const d = await gate.admit({ callId: `h${i}`, peer: `p${i % 10}`, account: 'hot' });
        expect(d.admitted, `h${i}`).to.equal(true);
      }
      // the script in batches of 20 keys: the logs and holds, then 100-odd records
      const moving = runProcess('bash', [script, `{${accountTag('hot')}}`, `127.0.0.1:${from}`, `127.0.0.1:${to}`], {
        cwd: process.cwd(),
        env: { BATCH: '20' },
        timeoutMs: 30_000,
      });
      const released: string[] = [];
      const refreshFailures: string[] = [];
      const recorded: string[] = [];
      const work: Promise<unknown>[] = [];
      for (let i = 0; i < 50; i++) {
        // a hang-up of h0..h49, a refresh of h50..h99, and a call that must pass (record),
        // every 4 ms
        work.push(
          gate.release(`h${i}`).then((o) => released.push(o)),
          gate.refresh(`h${50 + i}`).then(
            (held) => expect(held, `h${50 + i}`).to.equal(true),
            (e) => refreshFailures.push(`h${50 + i}: ${String(e)}`),
          ),
          gate.record({ callId: `r${i}`, peer: `p${i % 10}`, account: 'hot' }).then((d) => {
            if (d.degraded) recorded.push(`r${i} degraded`);
          }),
        );
        await sleep(4);
      }
      await Promise.all(work);
      const r = await moving;
      expect(r.stderr).to.equal('');
      expect(r.code).to.equal(0);
      expect(recorded, 'records that Redis did not take').to.deep.equal([]);
      // a refresh that met its record on the old master and its holds moved failed before it
      // wrote anything, as a store out of reach: sent again once the move is done, it holds
      for (const f of refreshFailures)
        expect(f).to.match(/StoreUnavailableError: Redis unavailable: a slot being moved/);
      for (const f of refreshFailures) expect(await gate.refresh(f.split(':')[0]!), f).to.equal(true);
      expect(released.filter((o) => o !== 'released' && o !== 'deferred')).to.deep.equal([]);
      expect(await masterOfSlot(client, slot)).to.equal(to);
      // h50..h99 and the 50 recorded calls hold; every release landed (a deferred one is sent
      // again): none left held on either master
      const holds = () => store.holds({ tag: accountTag('hot'), name: accountBucket('hot') });
      for (let i = 0; i < 50 && (await holds()).holds !== 100; i++) await sleep(100);
      expect((await holds()).holds, 'channels held on the account').to.equal(100);
    } finally {
      await gate.close();
    }
  });

  it('a release or refresh that meets a holds set already moved fails before any write, and lands once sent again', async () => {
    const { client, store, gate } = await gateOn('mvr:', {
      accounts: { hot: [{ channels: 100 }] },
      defaultPeer: [{ channels: 100 }],
    });
    try {
      // the call's record names two holds sets: its peer's and its account's
      expect((await gate.admit({ callId: 'x1', peer: 'p1', account: 'hot' })).admitted).to.equal(true);
      const slot = Number(await client.cluster('KEYSLOT', `mvr:{${accountTag('hot')}}:x`));
      const from = await masterOfSlot(client, slot);
      const to = ports().find((p) => p !== from)!;
      const id = async (port: number) => String(await rawCommand(port, ['CLUSTER', 'MYID']));
      await rawCommand(to, ['CLUSTER', 'SETSLOT', String(slot), 'IMPORTING', await id(from)]);
      await rawCommand(from, ['CLUSTER', 'SETSLOT', String(slot), 'MIGRATING', await id(to)]);
      const keys = (await rawCommand(from, ['CLUSTER', 'GETKEYSINSLOT', String(slot), '100'])) as string[];
      const account = keys.find((k) => k.endsWith(`${accountBucket('hot')}:ch`))!;
      const peer = keys.find((k) => k.includes(':peer:') && k.endsWith(':ch'))!;
      expect([account, peer].every(Boolean), keys.join(' ')).to.equal(true);
      // the record's second holds set moved (the peer's, after the account's), the record and the
      // first not yet: the order a move may leave them in
      await rawCommand(from, ['MIGRATE', '127.0.0.1', String(to), '', '0', '5000', 'KEYS', peer]);
      const first = () => rawCommand(from, ['ZRANGE', account, '0', '-1', 'WITHSCORES']);
      const before = await first();
      for (const attempt of [() => store.refresh({ id: 'x1', forUs: 60e6 }), () => store.release({ id: 'x1' })]) {
        const err = await attempt().then(
          () => undefined,
          (e: unknown) => e,
        );
        expect(String(err)).to.match(/^StoreUnavailableError: Redis unavailable: a slot being moved/);
        expect(await first(), "the account's holds set, untouched").to.deep.equal(before);
        expect(await rawCommand(from, ['EXISTS', keys.find((k) => k.includes(':call:in:'))!])).to.equal(1);
      }
      await moveSlot(ports(), slot, from, to, 0);
      expect((await store.release({ id: 'x1' })).released).to.equal(1);
      expect((await store.holds({ tag: accountTag('hot'), name: accountBucket('hot') })).holds).to.equal(0);
      expect(await rawCommand(to, ['ZCARD', peer]), "the peer's holds").to.equal(0);
    } finally {
      await gate.close();
    }
  });

  it('move-slot.sh from a master that does not own the slot: exit 1, said why, nothing left importing', async () => {
    const script = new URL('../examples/redis/move-slot.sh', import.meta.url).pathname;
    const client = await newClient();
    const slot = Number(await client.cluster('KEYSLOT', `{${accountTag('nobody')}}`));
    const owner = await masterOfSlot(client, slot);
    const [other, to] = ports().filter((p) => p !== owner) as [number, number];
    const r = await runProcess('bash', [script, `{${accountTag('nobody')}}`, `127.0.0.1:${other}`, `127.0.0.1:${to}`], {
      cwd: process.cwd(),
      timeoutMs: 30_000,
    });
    expect(r.code).to.equal(1);
    expect(r.stderr).to.equal(
      `move-slot: 127.0.0.1:${other}: CLUSTER SETSLOT ${slot}: ERR I'm not the owner of hash slot ${slot}\n`,
    );
    const me = String(await rawCommand(to, ['CLUSTER', 'NODES']))
      .split('\n')
      .find((l) => l.includes('myself'));
    expect(me, 'an importing slot shows as [slot-<-id]').to.not.include('-<-');
    expect(await masterOfSlot(client, slot)).to.equal(owner);
  });

  it("keeps a carrier's pacing and channels across the move", async () => {
    const client = await newClient();
    const store = new RedisStore({ redis: client, prefix: 'mvc:' });
    const carrier = { name: 'carrier:hot', intervalUs: 1, maxWaitUs: 0, channels: 40 };
    try {
      const slot = Number(await client.cluster('KEYSLOT', `mvc:{${carrierTag(carrier.name)}}:x`));
      const from = await masterOfSlot(client, slot);
      const to = ports().find((p) => p !== from)!;
      let taken = 0;
      const errors: unknown[] = [];
      const calls: Promise<void>[] = [];
      let moving: Promise<number> | undefined;
      for (let i = 0; i < 150; i++) {
        calls.push(
          store.reserve({ route: [carrier], hold: { id: `o${i}`, forUs: 60e6 } }).then(
            (r) => {
              if (r.index === 0) taken++;
            },
            (e) => void errors.push(e),
          ),
        );
        if (i === 20) moving = moveSlot(ports(), slot, from, to, 3);
        await sleep(4);
      }
      await Promise.all(calls);
      await moving;
      expect(errors.map(String).slice(0, 3)).to.deep.equal([]);
      expect(taken, 'the carrier takes its 40 channels, no more, across the move').to.equal(40);
      expect(await rawCommand(from, ['CLUSTER', 'COUNTKEYSINSLOT', String(slot)])).to.equal(0);
    } finally {
      await store.close();
    }
  });
});
