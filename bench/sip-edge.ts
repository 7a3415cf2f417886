/**
 * The reference SIP edge measured in a real SIP path (npm run bench:edge [-- --seconds N]):
 * the end-to-end test's setup (test/helpers/sip-edge.ts: sipp callers at three times peer p1's
 * limit, two sipp carriers, the edge as its own process on loopback), run for N seconds (default
 * 20) on the memory store, then on Redis (a redis-server child on a free port). Prints, per store:
 * calls offered, admitted and refused; the edge's admission latency and its INVITE-in to
 * INVITE-out latency for calls with no pacing delay (p50, p99, max); and per carrier the INVITE
 * spacing as the carrier's sipp saw it (min gap, most calls in a rolling second) and as the edge
 * sent it (min gap on the Dispatcher's clock).
 */
import { parseArgs } from 'node:util';
import { startRedisServer } from '../test/helpers/redis.js';
import { callsOf, CPS, OFFERED_CPS, PEER_LIMIT, runCalls, S, type Run } from '../test/helpers/sip-edge.js';
import { maxInWindow, minGap, sippAvailable, SIPP_INSTALL_HINT } from '../test/helpers/sipp.js';

const { values } = parseArgs({
  options: { seconds: { type: 'string', default: '20' }, json: { type: 'boolean', default: false } },
});
const seconds = Number(values.seconds);
if (!(Number.isInteger(seconds) && seconds >= 2 && seconds <= 120))
  throw new Error(`--seconds must be an integer from 2 to 120, got ${values.seconds}`);
if (!sippAvailable()) throw new Error(SIPP_INSTALL_HINT);

const ms = (us: number) => Math.round(us) / 1000;

function numbers(store: string, run: Run) {
  const calls = [...callsOf(run.callers[0]!).values()];
  const carriers = Object.fromEntries(
    (['A', 'B'] as const).map((c) => {
      const first = new Map<string, number>();
      for (const m of run.carriers[c].messages)
        if (m.dir === 'received' && m.method === 'INVITE' && !first.has(m.callId)) first.set(m.callId, m.t);
      const times = [...first.values()];
      return [
        c,
        {
          cps: CPS[c],
          invites: times.length,
          minGapMs: ms(minGap(times)),
          maxPerRollingSecond: maxInWindow(times, S),
          edgeMinGapMs: run.summary.carriers[c]?.minGapMs ?? null,
        },
      ];
    }),
  );
  const lat = (h: Run['summary']['admissionUs']) => ({
    count: h.count,
    p50Ms: ms(h.p50),
    p99Ms: ms(h.p99),
    maxMs: ms(h.max),
  });
  return {
    store,
    seconds,
    offered: run.offered,
    peerLimit: PEER_LIMIT,
    admitted: calls.filter((c) => c.trying !== undefined).length,
    refused: calls.filter((c) => c.final?.status === 503).length,
    refusedBy: run.summary.refused,
    rerouted: run.summary.rerouted,
    congested: run.summary.congested,
    admission: lat(run.summary.admissionUs),
    inviteInToOut: lat(run.summary.forwardUs),
    carriers,
  };
}

const redis = await startRedisServer();
try {
  for (const store of ['memory', 'redis'] as const) {
    const run = await runCalls({ store, redis, seconds });
    const n = numbers(store, run);
    if (values.json) {
      console.log(JSON.stringify(n));
      continue;
    }
    console.log(
      `${store}: ${n.offered} calls offered at ${OFFERED_CPS}/s over ${seconds} s (peer limit ${PEER_LIMIT}/s): ${n.admitted} admitted, ${n.refused} refused 503 (${JSON.stringify(n.refusedBy)}), ${n.rerouted} rerouted, ${n.congested} all routes congested`,
    );
    console.log(
      `  admission at the edge: p50 ${n.admission.p50Ms} ms, p99 ${n.admission.p99Ms} ms, max ${n.admission.maxMs} ms (${n.admission.count} decisions)`,
    );
    console.log(
      `  INVITE in -> out, no pacing delay: p50 ${n.inviteInToOut.p50Ms} ms, p99 ${n.inviteInToOut.p99Ms} ms, max ${n.inviteInToOut.maxMs} ms (${n.inviteInToOut.count} calls)`,
    );
    for (const [c, s] of Object.entries(n.carriers)) {
      console.log(
        `  carrier ${c} (cps ${s.cps}, 1/cps ${1000 / s.cps} ms): ${s.invites} INVITEs, min gap ${s.minGapMs} ms at the carrier's sipp (${s.edgeMinGapMs} ms at the edge), at most ${s.maxPerRollingSecond} in a rolling second`,
      );
    }
  }
} finally {
  await redis.stop();
}
