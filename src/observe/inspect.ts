/**
 * What the limits see right now, for an operator (`callgate inspect`, GET /v1/state, the live
 * metrics): each configured bucket's count and retry-after per limit, each carrier's queue wait.
 * One read-only store call (Store.inspect), nothing changed.
 *
 * Buckets: the global one, every configured account and peer, and the peers asked for by id
 * (those on defaultPeer are not listed otherwise: there is no bound on them). Tags: with a
 * global limit or attribute levels every inbound key has the tag `in`; without, an account's bucket has its
 * account's tag and a peer's bucket is read under the peer's own tag. On a Cluster, a peer whose
 * calls name a configured account counts under that account's tag instead (README "Redis keys
 * and Cluster"): inspect shows 0 for it there. On a single Redis keys carry no tag.
 *
 * With the global level leased (Store.leaseLanes, docs/leasing.md), an account's bucket is on
 * its lane's tag; a peer's is on its account's lane or its own, which the configuration does
 * not say, so it is read on its own lane and every configured account's, and summed (its calls
 * are on one lane when they always name the same account; the retry-after shown is the longest
 * of the lanes'); the global
 * level is read on every lane and summed: its count and channels are the level's, its
 * retry-after is not computed (0), since a call there is refused by its lane's share (the
 * lease metrics show the shares).
 */
import { formatDuration } from '../config/duration.js';
import type { BucketConfig, CallGateConfig } from '../config/types.js';
import {
  GLOBAL_BUCKET,
  GLOBAL_TAG,
  accountBucket,
  accountTag,
  carrierName,
  peerBucket,
  peerTag,
} from '../store/keys.js';
import type { CallGate } from '../gate.js';
import type { Bucket, Limit, Store } from '../store/types.js';
import { bansPage, listBans, type BanState } from './bans.js';
import { attributeBucket } from '../admission/attributes.js';
import { bucketLaneTags, type LanePlan } from '../lease/lanes.js';
import { InvalidArgumentError } from '../errors/index.js';
import { textTable } from '../text-table.js';

export interface LimitState {
  limit: number;
  window: string;
  algorithm: Limit['algorithm'];
  /** What the limit compares with `limit` now (sliding-window: an estimate, may be fractional). */
  count: number;
  /** 0 when it has room; else whole ms until it has (what a refusal would say). */
  retry_after_ms: number;
}

export interface BucketState {
  /** As in `limited_by`: `global`, `account:<id>`, `peer:<id>`. */
  bucket: string;
  /** A peer without limits of its own, on defaultPeer. */
  default_peer?: true;
  limits: LimitState[];
  /** The longest wait over its limits: 0 when its rate limits would let a call pass now. */
  retry_after_ms: number;
  /** With a channel limit: the calls in progress now. */
  channels?: { limit: number; in_use: number };
  /** A leased level: its lanes, over which count and channels are summed (retry-after: 0). */
  leased_lanes?: number;
}

export interface CarrierState {
  carrier: string;
  cps: number;
  max_wait_ms: number;
  /** The wait a call arriving now would get on this carrier. */
  queue_wait_ms: number;
  /** With a channel limit: the calls in progress now. */
  channels?: { limit: number; in_use: number };
  /**
   * Leased across regions (docs/leasing.md, "Carriers across regions"): this deployment's share
   * of the CPS and the channels, the most of its slots in any second ending now or later
   * (`used`, at most `calls_share`), and how long its lease has left (0: ended; it gives no slot).
   */
  lease?: { calls_share: number; channels_share: number; used: number; lease_left_ms: number };
}

export interface GateState {
  time_us: number;
  store: string;
  buckets: BucketState[];
  carriers: CarrierState[];
  /** The bans of attribute levels in force, when asked for (InspectOptions.bans). */
  bans?: BanState[];
}

export interface InspectOptions {
  /** Peers to show besides the configured ones (typically peers on defaultPeer). */
  readonly peers?: readonly string[];
  /** Time to inspect at, µs (default: the store's clock). */
  readonly now?: number;
  /** Also list the bans in force (a scan of the store's keys on Redis: an operator's view). */
  readonly bans?: boolean;
  /**
   * Values of attribute levels to show, as `<level>:<value>` (the value as limited_by shows it:
   * `caller:+15551234567`, `source:203.0.113.0/24`); a level that is not configured is an error.
   */
  readonly values?: readonly string[];
  /** Only the buckets with a channel limit (the live gauges' need: less to read at each scrape). */
  readonly channelsOnly?: boolean;
}

interface Asked {
  label: string;
  tag: string;
  bucket: Bucket;
  defaultPeer: boolean;
  /** Leased: the bucket is read on these lane tags (bucketLaneTags) instead of `tag`, then summed. */
  laneTags?: readonly string[];
}

/** Throws InvalidArgumentError when a value asked for (`<level>:<value>`) names no configured level (no store needed). */
export function checkValues(config: CallGateConfig, values: readonly string[]): void {
  valueBuckets(config, values);
}

/** The buckets of attribute values asked for (`<level>:<value>`), under the global tag. */
function valueBuckets(config: CallGateConfig, values: readonly string[]): Asked[] {
  return values.map((v) => {
    const colon = v.indexOf(':');
    const name = colon > 0 ? v.slice(0, colon) : v;
    const level = (config.inbound.attributes ?? []).find((l) => l.name === name);
    if (level === undefined || colon < 0 || colon === v.length - 1)
      throw new InvalidArgumentError(
        `expected <level>:<value> of a configured attribute level, got ${JSON.stringify(v)}`,
      );
    const { ban: _ban, ...bucket } = attributeBucket(level, v.slice(colon + 1));
    return { label: v, tag: GLOBAL_TAG, bucket, defaultPeer: false };
  });
}

function bucketsOf(
  config: CallGateConfig,
  peers: readonly string[],
  lanes: number | LanePlan | undefined,
  overflow = false,
): Asked[] {
  const { global, accounts, defaultPeer } = config.inbound;
  // with a global limit or attribute levels every inbound key has the platform's tag (plan.ts),
  // or, leased, the lane's of the call's account (else its peer)
  const platform = global !== undefined || (config.inbound.attributes ?? []).length > 0;
  const leased = lanes !== undefined && global !== undefined;
  const accountNames = [...accounts.keys()].map(accountBucket);
  // leased: where each bucket may have keys (bucketLaneTags), read there and summed
  const onLanes = (name: string) => (leased ? { laneTags: bucketLaneTags(name, accountNames, lanes, overflow) } : {});
  const out: Asked[] = [];
  const bucket = (name: string, b: BucketConfig): Bucket =>
    b.channels === undefined ? { name, limits: b.limits } : { name, limits: b.limits, channels: b.channels };
  if (global !== undefined)
    out.push({
      label: 'global',
      tag: GLOBAL_TAG,
      bucket: bucket(GLOBAL_BUCKET, global),
      defaultPeer: false,
      ...onLanes(GLOBAL_BUCKET),
    });
  for (const [id, b] of accounts) {
    const name = accountBucket(id);
    out.push({
      label: `account:${id}`,
      tag: platform ? GLOBAL_TAG : accountTag(id),
      bucket: bucket(name, b),
      defaultPeer: false,
      ...onLanes(name),
    });
  }
  const seen = new Set<string>();
  const addPeer = (id: string, b: BucketConfig, isDefault: boolean) => {
    if (seen.has(id)) return;
    seen.add(id);
    const name = peerBucket(id);
    out.push({
      label: `peer:${id}`,
      tag: platform ? GLOBAL_TAG : peerTag(id),
      bucket: bucket(name, b),
      defaultPeer: isDefault,
      ...onLanes(name),
    });
  };
  for (const [id, limits] of config.inbound.peers) addPeer(id, limits, false);
  for (const id of peers) {
    const own = config.inbound.peers.get(id);
    if (own !== undefined) addPeer(id, own, false);
    else if (defaultPeer !== undefined) addPeer(id, defaultPeer, true);
  }
  return out;
}

const ms = (us: number): number => Math.ceil(us / 1000);

export async function inspectState(
  config: CallGateConfig,
  store: Store,
  opts: InspectOptions = {},
): Promise<GateState> {
  const asked = [
    ...bucketsOf(config, opts.peers ?? [], store.leasePlan ?? store.leaseLanes, store.leaseOverflow),
    ...valueBuckets(config, opts.values ?? []),
  ].filter((a) => !opts.channelsOnly || a.bucket.channels !== undefined);
  const carriers = [...config.outbound.carriers];
  // each asked bucket once, a leased level once per lane: its first read at index first[i]
  const reads = asked.flatMap((a) => (a.laneTags ?? [a.tag]).map((tag) => ({ tag, bucket: a.bucket })));
  const first: number[] = [];
  asked.reduce((at, a) => {
    first.push(at);
    return at + (a.laneTags?.length ?? 1);
  }, 0);
  const r = await store.inspect({
    buckets: reads,
    carriers: carriers.map(([id, c]) => ({
      name: carrierName(id),
      intervalUs: c.intervalUs,
      maxWaitUs: c.maxWaitUs,
      ...(c.channels !== undefined && { channels: c.channels }),
    })),
    now: opts.now,
  });
  const bans = opts.bans ? await listBans(store, r.now) : undefined;
  return {
    ...(bans !== undefined && { bans }),
    time_us: r.now,
    store: store.kind,
    buckets: asked.map((a, i) => {
      const parts = r.buckets.slice(first[i]!, first[i]! + (a.laneTags?.length ?? 1));
      const global = a.laneTags !== undefined && a.bucket.name === GLOBAL_BUCKET;
      // a leased level's lanes partition its calls: its counts are their sums
      const limits = a.bucket.limits.map((l, j) => ({
        limit: l.limit,
        window: formatDuration(l.windowUs),
        algorithm: l.algorithm,
        count: parts.reduce((n, p) => n + p.counts[j]!, 0),
        retry_after_ms: global ? 0 : ms(Math.max(...parts.map((p) => p.retryAfterUs[j]!))),
      }));
      const state: BucketState = {
        bucket: a.label,
        limits,
        retry_after_ms: Math.max(0, ...limits.map((l) => l.retry_after_ms)),
      };
      if (a.defaultPeer) state.default_peer = true;
      if (a.bucket.channels !== undefined)
        state.channels = { limit: a.bucket.channels, in_use: parts.reduce((n, p) => n + (p.channels ?? 0), 0) };
      if (global) state.leased_lanes = store.leaseLanes!;
      return state;
    }),
    carriers: carriers.map(([id, c], k) => {
      const state: CarrierState = {
        carrier: id,
        cps: c.cps,
        max_wait_ms: c.maxWaitUs / 1000,
        queue_wait_ms: Math.round(r.carriers[k]!.waitUs) / 1000,
      };
      if (c.channels !== undefined) state.channels = { limit: c.channels, in_use: r.carriers[k]!.channels ?? 0 };
      const lease = r.carriers[k]!.lease;
      if (lease !== undefined)
        state.lease = {
          calls_share: lease.calls,
          channels_share: lease.channels,
          used: lease.used,
          lease_left_ms: Math.floor(lease.leftUs / 1000),
        };
      return state;
    }),
  };
}

/** The state of a gate's limits on its store, at its clock's time (the store's when it has none). */
export function inspectGate(gate: CallGate, opts: Omit<InspectOptions, 'now'> = {}): Promise<GateState> {
  return inspectState(gate.config, gate.store, { ...opts, now: gate.clock.now() });
}

/** The state as a terminal table. */
export function stateText(s: GateState): string {
  const ch = (c: { limit: number; in_use: number } | undefined) => (c === undefined ? '-' : `${c.in_use}/${c.limit}`);
  const rows: string[][] = [['bucket', 'limit', 'window', 'algorithm', 'count', 'retry after', 'channels']];
  for (const b of s.buckets) {
    const name = `${b.bucket}${b.default_peer ? ' (default)' : ''}${b.leased_lanes ? ` (${b.leased_lanes} lanes)` : ''}`;
    b.limits.forEach((l, j) => {
      const count = Number.isInteger(l.count) ? String(l.count) : l.count.toFixed(2);
      rows.push([
        j === 0 ? name : '',
        String(l.limit),
        l.window,
        l.algorithm,
        count,
        l.retry_after_ms > 0 ? `${l.retry_after_ms} ms` : '-',
        j === 0 ? ch(b.channels) : '',
      ]);
    });
    if (b.limits.length === 0) rows.push([name, '-', '-', '-', '-', '-', ch(b.channels)]);
  }
  // leased carriers' shares in two more columns, only where some carrier is leased
  const leased = s.carriers.some((c) => c.lease !== undefined);
  const carrierRows: string[][] = [
    ['carrier', 'cps', 'max wait', 'queue wait', 'channels', ...(leased ? ['share used/cps/ch', 'lease left'] : [])],
  ];
  for (const c of s.carriers) {
    const l = c.lease;
    const share =
      l === undefined ? ['-', '-'] : [`${l.used}/${l.calls_share}/${l.channels_share}`, `${l.lease_left_ms} ms`];
    carrierRows.push([
      c.carrier,
      String(c.cps),
      `${c.max_wait_ms} ms`,
      `${c.queue_wait_ms} ms`,
      ch(c.channels),
      ...(leased ? share : []),
    ]);
  }
  // (textTable: every cell printable; buckets, carriers and banned values come from traffic)
  const head = `callgate state at ${new Date(s.time_us / 1000).toISOString()} (${s.store} store)`;
  const parts = [head];
  parts.push(s.buckets.length > 0 ? textTable(rows) : 'no inbound buckets configured');
  parts.push(s.carriers.length > 0 ? textTable(carrierRows) : 'no carriers configured');
  if (s.bans !== undefined) {
    // the soonest to end first, at most LISTED_BY_DEFAULT (a flood can ban every caller it used)
    const page = bansPage(s.bans);
    const banRows = [['ban', 'value', 'ends', 'left']];
    for (const b of page.bans)
      banRows.push([
        b.level,
        b.value,
        new Date(b.until_us / 1000).toISOString(),
        `${Math.ceil(b.remaining_ms / 1000)} s`,
      ]);
    const more =
      page.total > page.bans.length
        ? `\n(${page.total - page.bans.length} more bans not listed; --json lists them all)`
        : '';
    parts.push(s.bans.length > 0 ? `${textTable(banRows)}${more}` : 'no bans in force');
  }
  return `${parts.join('\n\n')}\n`;
}
