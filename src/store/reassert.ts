/**
 * The reassert operation's argument check (shared by every store) and the memory store's
 * version of it: a memory store loses nothing while its process lives, but it keeps the same
 * semantics (types.ts, ReassertRequest), so that one conformance suite covers both.
 */
import { randomBytes } from 'node:crypto';
import { InvalidArgumentError } from '../errors/index.js';
import { isOutboundTag } from './keys.js';
import type { ReassertRequest, ReassertResult, ReassertStatus } from './types.js';
import { checkName, checkNow } from './validate.js';

/** Calls in one reassert request, at most (a batch: Lua's stack and one script's run time bound it). */
export const MAX_REASSERT_CALLS = 256;
/**
 * Calls per script call of a periodic sync, at most (a re-assertion after a loss takes
 * MAX_REASSERT_CALLS): a sync runs whatever the traffic, and each of its script calls holds
 * Redis while decisions queue behind it, so its calls go in small groups, one at a time.
 */
export const SYNC_BATCH_CALLS = 64;

export function checkReassert(req: ReassertRequest): void {
  checkName('tag', req.tag);
  checkNow(req.now);
  if (!Array.isArray(req.calls) || req.calls.length > MAX_REASSERT_CALLS)
    throw new InvalidArgumentError(`calls must be an array of at most ${MAX_REASSERT_CALLS} calls`);
  if (req.mode !== undefined && req.mode !== 'lost' && req.mode !== 'sync')
    throw new InvalidArgumentError(`mode must be 'lost' or 'sync', got ${JSON.stringify(req.mode)}`);
  const grace = req.graceUs ?? 0;
  if (!(Number.isSafeInteger(grace) && grace >= 0))
    throw new InvalidArgumentError(`graceUs must be a non-negative integer, got ${String(req.graceUs)}`);
  for (const c of req.calls) {
    if (typeof c.id !== 'string' || c.id === '')
      throw new InvalidArgumentError(`a call's id must be a non-empty string, got ${JSON.stringify(c.id)}`);
    if (c.direction !== 'in' && c.direction !== 'out')
      throw new InvalidArgumentError(`direction must be 'in' or 'out', got ${JSON.stringify(c.direction)}`);
    if ((c.direction === 'out') !== isOutboundTag(req.tag))
      throw new InvalidArgumentError(
        "outbound calls, and only they, are re-asserted on an outbound tag (their carrier's: carrierTag)",
      );
    if (!Number.isSafeInteger(c.end) || c.end < 0)
      throw new InvalidArgumentError(`a call's end must be a non-negative integer (µs), got ${String(c.end)}`);
    if (!Array.isArray(c.names)) throw new InvalidArgumentError('a call names its holds sets (an array)');
    for (const n of c.names) checkName('a holds set name', n);
  }
}

/** What MemoryStore lends reassertMemory: its records and hold sets. */
export interface MemoryHolds {
  record(direction: 'in' | 'out', id: string): { end: number; readonly sets: MemoryHoldSet[] } | undefined;
  setRecord(direction: 'in' | 'out', id: string, end: number, sets: MemoryHoldSet[]): void;
  set(direction: 'in' | 'out', name: string): MemoryHoldSet;
}

export interface MemoryHoldSet {
  readonly byId: Map<string, number>;
  add(id: string, end: number): void;
  trim(t: number): void;
}

/** The memory store's reassert at t, with its markers per tag. */
export function reassertMemory(
  holds: MemoryHolds,
  markers: Map<string, { token: string; graceUntil: number; procs?: Map<string, number> }>,
  req: ReassertRequest,
  t: number,
): ReassertResult {
  let marker = markers.get(req.tag);
  const missing = marker === undefined;
  if (marker === undefined) {
    marker = { token: randomBytes(6).toString('base64url'), graceUntil: t + (req.graceUs ?? 0) };
    markers.set(req.tag, marker);
  }
  if (req.restartGrace === true && marker.graceUntil < t) marker.graceUntil = t + (req.graceUs ?? 0);
  const procs = (marker.procs ??= new Map());
  for (const [p, at] of procs) if (at <= t - (req.processTtlUs ?? 60_000_000)) procs.delete(p);
  const me = req.process ?? '';
  const others = procs.size - (procs.has(me) ? 1 : 0);
  if (me !== '') procs.set(me, t);
  const expected = req.token ?? '';
  // lost for sure only when the caller knew a marker (see lua/reassert.lua)
  const fresh = expected !== '' && expected !== marker.token;
  const statuses: ReassertStatus[] = req.calls.map((c) => {
    if (c.end <= t) return 'ended';
    const rec = holds.record(c.direction, c.id);
    if (rec === undefined && !fresh && req.mode === 'sync') return expected === '' ? 'unknown' : 'gone';
    const end = rec?.end ?? c.end;
    const sets = rec ? [...rec.sets] : [];
    let added = rec === undefined;
    // a check (sync) under an unchanged marker trusts the record: only the holds it names come back
    const trusted = rec !== undefined && !fresh && req.mode === 'sync';
    for (const name of c.names) {
      const set = holds.set(c.direction, name);
      if (trusted && !rec.sets.includes(set)) continue;
      set.trim(t);
      const had = set.byId.get(c.id);
      if (had === undefined || had <= t) added = true;
      set.add(c.id, end);
      if (!sets.includes(set)) {
        sets.push(set);
        added = true;
      }
    }
    if (added) holds.setRecord(c.direction, c.id, end, sets);
    return added ? 'written' : 'present';
  });
  return { statuses, token: marker.token, markerMissing: missing, graceUntil: marker.graceUntil, others, now: t };
}
