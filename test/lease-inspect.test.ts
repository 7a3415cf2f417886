/**
 * Live inspection of a leased deployment (src/observe/inspect.ts with Store.leaseLanes,
 * `callgate inspect --lease-lanes`): accounts and peers are read on their lanes, the global level
 * on every lane and summed. The same calls on an unleased store give the same counts; holds
 * and reset (src/observe/operate.ts, `callgate holds | reset --lease-lanes`) find the lanes too.
 */
import { expect } from 'chai';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseConfig } from '../src/config/load.js';
import { CallGate } from '../src/gate.js';
import { LeaseCoordinator } from '../src/lease/coordinator.js';
import { inspectGate, stateText, type GateState } from '../src/observe/inspect.js';
import { listHolds, resetBucket } from '../src/observe/operate.js';
import { RedisStore } from '../src/store/redis/redis-store.js';
import { redisRig } from './helpers/redis.js';
import { runNode } from './helpers/run.js';

const ROOT = new URL('..', import.meta.url).pathname;
const LANES = 4;
// far from every limit: leased and unleased admit every call alike
const CONFIG = {
  inbound: {
    global: [{ limit: 1000, window: 'PT10S' }, { channels: 500 }],
    accounts: { acme: [{ limit: 100, window: 'PT10S' }, { channels: 50 }], beta: [{ limit: 100, window: 'PT10S' }] },
    peers: { p1: [{ limit: 50, window: 'PT10S' }, { channels: 20 }], p2: [{ limit: 50, window: 'PT10S' }] },
    defaultPeer: [{ limit: 50, window: 'PT10S' }],
  },
};
const CALLS: [peer: string, account: string | undefined, n: number][] = [
  ['p1', 'acme', 7],
  ['p2', 'acme', 3],
  ['p2', undefined, 4],
  ['q1', 'beta', 5],
  ['q2', undefined, 6],
  ['q3', undefined, 2],
];

const CONFIG_LOADED = parseConfig(CONFIG);

/** The buckets' counts and channels, without the time. */
const counts = (s: GateState) =>
  s.buckets.map((b) => ({ bucket: b.bucket, counts: b.limits.map((l) => l.count), channels: b.channels?.in_use }));

describe('inspect a leased deployment', function () {
  this.timeout(60_000);
  const rig = redisRig();
  const client = () => rig.client();

  async function gateOn(prefix: string, leased: boolean) {
    const store = new RedisStore({
      redis: client(),
      prefix,
      ...(leased && { lease: { lanes: LANES }, hashTags: true }),
    });
    const gate = await CallGate.create({ config: CONFIG, store, shield: false });
    const coordinator = leased
      ? LeaseCoordinator.forGate(gate, {
          deployments: [{ redis: client(), lanes: LANES, prefix }],
        }).start()
      : undefined;
    return { gate, coordinator };
  }

  async function offer(gate: CallGate): Promise<number> {
    let admitted = 0;
    for (const [peer, account, n] of CALLS)
      for (let i = 0; i < n; i++) {
        const d = await gate.admit({ callId: `${peer}-${account}-${i}`, peer, ...(account && { account }) });
        if (d.admitted) admitted++;
      }
    return admitted;
  }

  it('sums the global level over the lanes, reads accounts and peers on theirs; as unleased', async () => {
    const prefix = `cginspect:${randomBytes(4).toString('hex')}:`;
    const leased = await gateOn(`${prefix}l:`, true);
    const plain = await gateOn(`${prefix}u:`, false);
    try {
      // the first grants: every lane holds a share within a few ticks
      await new Promise((r) => setTimeout(r, 500));
      const total = CALLS.reduce((n, c) => n + c[2], 0);
      expect(await offer(leased.gate)).to.equal(total);
      expect(await offer(plain.gate)).to.equal(total);
      const peers = ['q1', 'q2', 'q3'];
      const l = await inspectGate(leased.gate, { peers });
      const u = await inspectGate(plain.gate, { peers });
      expect(counts(l)).to.deep.equal(counts(u));
      const global = l.buckets.find((b) => b.bucket === 'global')!;
      expect(global).to.deep.include({
        leased_lanes: LANES,
        retry_after_ms: 0,
        channels: { limit: 500, in_use: total },
      });
      expect(global.limits[0]!.count).to.equal(total);
      expect(counts(l).find((b) => b.bucket === 'account:acme')).to.deep.equal({
        bucket: 'account:acme',
        counts: [10],
        channels: 10,
      });
      expect(counts(l).find((b) => b.bucket === 'peer:q2')!.counts).to.deep.equal([6]);
      expect(stateText(l)).to.match(/^global \(4 lanes\) +1000 +10s +sliding-log +27 +- +27\/500$/m);

      // a reload to a configuration the leased store cannot take is refused: the old one stays
      const withAttributes = {
        inbound: {
          ...CONFIG.inbound,
          attributes: [{ name: 'caller', key: 'caller' as const, limits: [{ limit: 5, window: 'PT1S' }] }],
        },
      };
      const refused = await leased.gate.reload(withAttributes).then(
        () => undefined,
        (e: unknown) => e as Error,
      );
      expect(refused?.message).to.match(/does not combine with attribute levels/);
      expect(leased.gate.config.inbound.attributes ?? []).to.have.length(0);

      // holds and reset find the calls on the lanes
      for (const [bucket, n] of [
        ['global', total],
        ['account:acme', 10],
        ['peer:p1', 7],
      ] as const) {
        const h = await listHolds(CONFIG_LOADED, leased.gate.store, { bucket });
        const p = await listHolds(CONFIG_LOADED, plain.gate.store, { bucket });
        expect(h.total, bucket).to.equal(n);
        expect(h.holds.map((x) => x.call_id).sort(), bucket).to.deep.equal(p.holds.map((x) => x.call_id).sort());
      }
      const reset = await resetBucket(CONFIG_LOADED, leased.gate.store, 'peer:q2');
      expect(reset).to.deep.include({ events: 6 });
      const after = await inspectGate(leased.gate, { peers });
      expect(counts(after).find((b) => b.bucket === 'peer:q2')!.counts).to.deep.equal([0]);

      // the CLI, told the lanes; without them it reads the one inbound tag, where nothing is
      const dir = mkdtempSync(join(tmpdir(), 'callgate-lease-inspect-'));
      try {
        const configPath = join(dir, 'limits.json');
        writeFileSync(configPath, JSON.stringify(CONFIG));
        // a command of the CLI on the leased deployment's Redis and prefix
        const callgate = (command: string, ...more: string[]) =>
          runNode(
            [
              join(ROOT, 'bin/callgate.js'),
              command,
              ...['--config', configPath, '--redis-url', rig.server.url, '--prefix', `${prefix}l:`, '--json'],
              ...more,
            ],
            { cwd: ROOT },
          );
        const cli = (...more: string[]) => callgate('inspect', ...more);
        const told = await cli('--lease-lanes', String(LANES), '--peer', 'q1', '--peer', 'q2', '--peer', 'q3');
        expect(told.code, told.stderr).to.equal(0);
        expect(counts(JSON.parse(told.stdout))).to.deep.equal(counts(after));
        const untold = await cli();
        expect(untold.code, untold.stderr).to.equal(0);
        const g = (JSON.parse(untold.stdout) as GateState).buckets.find((b) => b.bucket === 'global')!;
        expect(g.limits[0]!.count).to.equal(0);
        const holds = await callgate('holds', '--bucket', 'global', '--lease-lanes', String(LANES));
        expect(holds.code, holds.stderr).to.equal(0);
        expect(JSON.parse(holds.stdout).total).to.equal(total);
        // a configuration whose global level cannot be leased: one line, exit 2, before Redis
        const noGlobal = join(dir, 'no-global.json');
        writeFileSync(noGlobal, JSON.stringify({ inbound: { defaultPeer: [{ limit: 5, window: 'PT1S' }] } }));
        for (const args of [
          ['holds', '--config', noGlobal, '--bucket', 'peer:x', '--lease-lanes', '4'],
          ['reset', '--config', noGlobal, '--bucket', 'peer:x', '--lease-lanes', '4'],
          ['inspect', '--config', noGlobal, '--lease-lanes', '4'],
          ['serve', '--config', noGlobal, '--store', 'redis', '--lease-lanes', '4'],
          [
            'serve',
            '--config',
            join(ROOT, 'examples/limits/attributes.json'),
            '--store',
            'redis',
            '--lease-lanes',
            '4',
          ],
        ]) {
          const r = await runNode([join(ROOT, 'bin/callgate.js'), ...args, '--redis-url', 'redis://127.0.0.1:1'], {
            cwd: ROOT,
          });
          expect(r.code, `${args.join(' ')}: ${r.stderr}`).to.equal(2);
          expect(r.stderr.trimEnd().split('\n')).to.have.length(1);
          expect(r.stderr).to.match(
            /a leased global level (must be configured|does not combine with attribute levels)/,
          );
        }
        for (const [bad, message] of [
          ['0', /--lease-lanes: expected an integer from 1 to 1024, got 0/],
          ['x', /--lease-lanes: expected an integer from 1 to 1024, got "x"/],
        ] as const) {
          const r = await cli('--lease-lanes', bad);
          expect(r.code).to.equal(2);
          expect(r.stderr.trimEnd().split('\n')).to.have.length(1);
          expect(r.stderr).to.match(message);
        }
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    } finally {
      await leased.coordinator?.stop();
      await leased.gate.close();
      await plain.gate.close();
    }
  });
});
