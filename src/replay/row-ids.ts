/**
 * Each trace row is a call of its own: the contract decides rows, and knows no call ids beyond
 * naming them. Live, a store treats a call id it already holds as the same call (an INVITE sent
 * again: a repeated admit is a duplicate, counted nowhere; an outbound call reserved again gives
 * its earlier hold up). So a row whose id an earlier row still holds (in progress, or waiting for
 * its slot) is decided under an id of its own; its decision names the row's id.
 */
import type { CallGateConfig } from '../config/types.js';
import { MAX_ID_LENGTH } from '../ids.js';

/**
 * Whether an inbound call can hold a channel under `config` (a bucket with a channel limit
 * anywhere): only then does a store keep a record per call id, and only then need rows be told
 * apart, so that without channel limits the replay keeps nothing per call (flat memory).
 */
export function inboundHolds(config: CallGateConfig): boolean {
  const { inbound } = config;
  const any = (b: { channels?: number } | undefined) => b?.channels !== undefined;
  return (
    any(inbound.global) ||
    any(inbound.defaultPeer) ||
    [...inbound.accounts.values()].some(any) ||
    [...inbound.peers.values()].some(any) ||
    (inbound.attributes ?? []).some((a) => any(a.limits) || [...a.overrides.values()].some(any))
  );
}

export class RowIds {
  /** Per direction and id decided under: the end of its holds (µs). */
  private readonly live = new Map<string, number>();
  /** The ended entries are dropped once the map has doubled since the last time (amortized). */
  private sweepAt = 65_536;
  private fresh = 0;

  /** The id to decide a row of `id` at t under. */
  idFor(direction: 'in' | 'out', id: string, t: number): string {
    if (!this.holds(direction, id, t)) return id;
    for (;;) {
      const suffix = `#${(++this.fresh).toString(36)}`;
      let cut = Math.min(id.length, MAX_ID_LENGTH - suffix.length);
      // (never half a surrogate pair: an id must be well-formed)
      if (cut > 0 && cut < id.length && /[\ud800-\udbff]/.test(id[cut - 1]!)) cut--;
      const candidate = id.slice(0, cut) + suffix;
      if (!this.holds(direction, candidate, t)) return candidate;
    }
  }

  /** A row decided under `id` holds until `end` (its decision at t). */
  held(direction: 'in' | 'out', id: string, end: number, t: number): void {
    if (end <= t) return;
    this.live.set(direction + id, end);
    if (this.live.size >= this.sweepAt) {
      for (const [key, e] of this.live) if (e <= t) this.live.delete(key);
      this.sweepAt = Math.max(65_536, 2 * this.live.size);
    }
  }

  private holds(direction: 'in' | 'out', id: string, t: number): boolean {
    const end = this.live.get(direction + id);
    return end !== undefined && end > t;
  }
}
