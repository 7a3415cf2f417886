/**
 * A Redis Cluster of three masters, each with one replica, whose nodes can be killed one by one
 * (test/helpers/redis.ts' startCluster has no replicas and no per-node control). Each node is a
 * startRedisServer() process (no persistence); the masters own a third of the slots each.
 */
import { rawCommand, startRedisServer, type RedisServer } from '../helpers/redis.js';
import { sleep } from './harness.js';

export interface ReplicatedCluster {
  masters: RedisServer[];
  replicas: RedisServer[];
  nodes: { host: string; port: number }[];
  /** The master (index) owning `key`'s slot, as configured. */
  masterOf(key: string): Promise<number>;
  stop(): Promise<void>;
}

/** The slots each master owns, as configured (master i: RANGES[i]). */
export const RANGES: readonly [number, number][] = [
  [0, 5460],
  [5461, 10922],
  [10923, 16383],
];
const ARGS = ['--cluster-enabled', 'yes', '--cluster-config-file', 'nodes.conf', '--cluster-node-timeout', '1500'];

async function until(what: string, check: () => Promise<boolean>, ms = 20_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await check().catch(() => false))) {
    if (Date.now() > deadline) throw new Error(`cluster: ${what} not reached within ${ms} ms`);
    await sleep(100);
  }
}

export async function startReplicatedCluster(extraArgs: readonly string[] = []): Promise<ReplicatedCluster> {
  const servers: RedisServer[] = [];
  const stop = async () => {
    await Promise.all(servers.map((s) => s.stop()));
  };
  try {
    for (let i = 0; i < 6; i++) servers.push(await startRedisServer({ args: [...ARGS, ...extraArgs] }));
    const masters = servers.slice(0, 3);
    const replicas = servers.slice(3);
    await Promise.all(
      masters.map(async (m, i) => {
        await rawCommand(m.port, ['CLUSTER', 'SET-CONFIG-EPOCH', String(i + 1)]);
        await rawCommand(m.port, ['CLUSTER', 'ADDSLOTSRANGE', String(RANGES[i]![0]), String(RANGES[i]![1])]);
      }),
    );
    for (const s of servers.slice(1)) await rawCommand(servers[0]!.port, ['CLUSTER', 'MEET', s.host, String(s.port)]);
    const ids = await Promise.all(masters.map(async (m) => String(await rawCommand(m.port, ['CLUSTER', 'MYID']))));
    // a replica can follow a master once it knows it
    for (const [i, r] of replicas.entries()) {
      await until(`node ${r.port} knows its master`, async () =>
        String(await rawCommand(r.port, ['CLUSTER', 'NODES'])).includes(ids[i]!),
      );
      await rawCommand(r.port, ['CLUSTER', 'REPLICATE', ids[i]!]);
    }
    for (const s of servers)
      await until(`cluster_state:ok on ${s.port}`, async () =>
        /cluster_state:ok/.test(String(await rawCommand(s.port, ['CLUSTER', 'INFO']))),
      );
    for (const r of replicas)
      await until(`replica ${r.port} in sync`, async () =>
        /master_link_status:up/.test(String(await rawCommand(r.port, ['INFO', 'replication']))),
      );
    return {
      masters,
      replicas,
      nodes: servers.map((s) => ({ host: s.host, port: s.port })),
      async masterOf(key) {
        const slot = Number(await rawCommand(masters[0]!.port, ['CLUSTER', 'KEYSLOT', key]));
        return RANGES.findIndex(([a, b]) => slot >= a && slot <= b);
      },
      stop,
    };
  } catch (err) {
    await stop();
    throw err;
  }
}

/** Wait until the replica on `port` took over as master and the cluster answers ok again. */
export async function clusterOk(port: number): Promise<void> {
  await until(`${port} promoted`, async () =>
    /role:master/.test(String(await rawCommand(port, ['INFO', 'replication']))),
  );
  await until(`cluster_state:ok on ${port}`, async () =>
    /cluster_state:ok/.test(String(await rawCommand(port, ['CLUSTER', 'INFO']))),
  );
}
