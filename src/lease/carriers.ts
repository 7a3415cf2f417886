/**
 * Carriers leased across regions (docs/leasing.md, "Carriers across regions"): each region's
 * Redis paces a carrier on its own, within a share of the carrier's CPS and channels that a
 * LeaseCoordinator moves between the regions by demand. A region's share is calls per window
 * CARRIER_LEASE_WINDOW_US on its slot log, and channels on its holds (lua/reserve.lua).
 */
import type { CallGateConfig } from '../config/types.js';
import { InvalidArgumentError } from '../errors/index.js';
import { carrierName } from '../store/keys.js';

/** A leased carrier's share is calls per second: its CPS is the limit of every 1 s window. */
export const CARRIER_LEASE_WINDOW_US = 1_000_000;

/** RedisStoreOptions.leasedCarriers checked: the carriers' names (store/keys.ts), a clear error otherwise. */
export function leasedCarrierNames(ids: unknown): ReadonlySet<string> {
  if (ids === undefined) return new Set();
  if (!Array.isArray(ids)) throw new InvalidArgumentError('leasedCarriers must be an array of carrier ids');
  const names = new Set<string>();
  for (const id of ids) {
    if (typeof id !== 'string' || id === '')
      throw new InvalidArgumentError(
        `leasedCarriers: a carrier id must be a non-empty string, got ${JSON.stringify(id)}`,
      );
    names.add(carrierName(id));
  }
  return names;
}

/**
 * A leased carrier's limit from a configuration: its CPS as calls per 1 s window, and its
 * channels (0: none). A clear error when the carrier is not configured or its CPS is not a
 * whole number (a share is a whole number of calls per window).
 */
export function leasedCarrier(
  config: CallGateConfig,
  id: string,
): { calls: number; windowUs: number; channels: number } {
  const c = config.outbound.carriers.get(id);
  if (c === undefined)
    throw new InvalidArgumentError(`a leased carrier must be configured: no carrier ${JSON.stringify(id)}`);
  if (!Number.isSafeInteger(c.cps))
    throw new InvalidArgumentError(`a leased carrier's cps must be a whole number: ${JSON.stringify(id)} has ${c.cps}`);
  return { calls: c.cps, windowUs: CARRIER_LEASE_WINDOW_US, channels: c.channels ?? 0 };
}
