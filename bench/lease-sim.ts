/**
 * The lease rule on a simulated clock (src/lease, issue 28; no Redis): false refusals and
 * convergence of the shares' rebalancing, for the figures in the lease notes.
 *
 *   npx tsx bench/lease-sim.ts [--seconds 60] [--seed 7]
 *
 * Each run: Poisson calls at a fraction of the limit (1,000 calls per 1 s window, 1,100
 * channels, holds of 1 s on average), Zipf demand over the lanes (exponent 1) whose ranks are
 * reshuffled every 5 s (the hot lanes move), a coordinator ticking every T with messages of up
 * to 2 ms each way, lanes reporting what leaves their window before the next tick.
 *
 * false refusals: calls the leased level refused while the unleased reference (one sliding log
 *   and one channel count over all lanes, the same arrivals in the same order) admitted them,
 *   in % of offered. room: refused while the leased lanes' own total had room. ref: the
 *   reference's own refusals, in % of offered. lost: how many fewer calls the leased level
 *   admitted than the reference, in % of offered (leased% - ref%): past a false refusal the two
 *   see different counts, and the leased level may admit a later call the reference refuses,
 *   so near or over the limit false% counts calls that traded places as well as calls lost.
 * spill: calls counted on the overflow lane (the rows with one), in % of offered.
 * paused% / full% / chans%: the false refusals at 100 % by cause (causeRow).
 * convergence: how fast the shares follow a shift of demand (bench/lease-convergence.ts), median
 *   and worst over the shifts, in seconds.
 */
import { swappingArrivals, zipfArrivals } from '../scripts/lease-arrivals.js';
import { simulate } from '../scripts/lease-simulate.js';
import { convergence } from './lease-convergence.js';

function arg(name: string, dflt: number): number {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? Number(process.argv[i + 1]) : dflt;
}

const SECONDS = arg('seconds', 60);
const SEED = arg('seed', 7);
const SHIFT_US = 5_000_000;
const LIMIT = { calls: 1000, channels: 1100 };

/** Poisson calls at `load` × the limit, Zipf (exponent 1) over the lanes, hot lanes moving every `shiftUs` (5 s). */
function arrivalsFor(lanes: number, load: number, shiftUs = SHIFT_US, limit = LIMIT.calls) {
  return zipfArrivals({
    lanes,
    rate: limit * load,
    durationUs: SECONDS * 1e6,
    zipf: 1,
    shiftUs,
    meanHoldUs: 1_000_000,
    seed: SEED,
  });
}

const pct = (n: number, d: number) => ((100 * n) / d).toFixed(2).padStart(6);

/** What a row changes from the bench's shape: demand that never moves, no message delay, another headroom. */
interface Variant {
  readonly still?: boolean;
  /** Another limit (calls per 1 s window; channels 1.1 × that). */
  readonly limit?: number;
  /** An overflow lane (RedisStore's lease.overflow). */
  readonly overflow?: boolean;
  readonly latencyUs?: number;
  readonly headroom?: number;
  /** Two lanes (regions), 80 % of the calls on one, the two swapping every 5 s (bench/lease-carriers.ts). */
  readonly regions?: boolean;
}

function row(lanes: number, load: number, tickMs: number, leaving = true, v: Variant = {}): void {
  // regions: the carrier's channels of bench/lease-carriers.ts, 2 × the CPS × the 1 s hold
  const limit =
    v.limit === undefined ? LIMIT : { calls: v.limit, channels: Math.round(v.limit * (v.regions ? 2 : 1.1)) };
  const arrivals = v.regions
    ? swappingArrivals({
        rate: limit.calls * load,
        durationUs: SECONDS * 1e6,
        busyShare: 0.8,
        shiftUs: SHIFT_US,
        meanHoldUs: 1_000_000,
        seed: SEED,
      })
    : arrivalsFor(lanes, load, v.still ? Number.POSITIVE_INFINITY : SHIFT_US, limit.calls);
  const tickUs = tickMs * 1000;
  const headroom = v.headroom ?? 2;
  const r = simulate(arrivals, {
    lanes,
    limit,
    windowUs: 1_000_000,
    tickUs,
    latencyUs: v.latencyUs ?? 2_000,
    leaving,
    seed: SEED,
    trace: true,
    params: { windowTicks: 1e6 / tickUs, up: 0.6, down: 0.2, headroom, floor: { calls: 1, channels: 1 } },
    overflow: v.overflow === true,
  });
  if (r.violations > 0) throw new Error(`over the limit: ${r.violations} admissions`);
  const c = convergence(r.shareTrace, SHIFT_US, SECONDS * 1e6);
  console.log(
    [
      String(lanes).padStart(5),
      `${(load * 100).toFixed(0)} %`.padStart(6),
      `${tickMs} ms`.padStart(7),
      leaving ? '   yes' : '    no',
      String(r.offered).padStart(8),
      pct(r.falseRefusals, r.offered),
      pct(r.roomRefusals, r.offered),
      pct(r.offered - r.referenceAdmitted, r.offered),
      pct(r.offered - r.admitted, r.offered),
      pct(r.referenceAdmitted - r.admitted, r.offered),
      `${c.median.toFixed(1)} / ${c.worst.toFixed(1)} s`.padStart(14),
      String(r.maxInWindow).padStart(6),
      String(limit.calls).padStart(6),
      pct(r.spilled, r.offered),
    ].join(' '),
  );
}

console.log(
  `${SECONDS} s simulated per row, seed ${SEED}, limit ${LIMIT.calls} calls/s and ${LIMIT.channels} channels`,
);
console.log(
  'lanes   load    tick leave  offered false%  room%   ref% leased%  lost%  conv med/max  maxW  limit spill%',
);
for (const tick of [100, 250])
  for (const lanes of [8, 16, 32]) for (const load of [0.5, 0.9, 0.95, 1.0, 1.2]) row(lanes, load, tick);
console.log('-- shorter ticks, and without the leaving count (even spread assumed)');
for (const load of [0.9, 0.95, 1.0]) row(16, load, 50);
for (const load of [0.9, 0.95]) row(16, load, 100, false);
console.log('-- 16 lanes at 95 %, where the false refusals come from: demand never moving; no message');
console.log('   delay; headroom 1 and 3 sigma; ticks of 25 and 10 ms (the 50 ms row above is the base)');
row(16, 0.95, 50, true, { still: true });
row(16, 0.95, 50, true, { latencyUs: 0 });
for (const headroom of [1, 3]) row(16, 0.95, 50, true, { headroom });
for (const tick of [25, 10]) row(16, 0.95, tick);
console.log('-- sizing: the limit over the lanes (calls per lane per window) at 90 and 95 %, 50 ms ticks;');
console.log('   the limit in the last column (the rows above: 1,000)');
for (const limit of [100, 500, 2000, 4000])
  for (const lanes of [8, 16, 32]) for (const load of [0.9, 0.95]) row(lanes, load, 50, true, { limit });
console.log('-- the floor of a split budget: the coordinator at its best (no message delay, 1 ms ticks) beside');
console.log('   2 ms and 50 ms ticks; 8 lanes of a limit of 600 (bench/lease-cluster.ts), with an overflow lane too');
for (const load of [0.9, 0.95, 1.0])
  for (const overflow of [false, true])
    for (const [latencyUs, tick] of [
      [2_000, 50],
      [0, 1],
    ] as const)
      row(8, load, tick, true, { limit: 600, latencyUs, overflow });
console.log('-- two regions (80 % of the calls in one, swapping every 5 s; bench/lease-carriers.ts), limits of');
console.log(
  '   100 and 600: messages of up to 40 ms each way with ticks of 200 and 80 ms, 2 ms and 50 ms, none and 1 ms',
);
for (const limit of [100, 600])
  for (const load of [0.9, 0.95, 1.0])
    for (const [latencyUs, tick] of [
      [40_000, 200],
      [40_000, 80],
      [2_000, 50],
      [0, 1],
    ] as const)
      row(2, load, tick, true, { limit, latencyUs, regions: true });
console.log('-- with an overflow lane (spill%: calls counted there), limits of 500 and 1,000, 50 ms ticks');
for (const limit of [500, 1000])
  for (const lanes of [8, 16, 32])
    for (const load of [0.9, 0.95, 1.0, 1.2]) row(lanes, load, 50, true, { limit, overflow: true });

/**
 * At the limit, with an overflow lane: why the leased level refused what the reference admitted
 * (lane without calls share and the overflow lane paused after a refusal, or full; channels),
 * with the store's 50 ms pause and with none (every call its lane refuses asks the overflow lane).
 */
function causeRow(limit: number, lanes: number, pauseMs: number): void {
  const arrivals = arrivalsFor(lanes, 1.0, SHIFT_US, limit);
  const r = simulate(arrivals, {
    lanes,
    limit: { calls: limit, channels: Math.round(limit * 1.1) },
    windowUs: 1_000_000,
    tickUs: 50_000,
    latencyUs: 2_000,
    leaving: true,
    seed: SEED,
    params: { windowTicks: 20, up: 0.6, down: 0.2, headroom: 2, floor: { calls: 1, channels: 1 } },
    overflow: true,
    overflowPauseUs: pauseMs * 1000,
  });
  if (r.violations > 0) throw new Error(`over the limit: ${r.violations} admissions`);
  const c = r.falseByCause;
  console.log(
    [
      String(limit).padStart(6),
      String(lanes).padStart(5),
      `${pauseMs} ms`.padStart(6),
      pct(r.falseRefusals, r.offered),
      pct(c.overflowPaused, r.offered),
      pct(c.overflowFull, r.offered),
      pct(c.channels, r.offered),
      pct(r.referenceAdmitted - r.admitted, r.offered),
      pct(r.spilled, r.offered),
    ].join(' '),
  );
}

console.log('-- at 100 % with an overflow lane, 50 ms ticks: the false refusals by cause, in % of offered');
console.log('   (paused: the overflow lane not asked, after it refused; full: it refused too), with the');
console.log("   store's 50 ms pause and without one");
console.log(' limit lanes  pause false% paused%  full% chans%  lost% spill%');
for (const limit of [600, 1000])
  for (const lanes of [8, 16]) for (const pause of [50, 0]) causeRow(limit, lanes, pause);

/**
 * A lane cut off for 10 s (src/lease/lost.ts): leases of 300 ms renewed every tick, shrink
 * results awaited 150 ms, holds bounded by a 5 s maximum call duration. The cut lane's own
 * calls are refused from its lease end (its shard is out of reach); what matters is the others:
 * their false refusals during the cut, against the same run's false refusals outside it, and
 * when the lost share came back to the pool.
 */
function cutRow(lanes: number, load: number): void {
  const cut = { lane: 0, fromUs: 20_000_000, toUs: 30_000_000 };
  const arrivals = arrivalsFor(lanes, load);
  const r = simulate(arrivals, {
    lanes,
    limit: LIMIT,
    windowUs: 1_000_000,
    tickUs: 100_000,
    latencyUs: 2_000,
    seed: SEED,
    record: true,
    params: { windowTicks: 10, up: 0.6, down: 0.2, headroom: 2, floor: { calls: 1, channels: 1 } },
    leaseUs: 300_000,
    replyTimeoutUs: 150_000,
    maxHoldUs: 5_000_000,
    partitions: [cut],
  });
  if (r.violations > 0) throw new Error(`over the limit: ${r.violations} admissions`);
  const inCut = (t: number) => t >= cut.fromUs && t < cut.toUs;
  const others = arrivals.filter((a) => a.lane !== cut.lane);
  const offeredIn = others.filter((a) => inCut(a.t)).length;
  const offeredOut = others.length - offeredIn;
  const falseOthers = r.falseRefusalList.filter((f) => f.lane !== cut.lane);
  const falseIn = falseOthers.filter((f) => inCut(f.t)).length;
  const lost = r.lost.find((x) => x.lane === cut.lane);
  const back = (resource: 'calls' | 'channels') => {
    const x = r.reclaims.find((y) => y.lane === cut.lane && y.resource === resource);
    return x ? `${((x.t - cut.fromUs) / 1e6).toFixed(2)} s` : '-';
  };
  console.log(
    [
      String(lanes).padStart(5),
      `${(load * 100).toFixed(0)} %`.padStart(6),
      pct(arrivals.filter((a) => a.lane === cut.lane && inCut(a.t)).length, arrivals.filter((a) => inCut(a.t)).length),
      pct(falseIn, offeredIn),
      pct(falseOthers.length - falseIn, offeredOut),
      `${lost ? ((lost.t - cut.fromUs) / 1e6).toFixed(2) : '-'} s`.padStart(8),
      back('calls').padStart(8),
      back('channels').padStart(8),
      String(r.restored.length > 0 ? `${((r.restored[0]!.t - cut.toUs) / 1e6).toFixed(2)} s` : '-').padStart(8),
      String(r.maxInWindow).padStart(6),
    ].join(' '),
  );
}

console.log('-- lane 0 cut off from 20 s to 30 s: its share of the calls offered then, false refusals of the');
console.log('   other lanes in the cut and outside it, when the lane was lost, its calls and channels share');
console.log('   back in the pool (after the cut began), when it was taken back (after the cut ended)');
console.log('lanes   load   lane0% false%in false%out   lost  calls at chans at    back   maxW');
for (const lanes of [8, 16]) for (const load of [0.9, 1.0]) cutRow(lanes, load);
