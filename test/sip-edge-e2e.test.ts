/**
 * The reference SIP edge (examples/sip-edge) in a real SIP call path, end to end: sipp callers
 * at three times a peer's limit, two sipp carriers, the edge as its own process (`npm run edge`'s
 * entry point) on loopback, on the memory store, on Redis, and on Redis stopped and restarted
 * mid-run. Everything is checked from sipp's own records (message logs, statistics, counts):
 *
 * - every call ended: sipp counts no failed call and no call left; refusals are the expected
 *   403/486/503 paths of the caller's scenario;
 * - admission: no peer-limit + 1 admitted calls were decided within one second. Each admitted
 *   call's decision lies between its INVITE leaving the caller and the 100 Trying (sent once
 *   admitted) reaching it, so L + 1 such intervals inside a window shorter than 1 s prove a
 *   violation on any clock;
 * - every 503 for a rate refusal carries Retry-After (and no other 503 does);
 * - wire spacing: per carrier, INVITE arrival gaps on the carrier's sipp >= 1/cps minus the
 *   clock resolution, and never more than cps in a rolling second (the carriers' sipp runs under
 *   real-time scheduling where allowed, so that its timestamps stay close to the wire on a busy
 *   host, as a policer's would); on the edge's own clock (the Dispatcher's readings) exactly
 *   >= 1/cps;
 * - reroutes happened (every route is [A, B]: a call on B was refused by A first), and the busy
 *   carrier answers (486) release calls like BYE does;
 * - the edge ends with no call in progress and no call held; one decision per call.
 *
 * SIP_E2E_KEEP=1 keeps each run's traces (sipp logs, the edge's configuration) and prints where.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { randomBytes } from 'node:crypto';
import { expect } from 'chai';
import type { EdgeSummary } from '../examples/sip-edge/edge.js';
import { startRedisServer, type RedisServer } from './helpers/redis.js';
import { freeUdpPort, maxInWindow, minGap, sippAvailable, SIPP_INSTALL_HINT, startSipp, type SipLogEntry, type SippReport } from './helpers/sipp.js';

const SCENARIOS = path.resolve('examples/sip-edge/sipp');
const S = 1_000_000;
const PEER_LIMIT = 10;
const OFFERED_CPS = 30;
const BUSY_CPS = 2;
const CPS = { A: 5, B: 8 } as const;
/** The resolution of the clocks compared (timers and sipp's -timer_resol 1): 1 ms. */
const RESOLUTION_US = 1_000;
const PAUSE_MS = 300;
/** Calls in progress p1 may have: a little below what its rate and the call length make, so some are refused for channels. */
const P1_CHANNELS = 6;

interface Run {
  offered: number;
  callers: SippReport[];
  carriers: Record<'A' | 'B', SippReport>;
  summary: EdgeSummary;
  edgeStderr: string;
  killAt?: number;
  restartAt?: number;
}

/** The edge as its own process; resolves once it listens. */
async function startEdge(configFile: string, extra: string[]): Promise<{ child: ChildProcess; stop(): Promise<{ summary: EdgeSummary; stderr: string }> }> {
  const child = spawn(process.execPath, ['--import', 'tsx', 'examples/sip-edge/main.ts', '--config', configFile, ...extra], { stdio: ['ignore', 'pipe', 'pipe'] });
  let stderr = '';
  child.stderr!.on('data', (b: Buffer) => (stderr += b.toString()));
  const lines: string[] = [];
  let wake: (() => void) | undefined;
  createInterface({ input: child.stdout! }).on('line', (l) => (lines.push(l), wake?.()));
  const exited = new Promise<number | null>((r) => child.once('exit', (code) => (r(code), wake?.())));
  const next = async (ms: number) => {
    const until = Date.now() + ms;
    while (lines.length === 0) {
      if (child.exitCode !== null || Date.now() > until) throw new Error(`edge: no output (exit ${child.exitCode}); stderr:\n${stderr}`);
      await new Promise<void>((r) => ((wake = r), setTimeout(r, 100)));
    }
    return lines.shift()!;
  };
  try {
    expect(JSON.parse(await next(30_000))).to.have.property('listening');
  } catch (err) {
    child.kill('SIGKILL');
    throw err;
  }
  return {
    child,
    async stop() {
      child.kill('SIGTERM');
      const summary = JSON.parse(await next(15_000)) as EdgeSummary;
      expect(await exited, `edge exit code; stderr:\n${stderr}`).to.equal(0);
      return { summary, stderr };
    },
  };
}

async function runCalls(opts: { store: 'memory' | 'redis'; redis?: RedisServer; seconds: number; outage?: { killAtMs: number; restartAtMs: number } }): Promise<Run> {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'callgate-sip-'));
  const started: { stop(): Promise<unknown> }[] = [];
  try {
    const carriers = await Promise.all((['A', 'B'] as const).map((name) => startSipp({ name: `carrier${name}`, scenario: path.join(SCENARIOS, 'carrier.xml'), dir, timeoutS: 90, priority: true, trace: 'short' })));
    started.push(...carriers);
    const [listen, callerPort] = [await freeUdpPort(), await freeUdpPort()];
    const config = {
      listen: `127.0.0.1:${listen}`,
      limits: {
        inbound: {
          peers: { p1: [{ limit: PEER_LIMIT, window: 'PT1S' }, { channels: P1_CHANNELS }], p2: [{ limit: 5, window: 'PT1S' }] },
        },
        outbound: {
          carriers: {
            A: { cps: CPS.A, maxWait: 'PT0.3S', channels: 3 },
            B: { cps: CPS.B, maxWait: 'PT0.6S', channels: 6 },
          },
        },
      },
      // p1 by its source address; p2 (the busy caller) by its From user, the documented fallback
      peers: { p1: { sources: [`127.0.0.1:${callerPort}`] }, p2: {} },
      identify: ['source', 'pai', 'from'],
      route: ['A', 'B'],
      carriers: { A: { address: `127.0.0.1:${carriers[0]!.port}` }, B: { address: `127.0.0.1:${carriers[1]!.port}` } },
      retryAfterJitter: 2,
      timeoutMs: 200,
    };
    const configFile = path.join(dir, 'edge.json');
    writeFileSync(configFile, JSON.stringify(config, null, 2));
    const storeArgs = opts.store === 'redis' ? ['--store', 'redis', '--redis-url', opts.redis!.url, '--prefix', `e2e:${randomBytes(4).toString('hex')}:`] : [];
    const edge = await startEdge(configFile, storeArgs);
    started.push({ stop: async () => edge.child.kill('SIGKILL') });
    const offered = OFFERED_CPS * opts.seconds;
    const t0 = Date.now();
    const callers = await Promise.all([
      startSipp({ name: 'caller', scenario: path.join(SCENARIOS, 'caller.xml'), dir, port: callerPort, remote: `127.0.0.1:${listen}`, rate: OFFERED_CPS, calls: offered, pauseMs: PAUSE_MS, service: '1000', keys: { caller: 'p1' }, timeoutS: 60 }),
      startSipp({ name: 'busy', scenario: path.join(SCENARIOS, 'caller.xml'), dir, remote: `127.0.0.1:${listen}`, rate: BUSY_CPS, calls: BUSY_CPS * opts.seconds, service: 'busy', keys: { caller: 'p2' }, timeoutS: 60 }),
    ]);
    started.push(...callers);
    let killAt: number | undefined;
    let restartAt: number | undefined;
    if (opts.outage) {
      await new Promise((r) => setTimeout(r, opts.outage!.killAtMs - (Date.now() - t0)));
      killAt = Date.now() * 1000;
      await opts.redis!.kill('SIGKILL');
      await new Promise((r) => setTimeout(r, opts.outage!.restartAtMs - (Date.now() - t0)));
      await opts.redis!.restart();
      restartAt = Date.now() * 1000;
    }
    const callerReports = await Promise.all(callers.map((c) => c.done(60_000)));
    const carrierReports = await Promise.all(carriers.map((c) => c.stop()));
    const { summary, stderr } = await edge.stop();
    started.length = 0;
    return { offered, callers: callerReports, carriers: { A: carrierReports[0]!, B: carrierReports[1]! }, summary, edgeStderr: stderr, killAt, restartAt };
  } finally {
    await Promise.all(started.map((s) => s.stop().catch(() => undefined)));
    if (process.env.SIP_E2E_KEEP) console.log(`      traces kept in ${dir}`);
    else rmSync(dir, { recursive: true, force: true });
  }
}

/** The caller's INVITEs (first transmission), their first 100 Trying and their final response, per call. */
function callsOf(report: SippReport) {
  const calls = new Map<string, { invite?: number; trying?: number; final?: SipLogEntry }>();
  for (const m of report.messages) {
    if (!/ INVITE$/.test(m.cseq)) continue;
    const c = calls.get(m.callId) ?? {};
    calls.set(m.callId, c);
    if (m.dir === 'sent' && m.method === 'INVITE') c.invite ??= m.t;
    if (m.dir === 'received' && m.status === 100) c.trying ??= m.t;
    if (m.dir === 'received' && m.status! >= 200) c.final ??= m;
  }
  return calls;
}

/**
 * Most admitted calls whose decision intervals [INVITE sent, 100 received] all fit in one window
 * shorter than 1 s: each was certainly decided inside it.
 */
function provenInOneSecond(intervals: { a: number; b: number }[]): number {
  const sorted = [...intervals].sort((x, y) => x.a - y.a);
  let best = 0;
  for (let i = 0; i < sorted.length; i++) {
    const from = sorted[i]!.a;
    let n = 0;
    for (let j = i; j < sorted.length && sorted[j]!.a < from + S; j++) if (sorted[j]!.b < from + S) n++;
    best = Math.max(best, n);
  }
  return best;
}

const warning = (m: SipLogEntry) => m.headers['warning']?.join(' ') ?? '';

/** Every check of the issue that holds in every run; returns the numbers for the log line. */
function checkRun(run: Run, label: string) {
  const { summary } = run;
  // every call ended: sipp counts no failure and no call left, nothing unexpected was logged
  for (const r of [...run.callers, run.carriers.A, run.carriers.B]) {
    expect(r.code, `${label} ${r.name} exit code; output:\n${r.output.slice(-1500)}`).to.equal(0);
    expect(r.stats['FailedCall(C)'], `${label} ${r.name} failed calls`).to.equal('0');
    expect(r.stats['CurrentCall'], `${label} ${r.name} calls left`).to.equal('0');
    expect(r.errors, `${label} ${r.name} unexpected messages`).to.equal('');
  }
  const [caller, busy] = run.callers as [SippReport, SippReport];
  expect(Number(caller.stats['OutgoingCall(C)'])).to.equal(run.offered);
  expect(Number(caller.stats['SuccessfulCall(C)'])).to.equal(run.offered);
  const calls = callsOf(caller);
  expect(calls.size).to.equal(run.offered);
  const finals = [...calls.values()].map((c) => c.final!);
  expect(finals.every((f) => f !== undefined), `${label}: every INVITE got a final response`).to.equal(true);
  const byStatus = (s: number) => finals.filter((f) => f.status === s);
  expect(byStatus(200).length + byStatus(503).length, `${label}: only 200 and 503 for the caller`).to.equal(run.offered);

  // admission: no L + 1 admitted calls proven decided within one second
  const admitted = [...calls.values()].filter((c) => c.trying !== undefined).map((c) => ({ a: c.invite!, b: c.trying! }));
  const proven = provenInOneSecond(admitted);
  expect(proven, `${label}: admitted calls provably decided within one second`).to.be.at.most(PEER_LIMIT);
  expect(admitted.length).to.be.greaterThan(0);

  // 503s: Retry-After on every rate refusal, on no other
  const all503 = [...run.callers.flatMap((r) => [...callsOf(r).values()].map((c) => c.final!))].filter((f) => f?.status === 503);
  const rate503 = all503.filter((f) => / rate"/.test(warning(f)));
  for (const f of all503) {
    const ra = f.headers['retry-after'];
    if (rate503.includes(f)) expect(ra && /^\d+$/.test(ra[0]!) && Number(ra[0]) >= 1, `${label}: rate 503 of ${f.callId} has Retry-After`).to.equal(true);
    else expect(ra, `${label}: ${warning(f)} 503 of ${f.callId} has no Retry-After`).to.equal(undefined);
  }
  expect(rate503.length, `${label}: offered at 3x the limit, rate refusals happened`).to.be.greaterThan(0);

  // the busy caller: identified by its From user (fallback), answered 486 by the carrier
  const busyFinals = [...callsOf(busy).values()].map((c) => c.final!);
  expect(busyFinals.filter((f) => f.status === 486).length + busyFinals.filter((f) => f.status === 503).length).to.equal(busyFinals.length);

  // wire spacing per carrier, on the carrier's sipp clock
  const spacing: Record<string, { n: number; minGapMs: number; maxPerSecond: number; edgeMinGapMs: number }> = {};
  for (const name of ['A', 'B'] as const) {
    const first = new Map<string, number>();
    for (const m of run.carriers[name].messages) if (m.dir === 'received' && m.method === 'INVITE' && !first.has(m.callId)) first.set(m.callId, m.t);
    const times = [...first.values()];
    const gap = minGap(times);
    const perSecond = maxInWindow(times, S);
    spacing[name] = { n: times.length, minGapMs: gap / 1000, maxPerSecond: perSecond, edgeMinGapMs: summary.carriers[name]?.minGapMs ?? NaN };
    expect(times.length, `${label}: carrier ${name} got calls`).to.be.greaterThan(1);
    // exact on the edge's own clock: the Dispatcher's readings just before each send
    const intervalUs = S / CPS[name];
    expect((summary.carriers[name]?.minGapMs ?? 0) * 1000, `${label}: carrier ${name} min send gap at the edge`).to.be.at.least(intervalUs);
    expect(gap, `${label}: carrier ${name} min INVITE gap (µs)`).to.be.at.least(intervalUs - RESOLUTION_US);
    expect(perSecond, `${label}: carrier ${name} INVITEs in a rolling second`).to.be.at.most(CPS[name]);
  }
  // every route is [A, B]: calls on B were refused by A first
  expect(summary.rerouted, `${label}: reroutes`).to.be.greaterThan(0);
  expect(spacing.B!.n).to.be.greaterThan(0);

  // channels: every admitted call released at its end (BYE, 486, refusal after admission), none held at the end
  expect(summary.holds, `${label}: calls holding channels when the edge stopped`).to.deep.equal({ 'peer:p1': 0, 'carrier:A': 0, 'carrier:B': 0 });
  expect(summary.releaseOutcomes['not-held'] ?? 0, `${label}: releases that found nothing held`).to.equal(0);
  // the edge: one decision per call, nothing left in progress or held, every admitted call released
  expect(summary.decisions, `${label}: one decision per call`).to.equal(summary.invites);
  expect(summary.invites).to.equal(run.offered + busyFinals.length);
  expect(summary.merged).to.equal(0);
  expect(summary.inProgress, `${label}: calls in progress at the end`).to.equal(0);
  expect(summary.held).to.equal(0);
  expect(summary.released, `${label}: every admitted call released`).to.equal(summary.admitted);
  const channel503 = all503.filter((f) => / channels"/.test(warning(f))).length;
  return {
    offered: run.offered,
    channel503,
    admitted: admitted.length,
    refused503: all503.length,
    rate503: rate503.length,
    answered: byStatus(200).length,
    busy486: busyFinals.filter((f) => f.status === 486).length,
    proven,
    spacing,
    summary,
  };
}

function describeNumbers(label: string, n: ReturnType<typeof checkRun>): string {
  const sp = Object.entries(n.spacing)
    .map(([c, s]) => `${c}: ${s.n} INVITEs, min gap ${s.minGapMs.toFixed(3)} ms at the carrier, ${s.edgeMinGapMs.toFixed(3)} ms at the edge (1/cps ${1e3 / CPS[c as 'A' | 'B']} ms), max ${s.maxPerSecond}/rolling s`)
    .join('; ');
  const q = (h: EdgeSummary['admissionUs']) => `p50 ${(h.p50 / 1000).toFixed(2)} / p99 ${(h.p99 / 1000).toFixed(2)} ms`;
  return (
    `      ${label}: offered ${n.offered} (+${n.busy486} busy), admitted ${n.admitted} (max ${n.proven} proven in 1 s, limit ${PEER_LIMIT}), ` +
    `answered ${n.answered}, 503 ${n.refused503} (rate ${n.rate503}, channels ${n.channel503}), rerouted ${n.summary.rerouted}, congested ${n.summary.congested}; ${sp}; ` +
    `edge admission ${q(n.summary.admissionUs)}, INVITE in->out (no delay) ${q(n.summary.forwardUs)}`
  );
}

describe('SIP edge end to end: sipp callers and carriers (examples/sip-edge)', function () {
  this.timeout(90_000);
  let redis: RedisServer | undefined;

  before(async function () {
    if (!sippAvailable()) throw new Error(SIPP_INSTALL_HINT);
    redis = await startRedisServer();
  });
  after(async () => {
    await redis?.stop();
  });

  it('memory store: every call ended, admission within the peer limit, Retry-After on rate refusals, carriers paced, reroutes, all released', async () => {
    const run = await runCalls({ store: 'memory', seconds: 6 });
    console.log(describeNumbers('memory', checkRun(run, 'memory')));
    expect(run.summary.errors).to.equal(0);
    expect(run.edgeStderr.replace(/^npm warn.*\n/gm, '')).to.equal('');
  });

  it('Redis store: the same', async () => {
    const run = await runCalls({ store: 'redis', redis, seconds: 6 });
    console.log(describeNumbers('redis', checkRun(run, 'redis')));
    expect(run.summary.errors).to.equal(0);
  });

  it('Redis stopped and restarted mid-run: every call ends (503 while away, fail-closed), one error line per outage, recovers by itself', async () => {
    const run = await runCalls({ store: 'redis', redis, seconds: 8, outage: { killAtMs: 2_500, restartAtMs: 5_000 } });
    const n = checkRun(run, 'outage');
    console.log(describeNumbers('outage', n));
    const calls = [...callsOf(run.callers[0]!).values()];
    const away = calls.filter((c) => c.final!.status === 503 && /store-unavailable/.test(warning(c.final!)));
    expect(away.length, 'store-unavailable 503s while Redis was away').to.be.greaterThan(0);
    // refused from the kill (minus a decision's timeout) until the client reconnected (ioredis backs off up to 2 s)
    for (const c of away) expect(c.invite!).to.be.within(run.killAt! - S / 2, run.restartAt! + 3 * S);
    // recovered by itself: calls answered after the restart
    const answeredAfter = calls.filter((c) => c.final!.status === 200 && c.invite! > run.restartAt!);
    expect(answeredAfter.length, 'answered after Redis came back').to.be.greaterThan(0);
    const outageLines = run.edgeStderr.split('\n').filter((l) => /Redis connection lost/.test(l));
    expect(outageLines, run.edgeStderr).to.have.length(1);
    console.log(`      outage: ${away.length} refused 503 store-unavailable while Redis was away, ${answeredAfter.length} answered after it came back`);
  });
});
