/**
 * A reload that turns a channel limit on: the calls already in progress on that level hold
 * nothing there (they were admitted under no channel limit), so the new limit would count none
 * of them. The ledger knows every bucket each call of this process touched: before the new
 * configuration takes effect, the calls touching a bucket that now has a channel limit get a
 * hold there (written to the store), so the limit counts them from its first decision on.
 *
 * What it cannot do: a level a call did not touch at its decision (an account configured only
 * now) is not added; on a Cluster, a level whose hash tag changes with the reload (a global
 * level added above accounts) is written on the call's own tag, which new decisions do not read.
 * Each process counts its own calls when it reloads: reload every process together.
 */
import type { CallGateConfig } from '../config/types.js';
import { accountBucket, GLOBAL_BUCKET, peerBucket } from '../store/keys.js';
import { holdNames, type HoldLedger } from './ledger.js';

/** Whether the bucket named `name` (store name, encoded) has a channel limit in `config`. */
export function channelsIn(config: CallGateConfig): (name: string) => boolean {
  const { global, accounts, peers, defaultPeer } = config.inbound;
  const on = new Set<string>();
  if (global?.channels !== undefined) on.add(GLOBAL_BUCKET);
  for (const [id, b] of accounts) if (b.channels !== undefined) on.add(accountBucket(id));
  const configuredPeers = new Set<string>();
  for (const [id, b] of peers) {
    configuredPeers.add(peerBucket(id));
    if (b.channels !== undefined) on.add(peerBucket(id));
  }
  const defaultOn = defaultPeer?.channels !== undefined;
  return (name) => on.has(name) || (defaultOn && name.startsWith('peer:') && !configuredPeers.has(name));
}

/** Whether `after` has a channel limit on an inbound bucket where `before` had none. */
export function turnsChannelsOn(before: CallGateConfig, after: CallGateConfig): boolean {
  const had = channelsIn(before);
  const { global, accounts, peers, defaultPeer } = after.inbound;
  if (global?.channels !== undefined && !had(GLOBAL_BUCKET)) return true;
  for (const [id, b] of accounts) if (b.channels !== undefined && !had(accountBucket(id))) return true;
  for (const [id, b] of peers) if (b.channels !== undefined && !had(peerBucket(id))) return true;
  // a peer of the default's: any name that is not a configured peer
  return defaultPeer?.channels !== undefined && before.inbound.defaultPeer?.channels === undefined;
}

/**
 * Give every inbound call of the ledger a hold in each of its buckets that has a channel limit
 * under `config` and where it holds none yet; those calls are marked to be written. Returns how
 * many calls changed.
 */
export function widenHolds(ledger: HoldLedger, config: CallGateConfig, now: number): number {
  const channels = channelsIn(config);
  let changed = 0;
  for (const calls of ledger.byTag(now, false).values()) {
    for (const { direction, hold } of calls) {
      if (direction !== 'in' || hold.buckets === undefined) continue;
      const held = holdNames(hold);
      const wanted = hold.buckets.map((b) => b.name).filter((n) => channels(n) && !held.includes(n));
      if (wanted.length === 0) continue;
      hold.names = [...held, ...wanted];
      hold.unwritten = true;
      changed++;
    }
  }
  return changed;
}
