/**
 * The keeper of a RedisStore's holds: the process's call ledger (src/holds/ledger.ts) written
 * again when Redis may have lost it.
 *
 * When. After every loss of the connection (a restart, a failover, a network cut: on a Cluster,
 * one node's, or a master deposed while its connection stayed open), once Redis answers again,
 * every call of the ledger is re-asserted in mode `lost` (lua/reassert.lua: a missing record is
 * written again, with its original end); and every `syncMs` in mode `sync`, which finds a tag
 * whose generation marker changed without the connection noticing (FLUSHALL, eviction), writes
 * the calls decided by policy while Redis was away, and forgets the calls released by another
 * process (their record is gone under an unchanged marker). The hot path pays nothing: no
 * decision script reads the marker.
 *
 * Decisions wait. While a tag's calls are being re-asserted after a loss, new admissions and
 * reservations on that tag (single Redis: all) wait for it, bounded by their own deadline (then
 * the store-trouble policy decides, as for any outage): a decision taken meanwhile would count
 * against holds that are about to come back. When the marker was missing (Redis came back
 * empty), they wait until the marker's recovery grace ends too, which gives the other processes
 * the time to reconnect and write theirs. Calls decided by policy (the store away or stalled)
 * hold back the decisions of their tag until their first write (unwrittenAdded).
 *
 * Releases of other processes. A release this process sent in the last `recentMs` is sent
 * again after a loss, leaving a tombstone, so that a process re-asserting that call afterwards
 * does not bring it back (and one that did has it dropped again).
 *
 * Releases racing a re-assertion. A re-assertion reads its calls from the ledger, then writes
 * them; a release of one of them that lands in between finds the record (or nothing), drops it,
 * and the write brings the call back, held until its end. Rather than order the two (which the
 * store cannot: a release may already be on its way, or waiting for the connection, when the
 * loss is seen), a release that may have raced a write is sent again once it has landed, leaving
 * a tombstone (releaseDone). It may have raced one when, from the moment it was sent (after any
 * wait for the recovery, see recovered()) to the moment it was answered:
 * - a re-assertion that read its call was not answered yet when it was sent (the ledger's
 *   `asserting` mark: a sync's read leaves out the calls already being released), or
 * - a loss was seen (a `lost` read takes the calls being released too, and this process is not
 *   the only one re-asserting: another process's write may come after this release too).
 * Any other release cannot race a write of its call: a read after the release was answered no
 * longer finds the call (the ledger forgets it then), and a write answered before the release
 * was sent landed before it. And a release sent again leaves its tombstone whatever the order:
 * a write landed before it is dropped, one landing after it finds the tombstone and skips the
 * call (lua/reassert.lua), within `tombstoneMs`. So no call is held after its release was
 * answered, by construction, not by timing. Only such releases pay the second script call.
 */
import { randomBytes } from 'node:crypto';
import type { SafeEmitter } from '../../events.js';
import { holdNames, reassertCall, type HoldLedger, type LedgerCall } from '../../holds/ledger.js';
import { MAX_REASSERT_CALLS, SYNC_BATCH_CALLS } from '../reassert.js';
import type { ReassertRequest, ReassertResult, StoreEvents } from '../types.js';

export interface HoldsKeeperOptions {
  readonly ledger: HoldLedger;
  readonly events: SafeEmitter<StoreEvents>;
  /** Whether keys carry hash tags (Cluster): then decisions wait per tag, else all together. */
  readonly hashTags: boolean;
  /** Redis' time now, µs, as well as the process knows it. */
  readonly now: () => number;
  readonly reassert: (req: ReassertRequest) => Promise<ReassertResult>;
  /** Send again the release of a call whose records were `groups`, leaving tombstones. */
  readonly resend: (id: string, groups: readonly (readonly string[])[]) => Promise<void>;
  /** Whether the connection is ready now. */
  readonly ready: () => boolean;
  /** The Redis instance behind the connection (INFO server run_id; '' unknown, as on a Cluster). */
  readonly instance: () => Promise<string>;
  readonly syncMs: number;
  readonly graceMs: number;
  /** How long a tombstone lasts, ms. */
  readonly tombstoneMs: number;
  readonly recentMs: number;
}

/** Pause between attempts while Redis still does not answer, ms. */
const RETRY_MS = 200;
/** The second sync after the first connection, ms. */
const SECOND_LOOK_MS = 1_000;
/** Releases kept for sending again after a loss, at most. */
const MAX_RECENT = 10_000;

/** What a release may have raced, noted when it is sent (HoldsKeeper.releaseSent). */
export interface ReleaseTicket {
  /** Losses seen before it was sent. */
  readonly losses: number;
  /** A re-assertion of its call was on its way when it was sent. */
  readonly asserting: boolean;
}

export class HoldsKeeper {
  /** Per lane (tag, or '' on a single Redis): decisions wait for this while its calls are re-asserted. */
  private readonly gates = new Map<string, Promise<void>>();
  /**
   * Per lane, while calls decided by policy (unwritten) wait for their first write: decisions
   * there wait too. `added`: calls made unwritten so far (a pass opens the gate only when none
   * came after it read the ledger).
   */
  private readonly unwrittenGates = new Map<string, { gate: Promise<void>; open: () => void; added: number }>();
  /** The marker token last seen per tag (single Redis: under '', one for all). */
  /** This process's id among those sharing the store (lua/reassert.lua, KEYS[2]). */
  private readonly id = randomBytes(6).toString('base64url');
  /** Per lane, the other processes seen there before the latest loss: with none, nobody waits for them. */
  private readonly peers = new Map<string, { others: number; looks: number }>();
  /** The Redis instance last seen ('' unknown). */
  private instance = '';
  /** A lost-mode run found another instance (a failover): it restarts the grace. */
  private moved = false;
  private readonly tokens = new Map<string, string>();
  /** Releases sent lately: call id -> when (ms) and its record keys, in order. */
  private readonly recent = new Map<string, { at: number; groups: readonly (readonly string[])[] }>();
  /** A loss was seen and its re-assertion has not succeeded yet. */
  private lostPending = false;
  /** Set from a loss until its re-assertion succeeded: releases and refreshes wait for it (not for the grace). */
  private recovering?: { done: Promise<void>; resolve: () => void };
  private running?: Promise<void>;
  /** Ends of the grace waits in progress (openAfter), for close(). */
  private readonly graceWaits = new Set<() => void>();
  private syncTimer?: NodeJS.Timeout;
  private retryTimer?: NodeJS.Timeout;
  private secondLook?: NodeJS.Timeout;
  /** whenFree's timers, by name. */
  private readonly freeTimers = new Map<'unwritten' | 'sync', NodeJS.Timeout>();
  private closed = false;
  /** When the last loss of the connection was seen (ms), 0: never. */
  private lastLoss = 0;
  /** Losses of the connection seen so far (a release that spans one is sent again: releaseDone). */
  private losses = 0;

  constructor(private readonly opts: HoldsKeeperOptions) {
    opts.ledger.onUnwritten = (tag) => this.unwrittenAdded(tag);
    if (opts.syncMs > 0) {
      this.syncTimer = setInterval(() => this.kick('sync'), opts.syncMs);
      this.syncTimer.unref();
    }
  }

  /** The wait a new decision on `tag` must make first, if any (undefined: none, the common case). */
  gate(tag: string): Promise<void> | undefined {
    if (this.gates.size === 0 && this.unwrittenGates.size === 0) return undefined;
    const lane = this.opts.hashTags ? tag : '';
    const lost = this.gates.get(lane);
    const unwritten = this.unwrittenGates.get(lane)?.gate;
    // a decision waits for the calls decided by policy: write them now, not at the next look
    if (unwritten !== undefined) this.writeUnwrittenNow();
    if (lost === undefined || unwritten === undefined) return lost ?? unwritten;
    return Promise.all([lost, unwritten]).then(() => undefined);
  }

  /**
   * The wait a release or refresh must make first, if any: until this process's calls are back
   * after a loss, so that a release of one of them finds it (and answers `released`).
   */
  recovered(): Promise<void> | undefined {
    return this.recovering?.done;
  }

  /**
   * The connection (or one Cluster node's) was lost: what Redis holds may not be what it held.
   * `on`: the tags that node serves (a Cluster node), whose decisions wait; else every tag's.
   */
  lost(on?: (tag: string) => boolean): void {
    if (this.closed) return;
    this.lostPending = true;
    this.lastLoss = Date.now();
    this.losses++;
    if (this.recovering === undefined) {
      let resolve!: () => void;
      const done = new Promise<void>((r) => (resolve = r));
      this.recovering = { done, resolve };
    }
    // decisions wait from now on: until Redis answers and the calls are back
    for (const lane of this.lanes()) if (on === undefined || on(lane)) this.closeGate(lane);
    // a Cluster client stays 'ready' while one node fails over: try until that node answers
    this.retryLater();
  }

  /**
   * A call decided by policy while Redis did not answer entered the ledger: write it as soon as
   * Redis answers. After a lost connection the re-assertion does; after a stall (no connection
   * lost) nothing else would before the next sync (never with `syncMs` 0), and meanwhile other
   * processes' decisions would not count its channels.
   */
  private unwrittenAdded(tag: string): void {
    // decisions on its lane wait for the write: taken on Redis before it, they would not count
    // this call (a local admission during a stall, then a decision as Redis wakes)
    const lane = this.opts.hashTags ? tag : '';
    const held = this.unwrittenGates.get(lane);
    if (held !== undefined) held.added++;
    else {
      let open!: () => void;
      const gate = new Promise<void>((resolve) => (open = resolve));
      this.unwrittenGates.set(lane, { gate, open, added: 1 });
    }
    this.writeUnwrittenSoon();
  }

  /** A pass of the calls decided by policy once Redis answers (again after a failed one). */
  private writeUnwrittenSoon(): void {
    this.whenFree('unwritten', () => this.writeUnwrittenNow());
  }

  /** That pass now, unless a run is under way (it writes them too) or Redis is away. */
  private writeUnwrittenNow(): void {
    if (this.closed || this.running !== undefined || this.lostPending || !this.opts.ready()) return;
    this.running = this.run('unwritten')
      .catch(() => this.writeUnwrittenSoon())
      .finally(() => (this.running = undefined));
  }

  /** A whole sync pass as soon as none runs (an unwritten pass found the marker changed). */
  private syncSoon(): void {
    this.whenFree('sync', () => this.kick('sync'));
  }

  /**
   * `start` once no run is under way and Redis answers, looked at every RETRY_MS: a run under way
   * may be waiting on a stalled Redis (a lost pass, pending or running, writes unwritten calls
   * too). One timer per name.
   */
  private whenFree(name: 'unwritten' | 'sync', start: () => void): void {
    if (this.closed || this.freeTimers.has(name)) return;
    const timer = setTimeout(() => {
      this.freeTimers.delete(name);
      if (this.closed) return;
      if (this.running !== undefined || this.lostPending || !this.opts.ready()) this.whenFree(name, start);
      else start();
    }, RETRY_MS);
    timer.unref();
    this.freeTimers.set(name, timer);
  }

  private retryLater(): void {
    if (this.closed || this.retryTimer !== undefined) return;
    this.retryTimer = setTimeout(() => {
      this.retryTimer = undefined;
      if (this.lostPending) this.kick('lost');
      if (this.lostPending) this.retryLater();
    }, RETRY_MS);
    this.retryTimer.unref();
  }

  /** Redis answers (the connection is ready): after a loss, re-assert; the first time, learn the markers. */
  ready(): void {
    if (this.lostPending) this.kick('lost');
    else if (this.tokens.size === 0 && this.opts.syncMs > 0) {
      this.kick('sync');
      // a second look soon after: who else shares the store (see reassertTag, the grace)
      clearTimeout(this.secondLook);
      this.secondLook = setTimeout(() => this.kick('sync'), SECOND_LOOK_MS);
      this.secondLook.unref();
    }
  }

  /**
   * The tombstone a release leaves beside a record it finds missing ('' none): from a loss until
   * `recentMs` after it (a call released during or soon after an outage may not be written back
   * yet by the process that admitted it).
   */
  tombstoneMs(): string {
    return this.lastLoss > 0 && Date.now() - this.lastLoss < this.opts.recentMs ? String(this.opts.tombstoneMs) : '';
  }

  /** A release of call `id` (live time) is being sent now, after any wait for the recovery: what it may race. */
  releaseSent(id: string): ReleaseTicket {
    return { losses: this.losses, asserting: this.opts.ledger.asserting(id) };
  }

  /**
   * The release of call `id` (live time) was answered, its records were `groups`: kept for a
   * re-send after a loss, and sent again now, leaving tombstones, when it may have raced a
   * re-assertion of the call (see the top of this file). A failed re-send is left to the next
   * loss (the release is among the recent ones then).
   */
  async releaseDone(id: string, groups: readonly (readonly string[])[], ticket: ReleaseTicket): Promise<void> {
    this.released(id, groups);
    if (!ticket.asserting && ticket.losses === this.losses) return;
    await this.opts.resend(id, groups).catch(() => undefined);
  }

  /**
   * A call was released from this process: its record keys, for a re-send after a loss. Those of
   * an earlier release of the id are kept too: a retry of a deferred release finds no record
   * (nor locator) where the first attempt, answered late, dropped them, and that attempt may
   * have landed on a master deposed before its replica copied it.
   */
  released(id: string, groups: readonly (readonly string[])[]): void {
    const before = this.recent.get(id)?.groups ?? [];
    this.recent.delete(id);
    if (this.recent.size >= MAX_RECENT) this.recent.delete(this.recent.keys().next().value!);
    const same = (a: readonly string[], b: readonly string[]) => a.length === b.length && a.every((k, i) => k === b[i]);
    this.recent.set(id, {
      at: Date.now(),
      groups: [...before.filter((g) => !groups.some((h) => same(g, h))), ...groups],
    });
  }

  private lanes(): string[] {
    if (!this.opts.hashTags) return [''];
    return [...this.opts.ledger.byTag(this.opts.now()).keys()];
  }

  private closeGate(lane: string): void {
    if (this.gates.has(lane)) return;
    let open!: () => void;
    const gate = new Promise<void>((resolve) => (open = resolve));
    (gate as Promise<void> & { open?: () => void }).open = open;
    this.gates.set(lane, gate);
  }

  private openGate(lane: string): void {
    const gate = this.gates.get(lane) as (Promise<void> & { open?: () => void }) | undefined;
    if (gate === undefined) return;
    this.gates.delete(lane);
    gate.open?.();
  }

  /** A sync pass now (after the one running, if any): writes the calls marked unwritten; rejects on failure. */
  async runNow(): Promise<void> {
    await this.running;
    const run = this.run('sync');
    this.running = run.catch(() => undefined).finally(() => (this.running = undefined));
    await run;
  }

  /** Start a run of `mode` unless one runs; a loss seen meanwhile runs again after it. */
  private kick(mode: 'lost' | 'sync'): void {
    if (this.closed || this.running) return;
    if (!this.opts.ready()) return; // 'ready' kicks again
    const lost = mode === 'lost' || this.lostPending;
    this.lostPending = false;
    this.running = this.run(lost ? 'lost' : 'sync')
      .catch(() => {
        if (lost) this.lostPending = true;
      })
      .finally(() => {
        this.running = undefined;
        if (this.lostPending) this.retryLater();
      });
  }

  /**
   * One pass over the ledger; throws when Redis failed meanwhile (a `lost` pass is then retried).
   * `unwritten`: only the calls decided by policy, never written yet (unwrittenAdded).
   */
  private async run(mode: PassMode): Promise<void> {
    // the calls made unwritten so far, per lane: this pass writes them (it reads the ledger after)
    const unwrittenBefore = new Map([...this.unwrittenGates].map(([lane, g]) => [lane, g.added]));
    // another instance behind the connection (a failover, a restart): its data may lag
    // (read after a loss, and once to know it: a sync pays nothing more)
    const instance = mode === 'lost' || this.instance === '' ? await this.opts.instance().catch(() => '') : '';
    if (instance !== '') {
      this.moved = mode === 'lost' && this.instance !== '' && instance !== this.instance;
      this.instance = instance;
    } else if (mode === 'lost') this.moved = false;
    if (mode === 'lost') await this.resendRecent();
    // every batch of the pass compares with the markers seen before it (a first batch may write
    // a missing marker anew: the later ones must still see that it changed)
    const tokens = new Map(this.tokens);
    const passes = new Map<string, TagPass>();
    const passOf = (tag: string): TagPass => {
      let pass = passes.get(tag);
      if (pass === undefined) {
        const lane = this.opts.hashTags ? tag : '';
        pass = newTagPass(tag, lane, tokens.get(lane) ?? '', mode);
        passes.set(tag, pass);
      }
      return pass;
    };
    // the calls read and not yet in a batch, and the batches sent and not answered: both bounded,
    // so that a pass holds a few hundred of the ledger's calls as objects, not all of them
    let pending = 0;
    let inFlight = 0;
    // after a loss decisions wait for the pass: more at once; a sync runs beside them: few
    const maxInFlight = mode === 'lost' ? LOST_BATCHES_IN_FLIGHT : SYNC_BATCHES_IN_FLIGHT;
    let wake: (() => void) | undefined;
    const send = (pass: TagPass, lost: boolean, batch: LedgerCall[]): void => {
      inFlight++;
      pass.chain = pass.chain
        .then(() => this.sendBatch(pass, lost, batch))
        .finally(() => {
          inFlight--;
          const w = wake;
          wake = undefined;
          w?.();
        });
    };
    // policy-decided calls were never written: whatever the mode, a missing record means not yet
    const flush = (pass: TagPass, all: boolean): void => {
      for (const [i, list] of pass.pending.entries()) {
        const lost = i === 0 || mode === 'lost';
        const size = lost ? MAX_REASSERT_CALLS : SYNC_BATCH_CALLS;
        while (list.length >= size || (all && list.length > 0)) {
          const batch = list.splice(0, size);
          pending -= batch.length;
          send(pass, lost, batch);
        }
      }
    };
    // a sync leaves the calls being released alone; after a loss their releases wait for this
    // run. Each call is marked as read at once: until its write is answered, a release sent of
    // it may land first
    await this.opts.ledger.eachInSteps(
      this.opts.now(),
      true,
      mode === 'lost',
      mode === 'unwritten' ? (hold) => hold.unwritten === true : undefined,
      (call) => {
        this.opts.ledger.assertingOne(call, true);
        const pass = passOf(call.hold.tag);
        pass.checked++;
        pass.pending[call.hold.unwritten === true ? 0 : 1].push(call);
        pending++;
        flush(pass, false);
        // calls over many tags, each short of a batch: send what is read
        if (pending > MAX_PENDING_CALLS) for (const p of passes.values()) flush(p, true);
        if (inFlight < maxInFlight) return undefined;
        return new Promise<void>((resolve) => (wake = resolve));
      },
    );
    for (const pass of passes.values()) flush(pass, true);
    // on a single Redis one marker serves every tag: read it even when the ledger is empty
    if (!this.opts.hashTags && passes.size === 0 && mode !== 'unwritten') send(passOf('in'), mode === 'lost', []);
    await Promise.all([...passes.values()].map((pass) => pass.chain));
    let failed: unknown;
    let graceUntilMs = 0;
    await Promise.all(
      [...passes.values()].map(async (pass) => {
        if (pass.failed !== undefined) {
          failed = pass.failed;
          return;
        }
        const until = this.finishTag(pass, mode);
        if (until > graceUntilMs) graceUntilMs = until;
        // gates open after a re-assertion only (a sync must not open those a loss closed
        // meanwhile); the grace is waited out beside the run, not in it: a write asked for
        // meanwhile (a reload's, runNow) waits for the run's writes, not for the grace
        if (this.opts.hashTags && mode === 'lost') void this.openAfter(pass.tag, until, this.losses);
      }),
    );
    if (failed !== undefined) throw failed;
    // every pass writes the calls decided by policy that it read: their lanes decide again,
    // unless more such calls came since it began (the pass for them opens it)
    for (const [lane, added] of unwrittenBefore) {
      const held = this.unwrittenGates.get(lane);
      if (held === undefined || held.added !== added) continue;
      this.unwrittenGates.delete(lane);
      held.open();
    }
    if (mode !== 'lost' || this.lostPending) return; // another loss came meanwhile: its own run opens
    this.recovering?.resolve();
    this.recovering = undefined;
    if (!this.opts.hashTags) void this.openAfter('', graceUntilMs, this.losses);
    // a tag closed at the loss whose calls all ended since has nothing to wait for
    else for (const lane of [...this.gates.keys()]) if (!passes.has(lane)) this.openGate(lane);
  }

  /**
   * Open a lane's gate at `untilMs` (process clock), now if it passed, unless a loss came after
   * the `losses`-th (the grace runs beside the keeper's runs: a later loss's own run opens it).
   */
  private async openAfter(lane: string, untilMs: number, losses: number): Promise<void> {
    if (!this.gates.has(lane)) return;
    const wait = untilMs - Date.now();
    if (wait > 0)
      await new Promise<void>((resolve) => {
        const timer = setTimeout(() => {
          this.graceWaits.delete(stop);
          resolve();
        }, wait).unref();
        // close() ends the wait at once: no timer outlives the store
        const stop = () => {
          clearTimeout(timer);
          resolve();
        };
        this.graceWaits.add(stop);
      });
    if (!this.lostPending && !this.closed && this.losses === losses) this.openGate(lane);
  }

  /** Write (or check) one batch of a tag's calls; a failure stops the tag's later batches. */
  private async sendBatch(pass: TagPass, lost: boolean, batch: LedgerCall[]): Promise<void> {
    if (pass.failed !== undefined) {
      this.opts.ledger.assertingAll(batch, false); // never sent (the next run reads them again)
      return;
    }
    const req: ReassertRequest = {
      tag: pass.tag,
      calls: batch.map(reassertCall),
      mode: lost ? 'lost' : 'sync',
      token: pass.known,
      graceUs: this.opts.graceMs * 1000,
      process: this.id,
      processTtlUs: Math.max(3 * this.opts.syncMs, 15_000) * 1000,
      restartGrace: this.moved,
    };
    let r: ReassertResult;
    try {
      r = await this.opts.reassert(req);
    } catch (err) {
      this.opts.ledger.assertingAll(batch, false); // not on its way (the next run reads it again)
      pass.failed = err;
      return;
    }
    this.opts.ledger.assertingAll(batch, false); // answered: a release sent from now on lands after it
    const { lane, known } = pass;
    if (known !== '' && r.token !== known) pass.changed = true;
    if (r.markerMissing && known !== '') pass.changed = true;
    // a pass of policy decisions alone writes no other call: a marker it finds changed is left
    // to a whole pass (finishTag), which must still compare with the token seen before, or it
    // would take every other call's missing record for a release elsewhere and forget it
    if (pass.mode === 'unwritten') {
      this.noteStatuses(pass, batch, r);
      return;
    }
    this.tokens.set(lane, r.token);
    // the grace waits for other processes' holds: a process that saw no other needs none
    const graceLeftMs = Math.max(0, (r.graceUntil - r.now) / 1000);
    // (one look is not enough: processes started together register one after the other)
    const seen = this.peers.get(lane);
    if (graceLeftMs > 0 && (seen === undefined || seen.looks < 2 || seen.others > 0))
      pass.graceUntilMs = Math.max(pass.graceUntilMs, Date.now() + graceLeftMs);
    // a store that lost its state also lost who was there: keep what was seen before. And a
    // marker still in its grace has not heard from every process yet (they register as they
    // write their calls back): what it says of the others counts only if larger. A sync run
    // just after this process wrote a new marker, before the others' calls came back, read "no
    // other"; at the next empty restart it then took itself for alone, waited for no one, and
    // admitted past a channel limit (test/holds-restart.test.ts)
    if (!r.markerMissing && !pass.changed)
      this.peers.set(lane, {
        others: graceLeftMs > 0 ? Math.max(r.others, seen?.others ?? 0) : r.others,
        looks: (seen?.looks ?? 0) + 1,
      });
    this.noteStatuses(pass, batch, r);
  }

  /** A batch's answer, call by call: forgotten when ended or released, else written (or there). */
  private noteStatuses(pass: TagPass, batch: LedgerCall[], r: ReassertResult): void {
    r.statuses.forEach((status, j) => {
      const c = batch[j]!;
      if (status === 'ended' || status === 'gone') {
        if (status === 'gone') pass.gone++;
        this.opts.ledger.remove(c.id, c.direction);
        return;
      }
      if (status === 'unknown') return;
      const firstWrite = c.hold.unwritten === true;
      c.hold.unwritten = undefined;
      if (status !== 'written') return;
      pass.reasserted += holdNames(c.hold).length;
      if (!firstWrite) pass.restored++;
    });
  }

  /** A tag's pass done: its events; the end of its recovery grace (process clock, ms). */
  private finishTag(pass: TagPass, mode: PassMode): number {
    const { tag, reasserted, gone, checked } = pass;
    // the marker changed under a pass of policy decisions: a whole pass, soon, writes the rest
    if (mode === 'unwritten') {
      if (pass.changed) this.syncSoon();
      if (reasserted > 0 || gone > 0) this.opts.events.safeEmit('holdsReasserted', { tag, reasserted, gone, checked });
      return 0;
    }
    // a call decided by policy written for the first time is no sign that Redis lost anything
    if (pass.restored > 0 || pass.changed)
      this.opts.events.safeEmit('storeLoss', { tag, cause: mode === 'lost' && !pass.changed ? 'reconnect' : 'marker' });
    // after a loss always (it says the holds are back); from a sync only when it changed something
    if (mode === 'lost' || reasserted > 0 || gone > 0)
      this.opts.events.safeEmit('holdsReasserted', { tag, reasserted, gone, checked });
    return pass.graceUntilMs;
  }

  /** Send again the releases of the last `recentMs` (tombstones first, so that no re-assertion brings them back). */
  private async resendRecent(): Promise<void> {
    const since = Date.now() - this.opts.recentMs;
    for (const [id, r] of this.recent) if (r.at < since) this.recent.delete(id);
    const list = [...this.recent];
    for (let i = 0; i < list.length; i += MAX_REASSERT_CALLS) {
      await Promise.all(list.slice(i, i + MAX_REASSERT_CALLS).map(([id, r]) => this.opts.resend(id, r.groups)));
    }
  }

  /** Stop the timers; decisions waiting on a gate go on. */
  async close(): Promise<void> {
    this.closed = true;
    clearInterval(this.syncTimer);
    clearTimeout(this.retryTimer);
    clearTimeout(this.secondLook);
    for (const timer of this.freeTimers.values()) clearTimeout(timer);
    this.freeTimers.clear();
    for (const lane of [...this.gates.keys()]) this.openGate(lane);
    for (const held of this.unwrittenGates.values()) held.open();
    this.unwrittenGates.clear();
    for (const stop of this.graceWaits) stop();
    this.graceWaits.clear();
    this.recovering?.resolve();
    this.recovering = undefined;
    // A run waiting on a Redis that is gone would hold close() until the client gives up (a
    // client passed in is only disconnected by its owner, after close): wait a moment, no more.
    const run = this.running;
    if (run === undefined) return;
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([run, new Promise<void>((resolve) => (timer = setTimeout(resolve, CLOSE_WAIT_MS)))]);
    clearTimeout(timer);
  }
}

/** A pass over the ledger: after a loss, the periodic one, or the first write of policy decisions. */
type PassMode = 'lost' | 'sync' | 'unwritten';

/**
 * A pass's batches in flight at once, at most (one tag's go one after the other): a sync's few,
 * beside the decisions it must not hold up; a re-assertion's more, since decisions wait for it.
 */
const SYNC_BATCHES_IN_FLIGHT = 4;
const LOST_BATCHES_IN_FLIGHT = 16;
/** Calls read and not yet in a batch, at most: past it, every tag's short batch is sent. */
const MAX_PENDING_CALLS = 4096;

/** One tag's part of a pass: its calls waiting for a batch, its batches in order, what they found. */
interface TagPass {
  readonly tag: string;
  /** Its marker's lane: the tag on a Cluster, '' (one marker) on a single Redis. */
  readonly lane: string;
  /** The marker token seen before the pass ('' none yet). */
  readonly known: string;
  readonly mode: PassMode;
  /** Calls read, waiting for a batch: those decided by policy (written whatever the mode), the rest. */
  readonly pending: [LedgerCall[], LedgerCall[]];
  /** Its batches, one after the other. */
  chain: Promise<void>;
  /** A batch failed: the later ones are not sent. */
  failed?: unknown;
  checked: number;
  reasserted: number;
  /** Calls written that Redis had held before (not first writes of policy decisions): a loss. */
  restored: number;
  gone: number;
  changed: boolean;
  graceUntilMs: number;
}

function newTagPass(tag: string, lane: string, known: string, mode: PassMode): TagPass {
  return {
    tag,
    lane,
    known,
    mode,
    pending: [[], []],
    chain: Promise.resolve(),
    checked: 0,
    reasserted: 0,
    restored: 0,
    gone: 0,
    changed: false,
    graceUntilMs: 0,
  };
}

/** How long close() waits for a run in progress (ms). */
const CLOSE_WAIT_MS = 1000;
