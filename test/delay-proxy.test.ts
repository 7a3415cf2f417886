/**
 * The slow inter-region link of the tests (test/helpers/delay-proxy.ts), checked against a real
 * redis-server: every round trip through it takes at least twice its one-way delay, bytes keep
 * their order and content, a cut closes the connections it carries and refuses new ones until
 * healed. A CallGate decision made across it waits for the link: what a leased level's
 * decisions must never do (issue 28), and what the region tests will measure against.
 */
import { randomBytes } from 'node:crypto';
import { expect } from 'chai';
import { Redis } from 'ioredis';
import { CallGate } from '../src/gate.js';
import { RedisStore } from '../src/store/redis/redis-store.js';
import { type DelayProxy, startDelayProxy } from './helpers/delay-proxy.js';
import { type RedisServer, startRedisServer } from './helpers/redis.js';

const DELAY_MS = 40;

describe('a delay proxy between regions', () => {
  let server: RedisServer;
  let proxy: DelayProxy;
  const clients: Redis[] = [];
  const client = (opts: { retry?: boolean } = {}) => {
    const c = new Redis({
      host: '127.0.0.1',
      port: proxy.port,
      maxRetriesPerRequest: 0,
      ...(opts.retry === false && { retryStrategy: () => null }),
    });
    c.on('error', () => undefined); // the cut's resets: each test checks what it expects
    clients.push(c);
    return c;
  };

  before(async () => {
    server = await startRedisServer();
    proxy = await startDelayProxy({ host: server.host, port: server.port }, DELAY_MS);
  });
  afterEach(() => {
    for (const c of clients.splice(0)) c.disconnect();
    proxy.heal();
  });
  after(async () => {
    await proxy.close();
    await server.stop();
  });

  it('adds its delay each way: every round trip takes at least twice it', async () => {
    const c = client();
    await c.ping();
    const times: number[] = [];
    for (let i = 0; i < 5; i++) {
      const t0 = performance.now();
      await c.ping();
      times.push(performance.now() - t0);
    }
    expect(Math.min(...times)).to.be.at.least(2 * DELAY_MS - 2); // each timer may fire up to 1 ms early (libuv caches the loop time)
    // and no more than the delay plus the machine's own time (a loose bound: a loaded CI runner)
    expect(Math.min(...times)).to.be.below(2 * DELAY_MS + 200);
  });

  it('keeps the bytes and their order: 1 MB back as sent, 200 pipelined INCRs in order', async () => {
    const c = client();
    const value = randomBytes(1 << 20);
    await c.set('big', value);
    expect(Buffer.compare((await c.getBuffer('big'))!, value)).to.equal(0);
    const p = c.pipeline();
    for (let i = 0; i < 200; i++) p.incr('n');
    const replies = (await p.exec())!.map(([, v]) => v);
    expect(replies).to.deep.equal(Array.from({ length: 200 }, (_, i) => i + 1));
  });

  it('a cut closes the connections it carries and refuses new ones until healed', async () => {
    const c = client({ retry: false });
    await c.set('k', 'v');
    proxy.cut();
    const err = await c.get('k').then(
      () => undefined,
      (e: Error) => e,
    );
    expect(err, 'a command across a cut link fails').to.be.an('error');
    const fresh = client({ retry: false });
    const refused = await fresh.ping().then(
      () => undefined,
      (e: Error) => e,
    );
    expect(refused, 'a new connection is refused while cut').to.be.an('error');
    proxy.heal();
    const after = client();
    expect(await after.get('k')).to.equal('v');
  });

  it('a decision made across the link waits for it: at least one round trip', async () => {
    const c = client();
    const gate = await CallGate.create({
      config: { inbound: { defaultPeer: [{ limit: 10, window: '1s' }] } },
      store: new RedisStore({ redis: c, prefix: 'region:' }),
      shield: false,
      timeoutMs: 5_000,
    });
    try {
      await gate.admit({ callId: 'warm', peer: 'p' });
      const t0 = performance.now();
      const d = await gate.admit({ callId: 'x', peer: 'p' });
      expect(d.admitted).to.equal(true);
      expect(performance.now() - t0).to.be.at.least(2 * DELAY_MS - 2);
    } finally {
      await gate.close();
    }
  });
});
