/**
 * `callgate holds`, `callgate release` and `callgate reset` as an operator runs them (child
 * processes) against the live Redis a routing process uses.
 */
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import type { Cluster, Redis } from 'ioredis';
import { CallGate } from '../src/gate.js';
import { RedisStore } from '../src/store/redis/redis-store.js';
import { getRedis, newClusterClient, newRedisClient, startCluster } from './helpers/redis.js';
import { runNode, type Run } from './helpers/run.js';

const ROOT = new URL('..', import.meta.url).pathname;
const CONFIG = {
  inbound: { peers: { p1: [{ limit: 100, window: 'PT1H' }, { channels: 2 }] } },
  outbound: { carriers: { A: { cps: 100, maxWait: 'PT1S', channels: 3 } } },
};

/** A program with `input` on its stdin. */
function runCommand(file: string, args: string[], input: string): Promise<Run> {
  return new Promise((resolve, reject) => {
    const child = spawn(file, args, { cwd: ROOT });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (b: Buffer) => (stdout += b));
    child.stderr.on('data', (b: Buffer) => (stderr += b));
    const timer = setTimeout(() => child.kill('SIGKILL'), 30_000);
    child.on('error', reject);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
    child.stdin.end(input);
  });
}

interface Backend {
  /** The command-line options that reach it. */
  args: string[];
  client(): Redis | Cluster;
  stop(): Promise<void>;
}

const backends: [string, () => Promise<Backend>][] = [
  [
    'Redis',
    async () => {
      const h = await getRedis();
      return { args: ['--redis-url', h.url], client: () => newRedisClient(h), stop: () => h.stop() };
    },
  ],
  [
    'Redis Cluster',
    async () => {
      const h = await startCluster();
      const seed = h.nodes[1]!;
      return {
        args: ['--redis-url', `redis://${seed.host}:${seed.port}`, '--redis-cluster'],
        client: () => newClusterClient(h),
        stop: () => h.stop(),
      };
    },
  ],
];

for (const [name, start] of backends)
  describe(`callgate holds | release | reset (the commands) on ${name}`, function () {
    this.timeout(60_000);
    let backend: Backend;
    let dir: string;
    before(async () => {
      backend = await start();
      dir = mkdtempSync(join(tmpdir(), 'callgate-operate-'));
    });
    after(async () => {
      await backend?.stop();
      rmSync(dir, { recursive: true, force: true });
    });

    it('lists the calls holding a bucket, frees one by id, resets a bucket with --yes; refuses without a terminal', async () => {
      const prefix = `cgops:${randomBytes(4).toString('hex')}:`;
      const configPath = join(dir, 'limits.json');
      writeFileSync(configPath, JSON.stringify(CONFIG));
      const client = backend.client();
      const gate = await CallGate.create({ config: CONFIG, store: new RedisStore({ redis: client, prefix }) });
      const run = (...args: string[]) =>
        runNode([join(ROOT, 'bin/callgate.js'), ...args, ...backend.args, '--prefix', prefix], { cwd: ROOT });
      /** The command on a pseudo-terminal (script -qec), `answer` typed on it. */
      const onTerminal = (answer: string, ...args: string[]) => {
        const argv = [process.execPath, join(ROOT, 'bin/callgate.js'), ...args, ...backend.args, '--prefix', prefix];
        const line = argv.map((a) => `'${a.replace(/'/g, "'\\''")}'`).join(' ');
        return runCommand('script', ['-qec', line, '/dev/null'], `${answer}\n`);
      };
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
        expect([rel.code, rel.stdout], rel.stderr).to.deep.equal([
          0,
          'released call "stuck-1": its channels are free\n',
        ]);
        const again = await run('release', '--call-id', 'stuck-1', '--json');
        expect(JSON.parse(again.stdout)).to.deep.equal({ call_id: 'stuck-1', released: false, outcome: 'not-held' });
        expect((await gate.admit({ callId: 'c3', peer: 'p1' })).admitted, 'a channel was freed').to.equal(true);

        const refused = await run('reset', '--config', configPath, '--bucket', 'peer:p1');
        expect([refused.code, refused.stderr]).to.deep.equal([
          2,
          'error: reset peer:p1 needs a confirmation: run it in a terminal, or add --yes to skip it\n',
        ]);
        expect((await gate.admit({ callId: 'c4', peer: 'p1' })).reason, 'nothing was reset').to.equal('channels');
        // on a terminal (script(1) gives it one): asked, and anything but y cancels
        const no = await onTerminal('n', 'reset', '--config', configPath, '--bucket', 'peer:p1');
        expect(no.stdout).to.include('Reset peer:p1 on ').and.include('reset cancelled: nothing removed');
        expect((await gate.admit({ callId: 'c4', peer: 'p1' })).reason, 'nothing was reset').to.equal('channels');
        const reset = await run('reset', '--config', configPath, '--bucket', 'peer:p1', '--yes', '--json');
        expect(reset.code, reset.stderr).to.equal(0);
        expect(reset.stderr, reset.stderr).to.match(
          /^\S+Z reset peer:p1: removed 3 events, 0 window counters, 2 holds: "c 2", "c3"\n$/,
        );
        expect(JSON.parse(reset.stdout)).to.deep.include({ bucket: 'peer:p1', events: 3, holds: ['c 2', 'c3'] });
        expect((await gate.admit({ callId: 'c4', peer: 'p1' })).admitted, 'the holds are gone').to.equal(true);
        await gate.admit({ callId: 'c5', peer: 'p1' });
        const yes = await onTerminal('y', 'reset', '--config', configPath, '--bucket', 'peer:p1');
        expect(yes.stdout, yes.stdout).to.match(
          /reset peer:p1: removed 2 events, 0 window counters, 2 holds: "c4", "c5"/,
        );
        const unknown = await run('reset', '--config', configPath, '--bucket', 'peer:zz', '--yes');
        expect([unknown.code, unknown.stderr]).to.deep.equal([
          2,
          'error: bucket peer:zz: the configuration has no peer "zz" and no defaultPeer\n',
        ]);
        // a brace in the prefix would put every key on one Cluster slot of its own
        const braced = await runNode(
          [join(ROOT, 'bin/callgate.js'), 'release', '--call-id', 'x', ...backend.args, '--prefix', 'a{b'],
          { cwd: ROOT },
        );
        expect([braced.code, braced.stderr]).to.deep.equal([
          2,
          `error: --prefix must not contain '{' or '}', got "a{b"\n`,
        ]);
      } finally {
        await gate.close();
        client.disconnect();
      }
    });
  });
