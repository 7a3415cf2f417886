/**
 * A socket that fails twice does not end the process. ioredis listens to each socket's 'error'
 * once (redis/ioredis#1183): a TLS socket whose write was reset and whose server's alert is read
 * after it (a client certificate refused after a TLS 1.3 handshake) emitted its second error with
 * no listener, an uncaught exception; CI saw it once in test/redis-tls. The errors are emitted
 * here on the client's real sockets, in that order, as Node's TLS socket emits them.
 */
import { expect } from 'chai';
import type { Cluster, Redis } from 'ioredis';
import { CallGate } from '../src/gate.js';
import { RedisStore } from '../src/store/redis/redis-store.js';
import {
  newClusterClient,
  newRedisClient,
  startCluster,
  startRedisServer,
  type RedisClusterHandle,
  type RedisServer,
} from './helpers/redis.js';

const CONFIG = { inbound: { peers: { p: [{ limit: 100, window: 'PT1S' }] } } };

/** Two errors on a socket, as a TLS socket emits them: no exception, one outage reported. */
function failTwice(stream: Redis['stream']): void {
  stream.emit('error', Object.assign(new Error('write ECONNRESET'), { code: 'ECONNRESET' }));
  stream.emit('error', new Error('SSL routines:ssl3_read_bytes:tlsv1 alert decode error'));
  stream.destroy();
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * A decision, sockets failing twice (`fail` picks them, every open one by default), a decision
 * again (on new sockets, guarded too). `reported`: the store's outage reports expected (a
 * Cluster's node errors are not outages, unless every node is lost and the client closes).
 */
async function decideThrough(
  client: Redis | Cluster,
  sockets: () => Redis['stream'][],
  reported: string[],
  opts: { connect?: () => Promise<unknown>; fail?: (open: Redis['stream'][]) => Redis['stream'][] } = {},
): Promise<void> {
  const store = new RedisStore({ redis: client, prefix: `t:sockets:${Date.now()}:` });
  const gate = await CallGate.create({ config: CONFIG, store, policy: 'error' });
  const errors: Error[] = [];
  gate.on('error', (e) => errors.push(e));
  try {
    expect((await gate.admit({ callId: 'a', peer: 'p' })).admitted).to.equal(true);
    await opts.connect?.();
    const open = sockets();
    const before = opts.fail ? opts.fail(open) : open;
    expect(before.length).to.be.greaterThan(0);
    for (const s of before) expect(() => failTwice(s)).not.to.throw();
    // reconnected on new sockets, which are guarded too
    expect((await gate.admit({ callId: 'b', peer: 'p' })).admitted).to.equal(true);
    await sleep(100);
    expect(errors.map((e) => e.name)).to.deep.equal(reported);
    const after = sockets();
    expect(after.some((s) => before.includes(s))).to.equal(false);
    for (const s of after) expect(s.listenerCount('error')).to.be.greaterThan(1);
  } finally {
    await gate.close();
  }
}

describe('a client socket that fails twice (ioredis#1183) does not end the process', function () {
  this.timeout(60_000);

  describe('on one Redis', () => {
    let server: RedisServer;
    before(async () => {
      server = await startRedisServer();
    });
    after(async () => {
      await server?.stop();
    });

    it('the second error is ignored, the outage reported once, the new socket guarded too', async () => {
      const client = newRedisClient(server);
      try {
        await decideThrough(client, () => [client.stream], ['StoreUnavailableError']);
      } finally {
        client.disconnect();
      }
    });
  });

  describe('on a Redis Cluster', () => {
    let cluster: RedisClusterHandle;
    before(async () => {
      cluster = await startCluster(3);
    });
    after(async () => {
      await cluster?.stop();
    });

    const open = (client: Cluster) =>
      client
        .nodes('all')
        .map((n) => n.stream)
        .filter((s) => s && !s.destroyed);
    // every master connected after the store was made (ioredis connects a node at its first
    // command): which of them a decision alone connects is ioredis' choice, and decides the outcome
    const connectAll = (client: Cluster) => () => Promise.all(client.nodes('master').map((n) => n.ping()));

    it('one node socket failing, the others up: not an outage; the node comes back guarded', async () => {
      const client = newClusterClient(cluster);
      try {
        await decideThrough(client, () => open(client), [], {
          connect: connectAll(client),
          fail: (sockets) => {
            expect(sockets.length).to.equal(3);
            return sockets.slice(0, 1);
          },
        });
      } finally {
        client.disconnect();
      }
    });

    it('every node socket failing: the client closes and reconnects, one outage reported', async () => {
      const client = newClusterClient(cluster);
      try {
        await decideThrough(client, () => open(client), ['StoreUnavailableError'], {
          connect: connectAll(client),
          fail: (sockets) => {
            expect(sockets.length).to.equal(3);
            return sockets;
          },
        });
      } finally {
        client.disconnect();
      }
    });
  });
});
