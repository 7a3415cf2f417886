/**
 * A real Kamailio (Debian's 5.6, examples/kamailio/kamailio-redis.cfg) deciding through
 * ndb_redis on a leased global level (docs/leasing.md), beside a Node process whose leased
 * RedisStore shares it, with a lease coordinator moving the lanes' shares: Kamailio's calls from
 * two peers pinned on two lanes, the Node process's from a third. Offered over the level's calls
 * and channels. Once on a single Redis (4 lanes, hash tags), once on a Redis Cluster of 3
 * masters (3 lanes, one a master; Kamailio with REDIS_CLUSTER, pointed at the first master,
 * its second peer's calls MOVED to the second, no script loaded anywhere beforehand). From
 * Kamailio's decision log, sipp's records and the Node decisions, all on Redis time:
 *
 * - the level held across Kamailio and Node: no window over its calls, never more calls holding
 *   at once than its channels;
 * - Kamailio refused by the level (`global rate` or `global channels`), and admitted on both lanes;
 * - every call's release found its record on its own lane: each BYE carried the call's record key
 *   in its route set (the Record-Route parameter `cgr`), so no channel is held at the end; on the
 *   single Redis the callee hangs up (test/sipp/callee-hangs-up.xml), so its BYE's From user
 *   names no peer and only the route set can place the call;
 * - every call ended, and Kamailio exits cleanly.
 *
 * Then the overflow lane (shares set by hand): calls spill to it, on one Redis and on a Cluster
 * (both steps MOVED), and after its refusal every worker leaves it alone for 50 ms.
 */
import { copyFileSync, mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { expect } from 'chai';
import { type Cluster, Redis } from 'ioredis';
import { parseConfig } from '../src/config/index.js';
import { CallGate } from '../src/gate.js';
import { kamailioCommands, kamailioInclude } from '../src/kamailio/redis-commands.js';
import { LeaseCoordinator } from '../src/lease/coordinator.js';
import { laneTag } from '../src/lease/lanes.js';
import { RedisStore } from '../src/store/redis/redis-store.js';
import { maxOpen } from './helpers/carrier-lease.js';
import { KAMAILIO_REDIS_CFG, startKamailio, kamailioRedisSetup, kamailioRedisTeardown } from './helpers/kamailio.js';
import {
  masterOfSlot,
  newClusterClient,
  type RedisClusterHandle,
  type RedisServer,
  rawCommand,
  startCluster,
} from './helpers/redis.js';
import { callsOf, SCENARIOS } from './helpers/sip-edge.js';
import { startSipp, type SippReport, warning } from './helpers/sipp.js';
import { maxInWindow } from './helpers/window.js';

const CALLS = 40;
const CHANNELS = 10;
/** Each caller's offered calls per second (Kamailio's two peers and the Node process), and for how long. */
const RATE = 25;
const SECONDS = 6;
const HOLD_MS = 300;
const PREFIX = 'klanes:';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

const limits = parseConfig({
  maxCallDuration: 'PT60S',
  inbound: {
    global: [{ limit: CALLS, window: 'PT1S' }, { channels: CHANNELS }],
    peers: Object.fromEntries(['p1', 'p2', 'p3'].map((p) => [p, [{ limit: 100, window: 'PT1S' }]])),
  },
});
const leaseOf = (lanes: number) => ({ lanes, pin: { peers: { p1: 0, p2: 1, p3: 2 } } });

/** Where the run goes: a single Redis or a Cluster, its clients, and Kamailio's defines for it. */
interface Deployment {
  readonly lanes: number;
  client(): Redis | Cluster;
  /** Kamailio's REDIS (and REDIS_CLUSTER) defines. */
  readonly defines: Record<string, string>;
  /** Every master's port, for the records left. */
  readonly ports: readonly number[];
  /**
   * Who ends the answered calls: the caller (its BYE's From user is the peer, which also names
   * the call's record) or the callee (test/sipp: only the Route header's record key can).
   */
  readonly hangsUp: 'caller' | 'callee';
  /** The level has an overflow lane (docs/leasing.md): Kamailio's refused calls spill to it too. */
  readonly overflow: boolean;
}

describe('Kamailio on a leased global level (kamailio-redis.cfg, callgate kamailio --lease-lanes): lanes shared with Node', function () {
  this.timeout(90_000);
  let redis: RedisServer | undefined;
  let dir: string;

  before(async () => {
    ({ redis, dir } = await kamailioRedisSetup('callgate-kamailio-lanes-'));
  });
  after(() => kamailioRedisTeardown(redis, dir));

  async function run(at: Deployment): Promise<void> {
    const LANES = at.lanes;
    const lease = { ...leaseOf(LANES), overflow: at.overflow };
    const stops: (() => Promise<unknown>)[] = [];
    try {
      const cmds = kamailioCommands(limits, PREFIX, 1, { lease });
      // the two Kamailio peers' call records are on two lanes
      const recordOf = (peer: string) => cmds.templates.find((t) => t.peer === peer && t.account === '')!.record;
      expect(recordOf('p1')).to.equal(`${PREFIX}{${laneTag(0, LANES)}}:call:in:`);
      expect(recordOf('p2')).to.equal(`${PREFIX}{${laneTag(1, LANES)}}:call:in:`);
      writeFileSync(path.join(dir, 'callgate-redis.cfg'), kamailioInclude(cmds, 'test'));
      copyFileSync(KAMAILIO_REDIS_CFG, path.join(dir, 'kamailio-redis.cfg'));

      const gateRedis = at.client();
      const coordinatorRedis = at.client();
      stops.push(async () => {
        gateRedis.disconnect();
        coordinatorRedis.disconnect();
      });
      const gate = await CallGate.create({
        config: limits,
        store: new RedisStore({ redis: gateRedis, prefix: PREFIX, lease, hashTags: true }),
        shield: false,
        policy: 'error',
      });
      stops.push(() => gate.close());
      const coordinator = LeaseCoordinator.forGate(gate, {
        deployments: [{ redis: coordinatorRedis, lanes: LANES, prefix: PREFIX, overflow: at.overflow }],
      }).start();
      stops.push(() => coordinator.stop());
      await sleep(600); // the first shares

      const carrier = await startSipp({
        name: 'carrier',
        scenario:
          at.hangsUp === 'caller' ? path.resolve('bench/sip/uas.xml') : path.resolve('test/sipp/callee-hangs-up.xml'),
        ...(at.hangsUp === 'callee' && { pauseMs: HOLD_MS }),
        dir,
        timeoutS: 60,
        trace: 'short',
      });
      stops.push(() => carrier.stop());
      const kamailio = await startKamailio({
        cfg: path.join(dir, 'kamailio-redis.cfg'),
        dir,
        defines: {
          ...at.defines,
          DESTINATION: `"sip:127.0.0.1:${carrier.port}"`,
          LOG_DECISIONS: '1',
          // a loaded machine must not turn decisions into the policy's (store-unavailable)
          REDIS_TIMEOUT_MS: '1000',
          CHILDREN: '4',
        },
        pkgMb: 16,
      });
      stops.push(() => kamailio.stop());

      const t0 = Date.now() * 1000;
      const callers = ['p1', 'p2'].map((peer) =>
        startSipp({
          name: `caller-${peer}`,
          scenario:
            at.hangsUp === 'caller' ? path.join(SCENARIOS, 'caller.xml') : path.resolve('test/sipp/caller-hung-up.xml'),
          dir,
          remote: `127.0.0.1:${kamailio.port}`,
          rate: RATE,
          calls: RATE * SECONDS,
          pauseMs: HOLD_MS,
          service: '1000',
          keys: { caller: peer },
          timeoutS: 45,
        }),
      );
      // the Node process's calls: p3, each released HOLD_MS after its admission
      const node: { at: number; admitted: boolean; id: string }[] = [];
      const nodeReleased = new Map<string, number>();
      const releases: string[] = [];
      gate.on('released', (e: { callId: string; at?: number }) => {
        if (e.at !== undefined) nodeReleased.set(e.callId, e.at);
      });
      const pending: Promise<unknown>[] = [];
      const start = performance.now();
      for (let n = 0; n < RATE * SECONDS; n++) {
        const wait = start + (n * 1000) / RATE - performance.now();
        if (wait > 0) await sleep(wait);
        const id = `node-${n}`;
        pending.push(
          gate.admit({ callId: id, peer: 'p3' }).then(async (d) => {
            node.push({ at: d.at, admitted: d.admitted, id });
            if (!d.admitted) return;
            await sleep(HOLD_MS);
            releases.push(await gate.release(id));
          }),
        );
      }
      await Promise.all(pending);
      expect(new Set(releases), 'the Node calls’ releases').to.deep.equal(new Set(['released']));
      const reports = (await Promise.all((await Promise.all(callers)).map((c) => c.done(45_000)))) as SippReport[];
      await sleep(1_500); // releases Kamailio could not send at once go again every second

      for (const r of reports) {
        expect(r.code, `${r.name}: exit; output:\n${r.output.slice(-1500)}`).to.equal(0);
        expect(r.stats['FailedCall(C)'], `${r.name} failed calls`).to.equal('0');
        expect(r.stats.CurrentCall, `${r.name} calls left`).to.equal('0');
      }
      // Kamailio's decisions at Redis time (µs modulo 2^32 in its log; this host's clock is Redis')
      const unwrap = (t: number) => {
        const base = t0 - (t0 % 2 ** 32);
        const full = base + t;
        return full < t0 - 2 ** 31 ? full + 2 ** 32 : full;
      };
      const log = kamailio.log();
      const admittedAt = new Map<string, number>();
      const releasedAt = new Map<string, number>();
      const spilled = [...log.matchAll(/callgate: admitted \w+ at -?\d+ \(overflow lane\)/g)].length;
      console.log(`      Kamailio: ${spilled} calls admitted through the overflow lane`);
      for (const m of log.matchAll(/callgate: (admitted|released) (\w+) at (-?\d+)/g)) {
        const t = unwrap((Number(m[3]) + 2 ** 32) % 2 ** 32);
        if (m[1] === 'admitted') admittedAt.set(m[2]!, t);
        else if (!releasedAt.has(m[2]!)) releasedAt.set(m[2]!, t);
      }
      const sipCalls = reports.flatMap((r) => [...callsOf(r).entries()].map(([id, c]) => ({ id, peer: r.name, c })));
      const ok = sipCalls.filter((x) => x.c.final?.status === 200);
      const refused = sipCalls.filter((x) => x.c.final?.status === 503);
      expect(ok.length + refused.length, 'every call answered 200 or 503').to.equal(sipCalls.length);
      expect(admittedAt.size, 'Kamailio logged each admission').to.equal(ok.length);
      for (const who of ['caller-p1', 'caller-p2'])
        expect(ok.filter((x) => x.peer === who).length, `${who}: admitted on its lane`).to.be.above(0);
      const reasons = new Set(refused.map((x) => warning(x.c.final!)));
      expect(
        [...reasons].every((w) => /callgate "global (rate|channels)"/.test(w)),
        [...reasons].join(' | '),
      ).to.equal(true);
      expect(refused.length, 'Kamailio refused by the level').to.be.above(0);
      expect(node.filter((x) => !x.admitted).length, 'Node refused by the level').to.be.above(0);

      // the level across both: calls in any second, calls holding at once
      const admitted = [...admittedAt.values(), ...node.filter((x) => x.admitted).map((x) => x.at)];
      expect(maxInWindow(admitted, 1_000_000), 'admitted in any second, Kamailio and Node').to.be.at.most(CALLS);
      const holds: [number, number][] = [
        ...[...admittedAt].map(([id, a]): [number, number] => [a, releasedAt.get(id) ?? Number.POSITIVE_INFINITY]),
        ...node.filter((x) => x.admitted).map((x): [number, number] => [x.at, nodeReleased.get(x.id)!]),
      ];
      expect(maxOpen(holds), 'calls holding at once, Kamailio and Node').to.be.at.most(CHANNELS);
      expect(releasedAt.size, 'Kamailio released each call it admitted').to.equal(admittedAt.size);

      // every release found its record on its own lane: nothing holds, no record is left
      const raw = at.client();
      try {
        for (let k = 0; k < LANES; k++)
          expect(await raw.zcard(`${PREFIX}{${laneTag(k, LANES)}}:global:ch`), `lane ${k}: holds left`).to.equal(0);
      } finally {
        raw.disconnect();
      }
      for (const port of at.ports)
        expect(await rawCommand(port, ['KEYS', `${PREFIX}*call:in:*`]), `call records left on ${port}`).to.deep.equal(
          [],
        );
      expect(await kamailio.stop(), `Kamailio's exit; its log:\n${log.slice(-3000)}`).to.equal(0);
    } finally {
      for (const stop of stops.reverse()) await stop().catch(() => undefined);
    }
  }

  it('on a single Redis, the callee hanging up: the level holds across Kamailio and Node; each release finds its lane by the route set', async () => {
    await run({
      lanes: 4,
      client: () => new Redis(redis!.port, '127.0.0.1'),
      defines: { REDIS: `"name=callgate;addr=127.0.0.1;port=${redis!.port}"` },
      ports: [redis!.port],
      hangsUp: 'callee',
      overflow: true,
    });
  });

  it('on a Redis Cluster of 3 masters: the same, Kamailio following MOVED and loading the scripts on each master', async () => {
    const cluster: RedisClusterHandle = await startCluster(3);
    try {
      const [first] = cluster.nodes;
      await run({
        lanes: 3,
        client: () => newClusterClient(cluster),
        defines: { REDIS: `"name=callgate;addr=127.0.0.1;port=${first!.port}"`, REDIS_CLUSTER: '1' },
        ports: cluster.nodes.map((n) => n.port),
        hangsUp: 'caller',
        overflow: false,
      });
      // p2's lane is on the second master, where Kamailio (pointed at the first) was MOVED, and
      // found no script until its NOSCRIPT loaded them there
      const client = newClusterClient(cluster);
      try {
        const slot = Number(await client.call('CLUSTER', 'KEYSLOT', `{${laneTag(1, 3)}}`));
        expect(await masterOfSlot(client, slot)).to.equal(cluster.nodes[1]!.port);
      } finally {
        client.disconnect();
      }
      const p2 = kamailioCommands(limits, PREFIX, 1, { lease: leaseOf(3) }).templates.find((t) => t.peer === 'p2')!;
      const sha = p2.command.split(' ')[1]!;
      expect(await rawCommand(cluster.nodes[1]!.port, ['SCRIPT', 'EXISTS', sha])).to.deep.equal([1]);
    } finally {
      await cluster.stop();
    }
  });

  /** Where a spill run goes: the Kamailio and Redis it uses, and p1's lane (of 4). */
  interface SpillAt {
    readonly name: string;
    readonly lane: number;
    client(): Redis | Cluster;
    readonly defines: Record<string, string>;
  }

  /** A spill run's parts, for its checks: its Kamailio, a client, p1's lane's tag, the prefix. */
  interface SpillRun {
    readonly kamailio: Awaited<ReturnType<typeof startKamailio>>;
    readonly raw: Redis | Cluster;
    readonly lane: string;
    readonly prefix: string;
    /** sipp calls from p1 to Kamailio, each held 2 s: its report. */
    call(o: { name: string; calls: number; rate: number }): Promise<SippReport>;
  }

  /**
   * The overflow lane with shares set by hand (no coordinator), an hour-long window: p1's lane
   * (`lane` of 4) gets `shares.lane` calls, the overflow lane `shares.overflow`; then `check`
   * with a Kamailio with `defines` (a carrier answering every call behind it), which must exit
   * cleanly.
   */
  async function withSpill(
    at: SpillAt,
    shares: { lane: number; overflow: number },
    check: (r: SpillRun) => Promise<void>,
  ): Promise<void> {
    // each run its own keys (the single Redis's runs share it)
    const prefix = `kspill-${at.name}:`;
    const LANE = laneTag(at.lane, 4);
    const hour = parseConfig({
      maxCallDuration: 'PT60S',
      inbound: {
        global: [{ limit: 100, window: 'PT1H' }, { channels: 10 }],
        peers: { p1: [{ limit: 100, window: 'PT1H' }, { channels: 10 }] },
      },
    });
    const lease = { lanes: 4, pin: { peers: { p1: at.lane } }, overflow: true };
    const sub = path.join(dir, at.name);
    mkdirSync(sub, { recursive: true });
    writeFileSync(
      path.join(sub, 'callgate-redis.cfg'),
      kamailioInclude(kamailioCommands(hour, prefix, 1, { lease }), 'test'),
    );
    copyFileSync(KAMAILIO_REDIS_CFG, path.join(sub, 'kamailio-redis.cfg'));
    const raw = at.client();
    const stops: (() => Promise<unknown>)[] = [async () => raw.disconnect()];
    try {
      const [sec] = (await raw.time()) as unknown as [string];
      const end = String((Number(sec) + 3600) * 1_000_000);
      await raw.hset(`${prefix}{${LANE}}:global:share`, 'c', String(shares.lane), 'h', '10', 'e', end);
      await raw.hset(`${prefix}{in:overflow}:global:share`, 'c', String(shares.overflow), 'h', '0', 'e', end);
      const carrier = await startSipp({
        name: `${at.name}-carrier`,
        scenario: path.resolve('bench/sip/uas.xml'),
        dir: sub,
        timeoutS: 30,
        trace: 'short',
      });
      stops.push(() => carrier.stop());
      const kamailio = await startKamailio({
        cfg: path.join(sub, 'kamailio-redis.cfg'),
        dir: sub,
        defines: {
          DESTINATION: `"sip:127.0.0.1:${carrier.port}"`,
          LOG_DECISIONS: '1',
          REDIS_TIMEOUT_MS: '1000',
          CHILDREN: '2',
          ...at.defines,
        },
        pkgMb: 16,
      });
      stops.push(() => kamailio.stop());
      const call = async (o: { name: string; calls: number; rate: number }) => {
        const caller = await startSipp({
          name: `${at.name}-${o.name}`,
          scenario: path.join(SCENARIOS, 'caller.xml'),
          dir: sub,
          remote: `127.0.0.1:${kamailio.port}`,
          rate: o.rate,
          calls: o.calls,
          pauseMs: 2_000,
          service: '1000',
          keys: { caller: 'p1' },
          timeoutS: 25,
        });
        return caller.done(30_000);
      };
      await check({ kamailio, raw, lane: LANE, prefix, call });
      const log = kamailio.log();
      expect(await kamailio.stop(), `Kamailio's exit; its log:\n${log.slice(-3000)}`).to.equal(0);
    } finally {
      for (const stop of stops.reverse()) await stop().catch(() => undefined);
    }
  }

  /**
   * p1's lane takes 2 calls, the overflow lane 3; of six calls one after the other, two are
   * admitted on the lane, three through the overflow lane, and the sixth refused.
   */
  function spill(at: SpillAt): Promise<void> {
    return withSpill(at, { lane: 2, overflow: 3 }, async ({ kamailio, raw, lane, prefix, call }) => {
      const report = await call({ name: 'caller', calls: 6, rate: 4 });
      expect(report.stats['FailedCall(C)'], 'failed calls').to.equal('0');
      const finals = [...callsOf(report).values()].sort((a, b) => a.invite! - b.invite!).map((c) => c.final!);
      // two on the lane, three spilled to the overflow lane, then both shares used up
      expect(finals.map((f) => f.status)).to.deep.equal([200, 200, 200, 200, 200, 503]);
      expect(warning(finals[5]!)).to.include('callgate "global rate"');
      expect([...kamailio.log().matchAll(/callgate: admitted \w+ at -?\d+ \(overflow lane\)/g)]).to.have.length(3);
      // counted once in the level: 2 on the lane's log, 3 on the overflow lane's; each call's
      // channel on its own lane, given back at its end
      expect(await raw.zcard(`${prefix}{${lane}}:global:log`)).to.equal(2);
      expect(await raw.zcard(`${prefix}{in:overflow}:global:log`)).to.equal(3);
      expect(await raw.zcard(`${prefix}{${lane}}:peer:p1:log`)).to.equal(5);
      expect(await raw.zcard(`${prefix}{${lane}}:global:ch`)).to.equal(0);
    });
  }

  it('the overflow lane: a call its lane’s share refuses spills to it, in Kamailio as in a RedisStore', async () => {
    await spill({
      name: 'spill',
      lane: 0,
      client: () => new Redis(redis!.port, '127.0.0.1'),
      defines: { REDIS: `"name=callgate;addr=127.0.0.1;port=${redis!.port}"` },
    });
  });

  it('the overflow lane refused: every Kamailio worker leaves it alone for 50 ms, then asks again', async () => {
    // no share anywhere: each call is refused by its lane for lack of calls share, and would
    // spill; the overflow lane refuses it too, with the wait of a lane without share (a window,
    // capped at 50 ms by route[SPILL])
    await withSpill(
      {
        name: 'spill-pause',
        lane: 0,
        client: () => new Redis(redis!.port, '127.0.0.1'),
        defines: { REDIS: `"name=callgate;addr=127.0.0.1;port=${redis!.port}"` },
      },
      { lane: 0, overflow: 0 },
      async ({ raw, lane, prefix, call }) => {
        // the refusals for lack of share each lane counted
        const refused = async (tag: string) => Number(await raw.hget(`${prefix}{${tag}}:global:share`, 'rc'));
        const burst = async (name: string, calls: number, rate: number) => {
          const asked = await refused('in:overflow');
          const report = await call({ name, calls, rate });
          expect(report.stats['FailedCall(C)'], 'failed calls').to.equal('0');
          const finals = [...callsOf(report).values()].map((c) => c.final!);
          expect(finals.map((f) => f.status)).to.deep.equal(new Array(calls).fill(503));
          for (const f of finals) expect(warning(f)).to.include('callgate "global rate"');
          return (await refused('in:overflow')) - asked;
        };
        // ten calls in about 45 ms: the overflow lane asked once (twice when both workers ask
        // before either pauses, more when sipp spreads them past 50 ms), not ten times
        expect(await burst('burst', 10, 200)).to.be.within(1, 4);
        await sleep(100);
        // twenty calls in about 380 ms: asked again each time a pause has ended, about every
        // 50 ms (a pause of a second, from the first burst, would not ask at all)
        expect(await burst('spread', 20, 50)).to.be.within(4, 12);
        expect(await refused(lane)).to.equal(30);
      },
    );
  });

  it('the overflow lane’s master stalled: the first calls wait out their timeout, then every worker leaves it alone for 1 s', async () => {
    const cluster: RedisClusterHandle = await startCluster(3);
    const TIMEOUT_MS = 300;
    try {
      // Kamailio on the second master, p1's lane (the fourth of 4) on the third, the overflow
      // lane on the first (the Cluster test below checks the placement); no calls share on
      // the lane, so every call asks the overflow lane, which then stops (SIGSTOP)
      await withSpill(
        {
          name: 'spill-stalled',
          lane: 3,
          client: () => newClusterClient(cluster),
          defines: {
            REDIS: `"name=callgate;addr=127.0.0.1;port=${cluster.nodes[1]!.port}"`,
            REDIS_CLUSTER: '1',
            REDIS_TIMEOUT_MS: String(TIMEOUT_MS),
          },
        },
        { lane: 0, overflow: 0 },
        async ({ call }) => {
          // one call first, every master up: the scripts loaded on each, the overflow lane asked
          const warm = await call({ name: 'warm', calls: 1, rate: 10 });
          expect([...callsOf(warm).values()].map((c) => c.final!.status)).to.deep.equal([503]);
          await sleep(200);
          // the other masters must not mark the stopped one failed (2 s here) and answer
          // CLUSTERDOWN for the whole Cluster meanwhile
          for (const node of cluster.nodes) {
            await rawCommand(node.port, ['CONFIG', 'SET', 'cluster-node-timeout', '60000']);
            await rawCommand(node.port, ['CONFIG', 'SET', 'cluster-require-full-coverage', 'no']);
          }
          process.kill(cluster.pids[0]!, 'SIGSTOP');
          try {
            const report = await call({ name: 'stalled', calls: 20, rate: 40 });
            expect(report.stats['FailedCall(C)'], 'failed calls').to.equal('0');
            const calls = [...callsOf(report).values()];
            expect(calls.map((c) => c.final!.status)).to.deep.equal(new Array(20).fill(503));
            for (const c of calls) expect(warning(c.final!)).to.include('callgate "global rate"');
            // two workers: each of the first two calls waits out its timeouts (the command and
            // a reconnection, at most 2 x 300 ms), the rest are refused without asking. Asking
            // every call would take twenty timeouts over two workers: 3 s at least
            const first = Math.min(...calls.map((c) => c.invite!));
            const last = Math.max(...calls.map((c) => c.final!.t));
            expect((last - first) / 1000, 'ms from the first INVITE to the last answer').to.be.below(
              4 * 2 * TIMEOUT_MS,
            );
          } finally {
            process.kill(cluster.pids[0]!, 'SIGCONT');
          }
        },
      );
    } finally {
      await cluster.stop();
    }
  });

  it('the overflow lane on a Redis Cluster: both steps MOVED, to two other masters', async () => {
    const cluster: RedisClusterHandle = await startCluster(3);
    try {
      // Kamailio on the second master; the call's lane (the fourth of 4) on the third, the
      // overflow lane on the first
      const client = newClusterClient(cluster);
      try {
        const masterOf = async (tag: string) =>
          masterOfSlot(client, Number(await client.call('CLUSTER', 'KEYSLOT', `{${tag}}`)));
        expect(await masterOf(laneTag(3, 4))).to.equal(cluster.nodes[2]!.port);
        expect(await masterOf('in:overflow')).to.equal(cluster.nodes[0]!.port);
      } finally {
        client.disconnect();
      }
      await spill({
        name: 'spill-cluster',
        lane: 3,
        client: () => newClusterClient(cluster),
        defines: { REDIS: `"name=callgate;addr=127.0.0.1;port=${cluster.nodes[1]!.port}"`, REDIS_CLUSTER: '1' },
      });
    } finally {
      await cluster.stop();
    }
  });
});
