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
  caller?: string;
  callee?: string;
  source?: string;
  fields?: Record<string, string>;
}

export interface InDecision {
  call_id: string;
  direction: 'in';
  outcome: 'admitted' | 'rejected';
  limited_by?: string;
  reason?: 'rate' | 'channels' | 'banned';
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

interface AttributeJson {
  name: string;
  key: 'caller' | 'callee' | 'source' | { field: string };
  match?: { prefixes?: string[]; digits?: number; subnet?: number | { v4?: number; v6?: number } };
  limits: EntryJson[];
  overrides?: Record<string, EntryJson[]>;
  order?: 'first' | 'after-global' | 'after-account' | 'last';
  maxValues?: number;
  ban?: { over: number; within: string; for: string };
}

interface ConfigJson {
  maxCallDuration?: string;
  inbound?: {
    global?: EntryJson[];
    accounts?: Record<string, EntryJson[]>;
    peers?: Record<string, EntryJson[]>;
    defaultPeer?: EntryJson[];
    attributes?: AttributeJson[];
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
  // ISO 8601: a decimal comma or dot on any component; weeks of 7 days
  const iso =
    /^P(?:(\d+(?:\.\d+)?)W)?(?:(\d+(?:\.\d+)?)D)?(?:T(?:(\d+(?:\.\d+)?)H)?(?:(\d+(?:\.\d+)?)M)?(?:(\d+(?:\.\d+)?)S)?)?$/.exec(
      text.replaceAll(',', '.'),
    );
  if (iso && text !== 'P' && !text.endsWith('T')) {
    const [, w, d, h, m, s] = iso;
    return Math.round(
      Number(w ?? 0) * 7 * 86400e6 +
        Number(d ?? 0) * 86400e6 +
        Number(h ?? 0) * 3600e6 +
        Number(m ?? 0) * 60e6 +
        Number(s ?? 0) * 1e6,
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
/**
 * A carrier's cps as an exact fraction p / q, from the decimal the configuration wrote (the
 * shortest text of the number: 6.4 is 64 / 10, not the binary double's value).
 */
function cpsFraction(cps: number): [bigint, bigint] {
  const m = /^(\d+)(?:\.(\d+))?(?:e([+-]?\d+))?$/.exec(String(cps));
  if (m === null) throw new Error(`cps ${cps}: not a positive decimal`);
  let p = BigInt(m[1]! + (m[2] ?? ''));
  let q = 10n ** BigInt((m[2] ?? '').length);
  const e = Number(m[3] ?? 0);
  if (e > 0) p *= 10n ** BigInt(e);
  else q *= 10n ** BigInt(-e);
  return [p, q];
}

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
  // c + p (1 - f) < L with f = (t mod W) / W, in exact integers: c W + p (W - t mod W) < L W
  const w = BigInt(W);
  return BigInt(c) * w + BigInt(p) * (w - BigInt(t % W)) < BigInt(lim.limit) * w;
}

// ------------------------------------------------------------------ attribute levels

/** An IPv4 address as 32 bits, or undefined. */
function ipv4Bits(text: string): number | undefined {
  const m = /^(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})$/.exec(text);
  if (!m) return undefined;
  const b = m.slice(1).map(Number);
  if (b.some((x) => x > 255)) return undefined;
  return ((b[0]! * 256 + b[1]!) * 256 + b[2]!) * 256 + b[3]!;
}

/** An IPv6 address as 128 bits (a bigint), or undefined. Written apart from src/ on purpose. */
function ipv6Bits(text: string): bigint | undefined {
  if (!text.includes(':')) return undefined;
  let s = text.split('%')[0]!;
  let tail: string[] = [];
  const dotted = /:(\d+\.\d+\.\d+\.\d+)$/.exec(s);
  if (dotted) {
    const v4 = ipv4Bits(dotted[1]!);
    if (v4 === undefined) return undefined;
    tail = [(v4 >>> 16).toString(16), (v4 & 0xffff).toString(16)];
    s = `${s.slice(0, s.length - dotted[1]!.length)}x`;
    s = s.endsWith('::x') ? s.slice(0, -1) : s.slice(0, -2);
  }
  const halves = s.split('::');
  if (halves.length > 2) return undefined;
  const split = (h: string) => (h === '' ? [] : h.split(':'));
  let groups: string[];
  if (halves.length === 2) {
    const l = split(halves[0]!);
    const r = [...split(halves[1]!), ...tail];
    groups = [...l, ...Array(8 - l.length - r.length).fill('0'), ...r];
  } else groups = [...split(halves[0]!), ...tail];
  if (groups.length !== 8 || !groups.every((g) => /^[0-9a-fA-F]{1,4}$/.test(g))) return undefined;
  return groups.reduce((acc, g) => (acc << 16n) | BigInt(Number.parseInt(g, 16)), 0n);
}

function modelSubnet(addr: string, v4: number, v6: number): string | undefined {
  const v4Net = (a4: number) => {
    const net = Math.floor(a4 / 2 ** (32 - v4)) * 2 ** (32 - v4);
    const parts = [3, 2, 1, 0].map((i) => Math.floor(net / 256 ** i) % 256);
    return `${parts.join('.')}/${v4}`;
  };
  const a4 = ipv4Bits(addr);
  if (a4 !== undefined) return v4Net(a4);
  const a6 = ipv6Bits(addr);
  if (a6 === undefined) return undefined;
  // IPv4-mapped (::ffff:0:0/96), however it is written: its IPv4 address
  if (a6 >> 32n === 0xffffn) return v4Net(Number(a6 & 0xffffffffn));
  const net = (a6 >> BigInt(128 - v6)) << BigInt(128 - v6);
  const groups: string[] = [];
  for (let i = 7; i >= 0; i--) groups.push(((net >> BigInt(16 * i)) & 0xffffn).toString(16));
  return `${groups.join(':')}/${v6}`;
}

/** The value an attribute level counts for a call, or undefined when it does not apply. */
export function modelAttributeValue(level: AttributeJson, call: ModelCall): string | undefined {
  const raw =
    typeof level.key === 'object'
      ? call.fields?.[level.key.field]
      : level.key === 'caller'
        ? call.caller
        : level.key === 'callee'
          ? call.callee
          : call.source;
  if (raw === undefined || raw === '') return undefined;
  const m = level.match;
  if (m === undefined) return raw;
  if (m.prefixes !== undefined) {
    const hits = m.prefixes.filter((p) => raw.startsWith(p)).sort((x, y) => y.length - x.length);
    return hits[0];
  }
  if (m.digits !== undefined) {
    const d = [...raw]
      .filter((c) => c >= '0' && c <= '9')
      .join('')
      .slice(0, m.digits);
    return d === '' ? undefined : d;
  }
  const sub = m.subnet!;
  const v4 = typeof sub === 'number' ? sub : (sub.v4 ?? 32);
  const v6 = typeof sub === 'number' ? 64 : (sub.v6 ?? 128);
  return modelSubnet(raw, v4, v6) ?? raw;
}

/** FNV-1a over UTF-16 code units, as the contract names the shared bucket past maxValues. */
function fnv1a(text: string): number {
  let h = 2166136261;
  for (let i = 0; i < text.length; i++) {
    h = (h ^ text.charCodeAt(i)) >>> 0;
    h = Number((BigInt(h) * 16777619n) % 4294967296n);
  }
  return h;
}

/**
 * Decisions for `calls` (in processing order) under `config` (the contract's JSON form). Every
 * call is a call of its own, whatever its id (the contract knows no call ids beyond naming them):
 * two calls of one id each count and each hold, as a replay decides them (src/replay/row-ids.ts).
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
  // Latest slot given, exactly (µs = n / p, p the numerator of the carrier's cps as a fraction
  // p / q, whose interval is 1e6 q / p µs), and hold ends, per carrier.
  const lastSlot = new Map<string, bigint>();
  const carrierEnds = new Map<string, number[]>();
  // Attribute levels: per bucket (level and value, or level and shared slot) its log, hold
  // ends and ban state.
  const attributes = inbound.attributes ?? [];
  const attrBuckets = new Map<
    string,
    { log: number[]; ends: number[]; span: number; strikes: number; until: number }
  >();
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
      interface Check {
        name: string;
        limits: ModelLimit[];
        channels?: number;
        log: number[];
        ends: number[];
        ban?: {
          threshold: number;
          spanUs: number;
          forUs: number;
          state: { span: number; strikes: number; until: number };
        };
      }
      const checks: Check[] = [];
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

      // attribute levels, each inserted where its order says; levels at one place in the order
      // of their order values (first, after-global, after-account), then configuration order
      const baseNames = checks.map((c) => c.name);
      const rank = new Map<Check, number>();
      const inserted = baseNames.map(() => [] as Check[]);
      const atEnd: Check[] = [];
      const before: Check[] = [];
      for (const level of attributes) {
        const value = modelAttributeValue(level, call);
        if (value === undefined) continue;
        const own = level.overrides !== undefined && Object.hasOwn(level.overrides, value);
        const list = own ? level.overrides![value]! : level.limits;
        const id = level.maxValues !== undefined && !own ? `#${fnv1a(value) % level.maxValues}` : `=${value}`;
        const key = `${level.name}\u0000${id}`;
        if (!attrBuckets.has(key)) attrBuckets.set(key, { log: [], ends: [], span: -1, strikes: 0, until: 0 });
        const state = attrBuckets.get(key)!;
        const limits = limitsOf(list);
        const check: Check = { name: `${level.name}:${value}`, limits, log: state.log, ends: state.ends };
        const channels = channelsOf(list);
        if (channels !== undefined) check.channels = channels;
        if (level.ban !== undefined && limits.length > 0) {
          check.ban = {
            threshold: Math.max(1, Math.ceil(level.ban.over * Math.min(...limits.map((l) => l.limit)))),
            spanUs: durationUs(level.ban.within),
            forUs: durationUs(level.ban.for),
            state,
          };
        }
        const order = level.order ?? 'last';
        rank.set(check, ['first', 'after-global', 'after-account', 'last'].indexOf(order));
        const iGlobal = baseNames.indexOf('global');
        const iPeer = baseNames.findIndex((n) => n.startsWith('peer:'));
        if (order === 'first') before.push(check);
        else if (order === 'after-global') (iGlobal >= 0 ? inserted[iGlobal]! : before).push(check);
        else if (order === 'after-account') (iPeer > 0 ? inserted[iPeer - 1]! : before).push(check);
        else atEnd.push(check);
      }
      const byRank = (a: Check, b: Check) => rank.get(a)! - rank.get(b)!; // (a stable sort)
      before.sort(byRank);
      for (const list of inserted) list.sort(byRank);
      const base = checks.splice(0);
      checks.push(...before);
      base.forEach((c, i) => {
        checks.push(c, ...inserted[i]!);
      });
      checks.push(...atEnd);

      const banned = checks.find((c) => c.ban !== undefined && c.ban.state.until > t);
      if (banned !== undefined) {
        out.push({
          call_id: call.callId,
          direction: 'in',
          outcome: 'rejected',
          limited_by: banned.name,
          reason: 'banned',
        });
        continue;
      }
      let refusal: { limited_by: string; reason: 'rate' | 'channels' } | undefined;
      // strikes: every banning level whose rate limits lack room, whoever refuses the call
      const struck = checks.filter((c) => c.ban !== undefined && !c.limits.every((lim) => hasRoom(c.log, lim, t)));
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
      for (const c of struck) {
        const ban = c.ban!;
        const k = Math.floor(t / ban.spanUs);
        if (ban.state.span !== k) {
          ban.state.span = k;
          ban.state.strikes = 0;
        }
        ban.state.strikes++;
        if (ban.state.strikes >= ban.threshold) {
          // banned; once the ban ends the value starts afresh (its strikes from 0)
          ban.state.until = t + ban.forUs;
          ban.state.strikes = 0;
        }
      }
      if (refusal !== undefined) {
        out.push({ call_id: call.callId, direction: 'in', outcome: 'rejected', ...refusal });
      } else {
        for (const check of checks) {
          check.log.push(t);
          if (check.channels !== undefined) check.ends.push(end(t));
        }
        out.push({ call_id: call.callId, direction: 'in', outcome: 'admitted' });
      }
    } else {
      const tried: string[] = [];
      let decision: OutDecision | undefined;
      for (const id of call.route ?? []) {
        const carrier = own(carriers, id);
        if (carrier === undefined) continue; // not configured: skipped, not listed
        // slot = max(t, last + I) and wait = slot - t, in exact fractions of a µs (n / p)
        const [p, q] = cpsFraction(carrier.cps);
        const maxWait = carrier.maxWait === undefined ? 0 : durationUs(carrier.maxWait);
        const last = lastSlot.get(id);
        const tp = BigInt(t) * p;
        const next = last === undefined ? tp : last + 1_000_000n * q;
        const slot = next > tp ? next : tp;
        const wait = slot - tp; // µs times p
        const ends = listOf(carrierEnds, id);
        const full = carrier.channels !== undefined && inProgress(ends, t) >= carrier.channels;
        if (wait <= BigInt(maxWait) * p && !full) {
          lastSlot.set(id, slot);
          // its end, slot + its hold, rounded up to a whole µs: compared with whole-µs times
          // (an end after t), that is exact
          const hold = BigInt(call.durationUs ?? maxCallUs) * p;
          const endUs = Number((slot + hold + p - 1n) / p);
          if (carrier.channels !== undefined && endUs > t) ends.push(endUs);
          decision = {
            call_id: call.callId,
            direction: 'out',
            outcome: 'dispatched',
            carrier: id,
            // the wait to the nearest µs, halves up, in ms
            delay_ms: Number((2n * wait + p) / (2n * p)) / 1000,
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
    for (const name of ['caller', 'callee', 'source'] as const) {
      const v = r[name]?.trim();
      if (v !== undefined && v !== '') call[name] = v;
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
