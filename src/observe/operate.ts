/**
 * What an operator does by hand during an incident (`callgate holds | release | reset`, GET
 * /v1/holds, POST /v1/release, POST /v1/reset): list the calls holding a bucket or a carrier,
 * free one stuck call, empty a bucket. Buckets are named as `limited_by` names them (`global`,
 * `account:<id>`, `peer:<id>`) and found under the configuration the routing processes use:
 * its limits say which window counters a bucket has, its hierarchy which hash tag it is under.
 *
 * On a Cluster without a global limit (nor attribute levels), a peer's bucket exists under its own
 * tag and under the tag of every configured account its calls name: holds and reset cover all of
 * them. With the global level leased, its buckets and the peers' are on every lane, an
 * account's on its lane (locateBucket). Attribute levels' buckets (`caller:<value>`, ...) are found too; a reset does not lift a
 * ban (DELETE /v1/bans does).
 */
import { namedAttributeBucket, slotProblem } from '../admission/attributes.js';
import type { BucketConfig, CallGateConfig } from '../config/types.js';
import { InvalidArgumentError } from '../errors/index.js';
import { idProblem, printable, printableJson } from '../ids.js';
import { textTable } from '../text-table.js';
import {
  GLOBAL_BUCKET,
  GLOBAL_TAG,
  OUTBOUND_TAG,
  accountBucket,
  accountTag,
  carrierName,
  peerBucket,
  peerTag,
} from '../store/keys.js';
import { bucketLaneTags, type LanePlan } from '../lease/lanes.js';
import { isOperable, type ListedHold, type OperableStore } from '../store/operations.js';
import type { Bucket, Store } from '../store/types.js';

/** A bucket (`global`, `account:<id>`, `peer:<id>`) or a carrier (its configured id). */
export type HoldsTarget = { readonly bucket: string } | { readonly carrier: string };

interface Located {
  readonly bucket: Bucket;
  /** The tags it may live under (one unless the store is tagged and the bucket is a peer's). */
  readonly tags: readonly string[];
}

function bad(message: string): never {
  throw new InvalidArgumentError(message);
}

function operable(store: Store): OperableStore {
  if (!isOperable(store)) bad(`the ${store.kind} store cannot list holds or reset buckets`);
  return store;
}

const bucketOf = (name: string, b: BucketConfig): Bucket =>
  b.channels === undefined ? { name, limits: b.limits } : { name, limits: b.limits, channels: b.channels };

/**
 * The bucket a `limited_by` label names under `config`, and its tags. `lanes`: the global level
 * is leased over that many lanes (Store.leaseLanes): a bucket's tags are then the lanes it may
 * have keys on (bucketLaneTags).
 */
export function locateBucket(
  config: CallGateConfig,
  label: string,
  tagged: boolean,
  lanes?: number | LanePlan,
  overflow = false,
): Located {
  const { global, accounts, peers, defaultPeer } = config.inbound;
  const attributes = config.inbound.attributes ?? [];
  // with a global limit or attribute levels, every inbound key has the platform's tag (plan.ts)
  const platform = global !== undefined || attributes.length > 0;
  // leased: where a bucket may have keys
  const onLanes =
    lanes !== undefined && global !== undefined
      ? (name: string) => bucketLaneTags(name, [...accounts.keys()].map(accountBucket), lanes, overflow)
      : undefined;
  const levels = attributes.map((l) => `${l.name}:<value>`).join(', ');
  const hint = `expected global, account:<id> or peer:<id>${levels === '' ? '' : `, or ${levels}`}`;
  if (label === 'global') {
    if (global === undefined) bad('bucket global: the configuration has no global limit');
    return { bucket: bucketOf(GLOBAL_BUCKET, global), tags: onLanes?.(GLOBAL_BUCKET) ?? [GLOBAL_TAG] };
  }
  const colon = label.indexOf(':');
  const kind = colon < 0 ? '' : label.slice(0, colon);
  const id = label.slice(colon + 1);
  if (colon < 0 || id === '') bad(`bucket ${JSON.stringify(label)}: ${hint}`);
  // the id a call could have named (as the sidecar's requests are checked)
  const problem = idProblem(id);
  if (problem !== undefined) bad(`bucket ${printable(label.slice(0, colon + 1))}…: its id ${problem}`);
  if (kind === 'account') {
    const limits = accounts.get(id);
    if (limits === undefined) bad(`bucket ${printable(label)}: the configuration has no account ${JSON.stringify(id)}`);
    const name = accountBucket(id);
    return { bucket: bucketOf(name, limits), tags: onLanes?.(name) ?? [platform ? GLOBAL_TAG : accountTag(id)] };
  }
  if (kind === 'peer') {
    const limits = peers.get(id) ?? defaultPeer;
    if (limits === undefined)
      bad(`bucket ${printable(label)}: the configuration has no peer ${JSON.stringify(id)} and no defaultPeer`);
    const tags =
      onLanes?.(peerBucket(id)) ??
      (platform ? [GLOBAL_TAG] : tagged ? [peerTag(id), ...[...accounts.keys()].map(accountTag)] : [peerTag(id)]);
    return { bucket: bucketOf(peerBucket(id), limits), tags };
  }
  // an attribute level: `<level>:<value>`, the value as limited_by shows it (after its match)
  const level = attributes.find((l) => l.name === kind);
  if (level === undefined) bad(`bucket ${JSON.stringify(label)}: ${hint}`);
  // `#<slot>`: a bucket shared past maxValues, as the bans listing names it
  const slot = slotProblem(level, id);
  if (slot !== undefined) bad(`bucket ${printable(label)}: ${slot}`);
  return { bucket: namedAttributeBucket(level, id), tags: [GLOBAL_TAG] };
}

export interface HoldsListing {
  /** `peer:<id>`, `carrier:<id>`, ... as asked. */
  readonly target: string;
  /** The channel limit there (undefined: none configured). */
  readonly limit?: number;
  /** Calls in progress there now. */
  readonly total: number;
  /** The calls (at most `max`), earliest end first: id, end (µs) and time left (ms). */
  readonly holds: readonly { readonly call_id: string; readonly end_us: number; readonly left_ms: number }[];
  readonly time_us: number;
}

/** Calls or bans an operator's listing shows unless asked for more (holds, GET /v1/holds, the bans). */
export const LISTED_BY_DEFAULT = 1000;

export interface OperateOptions {
  /** Time to act at, µs (default: the store's clock). */
  readonly now?: number;
}

function listing(holds: readonly ListedHold[], now: number) {
  return holds.map((h) => ({ call_id: h.id, end_us: h.endUs, left_ms: Math.ceil((h.endUs - now) / 1000) }));
}

/** The calls holding a bucket or a carrier now, with their ends. */
export async function listHolds(
  config: CallGateConfig,
  store: Store,
  target: HoldsTarget,
  opts: OperateOptions & { readonly max?: number } = {},
): Promise<HoldsListing> {
  const s = operable(store);
  if ('carrier' in target) {
    const r = await s.listHolds({ tag: OUTBOUND_TAG, name: carrierName(target.carrier), now: opts.now, max: opts.max });
    const limit = config.outbound.carriers.get(target.carrier)?.channels;
    return {
      target: `carrier:${target.carrier}`,
      ...(limit !== undefined && { limit }),
      total: r.total,
      holds: listing(r.holds, r.now),
      time_us: r.now,
    };
  }
  const { bucket, tags } = locateBucket(config, target.bucket, s.tagged, s.leasePlan ?? s.leaseLanes, s.leaseOverflow);
  let now = opts.now;
  let total = 0;
  const holds: ListedHold[] = [];
  for (const tag of tags) {
    const r = await s.listHolds({ tag, name: bucket.name, now, max: opts.max });
    now = r.now; // one instant for every tag
    total += r.total;
    holds.push(...r.holds);
  }
  holds.sort((a, b) => a.endUs - b.endUs);
  return {
    target: target.bucket,
    ...(bucket.channels !== undefined && { limit: bucket.channels }),
    total,
    holds: listing(holds.slice(0, opts.max ?? LISTED_BY_DEFAULT), now!),
    time_us: now!,
  };
}

export interface ResetReport {
  readonly bucket: string;
  /** Events removed from its sliding log. */
  readonly events: number;
  /** Window counters removed. */
  readonly windows: number;
  /** The calls whose hold there was removed (they keep their holds on other levels). */
  readonly holds: readonly string[];
  readonly time_us: number;
}

/** Empty a bucket's log, window counters and holds. */
export async function resetBucket(
  config: CallGateConfig,
  store: Store,
  label: string,
  opts: OperateOptions = {},
): Promise<ResetReport> {
  const s = operable(store);
  const { bucket, tags } = locateBucket(config, label, s.tagged, s.leasePlan ?? s.leaseLanes, s.leaseOverflow);
  let now = opts.now;
  let events = 0;
  let windows = 0;
  const holds: string[] = [];
  for (const tag of tags) {
    const r = await s.reset({ tag, bucket, now });
    now = r.now;
    events += r.events;
    windows += r.windows;
    holds.push(...r.holds.map((h) => h.id));
  }
  return { bucket: label, events, windows, holds, time_us: now! };
}

/** The log line of a reset: what was removed, naming the calls (at most 20, then a count). */
export function resetLine(r: ResetReport): string {
  const shown = r.holds.slice(0, 20).map((id) => printableJson(id));
  const more = r.holds.length > 20 ? ` and ${r.holds.length - 20} more` : '';
  const calls = r.holds.length > 0 ? `: ${shown.join(', ')}${more}` : '';
  return `reset ${printable(r.bucket)}: removed ${r.events} events, ${r.windows} window counters, ${r.holds.length} holds${calls}`;
}

/** A listing as a terminal table. */
export function holdsText(l: HoldsListing): string {
  const head = `${printable(l.target)}: ${l.total} calls in progress${l.limit !== undefined ? ` (limit ${l.limit})` : ''}`;
  if (l.holds.length === 0) return `${head}\n`;
  const rows = [
    ['call id', 'ends at', 'in'],
    ...l.holds.map((h) => [h.call_id, isoUs(h.end_us), formatLeft(h.left_ms)]),
  ];
  const table = textTable(rows, { allLeft: true });
  const more = l.total > l.holds.length ? `\n(${l.total - l.holds.length} more not listed)` : '';
  return `${head}\n${table}${more}\n`;
}

const isoUs = (us: number): string => new Date(Math.floor(us / 1000)).toISOString();
/** Time left: 59.7s, 12m5s, 3h59m59s. */
function formatLeft(ms: number): string {
  const left = Math.max(0, ms);
  if (left < 60_000) return `${Number((left / 1000).toFixed(1))}s`;
  const s = Math.floor(left / 1000);
  const [h, m, sec] = [Math.floor(s / 3600), Math.floor((s % 3600) / 60), s % 60];
  return h > 0 ? `${h}h${m}m${sec}s` : `${m}m${sec}s`;
}
