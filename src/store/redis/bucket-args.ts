/**
 * The arguments of the admit, record and inspect scripts (lua/includes/buckets.lua): what each bucket sends
 * (its keys and limit profile, built once per bucket and tag), and the builder of one script
 * call, which names each key, profile, bucket and bucket list once.
 */
import type { Bucket, Limit } from '../types.js';
import { logRetention } from '../validate.js';
import { holdsKey, logKey, windowKey } from './redis-keys.js';

/** A bucket's part of the script arguments (lua/includes/buckets.lua), per bucket and tag. */
export interface BucketArgs {
  readonly tag: string;
  /** Its keys: the log first when it has sliding-log limits, then one hash per distinct window, then its holds when it has a channel limit. */
  readonly keys: readonly string[];
  /** Its limit profile: retention, N, hoff, m, then (algo, L, W, off) per limit. */
  readonly profile: readonly string[];
  /** The profile as one string, to tell profiles apart. */
  readonly profileId: string;
  /** Its log's retention r, µs: the widest window of its sliding-log limits (0: no log). */
  readonly retention: number;
  /** That window's limit L (0: no log): with r, the step of its log's trim (trimBound). */
  readonly retentionLimit: number;
  /** Keys and profile as one string: two buckets are the same in a batch iff these are equal. */
  readonly id: string;
  /**
   * Its part of a lone call (admit-lone.lua: m, then L, W per limit, widest first)
   * when it has sliding-log limits only and no channel limit; else undefined.
   */
  readonly lone: readonly string[] | undefined;
  /**
   * Its part of a lone call with channels (admit-lone-held.lua: m, then L, W per limit, widest
   * first, then its channel limit N, 0 for none) when its limits are sliding logs only (or none)
   * and it has no ban; else undefined. Its keys are then its log (when m > 0) and its holds (when
   * N > 0), in that order.
   */
  readonly held: readonly string[] | undefined;
  /** On a leased level's lane: the lane's share hash (also the last of `keys`); else undefined. */
  readonly share: string | undefined;
}

/** The window of a sliding-log limit, 0 for the other algorithms (for ordering). */
const logWindow = (lim: Limit): number => (lim.algorithm === 'sliding-log' ? lim.windowUs : 0);

const ALGO_CODE = { 'sliding-log': 'l', 'fixed-window': 'f', 'sliding-window': 's' } as const;

/** Small integers as strings, made once: a batch's arguments are mostly indices. */
const SMALL = Array.from({ length: 4096 }, (_, i) => String(i));
/** '000' to '999': the digit groups of num(). */
const GROUPS = Array.from({ length: 1000 }, (_, i) => String(i).padStart(3, '0'));

/**
 * An integer as the decimal string a script reads. Not String(n) for a large one: V8 keeps each
 * number it converts, with its string, in a cache that lives in the old generation, so the
 * string of a number seen once (a deadline, a time in µs) stays referenced from there and is
 * copied by young collections and promoted. In a harness converting fresh numbers that was
 * 117 KB promoted per young collection against 2 KB; in the open loop at 20,000 calls/s, once
 * the bench's call ids no longer went through the cache either, the difference was within the
 * noise (29-34 KB vs 26-190 KB, 2 runs each). Such strings are joined from constant groups.
 */
export function num(n: number): string {
  const small = SMALL[n];
  if (small !== undefined) return small;
  if (!(Number.isSafeInteger(n) && n > 0)) return String(n);
  let s = GROUPS[n % 1000]!;
  n = Math.floor(n / 1000);
  while (n >= 1000) {
    s = GROUPS[n % 1000]! + s;
    n = Math.floor(n / 1000);
  }
  return SMALL[n]! + s; // 1 <= n < 1000 here: no leading zero
}

/** The step E (µs) of the trims of a log of retention r whose widest limit is L (trimBound). */
export function trimStep(r: number, L: number): number {
  return Math.min(Math.floor(r / 4) + 1, Math.floor((r * 256) / L) + 1);
}

/**
 * The bound below which a write at t (µs, Redis TIME) trims a log of retention r whose widest
 * limit is L (logWrite in lua/includes/log.lua): t - r rounded down to a multiple of the step
 * E = min(floor(r / 4), floor(256 r / L)) + 1, in the very operations Lua does on the same
 * doubles (a % b is a - floor(a / b) * b there), so both get the same number.
 */
export function trimBound(t: number, r: number, L: number): number {
  const e = trimStep(r, L);
  const b = t - r;
  return b - (b - Math.floor(b / e) * e);
}

/**
 * A bucket's keys (named from `base`) and limit profile. `leased`: the bucket is a leased
 * level's part on one lane (src/lease/): its limits are checked against the lane's share, kept in
 * `<base>:share` (lua/lease-observe.lua), named by a last pseudo-limit 'S'.
 */
export function bucketArgsOf(tag: string, base: string, bucket: Bucket, leased = false): BucketArgs {
  const retention = logRetention(bucket);
  const keys: string[] = retention > 0 ? [logKey(base)] : [];
  const windows = new Map<number, number>();
  // sliding-log limits widest window first (admit.lua and admit-lone.lua skip a count a wider one decides)
  const ordered = [...bucket.limits].sort((x, y) => logWindow(y) - logWindow(x));
  const limits: string[] = [];
  for (const lim of ordered) {
    let off = 0;
    if (lim.algorithm !== 'sliding-log') {
      off = windows.get(lim.windowUs) ?? keys.push(windowKey(base, lim.windowUs)) - 1;
      windows.set(lim.windowUs, off);
    }
    limits.push(ALGO_CODE[lim.algorithm], String(lim.limit), String(lim.windowUs), String(off));
  }
  const channels = bucket.channels ?? 0;
  const hoff = channels > 0 ? keys.push(holdsKey(base)) - 1 : 0;
  let m = ordered.length;
  const ban = bucket.ban;
  if (ban !== undefined) {
    // two pseudo-limits after the limits (admit.lua): 'b' the strikes hash, 'B' the ban's end
    const soff = keys.push(`${base}:strikes`) - 1;
    keys.push(`${base}:ban`);
    limits.push(
      'b',
      String(ban.threshold),
      String(ban.spanUs),
      String(soff),
      'B',
      '0',
      String(ban.forUs),
      String(soff + 1),
    );
    m += 2;
  }
  const share = leased ? `${base}:share` : undefined;
  if (share !== undefined) {
    limits.push('S', '0', '0', String(keys.push(share) - 1));
    m += 1;
  }
  const profile = [String(retention), String(channels), String(hoff), String(m), ...limits];
  const profileId = profile.join(' ');
  const logsOnly = ban === undefined && ordered.every((lim) => lim.algorithm === 'sliding-log');
  const logArgs = logsOnly
    ? [String(ordered.length), ...ordered.flatMap((lim) => [String(lim.limit), String(lim.windowUs)])]
    : [];
  const lone = logsOnly && retention > 0 && channels === 0 ? logArgs : undefined;
  const held = logsOnly ? [...logArgs, String(channels)] : undefined;
  // sliding logs come first, widest first: the first limit is the retention's when there is a log
  const retentionLimit = retention > 0 ? ordered[0]!.limit : 0;
  return {
    tag,
    keys,
    profile,
    profileId,
    retention,
    retentionLimit,
    id: `${keys.join('\n')}\n${profileId}`,
    lone,
    held,
    share,
  };
}

/**
 * The KEYS and the profiles and buckets (lua/includes/buckets.lua) of one script call, each
 * profile and each bucket once.
 */
export class ArgsBuilder {
  private readonly keys: string[] = [];
  private readonly keySet = new Set<string>();
  private readonly profiles: string[] = [];
  private readonly profileIndex = new Map<string, number>();
  private readonly buckets: string[] = [];
  /** 1-based index of each bucket, by its id (keys and limits). */
  private readonly bucketIndex = new Map<string, number>();
  /** The buckets, in index order. */
  readonly bucketList: BucketArgs[] = [];
  private readonly plans: string[] = [];
  /** 1-based index of each bucket list (the store's cached list per plan). */
  private readonly planIndex = new Map<readonly BucketArgs[], number>();

  /** The bucket list's 1-based index; 0 when one of its buckets does not fit (see bucket()). */
  plan(list: readonly BucketArgs[]): number {
    const seen = this.planIndex.get(list);
    if (seen !== undefined) return seen;
    const entry = [num(list.length)];
    for (const args of list) {
      const i = this.bucket(args);
      if (i === 0) return 0;
      entry.push(num(i));
    }
    for (const v of entry) this.plans.push(v);
    const p = this.planIndex.size + 1;
    this.planIndex.set(list, p);
    return p;
  }

  /**
   * The bucket's 1-based index; 0 when it shares a key with a bucket already in but differs
   * from it (the same name with other limits, after a reload): a script call must name each key
   * once, for one set of limits.
   */
  bucket(args: BucketArgs): number {
    const seen = this.bucketIndex.get(args.id);
    if (seen !== undefined) return seen;
    for (const k of args.keys) if (this.keySet.has(k)) return 0;
    let p = this.profileIndex.get(args.profileId);
    if (p === undefined) {
      p = this.profileIndex.size + 1;
      this.profileIndex.set(args.profileId, p);
      for (const v of args.profile) this.profiles.push(v);
    }
    this.buckets.push(num(this.keys.length + 1), num(p));
    for (const k of args.keys) {
      this.keys.push(k);
      this.keySet.add(k);
    }
    const i = this.bucketIndex.size + 1;
    this.bucketIndex.set(args.id, i);
    this.bucketList.push(args);
    return i;
  }

  /**
   * [numkeys, ...KEYS, ...head, P, ...profiles, B, ...buckets, (NP, ...plans), ...tail]; KEYS end
   * with `more`: keys the script names from a prefix (call records), declared so that a Cluster
   * checks them before it runs (a slot being moved: TRYAGAIN then, not an error mid-script)
   */
  argv(head: readonly string[], tail: readonly string[], withPlans: boolean, more: readonly string[] = []): string[] {
    const a: string[] = [String(this.keys.length + more.length)];
    for (const k of this.keys) a.push(k);
    for (const k of more) a.push(k);
    for (const v of head) a.push(v);
    a.push(String(this.profileIndex.size));
    for (const v of this.profiles) a.push(v);
    a.push(String(this.bucketIndex.size));
    for (const v of this.buckets) a.push(v);
    if (withPlans) {
      a.push(num(this.planIndex.size));
      for (const v of this.plans) a.push(v);
    }
    for (const v of tail) a.push(v);
    return a;
  }
}
