/**
 * A route's carrier ids that are not configured are reported, so that a typo does not look like
 * congestion: `skipped` on the reservation and the dispatch result, in the sidecar's answer and
 * the replay's decision line; a metric; a warning when a reload removes a carrier calls were
 * routed to. The decision itself stays the contract's (the unknown ids are never tried).
 */
import { expect } from 'chai';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { VirtualClock } from '../src/clock.js';
import type { CallGateConfigInput } from '../src/config/index.js';
import { loadConfig } from '../src/config/index.js';
import { CallGate, type GateWarning } from '../src/gate.js';
import { gateMetrics } from '../src/observe/metrics.js';
import { replay, type DecisionLine } from '../src/replay/replay.js';
import { buildApp } from '../src/server/app.js';
import { MemoryStore } from '../src/store/memory-store.js';
import { T0 } from './admission/stores.js';

const config: CallGateConfigInput = {
  outbound: { carriers: { A: { cps: 1, maxWait: '0ms' }, B: { cps: 1 }, C: { cps: 1 } } },
};

describe('a route naming carriers that are not configured', () => {
  let gate: CallGate;
  let dir: string;
  beforeEach(async () => {
    gate = await CallGate.create({ config, clock: new VirtualClock(T0) });
    dir = mkdtempSync(join(tmpdir(), 'callgate-skipped-'));
  });
  afterEach(async () => {
    await gate.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('reserve and dispatch name the skipped ids; a route of known ids only has no such field', async () => {
    const only = await gate.reserve({ callId: 'o1', route: ['typo', 'A2'] });
    expect(only).to.include({ outcome: 'rejected', reason: 'all-routes-congested' });
    expect(only.skipped).to.deep.equal(['typo', 'A2']);
    const mixed = await gate.reserve({ callId: 'o2', route: ['typo', 'A'] });
    expect(mixed).to.include({ outcome: 'dispatched', carrier: 'A' });
    expect(mixed.reroutedFrom, 'unknown ids are never tried').to.deep.equal([]);
    expect(mixed.skipped).to.deep.equal(['typo']);
    const known = await gate.reserve({ callId: 'o3', route: ['B'] });
    expect(known).to.not.have.property('skipped');
    const sent = await gate.dispatch({ callId: 'o4', route: ['nope', 'A', 'C'] }, () => undefined);
    expect(sent).to.deep.include({ outcome: 'dispatched', carrier: 'C', reroutedFrom: ['A'], skipped: ['nope'] });
    const refused = await gate.dispatch({ callId: 'o5', route: ['x'] });
    expect(refused).to.deep.include({ outcome: 'rejected', skipped: ['x'] });
  });

  it('counted in callgate_route_carriers_skipped_total', async () => {
    const { registry } = gateMetrics(gate);
    await gate.reserve({ callId: 'o1', route: ['typo', 'A2', 'A'] });
    await gate.reserve({ callId: 'o2', route: ['B'] });
    await gate.reserve({ callId: 'o3', route: ['typo'] });
    expect(await registry.metrics()).to.match(/^callgate_route_carriers_skipped_total 3$/m);
  });

  it('a reload that removes a carrier calls were routed to warns once, naming it', async () => {
    const warnings: GateWarning[] = [];
    gate.on('warning', (w) => warnings.push(w));
    await gate.reserve({ callId: 'o1', route: ['A'] });
    await gate.reload({ outbound: { carriers: { B: { cps: 1 }, C: { cps: 1 } } } });
    expect(warnings.map((w) => [w.code, w.carriers])).to.deep.equal([['route-carrier-unconfigured', ['A']]]);
    expect(warnings[0]!.message).to.include('"A"');
    // removing B, which no route named: no warning; A again: already told
    await gate.reload({ outbound: { carriers: { C: { cps: 1 } } } });
    expect(warnings).to.have.length(1);
    expect((await gate.reserve({ callId: 'o2', route: ['A', 'C'] })).skipped).to.deep.equal(['A']);
  });

  it('the sidecar answers skipped; a known route answers without it', async () => {
    const app = buildApp({
      gate,
      ready: async () => {},
      reload: () => gate.reload(config),
      state: async () => ({}) as never,
      sip: { jitterSeconds: 0 },
    });
    try {
      const r = await app.inject({ method: 'POST', url: '/v1/reserve', payload: { call_id: 'h1', route: ['A', 'Z'] } });
      expect(r.json()).to.deep.include({ outcome: 'dispatched', carrier: 'A', skipped: ['Z'] });
      const k = await app.inject({ method: 'POST', url: '/v1/reserve', payload: { call_id: 'h2', route: ['B'] } });
      expect(k.json()).to.not.have.property('skipped');
    } finally {
      await app.close();
    }
  });

  it("the replay's decision line names them (a field besides the contract's)", async () => {
    const trace = join(dir, 'trace.csv');
    writeFileSync(trace, 'time,call_id,direction,peer,account,route,duration\n0.0,c1,out,,,typo|A,1\n');
    const lines: DecisionLine[] = [];
    await replay({
      config: await loadConfig(config),
      tracePath: trace,
      store: new MemoryStore(),
      onDecision: (d) => void lines.push(d),
    });
    expect(lines).to.have.length(1);
    expect(lines[0]).to.deep.include({ outcome: 'dispatched', carrier: 'A', rerouted_from: [], skipped: ['typo'] });
  });
});
