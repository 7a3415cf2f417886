/**
 * The load of the leased-level tests on real Redis: calls offered on schedule (open loop) from
 * Zipf-skewed peers whose hot set moves every `shiftMs`, spread over the gates in turn; and the
 * checks every such test makes from the decisions' Redis times.
 */
import { expect } from 'chai';
import type { AdmissionDecision } from '../../src/admission/admission.js';
import type { CallGateConfigInput } from '../../src/config/types.js';
import { CallGate } from '../../src/gate.js';
import { MemoryStore } from '../../src/store/memory-store.js';
import { zipfSequence } from '../../bench/workload.js';
import { maxInWindow } from './window.js';

/** Each call holds its channels this long: the tests never report a call's end (maxCallDuration). */
export const HOLD_US = 2_000_000;

/**
 * A leased global level of `limit` calls per second and `channels` channels, peers far above
 * anything offered (so that every refusal is the global level's), calls holding HOLD_US.
 */
export function leasedConfig(limit: number, channels: number) {
  return {
    maxCallDuration: 'PT2S',
    inbound: {
      global: [{ limit, window: 'PT1S' }, { channels }],
      defaultPeer: [{ limit: 1_000, window: 'PT1S' }],
    },
  };
}

export interface Decided {
  readonly peer: string;
  readonly d: AdmissionDecision;
  /** From the call's scheduled time to its decision, ms (open loop: a late issue counts). */
  readonly ms: number;
}

export interface LoadOptions {
  readonly gates: readonly CallGate[];
  /** Calls per second. */
  readonly rate: number;
  readonly seconds: number;
  readonly peers: number;
  /** The hot peers move (the Zipf ranks rotate by 7) every shiftMs. */
  readonly shiftMs: number;
  /** Called once when the offered time reaches atMs (a fault to inject), awaited. */
  readonly at?: { readonly ms: number; readonly run: () => Promise<void> };
  readonly seed?: number;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Offers rate × seconds calls on schedule; resolves with every decision, sorted by its time. */
export async function offerLoad(o: LoadOptions): Promise<Decided[]> {
  const total = Math.round(o.rate * o.seconds);
  const seq = zipfSequence(total, o.peers, 1, o.seed ?? 7);
  const decided: Decided[] = [];
  const pending: Promise<void>[] = [];
  const start = performance.now();
  let fault = o.at;
  for (let n = 0; n < total; n++) {
    const dueMs = (n / o.rate) * 1000;
    const wait = start + dueMs - performance.now();
    if (wait > 0) await sleep(wait);
    if (fault !== undefined && dueMs >= fault.ms) {
      await fault.run();
      fault = undefined;
    }
    const peer = `peer-${(seq[n]! + Math.floor(dueMs / o.shiftMs) * 7) % o.peers}`;
    const gate = o.gates[n % o.gates.length]!;
    const due = start + dueMs;
    pending.push(
      gate
        .admit({ callId: `call-${n}`, peer })
        .then((d) => void decided.push({ peer, d, ms: performance.now() - due })),
    );
  }
  await Promise.all(pending);
  expect(decided).to.have.length(total);
  return decided.sort((a, b) => a.d.at - b.d.at);
}

/**
 * The level's invariant from the decisions' Redis times: calls admitted in any window of
 * windowUs at most `limit`, calls holding at once (each for holdUs: no call reports its end)
 * at most `channels`.
 */
export function expectWithinLimits(
  decided: readonly Decided[],
  limit: number,
  windowUs: number,
  channels: number,
  holdUs: number,
): void {
  const admitted = decided.filter((x) => x.d.admitted).map((x) => x.d.at);
  expect(maxInWindow(admitted, windowUs), 'calls in any window').to.be.at.most(limit);
  expect(maxInWindow(admitted, holdUs), 'calls holding at once').to.be.at.most(channels);
}

/**
 * The leased decisions against the unleased contract, replayed on the same arrivals at the same
 * times on a MemoryStore (calls decided by the store-trouble policy left out of both counts):
 * `falseRefusals`, the calls refused that the contract admits; `admitted` and
 * `referenceAdmitted`, how many the leased level and the contract admit in all. Past the first
 * false refusal the two no longer see the same counts, so the contract may refuse a later call
 * that the leased level admits: near or over the limit, `falseRefusals` counts calls that traded
 * places as well as calls lost, and `referenceAdmitted - admitted` is what leasing lost in all.
 */
export async function againstContract(
  decided: readonly Decided[],
  config: CallGateConfigInput,
): Promise<{ falseRefusals: number; admitted: number; referenceAdmitted: number }> {
  const reference = await CallGate.create({ config, store: new MemoryStore() });
  let falseRefusals = 0;
  let admitted = 0;
  let referenceAdmitted = 0;
  try {
    for (const [i, x] of decided.entries()) {
      if (x.d.degraded !== undefined) continue;
      const r = await reference.admit({ callId: `ref-${i}`, peer: x.peer, at: x.d.at });
      if (x.d.admitted) admitted++;
      if (r.admitted) referenceAdmitted++;
      if (r.admitted && !x.d.admitted) falseRefusals++;
    }
  } finally {
    await reference.close();
  }
  return { falseRefusals, admitted, referenceAdmitted };
}

/** Calls refused that the unleased contract admits (againstContract). */
export async function falseRefusals(decided: readonly Decided[], config: CallGateConfigInput): Promise<number> {
  return (await againstContract(decided, config)).falseRefusals;
}
