/**
 * The arguments of an admit script call: a lone call of plain sliding logs in admit-lone.lua's
 * layout, a lone call of sliding logs with channel limits in admit-lone-held.lua's, any other
 * batch in admit.lua's.
 */
import type { AdmitResult, Bucket, Hold, StopSignal } from '../types.js';
import type { Pending } from './batcher.js';
import { ArgsBuilder, num, type BucketArgs } from './bucket-args.js';
import { runsOf } from './call-runs.js';
import type { KnownLogs } from './known-logs.js';

/** An admission waiting for its batch. */
export interface PendingAdmit extends Pending<AdmitResult> {
  readonly buckets: readonly BucketArgs[];
  readonly now: string;
  /** With a channel limit in its buckets: the call's encoded id and hold time (µs); else undefined. */
  readonly id: string | undefined;
  readonly forUs: number;
}

/** Where an admitted call that holds enters the store's ledger: (tag, call id, buckets, hold end µs). */
export type NoteIn = (tag: string, id: string, buckets: readonly Bucket[], end: number) => void;

/**
 * An admission on its way: what its batch sends (PendingAdmit), and the promise its reply
 * settles. One object per call, its resolve a method: a literal with a closure per call to note
 * the admitted call in the ledger, and the closures that queued it, allocated about 0.4 KB more
 * per decision (V8's sampling heap profiler).
 */
export class AdmitCall implements PendingAdmit {
  readonly promise: Promise<AdmitResult>;
  private settle!: (r: AdmitResult) => void;
  reject!: (err: unknown) => void;

  constructor(
    readonly buckets: readonly BucketArgs[],
    readonly now: string,
    readonly id: string | undefined,
    readonly forUs: number,
    readonly signal: StopSignal | undefined,
    /** Given for a call on live time that holds: where it is noted once admitted, with `tag`, `hold` and `noted`. */
    private readonly noteTo: NoteIn | undefined,
    private readonly tag: string,
    private readonly hold: Hold | undefined,
    private readonly noted: readonly Bucket[],
  ) {
    this.promise = new Promise<AdmitResult>((resolve, reject) => {
      this.settle = resolve;
      this.reject = reject;
    });
  }

  resolve(r: AdmitResult): void {
    if (this.noteTo !== undefined && r.admitted && !r.duplicate)
      this.noteTo(this.tag, this.hold!.id, this.noted, r.now + this.hold!.forUs);
    this.settle(r);
  }
}

/** What packing an admit script call needs of the store. */
export interface AdmitEnv {
  /** The ttl floor (ms) of keys written with a caller-given now. */
  readonly virtualTtlMs: number;
  readonly known: KnownLogs;
  /** A fresh id, unique per script call: the lone call's event id, or the batch's member prefix. */
  member(): string;
  /** A call's deadline in Redis time ('' = none). */
  deadline(signal: StopSignal | undefined): string;
  /** The key prefix of the inbound call records on `tag`. */
  recordPrefix(tag: string): string;
  /**
   * On a Cluster (hash tags): declare admit.lua's call records in KEYS too, so that a slot being
   * moved to another master answers TRYAGAIN before the script runs, not an error in its midst.
   * (Kamailio's templates, for a single Redis, leave them out: ndb_redis passes three values.)
   */
  readonly declareRecords: boolean;
}

/**
 * A lone call in admit-lone.lua's layout, when every bucket of it has sliding-log limits only
 * (one key each, all distinct); else undefined (admit.lua's layout). Per bucket it sends what
 * this process knows of the log (KnownLogs): the bound of its latest trim, so that the script
 * skips a trim that would remove nothing; and until a reply confirms a write with these
 * buckets' limits, its third argument asks the script to set every log's expiry, since the
 * script otherwise skips the PEXPIRE while the log's expiry, set for the limits of that time,
 * is known to be enough (a reload may have widened a window). A leased global level's share
 * hash goes last in KEYS, and the third argument says so ('S').
 */
export function loneAdmitArgv(item: PendingAdmit, clock: string, env: AdmitEnv): string[] | undefined {
  const list = item.buckets;
  const n = list.length;
  // made at its full length (numkeys, keys, the share, the head, the bounds, the limits): grown
  // by push, a lone call's thirty arguments copied their array twice
  let size = 7 + 2 * n;
  for (const args of list) {
    if (args.lone === undefined) return undefined;
    size += args.lone.length;
  }
  // a leased level (the first bucket only, the global one): its lane's share hash, last
  const share = list[0]!.share;
  for (let q = 1; q < n; q++) if (list[q]!.share !== undefined) return undefined;
  if (share !== undefined) size++;
  const argv: string[] = new Array(size);
  argv[0] = num(share !== undefined ? n + 1 : n);
  let k = 1;
  for (const args of list) {
    const key = args.keys[0]!;
    for (let j = 1; j < k; j++) if (argv[j] === key) return undefined;
    argv[k++] = key;
  }
  if (share !== undefined) argv[k++] = share;
  const at = k;
  k = setLoneHead(argv, k, item, clock, env);
  let refresh = false;
  for (const args of list) {
    const bound = env.known.boundOf(args);
    if (bound === '') refresh = true;
    argv[k++] = bound;
  }
  argv[at + 2] = (refresh ? '1' : '') + (share !== undefined ? 'S' : '');
  for (const args of list) for (const v of args.lone!) argv[k++] = v;
  return argv;
}

/**
 * A lone script's arguments for `item` (admit-lone.lua's layout, else admit-lone-held.lua's;
 * see loneAdmitArgv, heldAdmitArgv), and which: 'l' or 'h'. Undefined: admit.lua's call.
 */
export function loneArgv(
  item: PendingAdmit,
  clock: string,
  env: AdmitEnv,
): { kind: 'l' | 'h'; argv: string[] } | undefined {
  const lone = loneAdmitArgv(item, clock, env);
  if (lone !== undefined) return { kind: 'l', argv: lone };
  const held = heldAdmitArgv(item, clock, env);
  return held === undefined ? undefined : { kind: 'h', argv: held };
}

/**
 * A run of calls in admit-lone-run.lua's layout: the keys of each call, then per call its
 * script ('l' or 'h', loneArgv), key count, argument count and arguments in that script's
 * layout; undefined when a call fits no lone script. `clock` asks for Redis TIME once, at the
 * end of the run.
 */
export function loneRunArgv(items: readonly PendingAdmit[], clock: string, env: AdmitEnv): string[] | undefined {
  const each: { kind: 'l' | 'h'; argv: string[] }[] = new Array(items.length);
  let keys = 0;
  let size = 2;
  for (let i = 0; i < items.length; i++) {
    const lone = loneArgv(items[i]!, '', env);
    if (lone === undefined) return undefined;
    keys += Number(lone.argv[0]);
    size += lone.argv.length + 2;
    each[i] = lone;
  }
  const out: string[] = new Array(size);
  out[0] = num(keys);
  let k = 1;
  for (const { argv } of each) for (let j = 1, n = Number(argv[0]); j <= n; j++) out[k++] = argv[j]!;
  out[k++] = clock;
  for (const { kind, argv } of each) {
    const n = Number(argv[0]);
    out[k++] = kind;
    out[k++] = argv[0]!;
    out[k++] = num(argv.length - 1 - n);
    for (let j = n + 1; j < argv.length; j++) out[k++] = argv[j]!;
  }
  return out;
}

/**
 * A lone call in admit-lone-held.lua's layout, when every bucket of it has sliding-log limits
 * only or none (with or without a channel limit, no ban) and no two of its keys are the same;
 * else undefined (admit.lua's layout). Meant for the calls loneAdmitArgv leaves: one with an id
 * (a bucket has a channel limit) names its call record as the last key. Per bucket with a log
 * it sends what this process knows of the log, with the third argument, as loneAdmitArgv does; a
 * leased global level's share hash goes after the buckets' keys ('S' in the third argument).
 */
export function heldAdmitArgv(item: PendingAdmit, clock: string, env: AdmitEnv): string[] | undefined {
  const list = item.buckets;
  const argv: string[] = [''];
  for (const [q, args] of list.entries()) {
    if (args.held === undefined) return undefined;
    // a leased level (the first bucket only): its keys but the share hash, which goes after all
    if (args.share !== undefined && q > 0) return undefined;
    for (const key of args.keys) {
      if (key === args.share) continue;
      for (let k = 1; k < argv.length; k++) if (argv[k] === key) return undefined;
      argv.push(key);
    }
  }
  const share = list[0]!.share;
  if (share !== undefined) argv.push(share);
  if (item.id !== undefined) argv.push(env.recordPrefix(list[0]!.tag) + item.id);
  argv[0] = num(argv.length - 1);
  const at = argv.length;
  setLoneHead(argv, at, item, clock, env);
  argv.push(item.id ?? '', num(item.forUs), num(list.length));
  let refresh = false;
  for (const args of list) {
    let bound = '';
    if (args.retention > 0) {
      bound = env.known.boundOf(args);
      if (bound === '') refresh = true;
    }
    argv.push(bound);
    for (const v of args.held!) argv.push(v);
  }
  argv[at + 2] = (refresh ? '1' : '') + (share !== undefined ? 'S' : '');
  return argv;
}

/**
 * ARGV[1..6] of both lone layouts, from argv[k] on: the ttl floor (virtual clocks), the call's
 * event id, the refresh flag ('' until a bucket's log turns out unknown), Redis TIME asked, now,
 * the deadline. Returns the index after them.
 */
function setLoneHead(argv: string[], k: number, item: PendingAdmit, clock: string, env: AdmitEnv): number {
  argv[k] = item.now === '' ? '0' : String(env.virtualTtlMs);
  argv[k + 1] = `${env.member()}:1`;
  argv[k + 2] = '';
  argv[k + 3] = clock;
  argv[k + 4] = item.now;
  argv[k + 5] = env.deadline(item.signal);
  return k + 6;
}

/**
 * A batch in admit.lua's layout: each limit profile, bucket and bucket list once, then per
 * bucket what this process knows of its log (see loneAdmitArgv), then the calls in runs that
 * share a time. A number when not every call fits one script call: how many of the first do
 * (0: the first call's own buckets share a key). A bucket named again with other limits (a
 * reload between two calls) must start a new script call, so every call is checked against its
 * own.
 */
export function admitArgv(items: readonly PendingAdmit[], clock: string, env: AdmitEnv): string[] | number {
  const b = new ArgsBuilder();
  const plans: number[] = new Array(items.length);
  for (let n = 0; n < items.length; n++) {
    const p = b.plan(items[n]!.buckets);
    if (p === 0) return n;
    plans[n] = p;
  }
  const { calls, virtual } = runsOf(items, (i, out) => {
    const item = items[i]!;
    out.push(num(plans[i]!), env.deadline(item.signal));
    if (item.id !== undefined) out.push(item.id, num(item.forUs));
  });
  const tag = items[0]!.buckets[0]!.tag;
  const tail: string[] = [];
  for (const args of b.bucketList) tail.push(env.known.boundOf(args));
  for (const v of calls) tail.push(v);
  const prefix = env.recordPrefix(tag);
  const records = new Set<string>();
  if (env.declareRecords) for (const item of items) if (item.id !== undefined) records.add(prefix + item.id);
  return b.argv([String(virtual ? env.virtualTtlMs : 0), `${env.member()}:`, prefix, clock], tail, true, [...records]);
}
