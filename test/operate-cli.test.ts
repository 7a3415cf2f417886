/**
 * `callgate holds`, `callgate release` and `callgate reset` as an operator runs them (child
 * processes) against the live Redis a routing process uses.
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import { Redis } from 'ioredis';
import { CallGate } from '../src/gate.js';
import { RedisStore } from '../src/store/redis/redis-store.js';
import { getRedis, type RedisHandle } from './helpers/redis.js';
import { runNode } from './helpers/run.js';

const ROOT = new URL('..', import.meta.url).pathname;
const CONFIG = {
  inbound: { peers: { p1: [{ limit: 100, window: 'PT1H' }, { channels: 2 }] } },
  outbound: { carriers: { A: { cps: 100, maxWait: 'PT1S', channels: 3 } } },
};

describe('callgate holds | release | reset (the commands)', function () {
  this.timeout(60_000);
  let redis: RedisHandle;
  let dir: string;
  before(async () => {
    redis = await getRedis();
    dir = mkdtempSync(join(tmpdir(), 'callgate-operate-'));
  });
  after(async () => {
    await redis?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('lists the calls holding a bucket, frees one by id, resets a bucket with --yes; refuses without a terminal', async () => {
    const prefix = `cgops:${randomBytes(4).toString('hex')}:`;
    const configPath = join(dir, 'limits.json');
    writeFileSync(configPath, JSON.stringify(CONFIG));
    const client = new Redis(redis.url);
    const gate = await CallGate.create({ config: CONFIG, store: new RedisStore({ redis: client, prefix }) });
    const run = (...args: string[]) =>
      runNode([join(ROOT, 'bin/callgate.js'), ...args, '--redis-url', redis.url, '--prefix', prefix], { cwd: ROOT });
    try {
      for (const id of ['stuck-1', 'c 2'])
        expect((await gate.admit({ callId: id, peer: 'p1' })).admitted).to.equal(true);
      expect((await gate.admit({ callId: 'c3', peer: 'p1' })).reason).to.equal('channels');
      await gate.reserve({ callId: 'o1', route: ['A'] });

      const holds = await run('holds', '--config', configPath, '--bucket', 'peer:p1', '--json');
      expect(holds.code, holds.stderr).to.equal(0);
      const l = JSON.parse(holds.stdout) as {
        total: number;
        limit: number;
        holds: { call_id: string; left_ms: number }[];
      };
      expect([l.total, l.limit, l.holds.map((h) => h.call_id)]).to.deep.equal([2, 2, ['stuck-1', 'c 2']]);
      // the default maxCallDuration: 4 h
      expect(l.holds[0]!.left_ms).to.be.within(4 * 3600_000 - 30_000, 4 * 3600_000);
      const text = await run('holds', '--config', configPath, '--carrier', 'A');
      expect(text.stdout).to.match(
        /^carrier:A: 1 calls in progress \(limit 3\)\ncall id +ends at +in\no1 +\S+Z +3h59m/,
      );
      const neither = await run('holds', '--config', configPath);
      expect([neither.code, neither.stderr]).to.deep.equal([
        2,
        'error: give one of --bucket global|account:<id>|peer:<id> or --carrier <id>\n',
      ]);

      const rel = await run('release', '--call-id', 'stuck-1');
      expect([rel.code, rel.stdout], rel.stderr).to.deep.equal([0, 'released call "stuck-1": its channels are free\n']);
      const again = await run('release', '--call-id', 'stuck-1', '--json');
      expect(JSON.parse(again.stdout)).to.deep.equal({ call_id: 'stuck-1', released: false, outcome: 'not-held' });
      expect((await gate.admit({ callId: 'c3', peer: 'p1' })).admitted, 'a channel was freed').to.equal(true);

      const refused = await run('reset', '--config', configPath, '--bucket', 'peer:p1');
      expect([refused.code, refused.stderr]).to.deep.equal([
        2,
        'error: reset peer:p1 needs a confirmation: run it in a terminal, or add --yes to skip it\n',
      ]);
      expect((await gate.admit({ callId: 'c4', peer: 'p1' })).reason, 'nothing was reset').to.equal('channels');
      const reset = await run('reset', '--config', configPath, '--bucket', 'peer:p1', '--yes', '--json');
      expect(reset.code, reset.stderr).to.equal(0);
      expect(reset.stderr, reset.stderr).to.match(
        /^\S+Z reset peer:p1: removed 3 events, 0 window counters, 2 holds: "c 2", "c3"\n$/,
      );
      expect(JSON.parse(reset.stdout)).to.deep.include({ bucket: 'peer:p1', events: 3, holds: ['c 2', 'c3'] });
      expect((await gate.admit({ callId: 'c4', peer: 'p1' })).admitted, 'the holds are gone').to.equal(true);
      const unknown = await run('reset', '--config', configPath, '--bucket', 'peer:zz', '--yes');
      expect([unknown.code, unknown.stderr]).to.deep.equal([
        2,
        'error: bucket peer:zz: the configuration has no peer "zz" and no defaultPeer\n',
      ]);
    } finally {
      await gate.close();
      client.disconnect();
    }
  });
});
