/**
 * The flood shield (src/admission/shield.ts): after a refusal by rate with a retry-after, the
 * next calls of the same buckets are refused in process until then, with the outcome Redis gives.
 *   - given times, one process: which calls reach Redis (script calls counted), the reload,
 *     the channel plans it never touches, a call back in time;
 *   - a seeded trace (three levels, a 10x flood beside normal traffic) replayed with and without
 *     the shield on fresh prefixes: identical outcomes, call by call;
 *   - live, four routing processes on one Redis (Redis TIME): every shielded refusal found the
 *     window of its peer full at that moment (from the admitted calls of all four), and no window
 *     holds more than its limit.
 */
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';
import type { Redis } from 'ioredis';
import { prng } from '../scripts/make-fixtures.js';
import type { AdmissionDecision } from '../src/admission/admission.js';
import type { CallGateConfigInput } from '../src/config/types.js';
import { CallGate } from '../src/gate.js';
import { RedisStore } from '../src/store/redis/redis-store.js';
import { uniquePrefix } from './admission/stores.js';
import { getRedis, newRedisClient, type RedisHandle } from './helpers/redis.js';
import { startWorker, type Worker } from './helpers/worker.js';
import type { ShieldWorkerArgs, ShieldWorkerReport } from './shield/worker.js';

const S = 1_000_000;
const T0 = 1_700_000_000_000_000;
const WORKER = fileURLToPath(new URL('./shield/worker.ts', import.meta.url));
const ROOT = fileURLToPath(new URL('..', import.meta.url));

async function scriptCalls(raw: Redis): Promise<number> {
  const info = await raw.info('commandstats');
  let n = 0;
  for (const m of info.matchAll(/^cmdstat_(evalsha|eval):calls=(\d+)/gm)) n += Number(m[2]);
  return n;
}

describe('flood shield', function () {
  this.timeout(60_000);
  let handle: RedisHandle;
  let raw: Redis;
  let client: Redis;
  const gates: CallGate[] = [];
  before(async () => {
    handle = await getRedis();
    raw = newRedisClient(handle);
    client = newRedisClient(handle);
  });
  afterEach(async () => {
    for (const g of gates.splice(0)) await g.close();
  });
  after(async () => {
    raw.disconnect();
    client.disconnect();
    await handle.stop();
  });
  const gate = async (config: CallGateConfigInput, shield?: boolean): Promise<CallGate> => {
    const g = await CallGate.create({
      config,
      // the holds keeper's checks are script calls too: off, as this test counts them
      store: new RedisStore({ redis: client, prefix: uniquePrefix('shield'), holds: { syncMs: 0 } }),
      timeoutMs: 5_000,
      shield,
    });
    gates.push(g);
    return g;
  };

  it('refuses in process until the retry-after, then asks Redis again; a reload clears it', async () => {
    const g = await gate({ inbound: { defaultPeer: [{ limit: 3, window: '1s' }] } }, true);
    await g.admit({ callId: 'w', peer: 'warm', at: T0 }); // the script loaded before counting
    await raw.config('RESETSTAT');
    const d: AdmissionDecision[] = [];
    for (let i = 0; i < 3; i++) d.push(await g.admit({ callId: `a${i}`, peer: 'x', at: T0 + i * 1000 }));
    expect(d.every((x) => x.admitted)).to.equal(true);
    // the 4th is refused by Redis until the first call leaves the window (T0 + 1 s)
    const r = await g.admit({ callId: 'r', peer: 'x', at: T0 + 10_000 });
    expect(r).to.include({ admitted: false, limitedBy: 'peer:x', retryAfterMs: 990 });
    expect(r.shielded).to.equal(undefined);
    expect(await scriptCalls(raw)).to.equal(4);
    // the next ones inside the retry-after: refused in process, same answer, the wait shrinking
    for (const at of [T0 + 20_000, T0 + 500_000, T0 + S - 1]) {
      const s = await g.admit({ callId: `s${at}`, peer: 'x', at });
      expect(s).to.deep.include({
        admitted: false,
        limitedBy: 'peer:x',
        reason: 'rate',
        retryAfterMs: Math.ceil((T0 + S - at) / 1000),
        at,
        shielded: true,
      });
    }
    expect(await scriptCalls(raw)).to.equal(4);
    // another peer is not shielded
    expect((await g.admit({ callId: 'y', peer: 'y', at: T0 + 600_000 })).admitted).to.equal(true);
    expect(await scriptCalls(raw)).to.equal(5);
    // at T0 + 1 s the first call has left the window: Redis decides, and admits
    expect((await g.admit({ callId: 'b', peer: 'x', at: T0 + S })).admitted).to.equal(true);
    expect(await scriptCalls(raw)).to.equal(6);
    // refused again (until T0 + 1 s + 1 ms), then a reload: the next call goes to Redis
    expect((await g.admit({ callId: 'c', peer: 'x', at: T0 + S + 1 })).shielded).to.equal(undefined);
    expect((await g.admit({ callId: 'd', peer: 'x', at: T0 + S + 2 })).shielded).to.equal(true);
    await g.reload({ inbound: { defaultPeer: [{ limit: 10, window: '1s' }] } });
    const after = await g.admit({ callId: 'e', peer: 'x', at: T0 + S + 3 });
    expect(after.admitted, 'the new limit has room').to.equal(true);
    expect(await scriptCalls(raw)).to.equal(8);
  });

  it('never shields a plan with a channel limit (a repeat of a holding call is admitted), nor a call back in time', async () => {
    const g = await gate({ inbound: { defaultPeer: [{ limit: 1, window: '1s' }, { channels: 5 }] } }, true);
    expect((await g.admit({ callId: 'h', peer: 'x', at: T0 })).admitted).to.equal(true);
    expect((await g.admit({ callId: 'o', peer: 'x', at: T0 + 1 })).admitted).to.equal(false);
    const again = await g.admit({ callId: 'h', peer: 'x', at: T0 + 2 });
    expect(again).to.include({ admitted: true, duplicate: true });
    expect((await g.admit({ callId: 'o2', peer: 'x', at: T0 + 3 })).shielded).to.equal(undefined);

    const h = await gate({ inbound: { defaultPeer: [{ limit: 1, window: '1s' }] } }, true);
    await h.admit({ callId: 'a', peer: 'x', at: T0 + 5 * S });
    expect((await h.admit({ callId: 'b', peer: 'x', at: T0 + 5 * S + 1 })).admitted).to.equal(false);
    expect((await h.admit({ callId: 'c', peer: 'x', at: T0 + 5 * S + 2 })).shielded).to.equal(true);
    // back in time (before a call already decided): Redis decides
    const back = await h.admit({ callId: 'd', peer: 'x', at: T0 + 5 * S + 1 });
    expect(back.shielded).to.equal(undefined);
    expect(back.admitted).to.equal(false);
  });

  it('shield off: every call goes to Redis', async () => {
    const g = await gate({ inbound: { defaultPeer: [{ limit: 1, window: '1s' }] } }, false);
    await g.admit({ callId: 'w', peer: 'w', at: T0 });
    await raw.config('RESETSTAT');
    for (let i = 0; i < 5; i++)
      expect((await g.admit({ callId: `c${i}`, peer: 'x', at: T0 + i })).shielded).to.equal(undefined);
    expect(await scriptCalls(raw)).to.equal(5);
  });

  it('a seeded trace (three levels, a 10x flood beside normal traffic): the same outcome for every call with and without the shield', async () => {
    const config: CallGateConfigInput = {
      inbound: {
        global: [
          { limit: 120, window: '1s' },
          { limit: 900, window: '10s' },
        ],
        accounts: {
          acme: [
            { limit: 40, window: '1s' },
            { limit: 300, window: '10s', algorithm: 'fixed-window' },
          ],
        },
        peers: {
          dialer: [
            { limit: 10, window: '1s' },
            { limit: 60, window: '10s' },
          ],
        },
        defaultPeer: [
          { limit: 6, window: '1s' },
          { limit: 40, window: '10s', algorithm: 'fixed-window' },
        ],
      },
    };
    // 20 s: the dialer offers ~100/s (10x its 1 s limit), 12 normal peers ~5/s each (some over)
    const rand = prng(0x5e1d);
    const calls: { peer: string; account?: string; at: number }[] = [];
    let t = T0;
    while (t < T0 + 20 * S) {
      t += Math.floor(rand() * 3_000) + 1;
      const peer = rand() < 0.6 ? 'dialer' : `p${Math.floor(rand() * 12)}`;
      calls.push({ peer, account: peer === 'dialer' || rand() < 0.5 ? 'acme' : undefined, at: t });
    }
    const run = async (shield: boolean) => {
      const g = await gate(config, shield);
      const out: AdmissionDecision[] = [];
      for (let i = 0; i < calls.length; i++) out.push(await g.admit({ callId: `c${i}`, ...calls[i]! }));
      return out;
    };
    const on = await run(true);
    const off = await run(false);
    const shielded = on.filter((d) => d.shielded).length;
    expect(shielded, 'calls refused by the shield').to.be.above(calls.length / 4);
    let sameLevel = 0;
    for (let i = 0; i < calls.length; i++) {
      expect(on[i]!.admitted, `call ${i} (${calls[i]!.peer} at ${calls[i]!.at})`).to.equal(off[i]!.admitted);
      if (on[i]!.admitted) continue;
      // where a shielded refusal may differ: another level, a longer retry-after from Redis
      if (on[i]!.limitedBy === off[i]!.limitedBy) sameLevel++;
      expect(on[i]!.retryAfterMs, `retry-after of call ${i}`).to.be.at.most(off[i]!.retryAfterMs);
    }
    expect(sameLevel, 'refusals naming the same level').to.be.above(0);
  });

  it('live, four routing processes flooding one peer at 10x its limit: every shielded refusal found its window full', async () => {
    const L = 20;
    const prefix = uniquePrefix('shield-mp');
    const workers: Worker<ShieldWorkerReport>[] = [];
    for (let i = 0; i < 4; i++) {
      const args: ShieldWorkerArgs = {
        id: `w${i}`,
        url: handle.url,
        prefix,
        limits: [{ limit: L, window: '1s' }],
        durationMs: 2_500,
        floodEveryMs: 20,
        normalEveryMs: 50,
      };
      workers.push(
        startWorker<ShieldWorkerReport>(WORKER, args, { cwd: ROOT, timeoutMs: 30_000, name: `worker ${i}` }),
      );
    }
    try {
      await Promise.all(workers.map((w) => w.ready));
      for (const w of workers) w.go();
      const reports = await Promise.all(workers.map((w) => w.report));
      const admitted = new Map<string, number[]>();
      for (const r of reports) {
        expect(r.errors, `errors of ${r.id}`).to.deep.equal([]);
        for (const d of r.decisions)
          if (d.admitted) (admitted.get(d.peer) ?? admitted.set(d.peer, []).get(d.peer)!).push(d.at);
      }
      for (const list of admitted.values()) list.sort((a, b) => a - b);
      const within = (list: number[], lo: number, hi: number) => list.filter((s) => s > lo && s <= hi).length;
      // no window over its limit
      for (const [peer, list] of admitted)
        for (let i = L; i < list.length; i++)
          expect(list[i]! - list[i - L]!, `${peer}: ${L + 1} calls within 1 s`).to.be.at.least(S);
      let shielded = 0;
      for (const r of reports) {
        const e = r.offsetErrUs + 1_000; // the clocks compared within a round trip, plus 1 ms
        for (const d of r.decisions) {
          if (!d.shielded) continue;
          shielded++;
          const tau = d.issuedUs + r.offsetUs; // Redis' clock when the call was offered
          const list = admitted.get(d.peer) ?? [];
          expect(
            within(list, tau - S - e, tau + e),
            `${d.peer}'s window at a shielded refusal (${r.id})`,
          ).to.be.at.least(L);
        }
      }
      const offered = reports.reduce((n, r) => n + r.decisions.filter((d) => d.peer === 'dialer').length, 0);
      expect(shielded, `shielded refusals of ${offered} flood calls`).to.be.above(offered / 2);
      // normal peers (4 per second each, limit 20/s) are never refused
      for (const r of reports)
        for (const d of r.decisions) if (d.peer !== 'dialer') expect(d.admitted, `${d.peer} (${r.id})`).to.equal(true);
    } finally {
      for (const w of workers) w.kill();
    }
  });
});
