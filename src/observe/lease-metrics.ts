/**
 * A LeaseCoordinator's state as Prometheus gauges (docs/metrics.md), read at each scrape from its
 * last tick: whether this process leads, its term, the lanes lost, and (on the leader) each
 * lane's shares, the pool and the debt of a decreased limit.
 */
import { Gauge, type Registry } from 'prom-client';
import type { LeaseCoordinator } from '../lease/coordinator.js';

export function leaseMetrics(coordinator: LeaseCoordinator, registry: Registry, prefix = 'callgate_'): void {
  const registers = [registry];
  const report = () => coordinator.report;
  new Gauge({
    name: `${prefix}lease_leader`,
    help: 'Whether this process leads the leased level (1) or waits as a candidate (0)',
    registers,
    collect() {
      this.set(report().leader ? 1 : 0);
    },
  });
  new Gauge({
    name: `${prefix}lease_lanes_lost`,
    help: 'Lanes the leader cannot reach, their shares frozen until their calls and holds are gone (leader only)',
    registers,
    collect() {
      this.reset();
      const r = report();
      if (r.leader) this.set(r.lost.length);
    },
  });
  const share = new Gauge({
    name: `${prefix}lease_share`,
    help: 'Each lane’s share of the leased level, calls per window or channels (leader only)',
    labelNames: ['lane', 'resource'] as const,
    registers,
    collect() {
      share.reset();
      const state = report().state;
      if (!report().leader || state === undefined) return;
      const names = coordinator.laneNames;
      state.shares.forEach((b, k) => {
        const lane = names[k] ?? String(k);
        share.set({ lane, resource: 'calls' }, b.calls);
        share.set({ lane, resource: 'channels' }, b.channels);
      });
    },
  });
  const held = new Gauge({
    name: `${prefix}lease_unshared`,
    help: 'Of the leased level, what no lane holds: the pool, and the debt a decreased limit left (leader only)',
    labelNames: ['part', 'resource'] as const,
    registers,
    collect() {
      held.reset();
      const state = report().state;
      if (!report().leader || state === undefined) return;
      for (const [part, b] of [
        ['pool', state.pool],
        ['debt', state.debt],
      ] as const) {
        held.set({ part, resource: 'calls' }, b.calls);
        held.set({ part, resource: 'channels' }, b.channels);
      }
    },
  });
}
