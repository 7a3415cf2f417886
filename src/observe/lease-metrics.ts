/**
 * LeaseCoordinators' state as Prometheus gauges (docs/metrics.md), read at each scrape from each
 * one's last tick, labelled by the level it leases (`global`, or `carrier:<id>`): whether this
 * process leads, its lanes lost, and (on the leader) each lane's shares, the pool and the debt of
 * a decreased limit; and the calls each lane refused for lack of share, as this process read them.
 */
import { Counter, Gauge, type Registry } from 'prom-client';
import type { LeaseCoordinator } from '../lease/coordinator.js';
import type { Budget } from '../lease/share.js';

export function leaseMetrics(
  coordinators: LeaseCoordinator | readonly LeaseCoordinator[],
  registry: Registry,
  prefix = 'callgate_',
): void {
  const registers = [registry];
  const all: readonly LeaseCoordinator[] = Array.isArray(coordinators) ? coordinators : [coordinators];
  new Gauge({
    name: `${prefix}lease_leader`,
    help: 'Whether this process leads the leased level (1) or waits as a candidate (0)',
    labelNames: ['level'] as const,
    registers,
    collect() {
      for (const c of all) this.set({ level: c.level }, c.report.leader ? 1 : 0);
    },
  });
  new Gauge({
    name: `${prefix}lease_lanes_lost`,
    help: 'Lanes the leader cannot reach, their shares frozen until their calls and holds are gone (leader only)',
    labelNames: ['level'] as const,
    registers,
    collect() {
      this.reset();
      for (const c of all) if (c.report.leader) this.set({ level: c.level }, c.report.lost.length);
    },
  });
  const share = new Gauge({
    name: `${prefix}lease_share`,
    help: 'Each lane’s share of the leased level, calls per window or channels (leader only)',
    labelNames: ['level', 'lane', 'resource'] as const,
    registers,
    collect() {
      share.reset();
      for (const c of all) {
        const { leader, state } = c.report;
        if (leader && state !== undefined) perLane(c, state.shares, (labels, v) => share.set(labels, v));
      }
    },
  });
  const refused = new Counter({
    name: `${prefix}lease_refused_total`,
    help: 'Calls a lane refused for lack of its share (calls) or of its channels share, as read by this process while it led',
    labelNames: ['level', 'lane', 'resource'] as const,
    registers,
    collect() {
      // totals kept by the coordinator, exported as they stand
      refused.reset();
      for (const c of all) perLane(c, c.refusals, (labels, v) => refused.inc(labels, v));
    },
  });
  const held = new Gauge({
    name: `${prefix}lease_unshared`,
    help: 'Of the leased level, what no lane holds: the pool, and the debt a decreased limit left (leader only)',
    labelNames: ['level', 'part', 'resource'] as const,
    registers,
    collect() {
      held.reset();
      for (const c of all) {
        const { leader, state } = c.report;
        if (!leader || state === undefined) continue;
        for (const [part, b] of [
          ['pool', state.pool],
          ['debt', state.debt],
        ] as const) {
          held.set({ level: c.level, part, resource: 'calls' }, b.calls);
          held.set({ level: c.level, part, resource: 'channels' }, b.channels);
        }
      }
    },
  });
}

type LaneLabels = { level: string; lane: string; resource: 'calls' | 'channels' };

/** Each lane's budget (laneNames' order) as two samples, calls and channels, labelled with its level and lane. */
function perLane(
  c: LeaseCoordinator,
  budgets: readonly Budget[],
  put: (labels: LaneLabels, value: number) => void,
): void {
  const names = c.laneNames;
  budgets.forEach((b, k) => {
    const lane = names[k] ?? String(k);
    put({ level: c.level, lane, resource: 'calls' }, b.calls);
    put({ level: c.level, lane, resource: 'channels' }, b.channels);
  });
}
