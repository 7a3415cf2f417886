/**
 * The call ledger: every call this process admitted or dispatched (or let in by policy while the
 * store was away) and has not seen end, with what it holds and until when. The store's holds are
 * the truth; the ledger is this process's own knowledge of its share of them, kept so that they
 * can be written again when the store lost them (a Redis restart without persistence, a failover
 * to a replica that missed the latest writes) and counted when a reload turns a channel limit on.
 *
 * Ids and names are as the store writes them (encoded, key-safe). Times are µs on the store's
 * clock (Redis TIME); only calls decided on live time enter (a virtual clock's ends mean nothing
 * to a restarted Redis).
 */
import type { Bucket, ReassertCall } from '../store/types.js';

/**
 * One side of a call: its hash tag, its buckets (inbound: the plan's own readonly list, shared,
 * so that an entry costs one small object) or the holds sets it holds (`names`), and its end.
 */
export interface LedgerHold {
  /** Hash tag of its keys (outbound: its carrier's, carrierTag, with hash tags; else OUTBOUND_TAG). */
  readonly tag: string;
  /** Every bucket of an inbound call, those without a channel limit too (for a reload that turns one on). */
  readonly buckets?: readonly Bucket[];
  /** The holds sets it holds a channel in, when not its buckets with a channel limit (outbound: its carrier). */
  names?: readonly string[];
  /** End of its holds, µs. */
  end: number;
  /** Entered while the store was away (policy `local` / `fail-open`): never written yet. */
  unwritten?: boolean;
}

export interface LedgerEntry {
  in?: LedgerHold;
  out?: LedgerHold;
  /** A release of the call is on its way: a periodic sync leaves it alone (it would race the release). */
  releasing?: boolean;
  /**
   * Re-assertions read with this call from the ledger and not answered yet (holds-keeper.ts): a
   * release sent meanwhile may land before the write, which would then bring the call back.
   */
  asserting?: number;
}

/** One call of a ledger read (byTag), with its entry (the object, even if the ledger drops it meanwhile). */
export interface LedgerCall {
  readonly id: string;
  readonly direction: 'in' | 'out';
  readonly hold: LedgerHold;
  readonly entry: LedgerEntry;
}

const channelNames = new WeakMap<readonly Bucket[], readonly string[]>();

/** The holds sets a ledger call holds a channel in. */
export function holdNames(hold: LedgerHold): readonly string[] {
  if (hold.names !== undefined) return hold.names;
  const buckets = hold.buckets;
  if (buckets === undefined) return [];
  let names = channelNames.get(buckets);
  if (names === undefined) {
    names = buckets.filter((b) => b.channels !== undefined).map((b) => b.name);
    channelNames.set(buckets, names);
  }
  return names;
}

/** A ledger call as a re-assertion writes it (types.ts, ReassertCall). */
export function reassertCall(c: LedgerCall): ReassertCall {
  return { id: c.id, direction: c.direction, names: holdNames(c.hold), end: c.hold.end };
}

export class HoldLedger {
  private readonly calls = new Map<string, LedgerEntry>();
  /** Told when a call enters unwritten, with its tag (its store writes such calls as soon as it answers). */
  onUnwritten?: (tag: string) => void;

  get size(): number {
    return this.calls.size;
  }

  /** Call `id` holds `hold` on `direction`'s side (or, without a channel limit, only touched its buckets). */
  add(id: string, direction: 'in' | 'out', hold: LedgerHold): void {
    let entry = this.calls.get(id);
    if (entry === undefined) this.calls.set(id, (entry = {}));
    entry[direction] = hold;
    if (hold.unwritten) this.onUnwritten?.(hold.tag);
  }

  /** The call ended (released from this process): it is not written again. */
  remove(id: string, direction?: 'in' | 'out'): void {
    if (direction === undefined) {
      this.calls.delete(id);
      return;
    }
    const entry = this.calls.get(id);
    if (entry === undefined) return;
    delete entry[direction];
    if (entry.in === undefined && entry.out === undefined) this.calls.delete(id);
  }

  /** The call's holds were refreshed: they end at `end`. */
  extend(id: string, end: number): void {
    const entry = this.calls.get(id);
    if (entry?.in) entry.in.end = end;
    if (entry?.out) entry.out.end = end;
  }

  /** A release of call `id` was sent (true) or failed and will be retried (false). */
  releasing(id: string, on: boolean): void {
    const entry = this.calls.get(id);
    if (entry !== undefined) entry.releasing = on || undefined;
  }

  get(id: string): LedgerEntry | undefined {
    return this.calls.get(id);
  }

  /** Whether a re-assertion read call `id` and is not answered yet (a release sent now may land first). */
  asserting(id: string): boolean {
    return (this.calls.get(id)?.asserting ?? 0) > 0;
  }

  /** A re-assertion of `calls` is on its way (true) or answered, or never sent (false). */
  assertingAll(calls: readonly LedgerCall[], on: boolean): void {
    for (const c of calls) this.assertingOne(c, on);
  }

  /** A re-assertion of call `c` is on its way (true) or answered, or never sent (false). */
  assertingOne(c: LedgerCall, on: boolean): void {
    const n = (c.entry.asserting ?? 0) + (on ? 1 : -1);
    c.entry.asserting = n > 0 ? n : undefined;
  }

  /**
   * The calls still holding at `now` (µs), grouped by tag (those that ended are forgotten on the
   * way): `holding` only those holding a channel somewhere.
   */
  byTag(now: number, holding = true, releasing = true): Map<string, LedgerCall[]> {
    const tags = new Map<string, LedgerCall[]>();
    for (const [id, entry] of this.calls) this.collect(id, entry, now, holding, releasing, tags);
    return tags;
  }

  /**
   * The calls byTag reads, one by one, in the ledger's order (`only`: the holds to read, default
   * all), the event loop turning every `step` entries: a ledger of calls in progress can hold
   * hundreds of thousands, and read at once (40,000 calls: 13-16 ms on a 2-core sandbox) it
   * stopped every decision of the process meanwhile. `each` hears a call before the loop turns
   * (a release sent from then on sees what it marked); a promise it returns is awaited before
   * the next (the holds keeper's bound on batches in flight), so that no more of the ledger is
   * read into objects than is being written: kept whole for a pass, one object per call was
   * copied by every young collection of the pass (5-9 ms pauses at 40,000 calls). The entries
   * there at the start are read; entries added meanwhile may be, dropped ones are not.
   */
  async eachInSteps(
    now: number,
    holding: boolean,
    releasing: boolean,
    only: ((hold: LedgerHold) => boolean) | undefined,
    each: (call: LedgerCall) => void | Promise<void>,
    step = 4096,
  ): Promise<void> {
    const out: LedgerCall[] = [];
    let left = this.calls.size;
    let seen = 0;
    for (const [id, entry] of this.calls) {
      if (left-- <= 0) break;
      this.collect(id, entry, now, holding, releasing, undefined, out, only);
      for (const call of out) {
        const wait = each(call);
        if (wait !== undefined) await wait;
      }
      out.length = 0;
      if (++seen % step === 0) await new Promise<void>((resolve) => setImmediate(resolve));
    }
  }

  /** One ledger entry into `tags` and `out` (each when given), ended sides forgotten (byTag). */
  private collect(
    id: string,
    entry: LedgerEntry,
    now: number,
    holding: boolean,
    releasing: boolean,
    tags: Map<string, LedgerCall[]> | undefined,
    out?: LedgerCall[],
    only?: (hold: LedgerHold) => boolean,
  ): void {
    if (!releasing && entry.releasing) return;
    for (const direction of ['in', 'out'] as const) {
      const hold = entry[direction];
      if (hold === undefined) continue;
      if (hold.end <= now) {
        delete entry[direction];
        continue;
      }
      if (holding && holdNames(hold).length === 0) continue;
      if (only !== undefined && !only(hold)) continue;
      const call = { id, direction, hold, entry };
      if (tags !== undefined) {
        let list = tags.get(hold.tag);
        if (list === undefined) tags.set(hold.tag, (list = []));
        list.push(call);
      }
      out?.push(call);
    }
    if (entry.in === undefined && entry.out === undefined) this.calls.delete(id);
  }
}
