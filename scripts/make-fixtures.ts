/**
 * Regenerates the committed fixtures: fixtures/NAME.trace.csv + fixtures/NAME.config.json.
 *
 *   npx tsx scripts/make-fixtures.ts [--out fixtures] [--only NAME]
 *
 * Deterministic (seeded PRNG, fixed start times): running it again gives the same bytes.
 * Every fixture tells one story; test/reference.test.ts checks with the reference model that
 * each story still happens (e.g. the boundary's second ten are refused).
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { fileURLToPath } from 'node:url';

// ------------------------------------------------------------------ helpers (shared with gen-trace)

/** mulberry32: small, fast, deterministic PRNG in [0, 1). */
export function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Exponential inter-arrival gap in µs for a Poisson process of `rate` per second. */
export function expGapUs(rand: () => number, rate: number): number {
  return Math.max(1, Math.round((-Math.log(1 - rand()) / rate) * 1e6));
}

const pad = (n: number, w = 2): string => String(n).padStart(w, '0');

export type TimeStyle = 'Z' | '+02:00' | '+0200' | '-05:00' | 'epoch';

/**
 * Exact text of a µs timestamp. `digits` = fraction digits written (0..9); beyond 6 the extra
 * digits are `extra` (they are truncated on reading), below 6 the time must be representable.
 */
export function formatUs(us: number, style: TimeStyle, digits = 6, extra = '000'): string {
  const secs = Math.floor(us / 1e6);
  const frac = us - secs * 1e6;
  let fracText = String(frac).padStart(6, '0');
  if (digits < 6) {
    if (
      !fracText
        .slice(digits)
        .split('')
        .every((c) => c === '0')
    )
      throw new Error(`cannot write ${us} with ${digits} digits`);
    fracText = fracText.slice(0, digits);
  } else if (digits > 6) {
    fracText += extra.padEnd(digits - 6, '0').slice(0, digits - 6);
  }
  const dot = digits > 0 ? `.${fracText}` : '';
  if (style === 'epoch') return `${secs}${dot}`;
  const offsetMin = style === 'Z' ? 0 : style === '-05:00' ? -300 : 120;
  const d = new Date((secs + offsetMin * 60) * 1000);
  const date = `${d.getUTCFullYear()}-${pad(d.getUTCMonth() + 1)}-${pad(d.getUTCDate())}`;
  const time = `${pad(d.getUTCHours())}:${pad(d.getUTCMinutes())}:${pad(d.getUTCSeconds())}`;
  return `${date}T${time}${dot}${style}`;
}

/** One CSV cell: quoted when it holds a delimiter, quote, line break, `#` first or outer spaces. */
export function csvCell(value: string): string {
  if (/[",\r\n]/.test(value) || value.startsWith('#') || value !== value.trim()) {
    return `"${value.replace(/"/g, '""')}"`;
  }
  return value;
}

export const csvLine = (cells: readonly string[]): string => `${cells.map(csvCell).join(',')}\n`;

export interface Row {
  time: number;
  callId: string;
  direction: 'in' | 'out';
  peer?: string;
  account?: string;
  route?: string[];
  /** The duration cell as written (seconds, ISO-8601, or empty). */
  duration?: string;
}

const S = 1_000_000; // µs per second
const MIN = 60 * S;

/** Stable sort by time (equal times keep generation order). */
const byTime = (rows: Row[]): Row[] =>
  rows
    .map((r, i) => ({ r, i }))
    .sort((a, b) => a.r.time - b.r.time || a.i - b.i)
    .map((x) => x.r);

/** Poisson arrivals of `rate`/s in [from, to) µs. */
function poisson(rand: () => number, rate: number, from: number, to: number): number[] {
  const out: number[] = [];
  for (let t = from + expGapUs(rand, rate); t < to; t += expGapUs(rand, rate)) out.push(t);
  return out;
}

interface Fixture {
  config: unknown;
  /** Full CSV text. */
  csv: string;
  calls: number;
  story: string;
}

function standardCsv(rows: Row[], style: (r: Row, i: number) => string): string {
  let csv = 'time,call_id,direction,peer,account,route\n';
  rows.forEach((r, i) => {
    csv += csvLine([style(r, i), r.callId, r.direction, r.peer ?? '', r.account ?? '', (r.route ?? []).join('|')]);
  });
  return csv;
}

// ------------------------------------------------------------------ boundary

/** 2024-03-05T09:00:00Z */
const T0 = Date.UTC(2024, 2, 5, 9, 0, 0) * 1000;

function boundary(): Fixture {
  const x = T0 + 10 * S;
  const rows: Row[] = [];
  let n = 0;
  const add = (time: number, peer = 'gw-1'): void => {
    rows.push({ time, callId: `b${String(++n).padStart(3, '0')}`, direction: 'in', peer });
  };
  add(x - 2 * S + 500_000); // a lone early call, long gone by x.999
  for (let i = 0; i < 10; i++) add(x + 999_000); // ten at x.999000 (equal times): all admitted
  for (let i = 0; i < 10; i++) add(x + S); // ten at (x+1).000000: all refused (window holds ten)
  add(x + S + 998_999); // (x+1).998999: the x.999 calls are still inside: refused
  for (let i = 0; i < 10; i++) add(x + S + 999_000); // (x+1).999000: the x.999 calls left exactly now: admitted
  add(x + S + 999_001); // one more: refused
  add(x + S + 999_500, 'gw-unknown'); // no own limits, no defaultPeer: unknown-peer
  add(x + 3 * S); // (x+3).000000: the window is empty again: admitted
  return {
    config: { inbound: { peers: { 'gw-1': [{ limit: 10, window: 'PT1S' }] } } },
    csv:
      '# boundary: 10 calls at x.999 s and 10 at (x+1).000 s against 10/s; the second ten are refused\n' +
      standardCsv(rows, (r) => formatUs(r.time, 'Z')),
    calls: rows.length,
    story: '10 at x.999 admitted, 10 at x+1.000 refused, 10 at x+1.999 admitted again',
  };
}

// ------------------------------------------------------------------ autodialer

function autodialer(): Fixture {
  const rand = prng(0xa0d1a1);
  const start = T0 + 3600 * S;
  const end = start + 75 * S;
  const rows: Row[] = [];
  const stream = (peer: string, account: string | undefined, rate: number, from: number, to: number): void => {
    for (const time of poisson(rand, rate, from, to)) {
      const r: Row = { time, callId: '', direction: 'in', peer };
      if (account !== undefined) r.account = account;
      rows.push(r);
    }
  };
  // The flood: one dialer of acme at ~30 cps against its 5/s (and 100/min).
  stream('dialer-9', 'acme', 30, start + 5 * S, end - 5 * S);
  // Well-behaved neighbours.
  stream('pbx-acme-1', 'acme', 3, start, end);
  stream('pbx-globex-1', 'globex', 2, start, end);
  stream('pbx-globex-2', 'globex', 2, start, end);
  stream('sbc-initech', undefined, 1, start, end);
  // globex surges for 5 s: its account limit (15/s) refuses some.
  stream('pbx-globex-1', 'globex', 10, start + 40 * S, start + 45 * S);
  stream('pbx-globex-2', 'globex', 10, start + 40 * S, start + 45 * S);
  // A storm of small default peers at 50-55 s: together they hit the global limit (60/s).
  for (let i = 1; i <= 24; i++) stream(`sbc-edge-${pad(i)}`, undefined, 2.8, start + 50 * S, start + 55 * S);
  // A peer nobody configured, while a defaultPeer exists, is limited by defaultPeer.
  stream('stranger', 'unknown-account', 0.5, start, end);
  const sorted = byTime(rows);
  sorted.forEach((r, i) => {
    r.callId = `ad-${String(i + 1).padStart(5, '0')}`;
  });
  return {
    config: {
      inbound: {
        global: [{ limit: 60, window: 'PT1S' }],
        accounts: {
          acme: [{ limit: 30, window: 'PT1S' }],
          globex: [
            { limit: 15, window: 'PT1S' },
            { limit: 600, window: 'PT1M' },
          ],
        },
        peers: {
          'dialer-9': [
            { limit: 5, window: 'PT1S' },
            { limit: 100, window: 'PT1M' },
          ],
          'pbx-acme-1': [{ limit: 10, window: 'PT1S' }],
          'pbx-globex-1': [{ limit: 8, window: 'PT1S' }],
          'pbx-globex-2': [{ limit: 8, window: 'PT1S' }],
        },
        defaultPeer: [{ limit: 3, window: '1s' }],
      },
    },
    csv:
      '# autodialer: dialer-9 floods at ~30 cps against 5/s and 100/min, next to well-behaved peers\n' +
      standardCsv(sorted, (r) => formatUs(r.time, 'epoch')),
    calls: sorted.length,
    story:
      'dialer-9 refused most of the time; neighbours unharmed; globex surge hits its account; edge storm hits global',
  };
}

// ------------------------------------------------------------------ event-types

function eventTypes(): Fixture {
  const rand = prng(0xe7e7);
  const start = T0 + 7200 * S;
  const rows: Row[] = [];
  const peers: Record<string, unknown> = {};
  for (let i = 1; i <= 20; i++) {
    const peer = `evt-${pad(i)}`;
    peers[peer] = [{ limit: 10, window: 'PT30M' }];
    // hot types (1-5) want ~20 per 30 min, warm (6-12) ~4, cold ~2; 1.8 times that in the busy hour
    const base = i <= 5 ? 20 : i <= 12 ? 4 : 2;
    for (let seg = 0; seg < 150; seg += 10) {
      const busy = seg >= 50 && seg < 110 ? 1.8 : 1;
      const rate = (base * busy) / (30 * 60);
      for (const time of poisson(rand, rate, start + seg * MIN, start + (seg + 10) * MIN)) {
        rows.push({ time, callId: '', direction: 'in', peer });
      }
    }
  }
  const sorted = byTime(rows);
  sorted.forEach((r, i) => {
    r.callId = `ev-${String(i + 1).padStart(4, '0')}`;
  });
  return {
    config: { inbound: { global: [{ limit: 100, window: 'PT30M' }], peers } },
    csv:
      '# event-types: 20 event types (peers) capped at 10 per 30 min each, under 100 per 30 min overall\n' +
      standardCsv(sorted, (r, i) => formatUs(r.time, i % 3 === 0 ? '+02:00' : 'Z')),
    calls: sorted.length,
    story: 'hot types hit their 10/PT30M, the busy hour hits the global 100/PT30M',
  };
}

// ------------------------------------------------------------------ user-windows

function userWindows(): Fixture {
  const rand = prng(0x05e4);
  const start = T0 + 4 * 3600 * S;
  const rows: Row[] = [];
  const push = (time: number): void =>
    void rows.push({ time, callId: '', direction: 'in', peer: 'user-42', account: 'tenant-7' });
  // Bursts of 12-20 calls within ~1.5 s, every ~2 min, for 100 min: the 10/s limit cuts each burst.
  for (let t = start; t < start + 100 * MIN; t += 90 * S + Math.round(rand() * 60 * S)) {
    const k = 12 + Math.floor(rand() * 9);
    for (let i = 0; i < k; i++) push(t + Math.round(rand() * 1.5 * S));
  }
  // Two sustained minutes at ~4 cps: 120/min refuses the rest; the second stream meets 240/h.
  for (const from of [start + 6 * MIN, start + 30 * MIN, start + 75 * MIN]) {
    for (const time of poisson(rand, 4, from, from + 70 * S)) push(time);
  }
  const sorted = byTime(rows);
  sorted.forEach((r, i) => {
    r.callId = `u-${String(i + 1).padStart(4, '0')}`;
  });
  return {
    config: {
      inbound: {
        peers: {
          'user-42': [
            { limit: 10, window: 'PT1S' },
            { limit: 120, window: 'PT1M' },
            { limit: 240, window: 'PT1H' },
          ],
        },
      },
    },
    csv:
      '# user-windows: one user with 10/s, 120/min and 240/h, bursting for 100 minutes\n' +
      standardCsv(sorted, (r, i) => formatUs(r.time, i % 2 === 0 ? 'Z' : 'epoch')),
    calls: sorted.length,
    story: 'each limit (10/s, 120/min, 240/h) refuses calls at some point',
  };
}

// ------------------------------------------------------------------ campaign

function campaign(): Fixture {
  const rand = prng(0xca3);
  const start = T0 + 6 * 3600 * S;
  const end = start + 6 * MIN;
  const rows: Row[] = [];
  const routes = [
    { route: ['A', 'B', 'C'], weight: 0.55 },
    { route: ['B', 'A'], weight: 0.15 },
    { route: ['legacy-X', 'A', 'D'], weight: 0.1 }, // legacy-X is not configured: skipped
    { route: ['C', 'D', 'E'], weight: 0.15 },
    { route: ['E', 'legacy-X'], weight: 0.05 },
  ];
  const pick = (): string[] => {
    let r = rand();
    for (const x of routes) if ((r -= x.weight) < 0) return x.route;
    return routes[0]!.route;
  };
  const out = (time: number, account: string): void =>
    void rows.push({ time, callId: '', direction: 'out', account, route: pick() });
  // Baseline: the campaign dials at ~5 cps all along.
  for (const t of poisson(rand, 5, start, end)) out(t, 'campaign-spring');
  // Bursts of 40 calls in 2 s at 1, 2 and 4 minutes: reroutes, then all-routes-congested.
  for (const m of [1, 2, 4]) {
    for (let i = 0; i < 40; i++) out(start + m * MIN + Math.round(rand() * 2 * S), 'campaign-spring');
  }
  // A ramp: 12 cps for 20 s from 3:00, beyond what the carriers take.
  for (const t of poisson(rand, 12, start + 3 * MIN, start + 3 * MIN + 20 * S)) out(t, 'campaign-flash');
  // Inbound callbacks from customers answering the campaign.
  for (const t of poisson(rand, 0.6, start + 20 * S, end))
    rows.push({ time: t, callId: '', direction: 'in', peer: 'sbc-callbacks', account: 'campaign-spring' });
  // ... a burst of them after the 2-minute wave
  for (const t of poisson(rand, 6, start + 2 * MIN + 10 * S, start + 2 * MIN + 16 * S))
    rows.push({ time: t, callId: '', direction: 'in', peer: 'sbc-callbacks', account: 'campaign-spring' });
  // ... and a few from a peer nobody configured: unknown-peer
  for (const t of poisson(rand, 0.05, start, end))
    rows.push({ time: t, callId: '', direction: 'in', peer: 'sbc-rogue' });
  const sorted = byTime(rows);
  sorted.forEach((r, i) => {
    r.callId = `${r.direction === 'out' ? 'o' : 'i'}-${String(i + 1).padStart(5, '0')}`;
  });
  return {
    config: {
      inbound: {
        accounts: { 'campaign-spring': [{ limit: 5, window: 'PT1S' }] },
        peers: {
          'sbc-callbacks': [
            { limit: 3, window: 'PT1S' },
            { limit: 60, window: 'PT1M' },
          ],
        },
      },
      outbound: {
        carriers: {
          A: { cps: 4, maxWait: 'PT1S' },
          B: { cps: 2.5, maxWait: '500ms' },
          C: { cps: 3, maxWait: 'PT2S' },
          D: { cps: 1 },
          E: { cps: 0.5, maxWait: 'PT4S' },
        },
      },
    },
    csv:
      '# campaign: an outbound campaign paced over carriers A (4 cps), B (2.5), C (3), D (1), E (0.5);\n' +
      '# bursts at 1, 2 and 4 minutes and a ramp at 3 force reroutes and all-routes-congested;\n' +
      '# legacy-X is not configured and is skipped; callbacks come in on sbc-callbacks\n' +
      standardCsv(sorted, (r) => formatUs(r.time, '+02:00')),
    calls: sorted.length,
    story: 'dispatched with delays, reroutes, all-routes-congested, legacy-X skipped, inbound callbacks limited',
  };
}

// ------------------------------------------------------------------ algorithms

function algorithms(): Fixture {
  const rand = prng(0xa160);
  const start = T0 + 8 * 3600 * S;
  // One traffic pattern: steady ~2.5 cps plus bursts straddling whole-second and 10-s boundaries.
  const pattern: number[] = [];
  for (const t of poisson(rand, 2.5, start, start + 40 * S)) pattern.push(t);
  for (let k = 3; k < 40; k += 5) {
    const b = start + k * S;
    for (let i = 0; i < 5; i++) pattern.push(b - 1 - Math.floor(rand() * 80_000)); // just before the boundary
    for (let i = 0; i < 5; i++) pattern.push(b + Math.floor(rand() * 80_000)); // just after
    pattern.push(b - 1, b, b); // exactly on it (equal times)
  }
  pattern.sort((a, b) => a - b);
  const limits = (algorithm: string): unknown[] => [
    { limit: 5, window: 'PT1S', algorithm },
    { limit: 40, window: 'PT10S', algorithm },
  ];
  const peers: [string, string][] = [
    ['{fixed} trunk:1', 'fixed-window'],
    ['{sliding} trunk:1', 'sliding-window'],
    ['{log} trunk:1', 'sliding-log'],
  ];
  const styles: TimeStyle[] = ['Z', '+02:00', '+0200', '-05:00', 'epoch'];
  // Columns in another order, with an extra column that readers ignore.
  let csv = '# algorithms: the same traffic on three peers, under fixed-window, sliding-window and sliding-log\n';
  csv += 'call_id,peer,time,direction,note,account,route\n';
  let n = 0;
  let calls = 0;
  for (const t of pattern) {
    for (const [peer] of peers) {
      const style = styles[Math.floor(rand() * styles.length)]!;
      const r = rand();
      const digits = t % S === 0 && r < 0.5 ? 0 : t % 1000 === 0 && r < 0.1 ? 3 : r > 0.9 ? 9 : 6;
      const time = formatUs(t, style, digits, String(Math.floor(rand() * 1000)));
      csv += csvLine([`alg-${String(++n).padStart(4, '0')}`, peer, time, 'in', `note, with "quotes" #${n}`, '', '']);
      calls++;
    }
    if (rand() < 0.03) csv += '\n';
    if (rand() < 0.03) csv += `# comment, with "quotes" and a , at ${formatUs(t, 'Z')}\n`;
  }
  // An account shared by two odd peers: fixed-window at the account, sliding-window at the peers.
  csv += '\n# an account over two peers with commas in their ids\n';
  for (const t of poisson(rand, 10, start + 45 * S, start + 55 * S)) {
    const peer = rand() < 0.5 ? 'sip:"east", gw{2}' : 'sip:west gw {3}';
    csv += csvLine([
      `alg-${String(++n).padStart(4, '0')}`,
      peer,
      formatUs(t, 'epoch'),
      'in',
      '',
      'acct {blue}: one',
      '',
    ]);
    calls++;
  }
  return {
    config: {
      inbound: {
        accounts: { 'acct {blue}: one': [{ limit: 6, window: 'PT1S', algorithm: 'fixed-window' }] },
        peers: Object.fromEntries(peers.map(([p, a]) => [p, limits(a)])),
        defaultPeer: [{ limit: 4, window: 'PT1S', algorithm: 'sliding-window' }],
      },
    },
    csv,
    calls,
    story: 'fixed-window lets bursts through at boundaries where sliding-window and sliding-log refuse',
  };
}

// ------------------------------------------------------------------ trunks (channels)

/** Seconds with up to six fraction digits, as a trace writes a duration (93.5, 12.000125). */
const seconds = (us: number): string => {
  const frac = String(us % S)
    .padStart(6, '0')
    .replace(/0+$/, '');
  return frac === '' ? String(Math.floor(us / S)) : `${Math.floor(us / S)}.${frac}`;
};

function trunks(): Fixture {
  const rand = prng(0x7a0c5);
  const start = T0 + 10 * 3600 * S;
  const end = start + 4 * MIN;
  const rows: Row[] = [];
  // Durations: exponential, mean 12 s, mostly as seconds with a fraction, some ISO-8601, some
  // never reported (held maxCallDuration, 90 s here).
  const duration = (): string => {
    const us = Math.round(expGapUs(rand, 1 / 12));
    const r = rand();
    if (r < 0.08) return '';
    if (r < 0.2) return `PT${Math.floor(us / MIN)}M${seconds(us % MIN)}S`;
    return seconds(us);
  };
  const inb = (time: number, peer: string, account?: string, d = duration()): void =>
    void rows.push({ time, callId: '', direction: 'in', peer, ...(account && { account }), duration: d });
  // acme's two PBXs share the account's 35 channels; pbx-acme-1 has 12 of its own
  for (const t of poisson(rand, 0.9, start, end)) inb(t, 'pbx-acme-1', 'acme');
  for (const t of poisson(rand, 0.7, start, end)) inb(t, 'pbx-acme-2', 'acme');
  // pbx-acme-2 retries in a storm for 3 s: its 8/s (and acme's 15/s) refuse by rate
  for (const t of poisson(rand, 14, start + 3 * MIN, start + 3 * MIN + 3 * S)) inb(t, 'pbx-acme-2', 'acme');
  // a big SBC without a channel limit of its own: the global 70 channels bite at its peaks
  for (const t of poisson(rand, 1.2, start, end)) inb(t, 'sbc-big');
  for (const t of poisson(rand, 7, start + MIN, start + MIN + 12 * S)) inb(t, 'sbc-big');
  // small peers on the default (2/s, 2 channels)
  for (const t of poisson(rand, 0.15, start, end)) inb(t, `small-${1 + Math.floor(rand() * 4)}`);
  // the exact boundary on small-9: a 5 s call frees its channel at x + 5 s exactly
  const x = start + 2 * MIN;
  inb(x, 'small-9', undefined, '5');
  inb(x + S, 'small-9', undefined, 'PT4.5S'); // both channels held until x + 5 s and x + 5.5 s
  inb(x + 5 * S - 1, 'small-9', undefined, '1'); // refused: 2 in progress
  inb(x + 5 * S, 'small-9', undefined, '1'); // admitted: the first call ended exactly now
  // outbound over A (5 cps, 8 channels), B (3 cps, 10 channels), C (2 cps, no channel limit)
  for (const t of poisson(rand, 2.5, start, end))
    rows.push({
      time: t,
      callId: '',
      direction: 'out',
      route: rand() < 0.7 ? ['A', 'B', 'C'] : ['B', 'A'],
      duration: duration(),
    });
  for (const t of poisson(rand, 8, start + 2.5 * MIN, start + 2.5 * MIN + 8 * S))
    rows.push({ time: t, callId: '', direction: 'out', route: ['A', 'B', 'C'], duration: duration() });
  const sorted = byTime(rows);
  sorted.forEach((r, i) => {
    r.callId = `${r.direction === 'out' ? 'o' : 'i'}-${String(i + 1).padStart(4, '0')}`;
  });
  // a call id given twice, 200 ms apart (an INVITE recorded again): two calls, each counted
  const first = sorted.find((r) => r.peer === 'pbx-acme-1' && r.time > start + 30 * S)!;
  const again: Row = { ...first, time: first.time + 200_000 };
  const all = byTime([...sorted, again]);
  let csv = 'time,call_id,direction,peer,account,route,duration\n';
  for (const r of all)
    csv += csvLine([
      formatUs(r.time, 'Z'),
      r.callId,
      r.direction,
      r.peer ?? '',
      r.account ?? '',
      (r.route ?? []).join('|'),
      r.duration ?? '',
    ]);
  return {
    config: {
      maxCallDuration: 'PT90S',
      inbound: {
        global: [{ limit: 40, window: 'PT1S' }, { channels: 70 }],
        accounts: { acme: [{ limit: 15, window: 'PT1S' }, { channels: 35 }] },
        peers: {
          'pbx-acme-1': [{ limit: 8, window: 'PT1S' }, { channels: 12 }],
          'pbx-acme-2': [{ limit: 8, window: 'PT1S' }],
          'sbc-big': [
            { limit: 20, window: 'PT1S' },
            { limit: 300, window: 'PT1M' },
          ],
        },
        defaultPeer: [{ limit: 2, window: 'PT1S' }, { channels: 2 }],
      },
      outbound: {
        carriers: {
          A: { cps: 5, maxWait: 'PT1S', channels: 8 },
          B: { cps: 3, maxWait: 'PT2S', channels: 10 },
          C: { cps: 2 },
        },
      },
    },
    csv:
      '# trunks: channel limits (calls in progress) beside rate limits, with call durations;\n' +
      '# acme shares 35 channels over two PBXs, the global 70 bite during the sbc-big burst,\n' +
      '# small-9 shows a call ending exactly when the next one comes, carriers A and B fill up\n' +
      csv,
    calls: all.length,
    story:
      'channel refusals at peer, account and global level, a channel freed exactly at its end, full carriers passed over, a call id given twice decided as two calls',
  };
}

// ------------------------------------------------------------------ main

export const FIXTURES: Record<string, () => Fixture> = {
  boundary,
  autodialer,
  'event-types': eventTypes,
  'user-windows': userWindows,
  campaign,
  algorithms,
  trunks,
};

function main(): void {
  const { values } = parseArgs({ options: { out: { type: 'string', default: 'fixtures' }, only: { type: 'string' } } });
  const dir = values.out;
  mkdirSync(dir, { recursive: true });
  for (const [name, make] of Object.entries(FIXTURES)) {
    if (values.only !== undefined && values.only !== name) continue;
    const f = make();
    writeFileSync(join(dir, `${name}.trace.csv`), f.csv);
    writeFileSync(join(dir, `${name}.config.json`), `${JSON.stringify(f.config, null, 2)}\n`);
    console.log(`${name}: ${f.calls} calls — ${f.story}`);
  }
}

if (process.argv[1] !== undefined && fileURLToPath(import.meta.url) === process.argv[1]) main();
