/**
 * A replay on a Redis Cluster decides as the contract does, or refuses: without a global level a
 * call's keys live on its account's hash tag, so a trace whose peer comes with two accounts (or
 * with one and without) would be counted apart on each shard. Found by an exactness probe: such
 * a replay admitted calls the contract refuses, with exit 0.
 */
import { expect } from 'chai';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Cluster } from 'ioredis';
import { parseConfig } from '../src/config/load.js';
import type { DecisionLine } from '../src/decision-line.js';
import { replay } from '../src/replay/replay.js';
import { MemoryStore } from '../src/store/memory-store.js';
import { RedisStore } from '../src/store/redis/redis-store.js';
import type { Store } from '../src/store/types.js';
import { newClusterClient, type RedisClusterHandle, startCluster } from './helpers/redis.js';

describe('replay on a Redis Cluster', function () {
  this.timeout(60_000);
  let cluster: RedisClusterHandle;
  let client: Cluster;
  let dir: string;
  before(async () => {
    cluster = await startCluster();
    client = newClusterClient(cluster);
    dir = mkdtempSync(join(tmpdir(), 'callgate-replay-cluster-'));
  });
  after(async () => {
    client?.disconnect();
    await cluster?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  const config = { inbound: { accounts: { a1: [] }, peers: { p: [{ limit: 1, window: 'PT10S' }] } } };
  const run = async (trace: string, store: Store): Promise<DecisionLine[]> => {
    const path = join(dir, `t${Math.random().toString(36).slice(2)}.csv`);
    writeFileSync(path, trace);
    const out: DecisionLine[] = [];
    await replay({ config: parseConfig(config), tracePath: path, store, onDecision: (d) => void out.push(d) });
    return out;
  };
  const cluster_ = (n: number) => new RedisStore({ redis: client, prefix: `replay-cluster:${n}:` });

  it('refuses, before any decision, a trace whose peer comes with and without its account', async () => {
    const trace =
      'time,call_id,direction,peer,account\n' + '1709665200.000000,c1,in,p,a1\n' + '1709665201.000000,c2,in,p,\n';
    // the contract: c2 is refused by the peer's limit (1 in 10 s), whatever the account
    expect((await run(trace, new MemoryStore())).map((d) => d.outcome)).to.deep.equal(['admitted', 'rejected']);
    let err: Error | undefined;
    const seen: DecisionLine[] = [];
    try {
      seen.push(...(await run(trace, cluster_(1))));
    } catch (e) {
      err = e as Error;
    }
    expect(seen).to.deep.equal([]);
    expect(err?.message).to.match(
      /:3: peer "p" comes with no configured account here and with account "a1" at line 2: on a Redis Cluster, without a global level/,
    );
  });

  it('decides as the memory store where every peer keeps its account', async () => {
    const cfg = {
      inbound: {
        accounts: { a1: [] },
        peers: { p: [{ limit: 1, window: 'PT10S' }], q: [{ limit: 1, window: 'PT10S' }] },
      },
    };
    const trace =
      'time,call_id,direction,peer,account\n' +
      '1709665200.000000,c1,in,p,a1\n' +
      '1709665200.500000,c2,in,q,\n' +
      '1709665201.000000,c3,in,p,a1\n' +
      '1709665201.500000,c4,in,q,unconfigured\n' + // an account the configuration lacks: q's own tag still
      '1709665212.000000,c5,in,p,a1\n';
    const outcomes = async (store: Store) => {
      const path = join(dir, `t${Math.random().toString(36).slice(2)}.csv`);
      writeFileSync(path, trace);
      const out: string[] = [];
      await replay({ config: parseConfig(cfg), tracePath: path, store, onDecision: (d) => void out.push(d.outcome) });
      return out;
    };
    const mem = await outcomes(new MemoryStore());
    expect(mem).to.deep.equal(['admitted', 'admitted', 'rejected', 'rejected', 'admitted']);
    expect(await outcomes(cluster_(2))).to.deep.equal(mem);
  });
});
