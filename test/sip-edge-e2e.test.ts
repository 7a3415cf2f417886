/**
 * The reference SIP edge (examples/sip-edge) in a real SIP call path, end to end: sipp callers
 * at three times a peer's limit, two sipp carriers, the edge as its own process (`npm run edge`'s
 * entry point) on loopback, on the memory store, on Redis, and on Redis stopped and restarted
 * mid-run. Everything is checked from sipp's own records (message logs, statistics, counts):
 *
 * - every call ended: sipp counts no failed call and no call left; refusals are the expected
 *   403/486/503 paths of the caller's scenario;
 * - admission: no peer-limit + 1 admitted calls were decided within one second. Each admitted
 *   call's decision lies between its INVITE leaving the caller (bounded below by the caller's
 *   log entry before it: sipp reads its clock after a send) and the 100 Trying (sent once
 *   admitted) reaching it, so L + 1 such intervals inside a window shorter than 1 s prove a
 *   violation on any clock;
 * - every 503 for a rate refusal carries Retry-After (and no other 503 does);
 * - wire spacing: on the edge's own clock (the Dispatcher's readings) exactly >= 1/cps; per
 *   carrier, on the carrier's sipp, INVITE arrival gaps >= 1/cps and never more than cps in a
 *   rolling second, both less WIRE_JITTER_US: each INVITE reaches sipp's clock a little after
 *   the edge read its own (the send, loopback, sipp's scheduling; sipp runs under real-time
 *   scheduling where allowed), and on a loaded 2-core machine a little can be tens of ms;
 * - reroutes happened (every route is [A, B]: a call on B was refused by A first), and the busy
 *   carrier answers (486) release calls like BYE does;
 * - the edge ends with no call in progress and no call held; one decision per call.
 *
 * SIP_E2E_KEEP=1 keeps each run's traces (sipp logs, the edge's configuration) and prints where.
 */
import { expect } from 'chai';
import type { EdgeSummary } from '../examples/sip-edge/edge.js';
import { startRedisServer, type RedisServer } from './helpers/redis.js';
import { callsOf, CPS, PEER_LIMIT, runCalls, S, type Run } from './helpers/sip-edge.js';
import {
  maxInWindow,
  minGap,
  provenInOneSecond,
  sippAvailable,
  SIPP_INSTALL_HINT,
  warning,
  type SippReport,
} from './helpers/sipp.js';

/**
 * How much later than the edge's clock reading an INVITE may reach the carrier's sipp clock
 * (and so how much closer to the one before it): 30 ms, room for a loaded machine. Still tight
 * enough that sending one call per second more than cps fails (A: 6 INVITEs 167 ms apart
 * land in 0.83 s; B: 9 at 111 ms in 0.89 s: both under 1 s - 30 ms).
 */
const WIRE_JITTER_US = 30_000;

/** Every check of the issue that holds in every run; returns the numbers for the log line. */
function checkRun(run: Run, label: string) {
  const { summary } = run;
  // every call ended: sipp counts no failure and no call left, nothing unexpected was logged
  for (const r of [...run.callers, run.carriers.A, run.carriers.B]) {
    expect(r.code, `${label} ${r.name} exit code; output:\n${r.output.slice(-1500)}`).to.equal(0);
    expect(r.stats['FailedCall(C)'], `${label} ${r.name} failed calls`).to.equal('0');
    expect(r.stats.CurrentCall, `${label} ${r.name} calls left`).to.equal('0');
    expect(r.errors, `${label} ${r.name} unexpected messages`).to.equal('');
  }
  const [caller, busy] = run.callers as [SippReport, SippReport];
  expect(Number(caller.stats['OutgoingCall(C)'])).to.equal(run.offered);
  expect(Number(caller.stats['SuccessfulCall(C)'])).to.equal(run.offered);
  const calls = callsOf(caller);
  expect(calls.size).to.equal(run.offered);
  const finals = [...calls.values()].map((c) => c.final!);
  expect(
    finals.every((f) => f !== undefined),
    `${label}: every INVITE got a final response`,
  ).to.equal(true);
  const byStatus = (s: number) => finals.filter((f) => f.status === s);
  expect(byStatus(200).length + byStatus(503).length, `${label}: only 200 and 503 for the caller`).to.equal(
    run.offered,
  );

  // admission: no L + 1 admitted calls proven decided within one second
  const admitted = [...calls.values()]
    .filter((c) => c.trying !== undefined)
    .map((c) => ({ a: c.leftAfter!, b: c.trying! }));
  const proven = provenInOneSecond(admitted);
  expect(proven, `${label}: admitted calls provably decided within one second`).to.be.at.most(PEER_LIMIT);
  expect(admitted.length).to.be.greaterThan(0);

  // 503s: Retry-After on every rate refusal, on no other
  const all503 = [...run.callers.flatMap((r) => [...callsOf(r).values()].map((c) => c.final!))].filter(
    (f) => f?.status === 503,
  );
  const rate503 = all503.filter((f) => / rate"/.test(warning(f)));
  for (const f of all503) {
    const ra = f.headers['retry-after'];
    if (rate503.includes(f))
      expect(
        ra && /^\d+$/.test(ra[0]!) && Number(ra[0]) >= 1,
        `${label}: rate 503 of ${f.callId} has Retry-After`,
      ).to.equal(true);
    else expect(ra, `${label}: ${warning(f)} 503 of ${f.callId} has no Retry-After`).to.equal(undefined);
  }
  expect(rate503.length, `${label}: offered at 3x the limit, rate refusals happened`).to.be.greaterThan(0);

  // the busy caller: identified by its From user (fallback), answered 486 by the carrier
  const busyFinals = [...callsOf(busy).values()].map((c) => c.final!);
  expect(
    busyFinals.filter((f) => f.status === 486).length + busyFinals.filter((f) => f.status === 503).length,
  ).to.equal(busyFinals.length);

  // wire spacing per carrier, on the carrier's sipp clock
  const spacing: Record<string, { n: number; minGapMs: number; maxPerSecond: number; edgeMinGapMs: number }> = {};
  for (const name of ['A', 'B'] as const) {
    const first = new Map<string, number>();
    for (const m of run.carriers[name].messages)
      if (m.dir === 'received' && m.method === 'INVITE' && !first.has(m.callId)) first.set(m.callId, m.t);
    const times = [...first.values()];
    const gap = minGap(times);
    const perSecond = maxInWindow(times, S);
    spacing[name] = {
      n: times.length,
      minGapMs: gap / 1000,
      maxPerSecond: perSecond,
      edgeMinGapMs: summary.carriers[name]?.minGapMs ?? NaN,
    };
    expect(times.length, `${label}: carrier ${name} got calls`).to.be.greaterThan(1);
    // exact on the edge's own clock: the Dispatcher's readings just before each send
    const intervalUs = S / CPS[name];
    expect(
      (summary.carriers[name]?.minGapMs ?? 0) * 1000,
      `${label}: carrier ${name} min send gap at the edge`,
    ).to.be.at.least(intervalUs);
    expect(gap, `${label}: carrier ${name} min INVITE gap (µs)`).to.be.at.least(intervalUs - WIRE_JITTER_US);
    expect(
      maxInWindow(times, S - WIRE_JITTER_US),
      `${label}: carrier ${name} INVITEs in a rolling second (less the jitter)`,
    ).to.be.at.most(CPS[name]);
  }
  // every route is [A, B]: calls on B were refused by A first
  expect(summary.rerouted, `${label}: reroutes`).to.be.greaterThan(0);
  expect(spacing.B!.n).to.be.greaterThan(0);

  // channels: every admitted call released at its end (BYE, 486, refusal after admission), none held at the end
  expect(summary.holds, `${label}: calls holding channels when the edge stopped`).to.deep.equal({
    'peer:p1': 0,
    'carrier:A': 0,
    'carrier:B': 0,
  });
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
    .map(
      ([c, s]) =>
        `${c}: ${s.n} INVITEs, min gap ${s.minGapMs.toFixed(3)} ms at the carrier, ${s.edgeMinGapMs.toFixed(3)} ms at the edge (1/cps ${1e3 / CPS[c as 'A' | 'B']} ms), max ${s.maxPerSecond}/rolling s`,
    )
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

  before(async () => {
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
    console.log(
      `      outage: ${away.length} refused 503 store-unavailable while Redis was away, ${answeredAfter.length} answered after it came back`,
    );
  });
});
