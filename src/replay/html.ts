/**
 * The HTML replay report: one self-contained file (uPlot, its stylesheet, the page's script and
 * the data all inline; nothing fetched when it opens). The summary tables are plain HTML written
 * here from the same ReportJson as the text report, so they read the same without any script;
 * the charts are drawn in the page by assets/report/app.js from the embedded series.
 *
 * uPlot (MIT, ~50 kB minified) draws time series of 10^5–10^6 points on a canvas in
 * milliseconds; the series are downsampled anyway (series.ts: busiest second per bucket).
 */
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { basename, join } from 'node:path';
import { formatDuration } from '../config/duration.js';
import type { CallGateConfig } from '../config/types.js';
import { packageRoot } from '../package-root.js';
import type { CompareJson } from './compare.js';
import type { ReplayResult } from './replay.js';
import {
  attributeTable,
  CARRIER_NOTE,
  carrierTable,
  channelTable,
  LEVEL_REJECTED_NOTE,
  PEAK_NOTE,
  levelTable,
  reportJson,
  reportText,
  type ReportJson,
} from './report.js';
import { seriesJson, totalsJson, type ReplaySeries, type ReplaySeriesJson } from './series.js';

const require = createRequire(import.meta.url);
/** The page's own script and stylesheet (assets/report/ of the package). */
const asset = (name: string): string => readFileSync(join(packageRoot(), 'assets', 'report', name), 'utf8');

export interface HtmlReportInput {
  readonly result: ReplayResult;
  readonly series: ReplaySeries;
  readonly config: CallGateConfig;
  readonly configPath: string;
  readonly tracePath: string;
  /** The what-if section, when the replay was compared with another configuration. */
  readonly whatif?: CompareJson;
  /** The series of the what-if's old configuration (its totals are drawn against the new ones). */
  readonly baselineSeries?: ReplaySeries;
}

/** One level as the page lists it (busiest first within its kind). */
export interface LevelMeta {
  key: string;
  kind: 'global' | 'account' | 'peer';
  offered: number;
  admitted: number;
  rejected: number;
  limits: {
    limit: number;
    window: string;
    windowS: number;
    algorithm: string;
    peak: number;
    busiest: [number, number] | null;
  }[];
  /** The channel limit and the most calls in progress at once, when configured. */
  channels?: { limit: number; peak: number };
}

export interface CarrierMeta {
  id: string;
  cps: number;
  maxWaitMs: number;
  dispatched: number;
  rerouted_away: number;
  rejected: number;
  channels?: { limit: number; peak: number };
}

export interface HtmlData {
  trace: string;
  config: string;
  levels: LevelMeta[];
  carriers: CarrierMeta[];
  series: ReplaySeriesJson;
  whatif?: CompareJson;
  /** All inbound / outbound traffic under the what-if's old configuration, on the same grid. */
  baseline?: Pick<ReplaySeriesJson, 'inbound' | 'outbound'>;
}

const esc = (s: string | number): string =>
  String(s).replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!);

/** Busiest first; ties by key, so the page is the same for the same replay. */
const busiestFirst = (a: { offered: number; key: string }, b: { offered: number; key: string }): number =>
  b.offered - a.offered || (a.key < b.key ? -1 : a.key > b.key ? 1 : 0);

function levelMetas(r: ReplayResult): LevelMeta[] {
  const all: LevelMeta[] = [...r.levels.entries()].map(([key, s]) => ({
    key,
    kind: key === 'global' ? 'global' : key.startsWith('account:') ? 'account' : 'peer',
    offered: s.offered,
    admitted: s.admitted,
    rejected: s.rejected,
    limits: s.peaks.map((p) => {
      const b = p.busiest;
      return {
        limit: p.limit.limit,
        window: formatDuration(p.limit.windowUs),
        windowS: p.limit.windowUs / 1e6,
        algorithm: p.limit.algorithm,
        peak: Math.round(p.peak * 100) / 100,
        busiest: b ? [b.fromUs / 1e6, b.toUs / 1e6] : null,
      };
    }),
    ...(s.channels && { channels: { limit: s.channels.channels, peak: s.channels.peak } }),
  }));
  const rank = { global: 0, account: 1, peer: 2 };
  return all.sort((a, b) => rank[a.kind] - rank[b.kind] || busiestFirst(a, b));
}

/** Calls that tried the carrier: it took them, or passed them over (rerouted away counts the rejected too). */
const offeredTo = (c: CarrierMeta): number => c.dispatched + c.rerouted_away;

function carrierMetas(r: ReplayResult, config: CallGateConfig): CarrierMeta[] {
  return [...r.carriers.entries()]
    .map(([id, c]) => {
      const cfg = config.outbound.carriers.get(id);
      return {
        id,
        cps: cfg?.cps ?? 0,
        maxWaitMs: (cfg?.maxWaitUs ?? 0) / 1000,
        dispatched: c.dispatched,
        rerouted_away: c.reroutedAway,
        rejected: c.rejected,
        ...(c.channels && { channels: { limit: c.channels.channels, peak: c.channels.peak } }),
      };
    })
    .sort((a, b) => offeredTo(b) - offeredTo(a) || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
}

function table(id: string, header: string[], rows: (string | number)[][], numericFrom = 1): string {
  const th = header.map((h, i) => `<th${i >= numericFrom ? ' class="num"' : ''}>${esc(h)}</th>`).join('');
  const tr = rows
    .map((r) => `<tr>${r.map((c, i) => `<td${i >= numericFrom ? ' class="num"' : ''}>${esc(c)}</td>`).join('')}</tr>`)
    .join('\n');
  return `<table id="${id}"><thead><tr>${th}</tr></thead><tbody>\n${tr}\n</tbody></table>`;
}

/** The text report's tables, cell for cell (report.ts formats both from ReportJson). */
function summaryTables(j: ReportJson): string {
  const out: string[] = [];
  if (j.levels.length > 0) {
    const t = levelTable(j, true);
    out.push(
      `<h3>Inbound levels</h3><p class="note">${esc(LEVEL_REJECTED_NOTE)}; ${esc(PEAK_NOTE)}; busiest = that window</p>`,
    );
    out.push(table('levels-table', t.header, t.rows));
  }
  if (j.carriers.length > 0) {
    const t = carrierTable(j);
    out.push(
      `<h3>Carriers</h3><p class="note">${esc(CARRIER_NOTE)}; delays given in ms, p50 / p99 by nearest rank; spacing = tightest gap between two slots / two sends, vs 1/cps</p>`,
    );
    out.push(table('carriers-table', t.header, t.rows));
  }
  const channels = channelTable(j);
  if (channels.rows.length > 0) {
    out.push(
      '<h3>Channels</h3><p class="note">peak = most calls in progress at once: each holds from its decision to its end</p>',
    );
    out.push(table('channels-table', channels.header, channels.rows));
  }
  const attrs = attributeTable(j);
  if (attrs.rows.length > 0) {
    out.push('<h3>Attribute levels</h3><p class="note">the values each attribute level refused most</p>');
    out.push(table('attributes-table', attrs.header, attrs.rows, 2));
    out.push(attributeBars(j));
  }
  return out.join('\n');
}

/** Per attribute level, a bar per value refused most (plain HTML: its width is its share of the top one). */
function attributeBars(j: ReportJson): string {
  const out: string[] = ['<div id="attributes-chart">'];
  for (const a of j.attributes ?? []) {
    const most = Math.max(1, ...a.top.map((v) => v.rejected));
    out.push(`<h4>${esc(a.level)}</h4>`);
    for (const v of a.top) {
      const w = ((100 * v.rejected) / most).toFixed(1);
      const b = ((100 * v.banned) / most).toFixed(1);
      out.push(
        `<div class="bar-row"><span class="bar-label">${esc(v.value)}</span><span class="bar" style="width:${w}%"><span class="bar-banned" style="width:${v.rejected > 0 ? ((100 * v.banned) / v.rejected).toFixed(1) : 0}%"></span></span><span class="bar-n">${v.rejected}${v.banned > 0 ? ` (${v.banned} banned, ${b}%)` : ''}</span></div>`,
      );
    }
  }
  out.push('</div>');
  return out.join('\n');
}

function whatifSection(w: CompareJson): string {
  const out: string[] = ['<section id="whatif"><h2>What-if</h2>'];
  out.push(
    `<p id="whatif-summary">${esc(w.summary)}</p>`,
    '<div id="whatif-charts"></div>',
    table(
      'whatif-totals',
      ['', 'old', 'new', 'change'],
      w.totals.map((t) => [t.metric, t.old, t.new, t.new - t.old > 0 ? `+${t.new - t.old}` : t.new - t.old]),
    ),
  );
  if (w.groups.length > 0) {
    out.push('<h3>Calls decided differently, by level / carrier and reason</h3>');
    out.push(
      table(
        'whatif-groups',
        ['direction', 'old decision', 'new decision', 'calls', 'first calls'],
        w.groups.map((g) => [g.direction, g.from, g.to, g.count, g.calls.join(', ')]),
        3,
      ),
    );
    out.push(
      `<details><summary>${w.calls_listed.length === w.differing ? 'Every one of the' : `The first ${w.calls_listed.length} of the`} ${w.differing} calls decided differently</summary>`,
    );
    out.push(
      table(
        'whatif-calls',
        ['call', 'time', 'direction', 'old decision', 'new decision'],
        w.calls_listed.map((c) => [c.call_id, c.time, c.direction, c.old, c.new]),
        9,
      ),
    );
    out.push('</details>');
  }
  out.push('</section>');
  return out.join('\n');
}

/** The page, as one string. */
export function reportHtml(input: HtmlReportInput): string {
  const { result: r } = input;
  const j = reportJson(r);
  const levels = levelMetas(r);
  const carriers = carrierMetas(r, input.config);
  // the busiest level of each kind stays at full resolution, whatever the budget
  const keep = new Set<string>();
  for (const kind of ['global', 'account', 'peer']) {
    const first = levels.find((l) => l.kind === kind);
    if (first) keep.add(first.key);
  }
  const series = seriesJson(input.series, r.firstUs ?? 0, keep);
  const data: HtmlData = {
    trace: input.tracePath,
    config: input.configPath,
    levels,
    carriers,
    series,
    ...(input.whatif && { whatif: input.whatif }),
    ...(input.baselineSeries && { baseline: totalsJson(input.baselineSeries, series.origin, series.step) }),
  };
  const text = reportText(r).split('\n');
  const head = text.slice(0, 3);
  const uplotJs = readFileSync(require.resolve('uplot/dist/uPlot.iife.min.js'), 'utf8');
  const uplotCss = readFileSync(require.resolve('uplot/dist/uPlot.min.css'), 'utf8');
  const appJs = asset('app.js');
  const appCss = asset('style.css');
  const title = `callgate replay: ${basename(input.tracePath)}`;
  // `<` escaped: the data can never close its script element, whatever the ids hold
  const json = JSON.stringify(data).replace(/</g, '\\u003c');
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${esc(title)}</title>
<style>${uplotCss}</style>
<style>${appCss}
#attributes-chart .bar-row{display:flex;align-items:center;gap:.5em;margin:2px 0;font-size:90%}
#attributes-chart .bar-label{flex:0 0 16em;overflow:hidden;text-overflow:ellipsis;white-space:nowrap;font-family:monospace}
#attributes-chart .bar{display:inline-block;height:1em;background:#c0392b;max-width:60%;position:relative}
#attributes-chart .bar-banned{position:absolute;left:0;top:0;height:100%;background:#6d1f16}</style>
</head>
<body>
<header>
<h1>${esc(title)}</h1>
<p class="meta">trace <code>${esc(input.tracePath)}</code>, configuration <code>${esc(input.configPath)}</code>${
    input.whatif ? `, compared with <code>${esc(input.whatif.baseline_config)}</code>` : ''
  }</p>
<pre id="summary">${esc(head.join('\n'))}</pre>
<p id="verdict" class="${j.all_limits_held ? 'ok' : 'bad'}">${esc(text[text.length - 1]!)}</p>
</header>
${input.whatif ? whatifSection(input.whatif) : ''}
<main id="charts"></main>
<section id="tables"><h2>Summary</h2>
${summaryTables(j)}
</section>
<footer>Times in UTC. Charts: drag to zoom, double-click to zoom out. When a bucket holds more than one second, a rate shows its busiest second.</footer>
<script id="data" type="application/json">${json}</script>
<script>${uplotJs}</script>
<script>${appJs}</script>
</body>
</html>
`;
}
