/**
 * CPU per decision (`npm run bench -- --only cpu`): what a decision costs the routing process
 * that embeds the library, and Redis, side by side with rate-limiter-flexible.
 *
 * The open-loop section's driver spins (a setImmediate pump) to keep its own lateness low, so it
 * holds a core whatever the calls cost, and the process's CPU says nothing there. Here a 1 ms
 * timer issues `perTick` calls at each firing and the process sleeps in between: its CPU time
 * (process.cpuUsage, every thread: JIT and GC helpers too) and redis-server's (INFO cpu) over
 * `calls` calls, divided by them, are the cost per decision. Each run starts on an empty Redis
 * and is warmed with half as many calls of the same peers at the same pace (plans, keys, the
 * JIT), so that it measures a process and a Redis in their steady state: a first version warmed
 * 500 calls and measured 2,000, and counted 2.7 times the µs per call of this one (at 2 calls
 * per firing, 1 level). Every call of a firing leaves in one turn of the event loop, so
 * callgate's RedisStore batches them (one script call per batch) where rate-limiter-flexible
 * sends one script call per call: the costs compare at that pace, not in general. Systems run
 * in interleaved rounds; the ratios are paired per round.
 */
import { Redis } from 'ioredis';
import { RateLimiterRedis, RateLimiterRes } from 'rate-limiter-flexible';
import type { CallGateConfigInput } from '../src/config/types.js';
import { CallGate, RedisStore } from 'callgate';
import { callIdOf } from './driver.js';
import { median, type SectionOptions } from './openloop.js';
import { redisCpuSeconds } from './workload.js';

export interface CpuRow {
  readonly type: 'cpu';
  readonly name: string;
  /** Calls per timer firing, and the rate that gave (calls / s of run). */
  readonly perTick: number;
  readonly perSecond: number;
  /** Medians over rounds, µs per decision. */
  readonly nodeUserUs: number;
  readonly nodeSysUs: number;
  readonly redisUs: number;
  /** Per round: this system's Node CPU (user + sys) per decision ÷ rate-limiter-flexible's. */
  readonly nodeRatios: readonly number[];
  readonly redisRatios: readonly number[];
  readonly check: 'ok' | 'FAIL';
  readonly checkDetail: string;
}

interface Sample {
  readonly calls: number;
  readonly seconds: number;
  readonly userUs: number;
  readonly sysUs: number;
  readonly redisUs: number;
  readonly errors: number;
}

/** `perTick` calls at each firing of a 1 ms timer, `ticks` firings; resolves once every call has. */
function paced(perTick: number, ticks: number, op: (i: number) => Promise<unknown>): Promise<unknown[]> {
  const all: Promise<unknown>[] = [];
  let fired = 0;
  return new Promise((resolve) => {
    const timer = setInterval(() => {
      for (let k = 0; k < perTick; k++) all.push(op(all.length));
      if (++fired >= ticks) {
        clearInterval(timer);
        resolve(Promise.all(all));
      }
    }, 1);
  });
}

async function measure(
  admin: Redis,
  perTick: number,
  ticks: number,
  op: (i: number) => Promise<boolean>,
): Promise<Sample> {
  const r0 = await redisCpuSeconds(admin);
  const c0 = process.cpuUsage();
  const t0 = performance.now();
  let errors = 0;
  await paced(perTick, ticks, (i) => op(i).then((ok) => void (ok || errors++)));
  const seconds = (performance.now() - t0) / 1000;
  const cpu = process.cpuUsage(c0);
  const redisUs = ((await redisCpuSeconds(admin)) - r0) * 1e6;
  const calls = perTick * ticks;
  return { calls, seconds, userUs: cpu.user / calls, sysUs: cpu.system / calls, redisUs: redisUs / calls, errors };
}

type System = (round: number) => Promise<Sample>;

/**
 * callgate on `config` (flood shield off) over a RedisStore of its own; `release`: every other
 * admitted call is released at once (a config with channels), as the open-loop section does.
 */
function gateSystem(
  o: SectionOptions,
  admin: Redis,
  config: CallGateConfigInput,
  accounts: boolean,
  release: boolean,
  perTick: number,
  ticks: number,
  loneUpTo?: number,
): System {
  const { work } = o;
  return async (round) => {
    // before the gate: flushed under it, its ledger and holds keeper would find their holds lost
    await admin.flushdb();
    const c = new Redis(o.url);
    const gate = await CallGate.create({
      config,
      store: new RedisStore({ redis: c, prefix: 'bench:cpu:', ...(loneUpTo !== undefined && { loneUpTo }) }),
      shield: false,
      timeoutMs: 5000,
    });
    const call = (prefix: string, i: number) => {
      const p = work.seq[i % work.seq.length]!;
      const callId = callIdOf(prefix, i);
      return gate
        .admit({ callId, peer: `peer${p}`, account: accounts ? `acct${p % work.accounts}` : undefined })
        .then(async (d) => {
          if (release && d.admitted && (i & 1) === 1 && (await gate.release(callId)) !== 'released') return false;
          return d.degraded === undefined;
        });
    };
    try {
      // warm: the same peers (plans, keys) and the JIT, at the measured pace
      await paced(perTick, Math.ceil(ticks / 2), (i) => call(`w${round}.`, i));
      return await measure(admin, perTick, ticks, (i) => call(`c${round}.`, i));
    } finally {
      await gate.close();
      c.disconnect();
    }
  };
}

function rlfSystem(o: SectionOptions, admin: Redis, perTick: number, ticks: number): System {
  const { work } = o;
  return async () => {
    await admin.flushdb();
    const c = new Redis(o.url);
    const limiter = new RateLimiterRedis({
      storeClient: c,
      points: work.rlf.points,
      duration: work.rlf.windowUs / 1e6,
      keyPrefix: 'bench:cpu',
    });
    const call = (i: number) =>
      limiter.consume(`peer${work.seq[i % work.seq.length]!}`).then(
        () => true,
        (e: unknown) => e instanceof RateLimiterRes,
      );
    try {
      await paced(perTick, Math.ceil(ticks / 2), call);
      return await measure(admin, perTick, ticks, call);
    } finally {
      c.disconnect();
    }
  };
}

export const CPU_RLF = 'rate-limiter-flexible, 1 level';

/**
 * Each system of `configs` (name, config, with accounts, released) and rate-limiter-flexible at
 * `perTick` calls per millisecond, `calls` calls per run, `rounds` interleaved rounds.
 */
export async function cpuSection(
  o: SectionOptions,
  configs: readonly {
    name: string;
    config: CallGateConfigInput;
    accounts: boolean;
    release: boolean;
    /** The RedisStore's loneUpTo (undefined: its default). */
    loneUpTo?: number;
  }[],
  perTick: number,
  calls: number,
  rounds: number,
): Promise<CpuRow[]> {
  const ticks = Math.ceil(calls / perTick);
  const admin = new Redis(o.url);
  const systems: [string, System][] = [
    ...configs.map((c): [string, System] => [
      c.name,
      gateSystem(o, admin, c.config, c.accounts, c.release, perTick, ticks, c.loneUpTo),
    ]),
    [CPU_RLF, rlfSystem(o, admin, perTick, ticks)],
  ];
  const samples = new Map<string, Sample[]>(systems.map(([name]) => [name, []]));
  try {
    for (let round = 0; round < rounds; round++)
      for (let k = 0; k < systems.length; k++) {
        const [name, run] = systems[(k + round) % systems.length]!;
        samples.get(name)!.push(await run(round));
      }
  } finally {
    admin.disconnect();
  }
  const rlf = samples.get(CPU_RLF)!;
  return systems.map(([name]) => {
    const s = samples.get(name)!;
    const errors = s.reduce((a, x) => a + x.errors, 0);
    return {
      type: 'cpu',
      name,
      perTick,
      perSecond: median(s.map((x) => x.calls / x.seconds)),
      nodeUserUs: median(s.map((x) => x.userUs)),
      nodeSysUs: median(s.map((x) => x.sysUs)),
      redisUs: median(s.map((x) => x.redisUs)),
      nodeRatios: s.map((x, k) => (x.userUs + x.sysUs) / (rlf[k]!.userUs + rlf[k]!.sysUs)),
      redisRatios: s.map((x, k) => x.redisUs / rlf[k]!.redisUs),
      check: errors > 0 ? 'FAIL' : 'ok',
      checkDetail:
        errors > 0 ? `${errors} calls degraded, failed or not released` : 'every call decided (and released)',
    };
  });
}
