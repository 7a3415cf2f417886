/**
 * The sidecar section of `npm run bench` (--only sidecar): `callgate serve` as its own process
 * on the bench's Redis, driven over keep-alive HTTP on loopback (undici Pool: a cheap client, so
 * the client's CPU takes little from the two processes measured), beside the in-process library
 * (CallGate.admit on a RedisStore) on the same Redis, at the same offered rates.
 *
 * Open loop: call i is issued at start + i / rate whatever happened to the calls before it, and
 * its latency runs from that scheduled time to its answer (a client that falls behind shows up
 * as latency, not as a lower offered rate). Bounded: rate x seconds calls per run, and a run ends
 * at most 10 s after its last call was due.
 *
 * Checked, else FAIL: every answer is a decision (HTTP 200); the admitted calls of every bucket
 * over all runs on one prefix never exceed a limit in any window (verify.ts); /metrics scraped
 * in the middle of each run counts between the decisions answered before the scrape and those
 * issued by its end, and after the runs exactly the decisions answered, admitted ones included.
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { Redis } from 'ioredis';
import { Pool } from 'undici';
import { CallGate } from '../src/gate.js';
import { RECOMMENDED_REDIS_OPTIONS, RedisStore } from '../src/store/redis/redis-store.js';
import type { Bucket } from '../src/store/types.js';
import { startSidecarProcess } from '../test/helpers/sidecar.js';
import { AdmittedLog, type LimitSpec } from './verify.js';
import { histogram, redisCpuSeconds, type Histogram } from './workload.js';

export interface SidecarBenchOptions {
  readonly redisUrl: string;
  /** Offered rates, calls per second. */
  readonly rates: readonly number[];
  /** Seconds per run. */
  readonly seconds: number;
  /** The configuration both systems run (as written in a file). */
  readonly config: unknown;
  /** Call i's peer and account. */
  readonly call: (i: number) => { peer: string; account?: string };
  /** The buckets (store names, limits) call i counts in when admitted: for the window check. */
  readonly bucketsOf: (i: number) => readonly Bucket[];
  /** HTTP connections kept alive to the sidecar. */
  readonly connections: number;
}

export interface SidecarRow {
  type: 'sidecar-run';
  system: 'sidecar HTTP' | 'library in process';
  rate: number;
  decisions: number;
  perSecond: number;
  admittedPct: number;
  p50ms: number;
  p99ms: number;
  maxMs: number;
  /** CPU cores used during the run: the bench process, the sidecar process, Redis. */
  cores: { bench: number; sidecar?: number; redis: number };
  /** Calls not answered within 10 s of the run's end: the offered rate is past what it sustains. */
  unanswered: number;
  check: 'ok' | 'FAIL';
  checkDetail: string;
}

interface RunResult {
  done: number;
  /** Calls answered with something else than a decision (FAIL). */
  errors: number;
  /** Calls still unanswered 10 s after the last was due (overload, not an error). */
  unanswered: number;
  seconds: number;
  hist: Histogram;
}

/**
 * Issue op(i) for i < rate * seconds, call i at start + i / rate (timer ticks of ~1 ms issue
 * every call due); latency from the scheduled time.
 */
function openLoop(
  rate: number,
  seconds: number,
  op: (i: number) => Promise<boolean>,
  midway?: (issued: () => number) => void,
): Promise<RunResult> {
  const n = Math.max(1, Math.round(rate * seconds));
  const hist = histogram();
  const start = performance.now();
  let issued = 0;
  let settled = 0;
  let errors = 0;
  let last = start;
  return new Promise((resolve) => {
    let timer: NodeJS.Timeout | undefined;
    const finish = () => {
      clearTimeout(timer);
      clearTimeout(giveUp);
      resolve({ done: settled - errors, errors, unanswered: n - settled, seconds: (last - start) / 1000, hist });
    };
    const giveUp = setTimeout(finish, seconds * 1000 + 10_000);
    const tick = () => {
      const due = Math.min(n, Math.floor(((performance.now() - start) * rate) / 1000) + 1);
      while (issued < due) {
        const i = issued++;
        const scheduled = start + (i * 1000) / rate;
        op(i).then(
          (ok) => {
            last = performance.now();
            if (ok) hist.recordValue(Math.max(1, Math.round((last - scheduled) * 1e6)));
            else errors++;
            if (++settled === n) finish();
          },
          () => {
            errors++;
            if (++settled === n) finish();
          },
        );
        if (i === Math.floor(n / 2) && midway) midway(() => issued);
      }
      if (issued < n) timer = setTimeout(tick, 1);
    };
    tick();
  });
}

/** CPU seconds (user + system) of a process so far, from /proc (Linux); undefined elsewhere. */
function procCpu(pid: number): number | undefined {
  try {
    const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
    return (Number(fields[11]) + Number(fields[12])) / 100; // utime, stime in USER_HZ (100)
  } catch {
    return undefined;
  }
}

/** Sum of callgate_decisions_total by outcome, from the exposition text. */
function decisionsIn(text: string): { total: number; admitted: number } {
  let total = 0;
  let admitted = 0;
  for (const m of text.matchAll(/^callgate_decisions_total\{([^}]*)\} (\d+)$/gm)) {
    total += Number(m[2]);
    if (/outcome="admitted"/.test(m[1]!)) admitted += Number(m[2]);
  }
  return { total, admitted };
}

const q = (h: Histogram, p: number) => h.getValueAtPercentile(p) / 1e6;

export async function sidecarSection(
  opts: SidecarBenchOptions,
  report: (row: SidecarRow) => void,
): Promise<SidecarRow[]> {
  const dir = mkdtempSync(join(tmpdir(), 'callgate-bench-'));
  const configPath = join(dir, 'limits.json');
  writeFileSync(configPath, JSON.stringify(opts.config));
  const admin = new Redis(opts.redisUrl);
  const rows: SidecarRow[] = [];
  const limitsOf = new Map<string, readonly LimitSpec[]>();
  const noteBuckets = (log: AdmittedLog, i: number, at: number) => {
    for (const b of opts.bucketsOf(i)) {
      log.add(b.name, at);
      limitsOf.set(b.name, b.limits);
    }
  };

  // --- the sidecar over HTTP -------------------------------------------------------------------
  const prefix = `bench:sidecar:${randomBytes(3).toString('hex')}:`;
  const sidecar = await startSidecarProcess([
    '--config',
    configPath,
    '--store',
    'redis',
    '--redis-url',
    opts.redisUrl,
    '--prefix',
    prefix,
    '--log-level',
    'info',
    '--no-watch',
  ]);
  const pool = new Pool(sidecar.url, { connections: opts.connections, pipelining: 1, keepAliveTimeout: 30_000 });
  const httpLog = new AdmittedLog();
  let answered = 0;
  let answeredAdmitted = 0;
  let outstanding = 0;
  let run = 0;
  const admitHttp = async (callId: string, i: number): Promise<boolean> => {
    const { peer, account } = opts.call(i);
    outstanding++;
    try {
      const res = await pool.request({
        method: 'POST',
        path: '/v1/admit',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ call_id: callId, peer, account }),
      });
      const body = (await res.body.json()) as { outcome: string; time_us: number };
      if (res.statusCode !== 200) return false;
      answered++;
      if (body.outcome === 'admitted') {
        answeredAdmitted++;
        noteBuckets(httpLog, i, body.time_us);
      }
      return true;
    } finally {
      outstanding--;
    }
  };
  /** Let an overloaded run's calls finish before the next run (bounded: 60 s). */
  const drain = async () => {
    const deadline = performance.now() + 60_000;
    while (outstanding > 0 && performance.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    return outstanding;
  };
  try {
    // warm-up (JIT, connections, scripts): not reported, not checked
    await openLoop(opts.rates[0]!, 1, (i) => admitHttp(`w${i}`, i));
    for (const rate of opts.rates) {
      run++;
      const before = {
        answered,
        admitted: answeredAdmitted,
        bench: process.cpuUsage(),
        sidecar: procCpu(sidecar.child.pid!),
        redis: await redisCpuSeconds(admin),
      };
      let scrape: Promise<string> | undefined;
      let scrapeCheck = '';
      const r = await openLoop(
        rate,
        opts.seconds,
        (i) => admitHttp(`r${run}-${i}`, i),
        (issued) => {
          const low = answered;
          scrape = pool
            .request({ method: 'GET', path: '/metrics' })
            .then((res) => res.body.text())
            .then((text) => {
              const seen = decisionsIn(text).total;
              const high = before.answered + issued();
              // counted before answered: at least what was answered when the scrape left
              if (seen < low || seen > high)
                scrapeCheck = `/metrics counted ${seen} decisions mid-run, outside [${low}, ${high}]`;
              return text;
            });
        },
      );
      await scrape;
      const left = await drain();
      const cpu = process.cpuUsage(before.bench);
      const sidecarCpu = procCpu(sidecar.child.pid!);
      const redisUsed = (await redisCpuSeconds(admin)) - before.redis;
      const decisions = answered - before.answered;
      const admitted = answeredAdmitted - before.admitted;
      const failures = [
        r.errors > 0 ? `${r.errors} calls answered without a decision` : '',
        left > 0 ? `${left} calls never answered` : '',
        scrapeCheck,
      ].filter(Boolean);
      const row: SidecarRow = {
        type: 'sidecar-run',
        system: 'sidecar HTTP',
        rate,
        decisions,
        perSecond: decisions / r.seconds,
        admittedPct: decisions === 0 ? 0 : (100 * admitted) / decisions,
        p50ms: q(r.hist, 50),
        p99ms: q(r.hist, 99),
        maxMs: r.hist.maxValue / 1e6,
        cores: {
          bench: (cpu.user + cpu.system) / 1e6 / r.seconds,
          sidecar:
            sidecarCpu !== undefined && before.sidecar !== undefined
              ? (sidecarCpu - before.sidecar) / r.seconds
              : undefined,
          redis: redisUsed / r.seconds,
        },
        unanswered: r.unanswered,
        check: failures.length > 0 ? 'FAIL' : 'ok',
        checkDetail: failures.join('; ') || '/metrics mid-run within the answered and issued counts',
      };
      rows.push(row);
      report(row);
      // past what it sustains: higher rates would only queue longer
      if (r.unanswered > 0 || row.perSecond < 0.9 * rate) break;
    }
    // after the runs: /metrics counts exactly what was answered; no window over its limit
    const final = decisionsIn(await (await pool.request({ method: 'GET', path: '/metrics' })).body.text());
    const scan = httpLog.check((b) => limitsOf.get(b)!);
    const problems: string[] = [];
    if (final.total !== answered || final.admitted !== answeredAdmitted) {
      problems.push(
        `/metrics counts ${final.total} decisions (${final.admitted} admitted), the bench got ${answered} (${answeredAdmitted} admitted)`,
      );
    }
    if (scan.violations > 0) problems.push(`${scan.violations} windows over their limit`);
    for (const row of rows) {
      if (problems.length > 0) {
        row.check = 'FAIL';
        row.checkDetail = [row.checkDetail, ...problems].join('; ');
      } else
        row.checkDetail += `; /metrics = ${final.total} decisions answered; no window over its limit (${scan.events} admitted events, ${scan.buckets} buckets)`;
    }
  } finally {
    await pool.close();
    await sidecar.stop('SIGTERM');
  }

  // --- the library in process, same Redis, same rates -----------------------------------------
  const redis = new Redis(opts.redisUrl, { ...RECOMMENDED_REDIS_OPTIONS, lazyConnect: true });
  await redis.connect();
  const gate = await CallGate.create({
    config: opts.config as never,
    store: new RedisStore({ redis, prefix: `bench:lib:${randomBytes(3).toString('hex')}:` }),
  });
  const libLog = new AdmittedLog();
  const libRows: SidecarRow[] = [];
  try {
    // warm-up, its admitted events noted too: the scan covers every event on this prefix
    await openLoop(opts.rates[0]!, 1, async (i) => {
      const d = await gate.admit({ callId: `w${i}`, ...opts.call(i) });
      if (d.admitted) noteBuckets(libLog, i, d.at);
      return d.degraded === undefined;
    });
    for (const rate of opts.rates) {
      run++;
      const before = { bench: process.cpuUsage(), redis: await redisCpuSeconds(admin) };
      let decisions = 0;
      let admitted = 0;
      const r = await openLoop(rate, opts.seconds, async (i) => {
        const d = await gate.admit({ callId: `r${run}-${i}`, ...opts.call(i) });
        if (d.degraded !== undefined) return false;
        decisions++;
        if (d.admitted) {
          admitted++;
          noteBuckets(libLog, i, d.at);
        }
        return true;
      });
      const cpu = process.cpuUsage(before.bench);
      const row: SidecarRow = {
        type: 'sidecar-run',
        system: 'library in process',
        rate,
        decisions,
        perSecond: decisions / r.seconds,
        admittedPct: decisions === 0 ? 0 : (100 * admitted) / decisions,
        p50ms: q(r.hist, 50),
        p99ms: q(r.hist, 99),
        maxMs: r.hist.maxValue / 1e6,
        cores: {
          bench: (cpu.user + cpu.system) / 1e6 / r.seconds,
          redis: ((await redisCpuSeconds(admin)) - before.redis) / r.seconds,
        },
        unanswered: r.unanswered,
        check: r.errors > 0 ? 'FAIL' : 'ok',
        checkDetail: r.errors > 0 ? `${r.errors} calls degraded (store out of reach)` : 'every call decided',
      };
      libRows.push(row);
    }
    const scan = libLog.check((b) => limitsOf.get(b)!);
    for (const row of libRows) {
      if (scan.violations > 0) {
        row.check = 'FAIL';
        row.checkDetail += `; ${scan.violations} windows over their limit`;
      } else row.checkDetail += `; no window over its limit (${scan.events} admitted events)`;
      rows.push(row);
      report(row);
    }
  } finally {
    await gate.close();
    await redis.quit();
    admin.disconnect();
    rmSync(dir, { recursive: true, force: true });
  }
  return rows;
}
