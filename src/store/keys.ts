/**
 * Key-safe names for buckets, carriers and hash tags.
 *
 * Identifiers from traffic (peer, account, carrier ids) may hold any character, including
 * `{`, `}`, `:` and spaces. encodeId keeps [A-Za-z0-9._~-] and writes every other UTF-16 code
 * unit as `%XXXX` (four hex digits): fixed-width escapes and an escaped `%` make the encoding
 * injective (no two ids collide), and no encoded id can open or close a hash tag or add a `:`.
 */
const SAFE = /^[A-Za-z0-9._~-]*$/;

export function encodeId(id: string): string {
  if (SAFE.test(id)) return id;
  let out = '';
  for (let i = 0; i < id.length; i++) {
    const ch = id[i]!;
    out += /[A-Za-z0-9._~-]/.test(ch) ? ch : `%${id.charCodeAt(i).toString(16).toUpperCase().padStart(4, '0')}`;
  }
  return out;
}

/** Bucket names, which are also the contract's `limited_by` values before encoding. */
export const GLOBAL_BUCKET = 'global';
export const ACCOUNT_PREFIX = 'account:';
export const accountBucket = (id: string): string => `${ACCOUNT_PREFIX}${encodeId(id)}`;
export const peerBucket = (id: string): string => `peer:${encodeId(id)}`;
export const carrierName = (id: string): string => `carrier:${encodeId(id)}`;

/**
 * Hash tags. An inbound call's keys share the tag of the top of the hierarchy it touches:
 * global when configured (one tag, so one Cluster slot, for all inbound traffic), else its
 * account, else its peer. Each carrier has a tag of its own (carrierTag), so carriers spread
 * over a Cluster's shards; a route over several carriers is tried one carrier (one shard) at a
 * time there (RedisStore.reserve).
 */
export const GLOBAL_TAG = 'in';
export const accountTag = (id: string): string => `a:${encodeId(id)}`;
export const peerTag = (id: string): string => `p:${encodeId(id)}`;
/**
 * The outbound side as a whole, as callers name it (holds, listHolds: `{ tag: OUTBOUND_TAG, name:
 * carrierName(id) }`); a store finds the carrier under its own tag. Before carriers had tags of
 * their own, every carrier's keys carried this one.
 */
export const OUTBOUND_TAG = 'out';
/** The hash tag of one carrier's keys (its last slot, holds and outbound call records), from its name. */
export const carrierTag = (name: string): string =>
  `${OUTBOUND_TAG}:${name.startsWith('carrier:') ? name.slice('carrier:'.length) : name}`;
/** Whether a tag names the outbound side: OUTBOUND_TAG or a carrier's own tag. */
export const isOutboundTag = (tag: string): boolean => tag === OUTBOUND_TAG || tag.startsWith(`${OUTBOUND_TAG}:`);
