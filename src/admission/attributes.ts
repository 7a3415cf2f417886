/**
 * Attribute levels (docs/attributes.md): from a call's caller, callee, source address or a named
 * field to the value a level counts, and to the bucket that value counts in.
 */
import { isIP } from 'node:net';
import type { AttributeLevelConfig, BucketConfig } from '../config/types.js';
import { encodeId } from '../store/keys.js';
import type { Bucket } from '../store/types.js';

/** What a call may carry for attribute levels. */
export interface CallAttributes {
  /** The calling number (ANI, From user, `$fU`). */
  readonly caller?: string;
  /** The called number (To / R-URI user, `$rU`). */
  readonly callee?: string;
  /** The source address the INVITE came from (`$si`). */
  readonly source?: string;
  /** Any other named attribute, for levels keyed by `{ "field": "<name>" }`. */
  readonly fields?: Readonly<Record<string, string>>;
}

/** The attribute a level reads, as the call gives it ('' and absent: none). */
function rawValue(level: AttributeLevelConfig, call: CallAttributes): string | undefined {
  const key = level.key;
  const v =
    key === 'caller'
      ? call.caller
      : key === 'callee'
        ? call.callee
        : key === 'source'
          ? call.source
          : call.fields !== undefined && Object.hasOwn(call.fields, key.field)
            ? call.fields[key.field]
            : undefined;
  return typeof v === 'string' && v !== '' ? v : undefined;
}

/** The groups of an IPv6 address as 8 numbers, or undefined. */
function ipv6Groups(text: string): number[] | undefined {
  let s = text;
  const zone = s.indexOf('%');
  if (zone >= 0) s = s.slice(0, zone);
  const tail: number[] = [];
  const v4 = /(\d+\.\d+\.\d+\.\d+)$/.exec(s);
  if (v4) {
    const b = v4[1]!.split('.').map(Number);
    tail.push((b[0]! << 8) | b[1]!, (b[2]! << 8) | b[3]!);
    s = s.slice(0, -v4[1]!.length);
    if (s.endsWith(':') && !s.endsWith('::')) s = s.slice(0, -1);
  }
  const [head, rest] = s.split('::') as [string, string | undefined];
  const parse = (part: string) => (part === '' ? [] : part.split(':').map((g) => Number.parseInt(g, 16)));
  const left = parse(head);
  const right = rest === undefined ? [] : parse(rest);
  const fill = 8 - left.length - right.length - tail.length;
  const groups = [...left, ...Array<number>(rest === undefined ? 0 : fill).fill(0), ...right, ...tail];
  return groups.length === 8 && groups.every((g) => g >= 0 && g <= 0xffff) ? groups : undefined;
}

/** An IPv4 network of `bits` bits, from the address as a number. */
function v4Network(n: number, bits: number): string {
  const size = 2 ** (32 - bits);
  const net = n - (n % size);
  return `${[24, 16, 8, 0].map((s) => Math.floor(net / 2 ** s) % 256).join('.')}/${bits}`;
}

/**
 * The network of an address with `bits` kept: `203.0.113.0/24`, `2001:db8:0:0:0:0:0:0/64`. An
 * IPv4-mapped IPv6 address is its IPv4 address, however it is written (`::ffff:10.1.2.3`,
 * `::ffff:a01:203`, `0:0:0:0:0:ffff:a01:203`): one network, one spelling.
 */
export function subnetOf(address: string, v4: number, v6: number): string | undefined {
  const kind = isIP(address);
  if (kind === 4)
    return v4Network(
      address.split('.').reduce((acc, b) => acc * 256 + Number(b), 0),
      v4,
    );
  if (kind === 6) {
    const g = ipv6Groups(address);
    if (g === undefined) return undefined;
    if (g.slice(0, 5).every((x) => x === 0) && g[5] === 0xffff) return v4Network(g[6]! * 65_536 + g[7]!, v4);
    const masked = g.map((x, i) => {
      const keep = Math.max(0, Math.min(16, v6 - 16 * i));
      return keep === 0 ? 0 : x & (0xffff << (16 - keep)) & 0xffff;
    });
    return `${masked.map((x) => x.toString(16)).join(':')}/${v6}`;
  }
  return undefined;
}

/**
 * The value level `level` counts for a call, or undefined when the level does not apply to it
 * (the attribute is absent, or matches none of the level's prefixes).
 */
export function attributeValue(level: AttributeLevelConfig, call: CallAttributes): string | undefined {
  const raw = rawValue(level, call);
  if (raw === undefined) return undefined;
  const match = level.match;
  if (match === undefined) return raw;
  if ('prefixes' in match) {
    let best: string | undefined;
    for (const p of match.prefixes) if (raw.startsWith(p) && (best === undefined || p.length > best.length)) best = p;
    return best;
  }
  if ('digits' in match) {
    const digits = raw.replace(/\D/g, '').slice(0, match.digits);
    return digits === '' ? undefined : digits;
  }
  // a source that is not an IP address counts as given
  return subnetOf(raw, match.subnet.v4, match.subnet.v6) ?? raw;
}

/** FNV-1a (32 bits) of a string's UTF-16 code units: the shared bucket of a value past maxValues. */
export function valueSlot(value: string, maxValues: number): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < value.length; i++) {
    h ^= value.charCodeAt(i);
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return h % maxValues;
}

/**
 * The store's name of the bucket `value` counts in: `attr:<level>:<value>` (encoded), or, with
 * maxValues and no override of its own, `attr:<level>:#<slot>`, shared by the values of one slot
 * (`#` never begins an encoded value).
 */
export function attributeBucketName(level: AttributeLevelConfig, value: string): string {
  if (level.maxValues !== undefined && !level.overrides.has(value))
    return `attr:${level.name}:#${valueSlot(value, level.maxValues)}`;
  return `attr:${level.name}:${encodeId(value)}`;
}

/** A ban's threshold: `over` times the tightest rate limit of the value's limits (at least 1). */
export function banThreshold(over: number, cfg: BucketConfig): number | undefined {
  if (cfg.limits.length === 0) return undefined;
  return Math.max(1, Math.ceil(over * Math.min(...cfg.limits.map((l) => l.limit))));
}

/**
 * Whether an operator's `value` names a bucket shared past maxValues (`#<slot>`, as the bans
 * listing shows it) rather than a value: only on a level with maxValues, and not a value of its
 * own (an override). A value `#5` on a level without maxValues is the caller's `#5`.
 */
export function isSharedSlot(level: AttributeLevelConfig, value: string): boolean {
  return level.maxValues !== undefined && /^#\d+$/.test(value) && !level.overrides.has(value);
}

/** Why `#<slot>` names no slot of `level` (past maxValues), or undefined. */
export function slotProblem(level: AttributeLevelConfig, value: string): string | undefined {
  if (!isSharedSlot(level, value) || Number(value.slice(1)) < level.maxValues!) return undefined;
  return `the attribute level "${level.name}" shares its values over ${level.maxValues} buckets, #0 to #${level.maxValues! - 1}: there is no ${value}`;
}

/** The bucket an operator names by `value` (as limited_by shows it, or `#<slot>`: isSharedSlot). */
export function namedAttributeBucket(level: AttributeLevelConfig, value: string): Bucket {
  const bucket = attributeBucket(level, value);
  return isSharedSlot(level, value) ? { ...bucket, name: `attr:${level.name}:${value}` } : bucket;
}

/** The bucket `value` of `level` counts in. */
export function attributeBucket(level: AttributeLevelConfig, value: string): Bucket {
  const cfg = level.overrides.get(value) ?? level.limits;
  const name = attributeBucketName(level, value);
  const threshold = level.ban && banThreshold(level.ban.over, cfg);
  const bucket: { -readonly [K in keyof Bucket]: Bucket[K] } = { name, limits: cfg.limits };
  if (cfg.channels !== undefined) bucket.channels = cfg.channels;
  if (level.ban !== undefined && threshold !== undefined)
    bucket.ban = { threshold, spanUs: level.ban.spanUs, forUs: level.ban.forUs };
  return bucket;
}
