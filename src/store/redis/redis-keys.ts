/**
 * The key names of a RedisStore. Keys: `<prefix>{<tag>}:<bucket>:log` (sliding log),
 * `<prefix>{<tag>}:<bucket>:win:<W>` (fixed and sliding-window counts of windows of W µs),
 * `<prefix>{<tag>}:<bucket>:ch` (the bucket's calls in progress), `<prefix>{out}:carrier:<id>`
 * (leaky bucket) and `…{out}:carrier:<id>:ch`, and the call records
 * `<prefix>{<tag>}:call:in:<call id>` and `<prefix>{out}:call:out:<call id>`. Hash tags only
 * matter on a Cluster; on a single Redis (hashTags false, the default there) keys carry no tag,
 * so a peer's bucket is one key whatever account its calls name. With tags, a call id's inbound
 * record is found on release through `<prefix>{c:<call id>}:loc`, which names it (call-locators.ts).
 */
import { OUTBOUND_TAG } from '../keys.js';
import type { Carrier } from '../types.js';

export class RedisKeys {
  constructor(
    readonly prefix: string,
    readonly hashTags: boolean,
  ) {}

  /** `<prefix>{<tag>}:<name>`, or `<prefix><name>` without hash tags. */
  base(tag: string, name: string): string {
    return this.hashTags ? `${this.prefix}{${tag}}:${name}` : `${this.prefix}${name}`;
  }

  /** A carrier's last slot; its holds are this key with `:ch`. */
  carrier(c: Carrier): string {
    return this.base(OUTBOUND_TAG, c.name);
  }

  /** The inbound call record of call id `id` (encoded) on `tag`. */
  inboundRecord(tag: string, id: string): string {
    return this.base(tag, `call:in:${id}`);
  }

  /** The outbound call record of call id `id` (encoded). */
  outboundRecord(id: string): string {
    return this.base(OUTBOUND_TAG, `call:out:${id}`);
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
}
