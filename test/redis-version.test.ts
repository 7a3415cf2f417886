/**
 * A Redis older than 7.0 (whose PEXPIRE has no GT, which the scripts use) is refused with a
 * clear error at each connection, before any script runs there: a decision with channels would
 * otherwise fail midway, after some of its writes. No Redis 6 is at hand, so a real Redis 7 is
 * reached through a proxy that rewrites the version INFO reports (`redis_version:7.` becomes
 * `redis_version:6.`, the same length); everything else is the real server.
 */
import net from 'node:net';
import { expect } from 'chai';
import { Redis } from 'ioredis';
import { CallGate } from '../src/gate.js';
import type { CallGateConfigInput } from '../src/config/types.js';
import { StoreUnavailableError } from '../src/errors/index.js';
import { RedisStore } from '../src/store/redis/redis-store.js';
import { redisRig } from './helpers/redis.js';

const config: CallGateConfigInput = {
  inbound: { global: [{ limit: 100, window: 'PT1S' }], peers: { p: [{ limit: 10, window: 'PT1S' }, { channels: 5 }] } },
};

/** A proxy to `port` that reports another major version (`to`) in every reply from the server. */
async function versionProxy(port: number, to: string): Promise<{ port: number; close(): Promise<void> }> {
  const open = new Set<net.Socket>();
  const server = net.createServer((client) => {
    const upstream = net.connect(port, '127.0.0.1');
    open.add(client).add(upstream);
    client.on('data', (chunk) => upstream.write(chunk));
    upstream.on('data', (chunk) =>
      client.write(chunk.toString('latin1').replace(/redis_version:7\./g, `redis_version:${to}.`), 'latin1'),
    );
    client.on('close', () => upstream.destroy());
    upstream.on('close', () => client.destroy());
    client.on('error', () => undefined);
    upstream.on('error', () => undefined);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as net.AddressInfo).port,
    close: async () => {
      for (const s of open) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

async function until(cond: () => boolean, ms: number): Promise<void> {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error('timed out');
    await new Promise((r) => setTimeout(r, 10));
  }
}

describe('RedisStore: a Redis older than 7.0', function () {
  this.timeout(20_000);
  const rig = redisRig();

  for (const [to, old] of [
    ['6', true],
    ['7', false],
  ] as const) {
    it(
      old
        ? 'Redis 6: every call fails with a clear error, said once, the policy decides, and nothing is written'
        : 'Redis 7 through the same proxy: no such error, decisions go through',
      async () => {
        const proxy = await versionProxy(rig.server.port, to);
        const client = new Redis(proxy.port, '127.0.0.1', { maxRetriesPerRequest: 1 });
        const gate = await CallGate.create({
          config,
          store: new RedisStore({ redis: client, prefix: `v${to}:`, holds: { syncMs: 0 } }),
          policy: 'fail-closed',
        });
        const errors: Error[] = [];
        gate.on('error', (e) => errors.push(e));
        try {
          await until(() => client.status === 'ready', 5_000);
          // the version is read once the connection is ready: one round trip
          await new Promise((r) => setTimeout(r, 200));
          const decisions = [];
          for (let i = 0; i < 3; i++) decisions.push(await gate.admit({ callId: `c${i}`, peer: 'p' }));
          const refusals = errors.filter((e) => /needs Redis 7\.0 or later/.test(e.message));
          if (old) {
            expect(decisions.map((d) => d.degraded)).to.deep.equal(['fail-closed', 'fail-closed', 'fail-closed']);
            expect(refusals).to.have.length(1);
            expect(refusals[0]).to.be.instanceOf(StoreUnavailableError);
            expect(refusals[0]!.message).to.match(/this server is Redis 6\.\d+\.\d+$/);
            expect(await rig.raw.keys(`v${to}:*`), 'nothing written').to.deep.equal([]);
          } else {
            expect(decisions.map((d) => d.admitted)).to.deep.equal([true, true, true]);
            expect(decisions.every((d) => d.degraded === undefined)).to.equal(true);
            expect(refusals).to.deep.equal([]);
          }
        } finally {
          await gate.close();
          client.disconnect();
          await proxy.close();
        }
      },
    );
  }
});
