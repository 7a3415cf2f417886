/**
 * The replay report: per level (global, account, peer) calls offered/admitted/rejected and, for
 * every configured limit, the peak admitted in any window of that limit next to the limit (the
 * proof it held); per carrier dispatched, rerouted away, rejected, delay percentiles and the
 * tightest slot spacing next to 1/cps; per level and carrier with a channel limit, the most calls
 * in progress at once next to it; totals and replay speed. A table or one JSON object.
 */
import { formatDuration } from '../config/duration.js';
import { hasUnprintable, printableJson } from '../ids.js';
import { textTable } from '../text-table.js';
import type { ReplayResult } from './replay.js';
import type { ChannelPeak, LevelStats } from './stats.js';
import { formatTime } from './trace.js';

export interface ReportJson {
  store: string;
  calls: number;
  elapsed_ms: number;
  calls_per_second: number;
  trace_span_s: number;
  inbound: {
    offered: number;
    admitted: number;
    rejected: number;
    rejected_by: Record<string, number>;
    rejected_for: { rate: number; channels: number; banned: number };
  };
  /** Per attribute level that refused calls: its refusals and the values it refused most. */
  attributes?: AttributeJson[];
  outbound: { offered: number; dispatched: number; rejected: number; rerouted: number };
  levels: {
    level: string;
    offered: number;
    admitted: number;
    rejected: number;
    limits: {
      limit: number;
      window: string;
      algorithm: string;
      peak: number;
      held: boolean;
      /** Where the peak was reached (see WindowPeak.busiest), ISO-8601 UTC; null when nothing was admitted. */
      busiest: { from: string; to: string } | null;
    }[];
    /** With a channel limit: the most calls in progress at once. */
    channels?: ChannelsJson;
  }[];
  carriers: {
    carrier: string;
    dispatched: number;
    rerouted_away: number;
    rejected: number;
    delay_ms: { p50: number | null; p99: number | null; max: number | null };
    interval_ms: number;
    min_slot_spacing_ms: number | null;
    min_send_spacing_ms: number | null;
    channels?: ChannelsJson;
  }[];
  all_limits_held: boolean;
}

export interface AttributeJson {
  level: string;
  rejected: number;
  banned: number;
  /** The values refused most, most first (at most TOP_VALUES). */
  top: { value: string; rejected: number; banned: number }[];
}

/** How many values per attribute level the report lists. */
export const TOP_VALUES = 10;

export interface ChannelsJson {
  limit: number;
  peak: number;
  held: boolean;
}

const channelsJson = (c: ChannelPeak | undefined): { channels?: ChannelsJson } =>
  c === undefined ? {} : { channels: { limit: c.channels, peak: c.peak, held: c.held } };

const ms = (us: number): number => Math.round(us) / 1000;
const round2 = (x: number): number => Math.round(x * 100) / 100;

/**
 * A peak as the report shows it: to 2 decimals, but below the limit when it stayed below it (a
 * sliding window's estimate of 1.999998 under a limit of 2 read as 2, beside `held`).
 */
export const shownPeak = (peak: number, limit: number): number => {
  const shown = round2(peak);
  return shown >= limit && peak < limit ? (Math.ceil(limit * 100) - 1) / 100 : shown;
};

function levelOrder(a: string, b: string): number {
  const rank = (k: string): number => (k === 'global' ? 0 : k.startsWith('account:') ? 1 : 2);
  return rank(a) - rank(b) || (a < b ? -1 : a > b ? 1 : 0);
}

export function reportJson(r: ReplayResult): ReportJson {
  const levels = [...r.levels.entries()].sort(([a], [b]) => levelOrder(a, b));
  const limitsOf = (s: LevelStats) =>
    s.peaks.map((p) => ({
      limit: p.limit.limit,
      window: formatDuration(p.limit.windowUs),
      algorithm: p.limit.algorithm,
      peak: shownPeak(p.peak, p.limit.limit),
      held: p.held,
      // a fixed window of the trace's last µs may end past the last time a trace can state
      // (Number.MAX_SAFE_INTEGER µs): it is shown ending there, not a RangeError after the decisions
      busiest: p.busiest
        ? {
            from: formatTime(Math.max(0, p.busiest.fromUs)),
            to: formatTime(Math.min(p.busiest.toUs, Number.MAX_SAFE_INTEGER)),
          }
        : null,
    }));
  const finite = (x: number): number | null => (Number.isFinite(x) ? ms(x) : null);
  const carriers = [...r.carriers.entries()].map(([id, c]) => ({
    carrier: id,
    dispatched: c.dispatched,
    rerouted_away: c.reroutedAway,
    rejected: c.rejected,
    // delays given (nearest rank: each a delay some call got); none when the carrier took no call
    delay_ms: {
      p50: c.dispatched ? ms(c.delays.percentile(50)) : null,
      p99: c.dispatched ? ms(c.delays.percentile(99)) : null,
      max: c.dispatched ? ms(c.delays.max) : null,
    },
    interval_ms: ms(c.intervalUs),
    min_slot_spacing_ms: finite(c.minSpacingUs),
    min_send_spacing_ms: finite(c.minSentSpacingUs),
    ...channelsJson(c.channels),
  }));
  const levelRows = levels.map(([level, s]) => ({
    level,
    offered: s.offered,
    admitted: s.admitted,
    rejected: s.rejected,
    limits: limitsOf(s),
    ...channelsJson(s.channels),
  }));
  // pacing held when no two slots on a carrier are closer than its interval (1 µs of rounding slack)
  const pacingHeld = [...r.carriers.values()].every((c) => !(c.minSpacingUs < c.intervalUs - 1));
  const channelsHeld = [...levelRows, ...carriers].every((x) => x.channels?.held !== false);
  return {
    store: r.store,
    calls: r.calls,
    elapsed_ms: Math.round(r.elapsedMs),
    calls_per_second: Math.round(r.calls / Math.max(r.elapsedMs / 1000, 1e-9)),
    trace_span_s: r.firstUs !== undefined ? round2((r.lastUs! - r.firstUs) / 1e6) : 0,
    inbound: {
      offered: r.inbound.offered,
      admitted: r.inbound.admitted,
      rejected: r.inbound.rejected,
      rejected_by: Object.fromEntries([...r.inbound.byReason.entries()].sort(([a], [b]) => levelOrder(a, b))),
      rejected_for: { ...r.inbound.byKind },
    },
    ...(r.attributes.levels.size > 0 && {
      attributes: r.attributes
        .top(TOP_VALUES)
        .map((a) => ({ level: a.level, rejected: a.rejected, banned: a.banned, top: a.values })),
    }),
    outbound: r.outbound,
    levels: levelRows,
    carriers,
    all_limits_held: levelRows.every((l) => l.limits.every((x) => x.held)) && pacingHeld && channelsHeld,
  };
}

function table(header: string[], rows: (string | number)[][]): string {
  return textTable([header, ...rows], { rule: true });
}

/** A table of the report: its header and rows (the text and the HTML report draw the same cells). */
export interface ReportTable {
  readonly header: string[];
  readonly rows: (string | number)[][];
}

/** Per level, one row per limit (the level's counts on its first row); `busiest` adds that window's span. */
export function levelTable(j: ReportJson, busiest = false): ReportTable {
  const rows: (string | number)[][] = [];
  for (const l of j.levels) {
    const limits = l.limits.length ? l.limits : [undefined];
    limits.forEach((x, i) => {
      const row: (string | number)[] = [
        i === 0 ? l.level : '',
        i === 0 ? l.offered : '',
        i === 0 ? l.admitted : '',
        i === 0 ? l.rejected : '',
        x ? `${x.limit}/${x.window}${x.algorithm === 'sliding-log' ? '' : ` ${x.algorithm}`}` : '-',
        x ? x.peak : '-',
        x ? (x.held ? 'held' : 'EXCEEDED') : '',
      ];
      const span = x?.busiest;
      if (busiest) row.push(span ? `${span.from} – ${span.to}` : '');
      rows.push(row);
    });
  }
  const header = ['level', 'offered', 'admitted', 'rejected', 'limit', 'peak', 'check'];
  return { header: busiest ? [...header, 'busiest window'] : header, rows };
}

export function carrierTable(j: ReportJson): ReportTable {
  return {
    header: [
      'carrier',
      'dispatched',
      'rerouted away',
      'rejected',
      'p50',
      'p99',
      'max',
      '1/cps',
      'min slot gap',
      'min send gap',
    ],
    rows: j.carriers.map((c) => [
      c.carrier,
      c.dispatched,
      c.rerouted_away,
      c.rejected,
      c.delay_ms.p50 ?? '-',
      c.delay_ms.p99 ?? '-',
      c.delay_ms.max ?? '-',
      c.interval_ms,
      c.min_slot_spacing_ms ?? '-',
      c.min_send_spacing_ms ?? '-',
    ]),
  };
}

/** Per attribute level, the values it refused most (one row each; the level's totals on its first row). */
export function attributeTable(j: ReportJson): ReportTable {
  const rows: (string | number)[][] = [];
  for (const a of j.attributes ?? [])
    a.top.forEach((v, i) => {
      rows.push([
        i === 0 ? `${a.level} (${a.rejected} refused, ${a.banned} banned)` : '',
        v.value,
        v.rejected,
        v.banned,
      ]);
    });
  return { header: ['attribute level', 'value', 'refused', 'of which banned'], rows };
}

/** Every level and carrier with a channel limit: the most calls in progress at once against it. */
export function channelTable(j: ReportJson): ReportTable {
  const rows: (string | number)[][] = [];
  for (const l of j.levels)
    if (l.channels) rows.push([l.level, l.channels.limit, l.channels.peak, l.channels.held ? 'held' : 'EXCEEDED']);
  for (const c of j.carriers)
    if (c.channels)
      rows.push([`carrier ${c.carrier}`, c.channels.limit, c.channels.peak, c.channels.held ? 'held' : 'EXCEEDED']);
  return { header: ['level / carrier', 'channels', 'peak', 'check'], rows };
}

/** Refusing buckets listed in the summary line at most; the rest are counted (the JSON has them all). */
export const REJECTED_BY_SHOWN = 10;

/**
 * The summary's "rejected (…)" list: every bucket in level order when there are few; else the
 * ones that refused most, then how many more and their calls (a 300,000-call trace refused by
 * 170 buckets made one unreadable line).
 */
export function rejectedBy(by: Record<string, number>, shown = REJECTED_BY_SHOWN): string {
  const all = Object.entries(by);
  if (all.length <= shown) return all.map(([k, v]) => `${bucketShown(k)} ${v}`).join(', ');
  const sorted = all.sort(([ka, a], [kb, b]) => b - a || levelOrder(ka, kb));
  const rest = sorted.slice(shown);
  const calls = rest.reduce((n, [, v]) => n + v, 0);
  const head = sorted
    .slice(0, shown)
    .map(([k, v]) => `${bucketShown(k)} ${v}`)
    .join(', ');
  return `${head}, and ${rest.length} more buckets with ${calls} calls (--json lists all)`;
}

/**
 * A bucket as the summary line shows it: its id quoted (JSON) when it holds a space, a comma, a
 * parenthesis or a quote, which would blur the list (`peer:"gw 7, east" 12, account:b 3`), or
 * a character a terminal acts on (escaped: printable).
 */
function bucketShown(bucket: string): string {
  const colon = bucket.indexOf(':');
  if (colon < 0) return bucket;
  const id = bucket.slice(colon + 1);
  return /[\s,()"]/.test(id) || hasUnprintable(id) ? `${bucket.slice(0, colon + 1)}${printableJson(id)}` : bucket;
}

/** What a level's peak is (the text table, the HTML). */
export const PEAK_NOTE =
  'peak = most calls admitted in any window of the limit (a sliding window: the highest estimate a call was admitted under, counted before it); check = held, or EXCEEDED when some window went over the limit';

/** Why a level's "rejected" exceeds the summary's count for it: said next to the table. */
export const LEVEL_REJECTED_NOTE =
  'rejected = calls of the level refused by any of their levels, so one refusal counts at each level of the call; the summary line counts it once, under the level that refused';

/** What the carrier counts are. */
export const CARRIER_NOTE =
  'rerouted away = calls that passed this carrier over; rejected = those of them no carrier took';

export function reportText(r: ReplayResult): string {
  const j = reportJson(r);
  const out: string[] = [];
  out.push(
    `callgate replay on the ${j.store} store: ${j.calls} calls (${j.trace_span_s} s of traffic) in ${j.elapsed_ms} ms, ${j.calls_per_second} calls/s`,
  );
  const rej = rejectedBy(j.inbound.rejected_by);
  const kinds =
    j.inbound.rejected_for.channels > 0 || j.inbound.rejected_for.banned > 0
      ? `; for rate ${j.inbound.rejected_for.rate}, for channels ${j.inbound.rejected_for.channels}${j.inbound.rejected_for.banned > 0 ? `, banned ${j.inbound.rejected_for.banned}` : ''}`
      : '';
  out.push(
    `inbound: ${j.inbound.offered} offered, ${j.inbound.admitted} admitted, ${j.inbound.rejected} rejected${rej ? ` (${rej}${kinds})` : ''}`,
  );
  out.push(
    `outbound: ${j.outbound.offered} offered, ${j.outbound.dispatched} dispatched, ${j.outbound.rejected} rejected, ${j.outbound.rerouted} rerouted`,
  );
  if (j.levels.length > 0) {
    out.push('', `Inbound levels (${LEVEL_REJECTED_NOTE}; ${PEAK_NOTE})`);
    const t = levelTable(j);
    out.push(table(t.header, t.rows));
  }
  if (j.carriers.length > 0) {
    out.push(
      '',
      `Carriers (${CARRIER_NOTE}; delays given in ms, p50 / p99 by nearest rank; spacing = tightest gap between two slots / two sends, vs 1/cps)`,
    );
    const t = carrierTable(j);
    out.push(table(t.header, t.rows));
  }
  const channels = channelTable(j);
  if (channels.rows.length > 0) {
    out.push(
      '',
      'Channels (peak = most calls in progress at once: each holds from its decision to its end; check = held, or EXCEEDED over the limit)',
    );
    out.push(table(channels.header, channels.rows));
  }
  const attrs = attributeTable(j);
  if (attrs.rows.length > 0) {
    out.push('', `Attribute levels: the ${TOP_VALUES} values each refused most`);
    out.push(table(attrs.header, attrs.rows));
  }
  out.push(
    '',
    j.all_limits_held ? 'Every limit held in every window.' : 'SOME LIMIT WAS EXCEEDED: see EXCEEDED above.',
  );
  return out.join('\n');
}
