/**
 * What a carrier leased across regions decided, against the unleased contract and its limits
 * (test/lease-carrier-regions.test.ts, bench/lease-carriers.ts).
 */
import type { CallGateConfigInput } from '../../src/config/types.js';
import { CallGate } from '../../src/gate.js';
import { MemoryStore } from '../../src/store/memory-store.js';

/** One reservation of a route whose first carrier is the leased one. */
export interface Reserved {
  /** Decision time, µs (the region's Redis TIME). */
  readonly at: number;
  readonly carrier: string | null;
}

/** Most intervals [from, to) open at once. */
export function maxOpen(intervals: readonly (readonly [number, number])[]): number {
  const edges = intervals.flatMap(([from, to]) => [
    [from, 1],
    [to, -1],
  ]);
  // an interval that ends at t is closed before one that opens at t
  edges.sort((a, b) => a[0]! - b[0]! || a[1]! - b[1]!);
  let open = 0;
  let best = 0;
  for (const [, d] of edges) best = Math.max(best, (open += d!));
  return best;
}

/**
 * The leased decisions against the unleased contract: the same reservations of `route`, replayed
 * in the order of their times at those times on a MemoryStore (one pacer of every carrier,
 * channels held as the gate holds them). `falseRefusals`: calls the contract gives `carrier`
 * that the lease sent elsewhere; `onCarrier` and `referenceOnCarrier`, how many calls each gave
 * it in all (after a false refusal the two see different slots, so a later call may trade places).
 */
export async function carrierAgainstContract(
  reserved: readonly Reserved[],
  config: CallGateConfigInput,
  route: readonly string[],
): Promise<{ falseRefusals: number; onCarrier: number; referenceOnCarrier: number }> {
  const carrier = route[0]!;
  const reference = await CallGate.create({ config, store: new MemoryStore() });
  let falseRefusals = 0;
  let onCarrier = 0;
  let referenceOnCarrier = 0;
  try {
    for (const [i, x] of [...reserved].sort((a, b) => a.at - b.at).entries()) {
      const r = await reference.reserve({ callId: `ref-${i}`, route: [...route], at: x.at });
      if (x.carrier === carrier) onCarrier++;
      if (r.carrier === carrier) {
        referenceOnCarrier++;
        if (x.carrier !== carrier) falseRefusals++;
      }
    }
  } finally {
    await reference.close();
  }
  return { falseRefusals, onCarrier, referenceOnCarrier };
}
