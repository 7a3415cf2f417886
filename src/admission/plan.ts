/**
 * From a call (peer, account) to what admission checks: the buckets in contract order
 * (global, account, peer), their `limited_by` labels, and the hash tag they share.
 */
import type { BucketConfig, CallGateConfig } from '../config/types.js';
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
  const { global, accounts, peers, defaultPeer } = config.inbound;
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
  const tag = global !== undefined ? GLOBAL_TAG : accountLimits !== undefined ? accountTag(account!) : peerTag(peer);
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
