/**
 * A deliberately naive reference model of callgate's contract (DESIGN.md, "Decisions" and
 * "Semantics"), written from the contract alone. It shares no code with src/: plain arrays,
 * linear scans, no cleverness. Slow on purpose; obviously correct is the only goal.
 *
 * Use: runModel(config, calls) with config in the contract's JSON form and calls already in
 * processing order (time order, equal times in file order); loadTraceForModel reads a trace CSV
 * into that order with its own simple time parser.
 */
import { readFileSync } from 'node:fs';
import { parse } from 'csv-parse/sync';

// ------------------------------------------------------------------ inputs and outputs

export interface ModelCall {
  /** Integer microseconds since the epoch. */
  time: number;
  callId: string;
  direction: 'in' | 'out';
  peer?: string;
  account?: string;
  route?: string[];
  /** How long the call lasted, µs; absent when its end was never reported. */
  durationUs?: number;
}

export interface InDecision {
  call_id: string;
  direction: 'in';
  outcome: 'admitted' | 'rejected';
  limited_by?: string;
  reason?: 'rate' | 'channels';
  duplicate?: true;
}

export interface OutDecision {
  call_id: string;
  direction: 'out';
  outcome: 'dispatched' | 'rejected';
  carrier: string | null;
  delay_ms: number | null;
  rerouted_from: string[];
  reason?: 'all-routes-congested';
  /** Route ids that are not configured carriers, in route order (a field besides the contract's). */
  skipped?: string[];
}

export type Decision = InDecision | OutDecision;

/** A bucket list entry: a rate limit, or `{ channels: N }`. */
interface EntryJson {
  limit?: number;
  window?: string;
  algorithm?: string;
  channels?: number;
}

interface ConfigJson {
  maxCallDuration?: string;
  inbound?: {
    global?: EntryJson[];
    accounts?: Record<string, EntryJson[]>;
    peers?: Record<string, EntryJson[]>;
    defaultPeer?: EntryJson[];
  };
  outbound?: {
    carriers?: Record<string, { cps: number; maxWait?: string; channels?: number }>;
  };
}

// ------------------------------------------------------------------ durations

/** `PT1S`, `PT0.5S`, `PT30M`, `PT1H`, `P1D`, `PT1M30S`, or `500ms` / `1s` / `1m` / `1h`, in µs. */
export function durationUs(text: string): number {
  const short = /^(\d+(?:\.\d+)?)(ms|s|m|h)$/.exec(text);
  if (short) {
    const unit = { ms: 1e3, s: 1e6, m: 60e6, h: 3600e6 }[short[2] as 'ms' | 's' | 'm' | 'h'];
    return Math.round(Number(short[1]) * unit);
  }
  const iso = /^P(?:(\d+(?:\.\d+)?)D)?(?:T(?:(\d+(?:\.\d+)?)H)?(?:(\d+(?:\.\d+)?)M)?(?:(\d+(?:\.\d+)?)S)?)?$/.exec(
    text,
  );
  if (iso && text !== 'P' && text !== 'PT') {
    const [, d, h, m, s] = iso;
    return Math.round(
      Number(d ?? 0) * 86400e6 + Number(h ?? 0) * 3600e6 + Number(m ?? 0) * 60e6 + Number(s ?? 0) * 1e6,
    );
  }
  throw new Error(`model: bad duration ${JSON.stringify(text)}`);
}

// ------------------------------------------------------------------ the model

interface ModelLimit {
  limit: number;
  windowUs: number;
  algorithm: 'sliding-log' | 'sliding-window' | 'fixed-window';
}

function limitsOf(list: EntryJson[]): ModelLimit[] {
  return list
    .filter((l) => l.channels === undefined)
    .map((l) => {
      const algorithm = (l.algorithm ?? 'sliding-log') as ModelLimit['algorithm'];
      if (!['sliding-log', 'sliding-window', 'fixed-window'].includes(algorithm)) {
        throw new Error(`model: bad algorithm ${l.algorithm}`);
      }
      return { limit: l.limit!, windowUs: durationUs(l.window!), algorithm };
    });
}

/** The bucket's channel limit N, if its list has `{ channels: N }`. */
function channelsOf(list: EntryJson[]): number | undefined {
  return list.find((l) => l.channels !== undefined)?.channels;
}

/** Calls in progress at t: holds whose end is after t. */
function inProgress(ends: number[], t: number): number {
  let n = 0;
  for (const e of ends) if (e > t) n++;
  return n;
}

function own<T>(obj: Record<string, T> | undefined, key: string): T | undefined {
  return obj !== undefined && Object.hasOwn(obj, key) ? obj[key] : undefined;
}

/** Does a bucket whose admitted calls are `log` have room at time t under limit `lim`? */
function hasRoom(log: number[], lim: ModelLimit, t: number): boolean {
  const W = lim.windowUs;
  if (lim.algorithm === 'sliding-log') {
    let n = 0;
    for (const s of log) if (t - W < s && s <= t) n++;
    return n < lim.limit;
  }
  const k = Math.floor(t / W);
  let c = 0;
  let p = 0;
  for (const s of log) {
    if (Math.floor(s / W) === k) c++;
    if (Math.floor(s / W) === k - 1) p++;
  }
  if (lim.algorithm === 'fixed-window') return c < lim.limit;
  const f = (t % W) / W;
  return c + p * (1 - f) < lim.limit;
}

/**
 * Decisions for `calls` (in processing order) under `config` (the contract's JSON form).
 *
 * Beyond the contract's text, as callgate decides (one call record per call id and direction):
 * - a repeated admit of a call id whose earlier admission still holds a channel (it held one in
 *   a bucket with a channel limit and its end is after t), on a path that has a channel limit, is
 *   admitted again and counted nowhere (`duplicate`);
 * - an outbound call that gets a carrier drops the hold of an earlier outbound call of its id.
 */
export function runModel(config: unknown, calls: readonly ModelCall[]): Decision[] {
  const cfg = (config ?? {}) as ConfigJson;
  const inbound = cfg.inbound ?? {};
  const carriers = cfg.outbound?.carriers ?? {};
  const maxCallUs = durationUs(cfg.maxCallDuration ?? 'PT4H');

  // Admitted call times and hold ends, one list each per bucket.
  const globalLog: number[] = [];
  const accountLogs = new Map<string, number[]>();
  const peerLogs = new Map<string, number[]>();
  const globalEnds: number[] = [];
  const accountEnds = new Map<string, number[]>();
  const peerEnds = new Map<string, number[]>();
  // Per call id, the end of its inbound holds (only calls that hold somewhere).
  const inboundEnd = new Map<string, number>();
  // Latest slot given and hold ends, per carrier.
  const lastSlot = new Map<string, number>();
  const carrierEnds = new Map<string, number[]>();
  // Per call id, its outbound hold: the carrier's list and the end in it.
  const outboundHold = new Map<string, { ends: number[]; end: number }>();
  const listOf = (m: Map<string, number[]>, k: string): number[] => {
    if (!m.has(k)) m.set(k, []);
    return m.get(k)!;
  };

  const out: Decision[] = [];
  for (const call of calls) {
    const t = call.time;
    const end = (start: number) => start + (call.durationUs ?? maxCallUs);
    if (call.direction === 'in') {
      const peer = call.peer!;
      const peerLimits = own(inbound.peers, peer) ?? inbound.defaultPeer;
      if (peerLimits === undefined) {
        out.push({ call_id: call.callId, direction: 'in', outcome: 'rejected', limited_by: 'unknown-peer' });
        continue;
      }
      const checks: { name: string; limits: ModelLimit[]; channels?: number; log: number[]; ends: number[] }[] = [];
      if (inbound.global !== undefined) {
        checks.push({
          name: 'global',
          limits: limitsOf(inbound.global),
          channels: channelsOf(inbound.global),
          log: globalLog,
          ends: globalEnds,
        });
      }
      if (call.account !== undefined) {
        const accLimits = own(inbound.accounts, call.account);
        if (accLimits !== undefined) {
          checks.push({
            name: `account:${call.account}`,
            limits: limitsOf(accLimits),
            channels: channelsOf(accLimits),
            log: listOf(accountLogs, call.account),
            ends: listOf(accountEnds, call.account),
          });
        }
      }
      checks.push({
        name: `peer:${peer}`,
        limits: limitsOf(peerLimits),
        channels: channelsOf(peerLimits),
        log: listOf(peerLogs, peer),
        ends: listOf(peerEnds, peer),
      });

      const previous = inboundEnd.get(call.callId);
      if (checks.some((c) => c.channels !== undefined) && previous !== undefined && previous > t) {
        out.push({ call_id: call.callId, direction: 'in', outcome: 'admitted', duplicate: true });
        continue;
      }
      let refusal: { limited_by: string; reason: 'rate' | 'channels' } | undefined;
      for (const check of checks) {
        if (!check.limits.every((lim) => hasRoom(check.log, lim, t))) {
          refusal = { limited_by: check.name, reason: 'rate' };
          break;
        }
        if (check.channels !== undefined && inProgress(check.ends, t) >= check.channels) {
          refusal = { limited_by: check.name, reason: 'channels' };
          break;
        }
      }
      if (refusal !== undefined) {
        out.push({ call_id: call.callId, direction: 'in', outcome: 'rejected', ...refusal });
      } else {
        let holds = false;
        for (const check of checks) {
          check.log.push(t);
          if (check.channels !== undefined) {
            check.ends.push(end(t));
            holds = true;
          }
        }
        if (holds && end(t) > t) inboundEnd.set(call.callId, end(t));
        out.push({ call_id: call.callId, direction: 'in', outcome: 'admitted' });
      }
    } else {
      const tried: string[] = [];
      let decision: OutDecision | undefined;
      for (const id of call.route ?? []) {
        const carrier = own(carriers, id);
        if (carrier === undefined) continue; // not configured: skipped, not listed
        const interval = 1e6 / carrier.cps;
        const maxWait = carrier.maxWait === undefined ? 0 : durationUs(carrier.maxWait);
        const last = lastSlot.get(id);
        const slot = last === undefined ? t : Math.max(t, last + interval);
        const wait = slot - t;
        const ends = listOf(carrierEnds, id);
        const full = carrier.channels !== undefined && inProgress(ends, t) >= carrier.channels;
        if (wait <= maxWait && !full) {
          lastSlot.set(id, slot);
          const old = outboundHold.get(call.callId);
          if (old !== undefined) old.ends.splice(old.ends.indexOf(old.end), 1);
          outboundHold.delete(call.callId);
          if (carrier.channels !== undefined && end(slot) > t) {
            ends.push(end(slot));
            outboundHold.set(call.callId, { ends, end: end(slot) });
          }
          decision = {
            call_id: call.callId,
            direction: 'out',
            outcome: 'dispatched',
            carrier: id,
            delay_ms: Math.round(wait) / 1000,
            rerouted_from: tried.slice(),
          };
          break;
        }
        tried.push(id);
      }
      const made: OutDecision = decision ?? {
        call_id: call.callId,
        direction: 'out',
        outcome: 'rejected',
        carrier: null,
        delay_ms: null,
        rerouted_from: tried,
        reason: 'all-routes-congested',
      };
      const skipped = (call.route ?? []).filter((id) => own(carriers, id) === undefined);
      out.push(skipped.length > 0 ? { ...made, skipped } : made);
    }
  }
  return out;
}

// ------------------------------------------------------------------ a simple trace loader

/**
 * Trace time to µs, separately from src/: epoch seconds by string arithmetic, ISO via
 * Date.parse on the whole-second part plus the fraction digits.
 */
export function simpleTimeUs(text: string): number {
  const t = text.trim();
  const epoch = /^(\d+)(?:\.(\d+))?$/.exec(t);
  if (epoch) return Number(epoch[1]) * 1e6 + Number((epoch[2] ?? '').padEnd(6, '0').slice(0, 6));
  const iso = /^(\d{4}-\d\d-\d\d)[T ](\d\d:\d\d:\d\d)(?:\.(\d+))?(Z|[+-]\d\d:?\d\d)$/.exec(t);
  if (!iso) throw new Error(`model: bad time ${JSON.stringify(text)}`);
  let zone = iso[4]!;
  if (zone !== 'Z' && !zone.includes(':')) zone = `${zone.slice(0, 3)}:${zone.slice(3)}`;
  const ms = Date.parse(`${iso[1]}T${iso[2]}${zone}`);
  if (Number.isNaN(ms)) throw new Error(`model: bad time ${JSON.stringify(text)}`);
  return ms * 1000 + Number((iso[3] ?? '').padEnd(6, '0').slice(0, 6));
}

/** A trace CSV as ModelCalls in processing order (stable sort by time). Whole file in memory. */
export function loadTraceForModel(path: string): ModelCall[] {
  const rows = parse(readFileSync(path), {
    columns: (h: string[]) => h.map((s) => s.trim()),
    bom: true,
    comment: '#',
    comment_no_infix: true,
    skip_empty_lines: true,
  }) as Record<string, string>[];
  const calls = rows.map((r): ModelCall => {
    const call: ModelCall = {
      time: simpleTimeUs(r.time!),
      callId: r.call_id!,
      direction: r.direction!.trim() as 'in' | 'out',
    };
    if (r.peer !== undefined && r.peer.trim() !== '') call.peer = r.peer;
    if (r.account !== undefined && r.account.trim() !== '') call.account = r.account;
    if (r.route !== undefined) {
      const route = r.route
        .split('|')
        .map((s) => s.trim())
        .filter((s) => s !== '');
      if (route.length > 0) call.route = route;
    }
    const d = r.duration?.trim() ?? '';
    if (d !== '') call.durationUs = /^\d+(\.\d+)?$/.test(d) ? simpleTimeUs(d) : durationUs(d);
    return call;
  });
  return calls
    .map((c, i) => ({ c, i }))
    .sort((a, b) => a.c.time - b.c.time || a.i - b.i)
    .map((x) => x.c);
}

/** Decisions of a committed fixture pair (`fixtures/NAME.config.json` + `NAME.trace.csv`). */
export function modelFixture(dir: string, name: string): { calls: ModelCall[]; decisions: Decision[] } {
  const config: unknown = JSON.parse(readFileSync(`${dir}/${name}.config.json`, 'utf8'));
  const calls = loadTraceForModel(`${dir}/${name}.trace.csv`);
  return { calls, decisions: runModel(config, calls) };
}
