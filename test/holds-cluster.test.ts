/**
 * Holds come back on a Redis Cluster (issue 25): three masters with a replica each, three
 * routing processes, channel limits at three levels, calls of 2-5 s; the master owning the
 * inbound calls' slot is killed under load and its replica takes over. Under `fail-closed`, the
 * calls in progress never exceed a channel limit and every release of a call from before the
 * failover answers `released` (the locators of calls admitted on healthy shards included). Under
 * `local` with `localShare` 1/3, the calls admitted locally during the outage are written to
 * Redis when it answers, and no decision Redis takes afterwards admits beyond a limit.
 */
import { expect } from 'chai';
import type { StorePolicy } from '../src/admission/admission.js';
import { uniquePrefix } from './admission/stores.js';
import { clusterOk, startReplicatedCluster, type ReplicatedCluster } from './holds/cluster.js';
import {
  endHoldsWorkers,
  HOLDS_LEVELS,
  killHoldsWorkers,
  peaks,
  releaseOf,
  sleep,
  startHoldsWorkers,
  type HoldsWorker,
} from './holds/harness.js';
import type { HoldsDecided, HoldsWorkerReport } from './holds/worker.js';

describe('holds come back on a Redis Cluster: a master killed under load', function () {
  this.timeout(120_000);
  let cluster: ReplicatedCluster | undefined;
  const workers: HoldsWorker[] = [];
  afterEach(async () => {
    await killHoldsWorkers(workers);
    await cluster?.stop();
    cluster = undefined;
  });

  async function run(policy: StorePolicy, localShare?: number) {
    cluster = await startReplicatedCluster();
    const prefix = uniquePrefix(`holds-cluster-${policy}`);
    const victim = await cluster.masterOf(`${prefix}{in}:global:ch`);
    await startHoldsWorkers(
      3,
      { cluster: cluster.nodes, prefix, durationMs: 14_000, pauseMs: 30, policy, localShare },
      workers,
    );
    await sleep(5_000);
    const kill = Date.now() * 1000;
    await cluster.masters[victim]!.kill();
    await clusterOk(cluster.replicas[victim]!.port);
    const back = Date.now() * 1000;
    const reports = await endHoldsWorkers(workers);
    return { reports, kill, back };
  }

  function outcomesOf(reports: HoldsWorkerReport[], calls: HoldsDecided[]): Record<string, number> {
    const out: Record<string, number> = {};
    for (const d of calls) {
      const o = releaseOf(reports, d.id);
      out[o?.outcome ?? 'none'] = (out[o?.outcome ?? 'none'] ?? 0) + 1;
    }
    return out;
  }

  it('fail-closed: within every limit; releases of calls from before the failover answer released', async () => {
    const { reports, kill, back } = await run('fail-closed');
    const decided = reports.flatMap((r) => r.decided);
    const admitted = decided.filter((d) => d.admitted);
    const carried = admitted.filter((d) => d.at < kill && (d.hangup ?? Infinity) > kill);
    const figures = {
      before: peaks(decided, HOLDS_LEVELS, 0, kill),
      after: peaks(decided, HOLDS_LEVELS, kill, Infinity),
    };
    const outcomes = outcomesOf(reports, carried);
    const times = reports.flatMap((w) => w.reasserted.filter((e) => e.reasserted > 0).map((e) => e.at));
    console.log(
      JSON.stringify({
        admitted: admitted.length,
        degraded: decided.filter((d) => d.degraded).length,
        ...figures,
        failoverMs: (back - kill) / 1000,
        carriedOver: carried.length,
        releasesOfCarried: outcomes,
        msFromClusterOkToLastReassertedHold: times.length > 0 ? Math.max(...times) - back / 1000 : undefined,
        errors: reports.flatMap((r) => r.errors).slice(0, 5),
      }),
    );
    for (const level of HOLDS_LEVELS) {
      expect(figures.before[level.label], level.label).to.be.at.most(level.n);
      expect(figures.after[level.label], level.label).to.be.at.most(level.n);
    }
    expect(carried.length).to.be.greaterThan(5);
    expect(Object.keys(outcomes)).to.deep.equal(['released']);
  });

  it('local with localShare 1/3: calls admitted locally are written back; Redis admits none beyond a limit', async () => {
    const { reports, kill, back } = await run('local', 1 / 3);
    const decided = reports.flatMap((r) => r.decided);
    const admitted = decided.filter((d) => d.admitted);
    const local = admitted.filter((d) => d.degraded === 'local');
    // the instants Redis decided: its admissions after the failover must fit every limit
    const byRedis = decided.filter((d) => d.degraded === undefined);
    const spans = (level: (typeof HOLDS_LEVELS)[number]) =>
      admitted.filter(level.member).map((d) => [d.at, d.hangup ?? Infinity] as const);
    const worst: Record<string, number> = {};
    const outage: Record<string, number> = {};
    for (const level of HOLDS_LEVELS) {
      const s = spans(level);
      const at = (t: number) => s.filter(([a, e]) => a <= t && e > t).length;
      worst[level.label] = Math.max(
        0,
        ...byRedis.filter((d) => d.admitted && level.member(d) && d.at >= back).map((d) => at(d.at)),
      );
      outage[level.label] = Math.max(0, ...local.filter(level.member).map((d) => at(d.at)));
    }
    const written = reports.reduce((n, r) => n + r.reasserted.reduce((m, e) => m + e.reasserted, 0), 0);
    console.log(
      JSON.stringify({
        admitted: admitted.length,
        admittedLocally: local.length,
        failoverMs: (back - kill) / 1000,
        peaksDuringOutage: outage,
        peaksAtRedisAdmissionsAfter: worst,
        holdsWritten: written,
        releasesOfLocal: outcomesOf(reports, local),
      }),
    );
    expect(local.length).to.be.greaterThan(0);
    for (const level of HOLDS_LEVELS) expect(worst[level.label], level.label).to.be.at.most(level.n);
    expect(written).to.be.greaterThan(0);
  });
});
