/** The arguments and reply of lua/reassert.lua (RedisStore.reassert). */
import { randomBytes } from 'node:crypto';
import { encodeId } from '../keys.js';
import type { ReassertRequest, ReassertResult, ReassertStatus } from '../types.js';
import type { RedisKeys } from './redis-keys.js';

/** A marker lives a day after the last reassert or sync that read it. */
const MARKER_TTL_MS = 86_400_000;

const STATUS: readonly ReassertStatus[] = ['ended', 'present', 'written', 'gone', 'unknown'];

/** [numkeys, ...KEYS, ...ARGV] of one reassert script call (see the script's header). */
export function reassertArgv(req: ReassertRequest, keys: RedisKeys, floorMs: number): string[] {
  const k: string[] = [keys.marker(req.tag)];
  const a: string[] = [
    req.now === undefined ? '' : String(req.now),
    String(floorMs),
    req.mode ?? 'lost',
    req.token ?? '',
    randomToken(),
    String(req.graceUs ?? 0),
    String(MARKER_TTL_MS),
    req.process ?? '',
    String(req.processTtlUs ?? 60_000_000),
    req.restartGrace === true ? '1' : '',
  ];
  for (const c of req.calls) {
    const id = encodeId(c.id);
    // outbound calls are re-asserted on the tag of their carrier (carrierTag), inbound on theirs
    const record = c.direction === 'in' ? keys.inboundRecord(req.tag, id) : keys.outboundRecord(req.tag, id);
    k.push(record, keys.tombstone(record));
    for (const name of c.names) k.push(keys.holds(req.tag, name));
    a.push(id, String(c.end), String(c.names.length));
  }
  return [String(k.length), ...k, ...a];
}

function randomToken(): string {
  return randomBytes(6).toString('base64url');
}

export function reassertResult(reply: unknown[]): ReassertResult {
  const now = Number(reply[0]);
  const marker = String(reply[1]);
  const [token = '', grace = '0'] = marker.split(' ');
  return {
    now,
    token,
    markerMissing: Number(reply[2]) === 1,
    graceUntil: Number(grace),
    others: Number(reply[3]),
    statuses: reply.slice(4).map((s) => STATUS[Number(s)]!),
  };
}
