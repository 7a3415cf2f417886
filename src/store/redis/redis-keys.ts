/**
 * The key names of a RedisStore. Keys: `<prefix>{<tag>}:<bucket>:log` (sliding log),
 * `<prefix>{<tag>}:<bucket>:win:<W>` (fixed and sliding-window counts of windows of W µs),
 * `<prefix>{<tag>}:<bucket>:ch` (the bucket's calls in progress), `<prefix>{out:<id>}:carrier:<id>`
 * (leaky bucket) and `…{out:<id>}:carrier:<id>:ch` (and, leased, `…:share` and `…:slots`), each
 * carrier on a tag of its own, and the call
 * records `<prefix>{<tag>}:call:in:<call id>` and `<prefix>{out:<carrier>}:call:out:<call id>` (on
 * the tag of the carrier that took the call). Hash tags only matter on a Cluster; on a single
 * Redis (hashTags false, the default there) keys carry no tag, so a peer's bucket is one key
 * whatever account its calls name. With tags, a call id's records are found on release through
 * `<prefix>{c:<call id>}:loc` (inbound) and `<prefix>{c:<call id>}:loc:out` (outbound), which
 * name them (call-locators.ts).
 */
import { carrierTag } from '../keys.js';
import type { Carrier } from '../types.js';

/** A bucket's sliding log: `<base>:log` (base: RedisKeys.base of its tag and name). */
export const logKey = (base: string): string => `${base}:log`;
/** A bucket's fixed- and sliding-window counts of windows of `windowUs`: `<base>:win:<W>`. */
export const windowKey = (base: string, windowUs: number): string => `${base}:win:${windowUs}`;
/** A bucket's or a carrier's holds set (its calls in progress): `<base>:ch`. */
export const holdsKey = (base: string): string => `${base}:ch`;

/**
 * Why `prefix` cannot start a store's keys, or undefined when it can: a brace would open or close
 * a Cluster hash tag of its own, and every key of the store would land on one slot (or on the
 * wrong one). `what` names the prefix in the message (an option, a flag).
 */
export function prefixProblem(what: string, prefix: string): string | undefined {
  return /[{}]/.test(prefix) ? `${what} must not contain '{' or '}', got ${JSON.stringify(prefix)}` : undefined;
}

export class RedisKeys {
  constructor(
    readonly prefix: string,
    readonly hashTags: boolean,
  ) {}

  /** `<prefix>{<tag>}:<name>`, or `<prefix><name>` without hash tags. */
  base(tag: string, name: string): string {
    return this.hashTags ? `${this.prefix}{${tag}}:${name}` : `${this.prefix}${name}`;
  }

  /** A bucket's holds set (its calls in progress). */
  holds(tag: string, name: string): string {
    return holdsKey(this.base(tag, name));
  }

  /** A carrier's last slot; its holds are holdsKey of this key. */
  carrier(c: Pick<Carrier, 'name'>): string {
    return this.base(carrierTag(c.name), c.name);
  }

  /**
   * A leased carrier's lane in this deployment (docs/leasing.md, "Carriers across regions"): its
   * share hash, its slot log and its holds, on the carrier's tag (lua/reserve.lua, lua/lease-*.lua).
   */
  carrierLease(c: Pick<Carrier, 'name'>): readonly [share: string, slots: string, holds: string] {
    const key = this.carrier(c);
    return [`${key}:share`, `${key}:slots`, holdsKey(key)];
  }

  /** The inbound call record of call id `id` (encoded) on `tag`. */
  inboundRecord(tag: string, id: string): string {
    return this.base(tag, `call:in:${id}`);
  }

  /** The outbound call record of call id `id` (encoded) on `tag` (the tag of the carrier that took it). */
  outboundRecord(tag: string, id: string): string {
    return this.base(tag, `call:out:${id}`);
  }

  /** The generation marker of a tag (one for all on a single Redis): see lua/reassert.lua. */
  marker(tag: string): string {
    return this.base(tag, 'gen');
  }

  /** The tombstone beside a call record (`call:in:<id>` -> `gone:in:<id>`), left by a release re-sent after a loss. */
  tombstone(record: string): string {
    return record.replace(/call:(in|out):([^:]*)$/, 'gone:$1:$2');
  }

  /** With hash tags: the key that names the inbound record of call id `id` (encoded). */
  locator(id: string): string {
    return this.base(`c:${id}`, 'loc');
  }

  /** With hash tags: the key that names the outbound record of call id `id` (encoded); same slot as locator(id). */
  outboundLocator(id: string): string {
    return this.base(`c:${id}`, 'loc:out');
  }
}
