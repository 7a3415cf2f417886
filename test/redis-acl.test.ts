/**
 * The minimal Redis ACL of README.md ("Redis: TLS and ACL"), read from the README itself, on a
 * single Redis and on a Cluster: sufficient (every store operation and the ready check work for
 * that user, nothing lands in ACL LOG), tight (commands and keys outside it are refused, inside
 * scripts too) and minimal (without any one of its permissions, that very command is refused).
 */
import { expect } from 'chai';
import { readFileSync } from 'node:fs';
import { Cluster, Redis } from 'ioredis';
import { redisAnswers } from '../src/cli/redis.js';
import { CallGate } from '../src/gate.js';
import { listHolds, resetBucket } from '../src/observe/operate.js';
import { RedisStore } from '../src/store/redis/redis-store.js';
import { RedisKeys } from '../src/store/redis/redis-keys.js';
import {
  newRedisClient,
  startCluster,
  startRedisServer,
  type RedisClusterHandle,
  type RedisServer,
} from './helpers/redis.js';

const README = readFileSync(new URL('../README.md', import.meta.url), 'utf8');
const USER = 'callgate';
const PASSWORD = 'acl-test-password';

/** The README's rules: `ACL SETUSER callgate on >CHANGE-ME <rules>`, and the Cluster's additions. */
function readmeRules(): { base: string[]; cluster: string[] } {
  const base = /^ACL SETUSER callgate on >CHANGE-ME (.+)$/m.exec(README);
  const cluster = /^ACL SETUSER callgate (\+.+)$/m.exec(README);
  if (!base || !cluster)
    throw new Error(
      'README.md lacks the "ACL SETUSER callgate on >CHANGE-ME ..." or the Cluster "ACL SETUSER callgate +..." line',
    );
  const split = (m: RegExpExecArray) => m[1]!.trim().split(/\s+/);
  return { base: split(base), cluster: split(cluster) };
}

const CONFIG = {
  inbound: {
    global: [{ limit: 4, window: 'PT60S', algorithm: 'sliding-window' as const }],
    accounts: { acme: [{ limit: 3, window: 'PT60S', algorithm: 'fixed-window' as const }] },
    peers: { p1: [{ limit: 2, window: 'PT60S' }, { channels: 5 }] },
  },
  outbound: { carriers: { A: { cps: 1, maxWait: 'PT0S', channels: 3 }, B: { cps: 1, maxWait: 'PT0S' } } },
};

const EXPECTED = [
  'admitted',
  'duplicate',
  'admitted',
  'rejected peer:p1 retry>0:true',
  'recorded',
  'dispatched A',
  'dispatched B',
  'rejected null',
  'holds 3',
  'refreshed true',
  'released c1 released',
  'released o1 released',
  'holds 2 and 0',
  'listed e1 c2',
  'reset 3 events, 2 holds',
  'count 0',
  'wait>=0 true',
  'left 0',
  'ready',
];

/** Where the user lives: admin connections to every node, and a store logged in as the user. */
interface Backend {
  admins: Redis[];
  /** A store as the user; `done` closes what it opened. */
  store(prefix: string): { store: RedisStore; done(): Promise<void> };
  /** A client logged in as the user (the sidecar's own, for its ready check). */
  client(): Redis | Cluster;
  stop(): Promise<void>;
}

async function singleRedis(): Promise<Backend> {
  const server: RedisServer = await startRedisServer();
  const admin = newRedisClient(server);
  await admin.ping();
  return {
    admins: [admin],
    store: (prefix) => {
      const store = RedisStore.connect(`redis://${USER}:${PASSWORD}@127.0.0.1:${server.port}`, { prefix });
      return { store, done: async () => undefined }; // the store owns its connection
    },
    client: () => new Redis(server.port, '127.0.0.1', { username: USER, password: PASSWORD, maxRetriesPerRequest: 1 }),
    stop: async () => {
      admin.disconnect();
      await server.stop();
    },
  };
}

async function cluster(): Promise<Backend> {
  const handle: RedisClusterHandle = await startCluster();
  const admins = handle.nodes.map((n) => new Redis(n.port, n.host));
  await Promise.all(admins.map((a) => a.ping()));
  return {
    admins,
    store: (prefix) => {
      const client = new Cluster(handle.nodes, {
        redisOptions: { username: USER, password: PASSWORD, connectTimeout: 2_000, maxRetriesPerRequest: 1 },
        clusterRetryStrategy: () => null,
        slotsRefreshTimeout: 2_000,
      });
      client.on('error', () => undefined); // a refused login surfaces through the commands
      return { store: new RedisStore({ redis: client, prefix }), done: async () => client.disconnect() };
    },
    client: () =>
      new Cluster(handle.nodes, {
        redisOptions: { username: USER, password: PASSWORD, connectTimeout: 2_000, maxRetriesPerRequest: 1 },
        clusterRetryStrategy: () => null,
      }),
    stop: async () => {
      for (const a of admins) a.disconnect();
      await handle.stop();
    },
  };
}

function aclSuite(name: string, start: () => Promise<Backend>, rules: () => string[]): void {
  describe(`the minimal Redis ACL (README) on ${name}`, function () {
    this.timeout(120_000);
    let backend: Backend;
    let seq = 0;
    before(async () => {
      backend = await start();
    });
    after(async () => backend?.stop());

    /** (Re)creates the user with `list` on every node; forgets cached scripts and past refusals. */
    async function setUser(list: string[]): Promise<void> {
      for (const admin of backend.admins) {
        await admin.call('ACL', 'SETUSER', USER, 'reset', 'on', `>${PASSWORD}`, ...list);
        await admin.script('FLUSH'); // so EVAL is needed again, as after a Redis restart
        await admin.call('ACL', 'LOG', 'RESET');
      }
    }

    async function aclLog(): Promise<string[]> {
      const all: string[] = [];
      for (const admin of backend.admins) {
        for (const e of (await admin.call('ACL', 'LOG')) as unknown[][]) {
          const m = new Map<string, unknown>();
          for (let i = 0; i < e.length; i += 2) m.set(String(e[i]), e[i + 1]);
          all.push(`${String(m.get('reason'))}: ${String(m.get('object'))}`);
        }
      }
      return all;
    }

    /** Every store operation as that user: what a routing process and the CLI's replay do. */
    async function workload(): Promise<string[]> {
      const prefix = `callgate:acl:${seq++}:`;
      const { store, done } = backend.store(prefix);
      try {
        const gate = await CallGate.create({ config: CONFIG, store, policy: 'error', timeoutMs: 5_000 }); // live: Redis TIME
        try {
          const out: string[] = [];
          // 200 lapsed holds in the peer's set (calls never released): the first admission at its
          // limit drops 128 of them (ZRANGEBYSCORE and ZREM), the next the rest
          const lapsed = backend.client();
          try {
            const [sec, us] = (await backend.admins[0]!.time()).map(Number);
            const past = sec! * 1_000_000 + us! - 1_000_000;
            const key = new RedisKeys(prefix, backend.admins.length > 1).holds('in', 'peer:p1');
            await lapsed.zadd(key, ...Array.from({ length: 200 }, (_, i) => [String(past - i), `gone${i}`]).flat());
          } finally {
            lapsed.disconnect();
          }
          for (const id of ['c1', 'c1', 'c2', 'c3']) {
            const d = await gate.admit({ callId: id, peer: 'p1', account: 'acme' });
            out.push(
              d.duplicate
                ? 'duplicate'
                : d.admitted
                  ? 'admitted'
                  : `rejected ${d.limitedBy} retry>0:${d.retryAfterMs > 0}`,
            );
          }
          out.push(
            (await gate.record({ callId: 'e1', peer: 'p1', account: 'acme' })).admitted ? 'recorded' : 'not recorded',
          );
          for (const id of ['o1', 'o2', 'o3']) {
            const r = await gate.reserve({ callId: id, route: ['A', 'B'] });
            out.push(`${r.outcome} ${r.carrier}`);
          }
          // the call's life: calls in progress, a long call refreshed, hang-ups
          const peer = { tag: 'in', name: 'peer:p1' }; // the global level's tag: every inbound key
          out.push(`holds ${(await store.holds(peer)).holds}`);
          out.push(`refreshed ${await gate.refresh('c2')}`);
          out.push(`released c1 ${await gate.release('c1')}`);
          out.push(`released o1 ${await gate.release('o1')}`);
          out.push(
            `holds ${(await store.holds(peer)).holds} and ${(await store.holds({ tag: 'out', name: 'carrier:A' })).holds}`,
          );
          // an operator's hand (callgate holds / reset) as the same user
          const listed = await listHolds(gate.config, store, { bucket: 'peer:p1' });
          out.push(`listed ${listed.holds.map((h) => h.call_id).join(' ')}`);
          const reset = await resetBucket(gate.config, store, 'peer:p1');
          out.push(`reset ${reset.events} events, ${reset.holds.length} holds`);
          out.push(`count ${(await store.count({ tag: 'x', bucket: 'y', windowUs: 1_000_000 })).count}`);
          out.push(
            `wait>=0 ${(await store.wait({ carrier: { name: 'A', intervalUs: 1_000_000, maxWaitUs: 0 } })).waitUs >= 0}`,
          );
          await store.clear();
          const left = (await Promise.all(backend.admins.map((a) => a.keys(`${prefix}*`)))).flat();
          out.push(`left ${left.length}`);
          // the sidecar's /readyz as this user (a PING check never read ready: PING is not allowed)
          const client = backend.client();
          client.on('error', () => undefined);
          try {
            await redisAnswers(client);
            out.push('ready');
          } catch (err) {
            out.push(`not ready: ${(err as Error).message}`);
          } finally {
            client.disconnect();
          }
          return out;
        } finally {
          await gate.close();
        }
      } finally {
        await done();
      }
    }

    it('is sufficient: every operation and the ready check work, nothing is refused', async () => {
      await setUser(rules());
      expect(await workload()).to.deep.equal(EXPECTED);
      expect(await aclLog()).to.deep.equal([]);
    });

    it('is tight: other commands, other keys and scripts doing more are refused', async () => {
      await setUser(rules());
      // on a Cluster, each node checks its own keys: talk to the node that holds them
      const port = backend.admins[0]!.options.port!;
      const user = new Redis(port, '127.0.0.1', { username: USER, password: PASSWORD, maxRetriesPerRequest: 1 });
      const refused = (run: () => Promise<unknown>) =>
        run().then(
          () => 'allowed',
          // NOPERM; from inside a script (Redis 7.0): "The user executing the script can't ..."
          (e: Error) => (/NOPERM|user executing the script can't/.test(e.message) ? 'refused' : e.message),
        );
      try {
        expect(await refused(() => user.flushall())).to.equal('refused');
        expect(await refused(() => user.config('GET', 'maxmemory'))).to.equal('refused');
        expect(await refused(() => user.keys('*'))).to.equal('refused');
        expect(await refused(() => user.call('ACL', 'WHOAMI'))).to.equal('refused');
        // a key outside the prefix, directly or from a script
        const other = await keyOn(port, 'other:');
        expect(await refused(() => user.zadd(other, 1, 'm'))).to.equal('refused');
        expect(await refused(() => user.eval("return redis.call('ZCOUNT', KEYS[1], 0, 1)", 1, other))).to.equal(
          'refused',
        );
        // commands outside the list, inside a script, on the user's own keys
        const own = await keyOn(port, 'callgate:own:');
        expect(await refused(() => user.rename(own, `${own}x`))).to.equal('refused');
        expect(await refused(() => user.eval("return redis.call('RENAME', KEYS[1], KEYS[1])", 1, own))).to.equal(
          'refused',
        );
        expect(await refused(() => user.eval("return redis.call('ZSCORE', KEYS[1], 'm')", 1, own))).to.equal('refused');
        // what it may do, it may do on its own keys only
        expect(await refused(() => user.eval("return redis.call('ZCOUNT', KEYS[1], 0, 1)", 1, own))).to.equal(
          'allowed',
        );
      } finally {
        user.disconnect();
      }
    });

    /** A key starting with `prefix` that the node on `port` serves (any such key on a single Redis). */
    async function keyOn(port: number, prefix: string): Promise<string> {
      const admin = backend.admins.find((a) => a.options.port === port)!;
      const slots = (await admin.call('CLUSTER', 'SLOTS').catch(() => undefined)) as
        | [number, number, [string, number]][]
        | undefined;
      if (!slots) return `${prefix}0`; // not a Cluster
      for (let i = 0; i < 1_000; i++) {
        const key = `${prefix}${i}`;
        const slot = Number(await admin.call('CLUSTER', 'KEYSLOT', key));
        if (slots.some(([from, to, [, p]]) => slot >= from && slot <= to && p === port)) return key;
      }
      throw new Error(`no key of the node on port ${port} found`);
    }

    it('is minimal: without any one of its permissions, that very command is refused', async () => {
      const list = rules();
      const permissions = list.filter((r) => r.startsWith('+'));
      expect(permissions.length).to.be.greaterThan(10);
      // ioredis warns on the console when the ready check (INFO) is refused: collect it
      const warnings: string[] = [];
      const warn = console.warn;
      console.warn = (...args: unknown[]) => warnings.push(args.join(' '));
      const evidence = new Map<string, string>();
      try {
        for (const p of permissions) {
          await setUser(list.filter((r) => r !== p));
          const error = await workload().then(
            () => '',
            (e: Error) => e.message,
          );
          evidence.set(p, [error, ...(await aclLog())].join(' | ').toLowerCase());
          if (process.env.ACL_EVIDENCE) process.stderr.write(`${p}: ${evidence.get(p)}\n`);
        }
      } finally {
        console.warn = warn;
      }
      for (const p of permissions) {
        const command = p.slice(1).split('|').pop()!;
        expect(evidence.get(p), `without ${p}`).to.match(new RegExp(`\\b${command}\\b`));
      }
    });
  });
}

aclSuite('a single Redis', singleRedis, () => readmeRules().base);
aclSuite('a Cluster', cluster, () => [...readmeRules().base, ...readmeRules().cluster]);
