/**
 * A real Kamailio (Debian's 5.6, examples/kamailio/kamailio.cfg) in front of the callgate
 * sidecar on Redis, with sipp callers and carriers on loopback (the SIP edge test's helper and
 * scenarios): a caller at three times its peer's limit, a "busy" caller whose calls the carriers
 * refuse 486. Checked from sipp's own records and the sidecar's state and metrics:
 *
 * - every call ended (sipp counts no failed call and no call left, nothing unexpected);
 * - admission: no peer-limit + 1 admitted calls were decided within one second (each admitted
 *   call's decision lies between its INVITE leaving the caller, bounded below by the caller's
 *   log entry before it, and the 100 Trying, which the configuration sends once admitted,
 *   reaching it);
 * - every 503 for a rate refusal carries Retry-After, and no other 503 does;
 * - carrier spacing: per carrier, INVITE gaps on the carrier's sipp >= 1/cps of the carrier's
 *   policer minus 1 ms, never more than that cps in a rolling second. Kamailio holds each call
 *   for the delay from the moment the sidecar's answer reached it, so HTTP and timer jitter come
 *   on top of the slot: the sidecar paces 20 % under the policer (README "Kamailio");
 * - reroutes (every route is [A, B]: a call on B was passed over by A);
 * - channels released: at the end no call holds a channel anywhere, and every admitted call was
 *   released (BYE, the carrier's 486, or no carrier); one decision per call (retransmissions
 *   absorbed by tm).
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { expect } from 'chai';
import { kamailioAvailable, startKamailio } from './helpers/kamailio.js';
import { startRedisServer, type RedisServer } from './helpers/redis.js';
import { startSidecarProcess, type SidecarProcess } from './helpers/sidecar.js';
import { callsOf, SCENARIOS } from './helpers/sip-edge.js';
import {
  maxInWindow,
  minGap,
  provenInOneSecond,
  sippAvailable,
  SIPP_INSTALL_HINT,
  startSipp,
  warning,
} from './helpers/sipp.js';

const CONFIG = path.resolve('examples/kamailio/kamailio.cfg');
const KAMAILIO_HINT =
  'kamailio not found: install it (Debian: apt-get install kamailio kamailio-utils-modules kamailio-json-modules); .ci/run does so when it is missing';
const S = 1_000_000;
const PEER_LIMIT = 10;
const OFFERED_CPS = 30;
const SECONDS = 6;
const BUSY_CPS = 2;
/** The carriers' policers; the sidecar paces 20 % below them. */
const POLICER = { A: 5, B: 8 } as const;
const PACED = { A: POLICER.A * 0.8, B: POLICER.B * 0.8 } as const;
const RESOLUTION_US = 1_000;
/** The sidecar requires it: every query of Kamailio's must send it. */
const TOKEN = randomBytes(12).toString('hex');
const AUTH = { authorization: `Bearer ${TOKEN}` };

describe('Kamailio in front of the sidecar (examples/kamailio), sipp callers and carriers', function () {
  this.timeout(120_000);
  let redis: RedisServer | undefined;
  let dir: string;

  before(async () => {
    if (!sippAvailable()) throw new Error(SIPP_INSTALL_HINT);
    if (!kamailioAvailable()) throw new Error(KAMAILIO_HINT);
    redis = await startRedisServer();
    dir = mkdtempSync(path.join(os.tmpdir(), 'callgate-kamailio-'));
  });
  after(async () => {
    await redis?.stop();
    if (process.env.SIP_E2E_KEEP) console.log(`      traces kept in ${dir}`);
    else if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('every call ended, admission within the peer limit, Retry-After on rate refusals, carriers paced, reroutes, all released', async () => {
    const stops: (() => Promise<unknown>)[] = [];
    let sidecar: SidecarProcess | undefined;
    try {
      const carriers = await Promise.all(
        (['A', 'B'] as const).map((name) =>
          startSipp({
            name: `carrier${name}`,
            scenario: path.join(SCENARIOS, 'carrier.xml'),
            dir,
            timeoutS: 90,
            priority: true,
            trace: 'short',
          }),
        ),
      );
      stops.push(...carriers.map((c) => () => c.stop()));
      // p2 (the busy caller) gets a channel limit that never binds: every admitted call then holds
      // a channel, so its release always finds something, even a busy call no carrier took
      // (all-routes-congested), which would otherwise answer not-held
      const limits = {
        inbound: {
          peers: {
            p1: [{ limit: PEER_LIMIT, window: 'PT1S' }, { channels: 6 }],
            p2: [{ limit: 5, window: 'PT1S' }, { channels: 1000 }],
          },
        },
        outbound: {
          carriers: {
            A: { cps: PACED.A, maxWait: 'PT0.3S', channels: 3 },
            B: { cps: PACED.B, maxWait: 'PT0.6S', channels: 6 },
          },
        },
      };
      const configPath = path.join(dir, 'limits.json');
      writeFileSync(configPath, JSON.stringify(limits, null, 2));
      sidecar = await startSidecarProcess([
        '--token',
        TOKEN,
        '--config',
        configPath,
        '--store',
        'redis',
        '--redis-url',
        redis!.url,
        '--prefix',
        `kam:${randomBytes(4).toString('hex')}:`,
        '--retry-jitter',
        '2',
        '--timeout-ms',
        '300',
        '--log-level',
        'info',
      ]);
      stops.push(() => sidecar!.stop());
      const kamailio = await startKamailio({
        cfg: CONFIG,
        dir,
        pkgMb: 8,
        defines: {
          SIDECAR: `"${sidecar.url}"`,
          SIDECAR_TOKEN: `"${TOKEN}"`,
          CARRIER_A: `"sip:127.0.0.1:${carriers[0]!.port}"`,
          CARRIER_B: `"sip:127.0.0.1:${carriers[1]!.port}"`,
          CHILDREN: '4',
        },
      });
      stops.push(() => kamailio.stop());
      const remote = `127.0.0.1:${kamailio.port}`;
      const offered = OFFERED_CPS * SECONDS;
      const callers = await Promise.all([
        startSipp({
          name: 'caller',
          scenario: path.join(SCENARIOS, 'caller.xml'),
          dir,
          remote,
          rate: OFFERED_CPS,
          calls: offered,
          pauseMs: 300,
          service: '1000',
          keys: { caller: 'p1' },
          timeoutS: 60,
        }),
        startSipp({
          name: 'busy',
          scenario: path.join(SCENARIOS, 'caller.xml'),
          dir,
          remote,
          rate: BUSY_CPS,
          calls: BUSY_CPS * SECONDS,
          service: 'busy',
          keys: { caller: 'p2' },
          timeoutS: 60,
        }),
      ]);
      const [caller, busy] = await Promise.all(callers.map((c) => c.done(60_000)));
      const carrierReports = await Promise.all(carriers.map((c) => c.stop()));
      const log = kamailio.log();

      // every call ended
      for (const r of [caller!, busy!, ...carrierReports]) {
        expect(
          r.code,
          `${r.name} exit code; errors:\n${r.errors.slice(-3000)}\noutput:\n${r.output.slice(-1500)}\nkamailio:\n${log.slice(-2000)}`,
        ).to.equal(0);
        expect(r.stats['FailedCall(C)'], `${r.name} failed calls`).to.equal('0');
        expect(r.stats.CurrentCall, `${r.name} calls left`).to.equal('0');
        expect(r.errors, `${r.name} unexpected messages`).to.equal('');
      }
      const calls = callsOf(caller!);
      expect(calls.size).to.equal(offered);
      const finals = [...calls.values()].map((c) => c.final!);
      expect(
        finals.every((f) => f !== undefined),
        'every INVITE got a final response',
      ).to.equal(true);
      const byStatus = (s: number) => finals.filter((f) => f.status === s);
      expect(byStatus(200).length + byStatus(503).length, 'only 200 and 503 for the caller').to.equal(offered);

      // admission
      const admitted = [...calls.values()]
        .filter((c) => c.trying !== undefined)
        .map((c) => ({ a: c.leftAfter!, b: c.trying! }));
      const proven = provenInOneSecond(admitted);
      expect(proven, 'admitted calls provably decided within one second').to.be.at.most(PEER_LIMIT);
      expect(admitted.length).to.be.greaterThan(PEER_LIMIT);

      // Retry-After on every rate refusal, on no other 503
      const all503 = [...callsOf(caller!).values(), ...callsOf(busy!).values()]
        .map((c) => c.final!)
        .filter((f) => f?.status === 503);
      const rate503 = all503.filter((f) => / rate"/.test(warning(f)));
      for (const f of all503) {
        const ra = f.headers['retry-after'];
        if (rate503.includes(f))
          expect(ra && /^\d+$/.test(ra[0]!) && Number(ra[0]) >= 1, `rate 503 of ${f.callId} has Retry-After`).to.equal(
            true,
          );
        else expect(ra, `${warning(f)} 503 of ${f.callId} has no Retry-After`).to.equal(undefined);
      }
      expect(rate503.length, 'offered at 3x the limit: rate refusals').to.be.greaterThan(0);
      const busyFinals = [...callsOf(busy!).values()].map((c) => c.final!);
      expect(
        busyFinals.filter((f) => f.status === 486 || f.status === 503).length,
        'busy calls: 486 from the carrier, or 503',
      ).to.equal(busyFinals.length);
      expect(busyFinals.filter((f) => f.status === 486).length).to.be.greaterThan(0);

      // carrier spacing, on the carriers' sipp clocks, against the policer
      const spacing: string[] = [];
      for (const [k, name] of [
        [0, 'A'],
        [1, 'B'],
      ] as const) {
        const first = new Map<string, number>();
        for (const m of carrierReports[k]!.messages)
          if (m.dir === 'received' && m.method === 'INVITE' && !first.has(m.callId)) first.set(m.callId, m.t);
        const times = [...first.values()];
        expect(times.length, `carrier ${name} got calls`).to.be.greaterThan(1);
        const gap = minGap(times);
        const perSecond = maxInWindow(times, S);
        spacing.push(
          `${name}: ${times.length} INVITEs, min gap ${(gap / 1000).toFixed(1)} ms (policer ${1000 / POLICER[name]} ms, paced ${(1000 / PACED[name]).toFixed(1)} ms), max ${perSecond}/rolling s`,
        );
        expect(gap, `carrier ${name} min INVITE gap (µs)`).to.be.at.least(S / POLICER[name] - RESOLUTION_US);
        expect(perSecond, `carrier ${name} INVITEs in a rolling second`).to.be.at.most(POLICER[name]);
      }

      // channels released, one decision per call
      const state = (await (await fetch(`${sidecar.url}/v1/state`, { headers: AUTH })).json()) as {
        buckets: { bucket: string; channels?: { in_use: number } }[];
        carriers: { carrier: string; channels?: { in_use: number } }[];
      };
      expect(state.buckets.find((b) => b.bucket === 'peer:p1')!.channels).to.deep.include({ in_use: 0 });
      expect(state.carriers.map((c) => [c.carrier, c.channels?.in_use])).to.deep.equal([
        ['A', 0],
        ['B', 0],
      ]);
      // a release's outcome is counted once its answer is back, and one that may have raced the
      // holds keeper's periodic write is sent again first: give the last ones a moment to count
      let metrics = '';
      const sum = (re: RegExp) => [...metrics.matchAll(re)].reduce((n, m) => n + Number(m[1]), 0);
      for (let i = 0; i < 30; i++) {
        metrics = await (await fetch(`${sidecar.url}/metrics`, { headers: AUTH })).text();
        const admitted = sum(/^callgate_decisions_total\{direction="in",outcome="admitted"[^}]*\} (\d+)$/gm);
        if (sum(/^callgate_releases_total\{outcome="released"\} (\d+)$/gm) >= admitted) break;
        await new Promise((r) => setTimeout(r, 100));
      }
      const decidedIn = sum(/^callgate_decisions_total\{direction="in"[^}]*\} (\d+)$/gm);
      const admittedIn = sum(/^callgate_decisions_total\{direction="in",outcome="admitted"[^}]*\} (\d+)$/gm);
      const released = sum(/^callgate_releases_total\{outcome="released"\} (\d+)$/gm);
      expect(decidedIn, 'one decision per call').to.equal(offered + busyFinals.length);
      expect(released, 'every admitted call released once').to.equal(admittedIn);
      expect(sum(/^callgate_releases_total\{outcome="not-held"\} (\d+)$/gm), 'no release that found nothing').to.equal(
        0,
      );
      expect(
        sum(/^callgate_carrier_decisions_total\{carrier="A",outcome="rerouted"\} (\d+)$/gm),
        'reroutes from A to B',
      ).to.be.greaterThan(0);
      console.log(
        `      offered ${offered} (+${busyFinals.length} busy), admitted ${admitted.length} (max ${proven} proven in 1 s, limit ${PEER_LIMIT}), answered ${byStatus(200).length}, ` +
          `503 ${all503.length} (rate ${rate503.length}), busy 486 ${busyFinals.filter((f) => f.status === 486).length}; ${spacing.join('; ')}`,
      );
    } finally {
      for (const stop of stops.reverse()) await stop().catch(() => undefined);
    }
  });
});
