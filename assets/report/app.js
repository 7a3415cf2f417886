// The charts of the callgate HTML replay report, drawn with uPlot from the data embedded in the
// page (script#data, see src/replay/html.ts and src/replay/series.ts for its shape).
// Plain browser JavaScript: this file is inlined into the report as is.
(() => {
  const D = JSON.parse(document.getElementById('data').textContent);
  const S = D.series;
  const root = document.getElementById('charts');
  const charts = [];
  const COLORS = {
    offered: '#8a8f98',
    admitted: '#2a9d4b',
    rejected: '#d62828',
    limit: '#1f4e9c',
    sent: '#6a4c93',
    rerouted: '#e07a00',
    dispatched: '#2a9d4b',
    window: '#2a6fdb',
    channels: '#2a6fdb',
    mean: '#2a6fdb',
    max: '#d62828',
    busiest: 'rgba(255, 170, 0, 0.22)',
  };

  function el(tag, attrs, ...children) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (k === 'class') e.className = v;
      else e.setAttribute(k, v);
    }
    for (const c of children) e.append(c);
    return e;
  }

  const fmtTime = (s) => new Date(s * 1000).toISOString().replace('T', ' ').replace('Z', '');
  /** Axis labels in UTC, 24 h: the date where it changes, the time to the precision of the ticks. */
  const axisTimes = (_u, splits, _i, _space, incr) => {
    let day;
    return splits.map((s) => {
      const iso = new Date(s * 1000).toISOString();
      const d = iso.slice(0, 10);
      const t = incr >= 86400 ? '' : incr >= 60 ? iso.slice(11, 16) : incr >= 1 ? iso.slice(11, 19) : iso.slice(11, 23);
      const label = d !== day ? (t ? `${t}\n${d}` : d) : t;
      day = d;
      return label;
    });
  };

  /**
   * A series as dense arrays over its own step: counts 0 where nothing happened, others null.
   * One more point closes the last bucket, so that a step drawn after each point shows it too.
   */
  function dense(sj, zero) {
    const n = Math.max(1, Math.ceil((S.buckets * S.step) / sj.step));
    const xs = new Array(n + 1);
    for (let i = 0; i <= n; i++) xs[i] = S.origin + i * sj.step;
    const cols = {};
    for (const [name, values] of Object.entries(sj.cols)) {
      const a = new Array(n + 1).fill(zero.includes(name) ? 0 : null);
      for (let k = 0; k < sj.idx.length; k++) a[sj.idx[k]] = values[k];
      a[n] = a[n - 1];
      cols[name] = a;
    }
    return { xs, cols, step: sj.step };
  }

  /**
   * Calls in progress as dense arrays: a bucket listed shows the most at once in it; one not
   * listed keeps the count the bucket before it ended with (it changes only at listed buckets).
   */
  function denseCarry(sj) {
    const n = Math.max(1, Math.ceil((S.buckets * S.step) / sj.step));
    const xs = new Array(n + 1);
    const used = new Array(n + 1);
    let v = 0;
    for (let i = 0, k = 0; i <= n; i++) {
      xs[i] = S.origin + i * sj.step;
      if (k < sj.idx.length && sj.idx[k] === i) {
        used[i] = sj.cols.used[k];
        v = sj.cols.after[k];
        k++;
      } else used[i] = i === n ? used[i - 1] : v;
    }
    return { xs, used, step: sj.step };
  }

  /** The channels chart of a level or carrier: calls in progress against the limit. */
  function channelChart(into, name, sj, channels) {
    if (!sj || !channels) return;
    const d = denseCarry(sj);
    chart(
      into,
      `${name}: calls in progress, against ${channels.limit} channels — most at once: ${channels.peak}${d.step > 1 ? ` (most in each ${d.step} s)` : ''}`,
      d.xs,
      [
        line('in progress', COLORS.channels, d.used),
        flat(`${channels.limit} channels`, COLORS.limit, channels.limit, d.xs.length),
      ],
      { unit: 'calls' },
    );
  }

  const stepped = uPlot.paths.stepped({ align: 1 });
  /** Points where values stand alone between gaps (a line would not show them), none elsewhere. */
  const gapPoints = (values) => {
    let alone = 0;
    for (let i = 0; i < values.length; i++) {
      if (values[i] != null && values[i - 1] == null && values[i + 1] == null) alone++;
    }
    return { show: alone > 0, size: 4 };
  };
  const line = (label, color, values, more) => ({
    label,
    stroke: color,
    width: 1.5,
    values,
    paths: stepped,
    points: { show: false },
    ...more,
  });
  const flat = (label, color, value, n) => ({
    label,
    stroke: color,
    width: 1,
    dash: [6, 4],
    values: new Array(n).fill(value),
    points: { show: false },
  });

  /** One uPlot chart in `parent`; `bands` are [from, to] (epoch s) shaded under the lines. */
  function chart(parent, title, xs, series, opts) {
    const o = opts || {};
    const box = el('div', { class: 'chart' });
    parent.append(box);
    const width = Math.max(320, parent.clientWidth || root.clientWidth || 900);
    const u = new uPlot(
      {
        title,
        width,
        height: o.height || 220,
        tzDate: (ts) => uPlot.tzDate(new Date(ts * 1e3), 'Etc/UTC'),
        scales: {
          x: { time: true },
          y: { range: (_u, _min, max) => [max > 0 ? -max * 0.02 : -0.02, max > 0 ? max * 1.1 : 1] },
        },
        axes: [
          { values: axisTimes, size: 50 },
          { label: o.unit || 'calls/s', size: 60 },
        ],
        cursor: { drag: { x: true, y: false } },
        series: [
          { label: 'time (UTC)', value: (_u, v) => (v == null ? '' : fmtTime(v)) },
          ...series.map(({ values, ...s }) => s),
        ],
        hooks: {
          drawClear: [
            (u) => {
              for (const [from, to] of o.bands || []) {
                const { left, top, width, height } = u.bbox;
                const x0 = Math.max(u.valToPos(from, 'x', true), left);
                const x1 = Math.min(u.valToPos(to, 'x', true), left + width);
                if (x1 < left || x0 > left + width) continue;
                u.ctx.fillStyle = COLORS.busiest;
                u.ctx.fillRect(x0, top, Math.max(x1 - x0, 3), height);
              }
            },
          ],
        },
      },
      [xs, ...series.map((s) => s.values)],
      box,
    );
    charts.push(u);
    return u;
  }

  const bucketNote = (step) => (step > 1 ? ` (busiest second of each ${step} s)` : '');

  function section(id, title) {
    const s = el('section', { id, class: 'panel' }, el('h2', {}, title));
    root.append(s);
    return s;
  }

  /** A select over items; `render(item, into)` draws the charts of the chosen one. */
  function chooser(sec, items, label, describe, render) {
    const select = el('select', { 'aria-label': label });
    items.forEach((it, i) => {
      select.append(el('option', { value: String(i) }, describe(it)));
    });
    const body = el('div', { class: 'panel-body' });
    sec.append(el('label', { class: 'chooser' }, `${label} `, select), body);
    const show = () => {
      for (const c of [...charts]) {
        if (body.contains(c.root)) {
          c.destroy();
          charts.splice(charts.indexOf(c), 1);
        }
      }
      body.replaceChildren();
      render(items[Number(select.value)], body);
      document.body.dataset.drawn = String(charts.length);
    };
    select.addEventListener('change', show);
    show();
    return select;
  }

  function totals() {
    if (S.inbound.idx.length > 0) {
      const d = dense(S.inbound, ['offered', 'admitted', 'rejected']);
      chart(section('inbound', 'Inbound, all calls'), `offered / admitted / rejected${bucketNote(d.step)}`, d.xs, [
        line('offered', COLORS.offered, d.cols.offered),
        line('admitted', COLORS.admitted, d.cols.admitted),
        line('rejected', COLORS.rejected, d.cols.rejected),
      ]);
    }
    if (S.outbound.idx.length > 0) {
      const d = dense(S.outbound, ['offered', 'dispatched', 'rejected', 'rerouted']);
      chart(
        section('outbound', 'Outbound, all calls'),
        `offered / dispatched / rejected / rerouted${bucketNote(d.step)}`,
        d.xs,
        [
          line('offered', COLORS.offered, d.cols.offered),
          line('dispatched', COLORS.dispatched, d.cols.dispatched),
          line('rejected', COLORS.rejected, d.cols.rejected),
          line('rerouted', COLORS.rerouted, d.cols.rerouted),
        ],
      );
    }
  }

  function levelCharts(meta, into) {
    const sj = S.levels[meta.key];
    if (!sj) return;
    const d = dense(sj, ['offered', 'admitted', 'rejected']);
    const n = d.xs.length;
    const rate = [
      line('offered', COLORS.offered, d.cols.offered),
      line('admitted', COLORS.admitted, d.cols.admitted),
      line('rejected', COLORS.rejected, d.cols.rejected),
    ];
    meta.limits.forEach((l) => {
      const perS = Math.round((l.limit / l.windowS) * 1000) / 1000;
      rate.push(
        flat(`limit ${l.limit}/${l.window}${l.windowS === 1 ? '' : ` (${perS}/s sustained)`}`, COLORS.limit, perS, n),
      );
    });
    chart(into, `${meta.key}: offered / admitted / rejected per second${bucketNote(d.step)}`, d.xs, rate);
    channelChart(into, meta.key, S.levelChannels[meta.key], meta.channels);
    meta.limits.forEach((l, i) => {
      const busiest = l.busiest ? ` — busiest: ${l.peak} in ${fmtTime(l.busiest[0])} – ${fmtTime(l.busiest[1])}` : '';
      const u = chart(
        into,
        `${meta.key}: calls in the window of ${l.limit}/${l.window}${l.algorithm === 'sliding-log' ? '' : ` ${l.algorithm}`}${busiest}`,
        d.xs,
        [
          {
            label: 'in window (at each admission)',
            stroke: COLORS.window,
            width: 1.5,
            values: d.cols[`w${i}`],
            points: gapPoints(d.cols[`w${i}`]),
          },
          flat(`limit ${l.limit}`, COLORS.limit, l.limit, n),
        ],
        { unit: 'calls', bands: l.busiest ? [l.busiest] : [] },
      );
      if (l.busiest) {
        const pad = Math.max(l.windowS, d.step) * 2;
        const zoom = el('button', { type: 'button', class: 'zoom' }, 'zoom to the busiest window');
        zoom.addEventListener('click', () => u.setScale('x', { min: l.busiest[0] - pad, max: l.busiest[1] + pad }));
        into.append(zoom);
      }
    });
  }

  function levels() {
    const upper = D.levels.filter((l) => l.kind !== 'peer');
    const peers = D.levels.filter((l) => l.kind === 'peer');
    const describe = (l) => `${l.key} — ${l.offered} offered, ${l.rejected} rejected`;
    if (upper.length > 0)
      chooser(section('levels-upper', 'Global and accounts'), upper, 'level', describe, levelCharts);
    if (peers.length > 0)
      chooser(section('levels-peers', 'Peers (busiest first)'), peers, 'peer', describe, levelCharts);
  }

  function carrierCharts(meta, into) {
    const c = S.carriers[meta.id];
    if (!c) return;
    const d = dense(c.decisions, ['dispatched', 'rerouted', 'rejected']);
    const sent = dense(c.sent, ['sent']);
    const n = d.xs.length;
    chart(
      into,
      `${meta.id}: dispatched / rerouted away / rejected (by decision) and sent (by slot) per second${bucketNote(d.step)}`,
      d.xs,
      [
        line('dispatched', COLORS.dispatched, d.cols.dispatched),
        line('rerouted away', COLORS.rerouted, d.cols.rerouted),
        line('rejected', COLORS.rejected, d.cols.rejected),
        line('sent', COLORS.sent, sent.cols.sent),
        flat(`${meta.cps} cps`, COLORS.limit, meta.cps, n),
      ],
    );
    chart(
      into,
      `${meta.id}: queue wait (delay before the call is sent)`,
      d.xs,
      [
        { label: 'max', stroke: COLORS.max, width: 1.5, values: d.cols.wait_max, points: gapPoints(d.cols.wait_max) },
        {
          label: 'mean',
          stroke: COLORS.mean,
          width: 1.5,
          values: d.cols.wait_mean,
          points: gapPoints(d.cols.wait_mean),
        },
        flat(`maxWait ${meta.maxWaitMs} ms`, COLORS.limit, meta.maxWaitMs, n),
      ],
      { unit: 'ms' },
    );
    channelChart(into, meta.id, S.carrierChannels[meta.id], meta.channels);
  }

  function carriers() {
    if (D.carriers.length === 0) return;
    const describe = (c) =>
      `${c.id} — ${c.dispatched} dispatched, ${c.rerouted_away} rerouted away, ${c.rejected} rejected`;
    chooser(section('carriers', 'Carriers (busiest first)'), D.carriers, 'carrier', describe, carrierCharts);
  }

  /** What-if: all traffic under the old configuration against the new one. */
  function whatif() {
    const box = document.getElementById('whatif-charts');
    if (!box || !D.baseline) return;
    const pairs = [
      ['inbound', 'inbound admitted per second', 'admitted', ['offered', 'admitted', 'rejected']],
      ['outbound', 'outbound dispatched per second', 'dispatched', ['offered', 'dispatched', 'rejected', 'rerouted']],
    ];
    for (const [dir, title, col, zero] of pairs) {
      if (S[dir].idx.length === 0) continue;
      const neu = dense(S[dir], zero);
      const old = dense(D.baseline[dir], zero);
      chart(box, `What-if: ${title}, old against new configuration${bucketNote(neu.step)}`, neu.xs, [
        line('offered', COLORS.offered, neu.cols.offered),
        line(`${col} (old: ${D.whatif.baseline_config})`, COLORS.rerouted, old.cols[col]),
        line(`${col} (new: ${D.whatif.config})`, COLORS.admitted, neu.cols[col]),
      ]);
    }
  }

  try {
    whatif();
    totals();
    levels();
    carriers();
    let resizing;
    window.addEventListener('resize', () => {
      clearTimeout(resizing);
      resizing = setTimeout(() => {
        for (const u of charts)
          u.setSize({ width: Math.max(320, u.root.parentElement.parentElement.clientWidth), height: u.height });
      }, 100);
    });
    document.body.dataset.drawn = String(charts.length);
    document.body.dataset.ready = '1';
  } catch (err) {
    console.error(`report: ${err?.stack ? err.stack : err}`);
  }
})();
