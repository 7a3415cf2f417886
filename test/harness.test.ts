import { expect } from 'chai';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import {
  getRedis,
  newClusterClient,
  newRedisClient,
  redisServerAvailable,
  startCluster,
  startRedisServer,
  type RedisClusterHandle,
  type RedisHandle,
  type RedisServer,
} from './helpers/redis.js';
import { runNode } from './helpers/run.js';

const ROOT = new URL('..', import.meta.url).pathname;

function portOpen(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = net.createConnection({ host: '127.0.0.1', port });
    s.once('connect', () => {
      s.destroy();
      resolve(true);
    });
    s.once('error', () => resolve(false));
  });
}

describe('test harness (real Redis)', function () {
  this.timeout(20_000);

  it('redisServerAvailable(): true with redis-server on PATH, false in a process whose PATH lacks it', async () => {
    const onPath = spawnSync('sh', ['-c', 'command -v redis-server'], { stdio: 'ignore' }).status === 0;
    expect(onPath, 'the other tests of this file need redis-server on PATH').to.equal(true);
    expect(redisServerAvailable()).to.equal(true);
    const empty = mkdtempSync(join(tmpdir(), 'callgate-empty-path-'));
    try {
      const r = await runNode(
        [
          '--import',
          'tsx',
          '--input-type=module',
          '-e',
          "const m = await import('./test/helpers/redis.ts'); console.log(m.redisServerAvailable());",
        ],
        { cwd: ROOT, env: { PATH: empty } },
      );
      expect(r.stdout.trim(), `PATH without redis-server; stderr: ${r.stderr}`).to.equal('false');
    } finally {
      rmSync(empty, { recursive: true, force: true });
    }
  });

  describe('getRedis', () => {
    let handle: RedisHandle;
    let client: Redis;
    before(async () => {
      handle = await getRedis();
      client = newRedisClient(handle);
    });
    after(async () => {
      client?.disconnect();
      await handle?.stop();
    });

    it('answers PING and SET/GET', async () => {
      expect(handle.url).to.match(/^rediss?:\/\//);
      expect(await client.ping()).to.equal('PONG');
      await client.set('harness:k', 'v1');
      expect(await client.get('harness:k')).to.equal('v1');
      await client.del('harness:k');
    });
  });

  describe('startRedisServer', () => {
    let server: RedisServer;
    before(async () => {
      server = await startRedisServer();
    });
    after(async () => {
      await server?.stop();
    });

    it('kill makes clients fail; restart answers again on the same port', async () => {
      const port = server.port;
      const client = newRedisClient(server);
      client.on('error', () => {}); // expected while the server is down
      try {
        expect(await client.ping()).to.equal('PONG');
        await server.kill();
        expect(await portOpen(port)).to.equal(false);
        let failed = false;
        try {
          await client.ping();
        } catch {
          failed = true;
        }
        expect(failed, 'PING should fail while the server is down').to.equal(true);

        await server.restart();
        expect(server.port).to.equal(port);
        const fresh = newRedisClient(server);
        try {
          expect(await fresh.ping()).to.equal('PONG');
        } finally {
          fresh.disconnect();
        }
      } finally {
        client.disconnect();
      }
      await server.stop();
      expect(await portOpen(port)).to.equal(false);
    });
  });

  describe('startCluster', () => {
    let cluster: RedisClusterHandle;
    before(async () => {
      cluster = await startCluster();
    });
    after(async () => {
      await cluster?.stop();
    });

    it('serves SET/GET on every slot range and CLUSTER INFO is ok on all nodes', async () => {
      expect(cluster.nodes).to.have.length(3);
      const client = newClusterClient(cluster);
      try {
        // Keys chosen to land on all three masters: {a}=15495, {b}=3300, {c}=7365.
        const keys = ['{a}k', '{b}k', '{c}k', 'foo', 'bar', 'baz'];
        for (const k of keys) await client.set(k, `v:${k}`);
        for (const k of keys) expect(await client.get(k)).to.equal(`v:${k}`);
        const perNode = await Promise.all(client.nodes('master').map((n) => n.dbsize()));
        expect(perNode.filter((n) => n > 0)).to.have.length(3);
      } finally {
        client.disconnect();
      }
      for (const n of cluster.nodes) {
        const r = new Redis({ host: n.host, port: n.port, maxRetriesPerRequest: 1 });
        try {
          const info = (await r.call('CLUSTER', 'INFO')) as string;
          expect(info).to.match(/cluster_state:ok/);
          expect(info).to.match(/cluster_known_nodes:3/);
        } finally {
          r.disconnect();
        }
      }
      const ports = cluster.nodes.map((n) => n.port);
      await cluster.stop();
      for (const p of ports) expect(await portOpen(p), `port ${p} closed`).to.equal(false);
    });
  });
});
