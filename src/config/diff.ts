/**
 * What changed between two configurations, for the engine's `reload` event: one entry per
 * bucket or carrier that was added, removed or changed. Granularity: `inbound.global`,
 * `inbound.defaultPeer`, each account, each peer, each carrier.
 *
 * A bucket's limits are compared as a set of (limit, window, algorithm) plus its channel limit:
 * reordering the limits of a bucket is no change, since every limit is checked. An empty list of
 * limits is present (a known peer, or a global bucket that counts without limiting): absent → []
 * is `added`. Carriers compare by rate (as paced), maxWait and channels. A new maxCallDuration is `changed`
 * at `maxCallDuration` (it applies to calls decided from then on).
 */
import { carrierRate } from '../store/slots.js';
import type { Limit } from '../store/types.js';
import { formatPath } from './path.js';
import type { AttributeLevelConfig, BucketConfig, CallGateConfig, CarrierConfig } from './types.js';

export type ConfigChangeKind = 'added' | 'removed' | 'changed';
export type ConfigSection = 'global' | 'defaultPeer' | 'account' | 'peer' | 'attribute' | 'carrier' | 'maxCallDuration';

export interface ConfigChange {
  /** `inbound.global`, `inbound.peers.peer45`, `inbound.peers["a b"]`, `outbound.carriers.A`… */
  readonly path: string;
  readonly kind: ConfigChangeKind;
  readonly section: ConfigSection;
  /** The account, peer or carrier id (absent for global and defaultPeer). */
  readonly id?: string;
}

function limitKey(l: Limit): string {
  return `${l.windowUs}/${l.limit}/${l.algorithm}`;
}

export function sameLimits(a: readonly Limit[], b: readonly Limit[]): boolean {
  if (a.length !== b.length) return false;
  const ka = a.map(limitKey).sort();
  const kb = b.map(limitKey).sort();
  return ka.every((k, i) => k === kb[i]);
}

function sameBucket(a: BucketConfig, b: BucketConfig): boolean {
  return a.channels === b.channels && sameLimits(a.limits, b.limits);
}

/** Two attribute levels alike: every key, limits compared as buckets are. */
function sameLevel(a: AttributeLevelConfig, b: AttributeLevelConfig): boolean {
  // prefixes match longest first, whatever their order
  const match = (m: AttributeLevelConfig['match']) =>
    m !== undefined && 'prefixes' in m ? { prefixes: [...m.prefixes].sort() } : (m ?? null);
  const rest = (l: AttributeLevelConfig) =>
    JSON.stringify([
      l.key,
      match(l.match),
      l.order,
      l.maxValues ?? null,
      l.ban ?? null,
      [...l.overrides.keys()].sort(),
    ]);
  return (
    rest(a) === rest(b) &&
    sameBucket(a.limits, b.limits) &&
    [...a.overrides].every(([v, x]) => {
      const y = b.overrides.get(v);
      return y !== undefined && sameBucket(x, y);
    })
  );
}

/** Two carriers alike: the same rate as the scripts take it (2.5 and 2.5000000001 pace alike), wait and channels. */
function sameCarrier(a: CarrierConfig, b: CarrierConfig): boolean {
  const rate = (c: CarrierConfig) => carrierRate({ name: '', ...c }).text;
  return rate(a) === rate(b) && a.maxWaitUs === b.maxWaitUs && a.channels === b.channels;
}

function kindOf<T>(a: T | undefined, b: T | undefined, same: (a: T, b: T) => boolean): ConfigChangeKind | undefined {
  if (a === undefined) return b === undefined ? undefined : 'added';
  if (b === undefined) return 'removed';
  return same(a, b) ? undefined : 'changed';
}

/** Changes from `old` to `next`: global, accounts, peers, defaultPeer, attribute levels (by name), carriers; within a map,
 * old ids first (removed / changed, in old order), then new ids (added, in new order). */
export function diffConfig(old: CallGateConfig, next: CallGateConfig): ConfigChange[] {
  const changes: ConfigChange[] = [];
  if (old.maxCallDurationUs !== next.maxCallDurationUs) {
    changes.push({ path: 'maxCallDuration', kind: 'changed', section: 'maxCallDuration' });
  }
  const single = (section: 'global' | 'defaultPeer', a?: BucketConfig, b?: BucketConfig) => {
    const kind = kindOf(a, b, sameBucket);
    if (kind) changes.push({ path: formatPath(['inbound', section]), kind, section });
  };
  const map = <T>(
    section: 'account' | 'peer' | 'attribute' | 'carrier',
    base: readonly string[],
    a: ReadonlyMap<string, T>,
    b: ReadonlyMap<string, T>,
    same: (x: T, y: T) => boolean,
  ) => {
    const ids = [...a.keys(), ...[...b.keys()].filter((id) => !a.has(id))];
    for (const id of ids) {
      const kind = kindOf(a.get(id), b.get(id), same);
      if (kind) changes.push({ path: formatPath([...base, id]), kind, section, id });
    }
  };
  single('global', old.inbound.global, next.inbound.global);
  map('account', ['inbound', 'accounts'], old.inbound.accounts, next.inbound.accounts, sameBucket);
  map('peer', ['inbound', 'peers'], old.inbound.peers, next.inbound.peers, sameBucket);
  single('defaultPeer', old.inbound.defaultPeer, next.inbound.defaultPeer);
  const levels = (c: CallGateConfig) => new Map((c.inbound.attributes ?? []).map((l) => [l.name, l]));
  map('attribute', ['inbound', 'attributes'], levels(old), levels(next), sameLevel);
  map('carrier', ['outbound', 'carriers'], old.outbound.carriers, next.outbound.carriers, sameCarrier);
  return changes;
}
