/**
 * From a call (peer, account) to what admission checks: the buckets in contract order
 * (global, account, peer), their `limited_by` labels, and the hash tag they share.
 */
import type { AttributeLevelConfig, BucketConfig, CallGateConfig } from '../config/types.js';
import { attributeBucket, attributeValue, type CallAttributes } from './attributes.js';
import { GLOBAL_BUCKET, GLOBAL_TAG, accountBucket, accountTag, peerBucket, peerTag } from '../store/keys.js';
import type { Bucket } from '../store/types.js';

export interface AdmissionPlan {
  readonly tag: string;
  readonly buckets: readonly Bucket[];
  /** The contract's `limited_by` value of each bucket: `global`, `account:<id>`, `peer:<id>`. */
  readonly labels: readonly string[];
}

/** A bucket of a plan: its rate limits, and its channel limit when it has one. */
function bucketOf(name: string, cfg: BucketConfig): Bucket {
  return cfg.channels === undefined
    ? { name, limits: cfg.limits }
    : { name, limits: cfg.limits, channels: cfg.channels };
}

/** The contract's sentinel for a peer with neither its own limits nor a defaultPeer. */
export const UNKNOWN_PEER = 'unknown-peer';

export function planFor(
  config: CallGateConfig,
  peer: string,
  account: string | undefined,
): AdmissionPlan | typeof UNKNOWN_PEER {
  const { global, accounts, peers, defaultPeer, attributes = [] } = config.inbound;
  const peerLimits = peers.get(peer) ?? defaultPeer;
  if (peerLimits === undefined) return UNKNOWN_PEER;
  const buckets: Bucket[] = [];
  const labels: string[] = [];
  if (global !== undefined) {
    buckets.push(bucketOf(GLOBAL_BUCKET, global));
    labels.push('global');
  }
  const accountLimits = account !== undefined && account !== '' ? accounts.get(account) : undefined;
  if (accountLimits !== undefined) {
    buckets.push(bucketOf(accountBucket(account!), accountLimits));
    labels.push(`account:${account}`);
  }
  buckets.push(bucketOf(peerBucket(peer), peerLimits));
  labels.push(`peer:${peer}`);
  // attribute levels span the platform (a caller's calls come from any peer): one tag for all
  const tag =
    global !== undefined || attributes.length > 0
      ? GLOBAL_TAG
      : accountLimits !== undefined
        ? accountTag(account!)
        : peerTag(peer);
  return { tag, buckets, labels };
}

/**
 * The levels a call from `peer` (naming `account`) is checked against under `config`, in the
 * contract's order and named as `limited_by` names them: `global`, `account:<id>`, `peer:<id>`
 * (its own limits or defaultPeer's). An account that is not configured adds no level. Undefined
 * when the peer has neither limits of its own nor a defaultPeer: its calls are refused as
 * `unknown-peer`. For an integration that shows or reads the buckets a call counts in, e.g. the
 * channels it holds (with inspectGate).
 */
export function admissionLevels(config: CallGateConfig, peer: string, account?: string): readonly string[] | undefined {
  const plan = planFor(config, peer, account);
  return plan === UNKNOWN_PEER ? undefined : plan.labels;
}

/** Where an attribute level of `order` goes among a plan's global / account / peer buckets. */
function insertAt(level: AttributeLevelConfig, labels: readonly string[]): number {
  switch (level.order) {
    case 'first':
      return 0;
    case 'after-global':
      return labels[0] === 'global' ? 1 : 0;
    case 'after-account': {
      const peer = labels.findIndex((l) => l.startsWith('peer:'));
      return peer < 0 ? labels.length : peer;
    }
    default:
      return labels.length;
  }
}

/** The order of the `order` values where several levels land at one point (no global bucket, say). */
const RANK: Readonly<Record<string, number>> = { first: 0, 'after-global': 1, 'after-account': 2, last: 3 };

/**
 * `base` (a call's global / account / peer plan) with the attribute levels that apply to the
 * call inserted where their `order` says; `base` itself when none applies. `values`: each
 * level's value for the call (undefined: it does not apply). Levels that land at one point keep
 * the order of their `order` values (a `first` level before an `after-account` one when the call
 * has neither a global nor an account bucket), then their configuration order.
 */
export function withAttributes(
  base: AdmissionPlan,
  levels: readonly AttributeLevelConfig[],
  values: readonly (string | undefined)[],
): AdmissionPlan {
  const baseLabels = base.labels;
  const inserted: { at: number; rank: number; i: number }[] = [];
  for (let i = 0; i < levels.length; i++) {
    if (values[i] === undefined) continue;
    const level = levels[i]!;
    inserted.push({ at: insertAt(level, baseLabels), rank: RANK[level.order ?? 'last'] ?? 3, i });
  }
  if (inserted.length === 0) return base;
  inserted.sort((a, b) => a.at - b.at || a.rank - b.rank || a.i - b.i);
  const buckets: Bucket[] = [];
  const labels: string[] = [];
  let k = 0;
  for (let p = 0; p <= baseLabels.length; p++) {
    for (; k < inserted.length && inserted[k]!.at === p; k++) {
      const { i } = inserted[k]!;
      buckets.push(attributeBucket(levels[i]!, values[i]!));
      labels.push(`${levels[i]!.name}:${values[i]!}`);
    }
    if (p < baseLabels.length) {
      buckets.push(base.buckets[p]!);
      labels.push(baseLabels[p]!);
    }
  }
  return { tag: base.tag, buckets, labels };
}

/**
 * Plans cached per (peer, account) for one configuration; a reload makes a new cache.
 * Bounded: past `max` entries it starts afresh (plans are cheap to rebuild).
 */
export class PlanCache {
  private plans = new Map<string, AdmissionPlan | typeof UNKNOWN_PEER>();

  constructor(
    readonly config: CallGateConfig,
    private readonly max = 100_000,
  ) {}

  /** Per (peer, account, attribute values): the plans of calls with attribute levels. */
  private withValues = new Map<string, AdmissionPlan>();

  /** The plan of a call: its peer's and account's, with its attribute levels. */
  forCall(
    call: { readonly peer: string; readonly account?: string } & CallAttributes,
  ): AdmissionPlan | typeof UNKNOWN_PEER {
    const base = this.get(call.peer, call.account);
    const levels = this.config.inbound.attributes ?? [];
    if (levels.length === 0 || base === UNKNOWN_PEER) return base;
    const values = levels.map((level) => attributeValue(level, call));
    if (values.every((v) => v === undefined)) return base;
    // lengths make the key injective
    let key = `${call.peer.length}:${call.peer}${(call.account ?? '').length}:${call.account ?? ''}`;
    for (const v of values) key += v === undefined ? '-' : `${v.length}:${v}`;
    let plan = this.withValues.get(key);
    if (plan === undefined) {
      plan = withAttributes(base, levels, values);
      if (this.withValues.size >= this.max) this.withValues.clear();
      this.withValues.set(key, plan);
    }
    return plan;
  }

  get(peer: string, account: string | undefined): AdmissionPlan | typeof UNKNOWN_PEER {
    const key = `${peer.length}:${peer}${account ?? ''}`; // the length makes it injective
    let plan = this.plans.get(key);
    if (plan === undefined) {
      plan = planFor(this.config, peer, account);
      if (this.plans.size >= this.max) this.plans.clear();
      this.plans.set(key, plan);
    }
    return plan;
  }
}
