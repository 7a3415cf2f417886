/**
 * Channels across real routing processes on one Redis (live Redis TIME):
 * - four processes admit calls of shared trunks and hang them up after a random time, half of
 *   the releases made by another process than the one that admitted the call; from the decision
 *   and release times (Redis TIME, returned by the engine), the calls in progress of every level
 *   never exceed its channel limit at any instant, the limits are reached, every channel refusal
 *   was justified, retransmitted admits are counted once, and nothing stays held at the end;
 * - a process killed with SIGKILL while holding calls: its holds lapse maxCallDuration after
 *   their decisions, to the microsecond, while another process's refreshed holds stay.
 */
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';
import { Redis } from 'ioredis';
import type { CallGateConfigInput } from '../src/config/types.js';
import { CallGate } from '../src/gate.js';
import { accountBucket, accountTag, GLOBAL_BUCKET, GLOBAL_TAG, peerBucket, peerTag } from '../src/store/keys.js';
import { RedisStore } from '../src/store/redis/redis-store.js';
import { getRedis, type RedisHandle } from './helpers/redis.js';
import { startMessageWorker, type MessageWorker } from './helpers/worker.js';
import { uniquePrefix } from './admission/stores.js';
import type { ChannelWorkerArgs, ChannelWorkerReport, Decided } from './channels/worker.js';

const WORKER = fileURLToPath(new URL('./channels/worker.ts', import.meta.url));
const ROOT = fileURLToPath(new URL('..', import.meta.url));
const S = 1_000_000;

type Worker = MessageWorker;

function startWorker(args: ChannelWorkerArgs): Worker {
  return startMessageWorker(WORKER, args, { cwd: ROOT, killAfterMs: 60_000, name: `worker ${args.id}` });
}

/** Calls in progress at t: started at or before t, ending after t. */
function inProgress(spans: readonly [number, number][], t: number): number {
  let n = 0;
  for (const [s, e] of spans) if (s <= t && e > t) n++;
  return n;
}

describe('channels across four routing processes on one Redis (live Redis TIME)', function () {
  this.timeout(60_000);
  let handle: RedisHandle;
  const workers: Worker[] = [];
  before(async () => {
    handle = await getRedis();
  });
  after(async () => {
    for (const w of workers) w.kill();
    await handle?.stop();
  });

  it('calls in progress never exceed any channel limit at any instant; releases from any process; repeats counted once', async () => {
    const config: CallGateConfigInput = {
      maxCallDuration: 'PT30S',
      inbound: {
        global: [{ limit: 5_000, window: 'PT1S' }, { channels: 20 }],
        accounts: { acme: [{ channels: 10 }] },
        peers: {
          'trunk {1}': [{ limit: 2_000, window: 'PT1S' }, { channels: 6 }],
          'trunk 2': [{ channels: 8 }],
          'trunk:3': [],
        },
      },
    };
    const limits = [
      { label: 'global', tag: GLOBAL_TAG, bucket: GLOBAL_BUCKET, n: 20, member: (_d: Decided) => true },
      {
        label: 'account:acme',
        tag: accountTag('acme'),
        bucket: accountBucket('acme'),
        n: 10,
        member: (d: Decided) => d.account === 'acme',
      },
      {
        label: 'peer:trunk {1}',
        tag: peerTag('trunk {1}'),
        bucket: peerBucket('trunk {1}'),
        n: 6,
        member: (d: Decided) => d.peer === 'trunk {1}',
      },
      {
        label: 'peer:trunk 2',
        tag: peerTag('trunk 2'),
        bucket: peerBucket('trunk 2'),
        n: 8,
        member: (d: Decided) => d.peer === 'trunk 2',
      },
    ];
    const prefix = uniquePrefix('ch-mp');
    const callers = [
      { peer: 'trunk {1}', account: 'acme' },
      { peer: 'trunk 2', account: 'acme' },
      { peer: 'trunk:3' },
      { peer: 'trunk 2' },
    ];
    for (let i = 0; i < 4; i++) {
      workers.push(
        startWorker({
          id: `w${i}`,
          url: handle.url,
          prefix,
          config,
          callers,
          mode: 'traffic',
          durationMs: 3_000,
          concurrency: 4,
          maxHoldMs: 250,
        }),
      );
    }
    await Promise.all(workers.map((w) => w.next((m) => m.ready === true)));
    // a BYE seen by another process: hand the release to the next worker
    workers.forEach((w, i) => {
      w.onMessage((m) => typeof m.bye === 'string' && workers[(i + 1) % 4]!.send(`release ${m.bye}`));
    });
    for (const w of workers) w.send('go');
    await Promise.all(workers.map((w) => w.next((m) => m.idle === true)));
    for (const w of workers) w.send('end');
    const reports = (await Promise.all(workers.map((w) => w.next((m) => m.report !== undefined)))).map(
      (m) => m.report as ChannelWorkerReport,
    );

    for (const r of reports) expect(r.errors, r.id).to.deep.equal([]);
    const decided = reports.flatMap((r) => r.decided);
    const admitted = decided.filter((d) => d.admitted);
    const releasedAt = new Map<string, number>();
    for (const r of reports) {
      for (const rel of r.released) {
        expect(rel.outcome, `release of ${rel.id}`).to.equal('released');
        expect(releasedAt.has(rel.id), `${rel.id} released once`).to.equal(false);
        releasedAt.set(rel.id, rel.at);
      }
    }
    // every admitted call was hung up, half of them by another process than its own
    expect(releasedAt.size).to.equal(admitted.length);
    const crossed = reports.reduce((n, r) => n + r.released.filter((rel) => !rel.id.startsWith(`${r.id}-`)).length, 0);
    expect(crossed).to.be.within(admitted.length * 0.3, admitted.length * 0.7);

    const ties = new Set([...releasedAt.values()]);
    const lines: string[] = [];
    for (const lim of limits) {
      const spans = admitted.filter(lim.member).map((d) => [d.at, releasedAt.get(d.id)!] as [number, number]);
      // the peak is reached just after a call begins
      const peak = Math.max(0, ...spans.map(([s]) => inProgress(spans, s)));
      const refusals = decided.filter((d) => d.limitedBy === lim.label && d.reason === 'channels');
      lines.push(`${lim.label}: ${spans.length} calls, peak ${peak}/${lim.n}, ${refusals.length} channel refusals`);
      expect(peak, `${lim.label} peak`).to.be.at.most(lim.n);
      expect(peak, `${lim.label} reached its limit`).to.equal(lim.n);
      // a refusal saw the limit full (a release in the very same microsecond may go either way)
      for (const d of refusals)
        if (!ties.has(d.at))
          expect(inProgress(spans, d.at), `${lim.label} refusal of ${d.id} at ${d.at}`).to.be.at.least(lim.n);
    }
    console.log(`      ${decided.length} decisions, ${admitted.length} admitted; ${lines.join('; ')}`);
    expect(decided.some((d) => d.limitedBy === 'global' && d.reason === 'channels')).to.equal(true);

    // retransmissions: the concurrent repeat got the same decision; after it, a repeat while holding is a duplicate
    const repeats = reports.flatMap((r) => r.repeats);
    expect(repeats.length).to.be.above(20);
    for (const rep of repeats) {
      expect(rep.concurrent, rep.id).to.equal(rep.first);
      if (rep.first === 'admitted') expect(rep.after, rep.id).to.equal('duplicate');
    }
    expect(repeats.filter((r) => r.first === 'admitted').length).to.be.above(5);

    // nothing stays held: every channel of every level is free
    const redis = new Redis(handle.url);
    try {
      const store = new RedisStore({ redis, prefix });
      for (const lim of limits)
        expect((await store.holds({ tag: lim.tag, name: lim.bucket })).holds, lim.label).to.equal(0);
    } finally {
      redis.disconnect();
    }
  });

  it('a process killed with SIGKILL: its holds lapse maxCallDuration after their decisions; refreshed ones stay', async () => {
    const config: CallGateConfigInput = { maxCallDuration: 'PT3S', inbound: { peers: { pbx: [{ channels: 6 }] } } };
    const prefix = uniquePrefix('ch-kill');
    const base = { url: handle.url, prefix, config, callers: [{ peer: 'pbx' }], mode: 'hold' as const, holdCalls: 3 };
    const doomed = startWorker({ ...base, id: 'doomed' });
    const steady = startWorker({ ...base, id: 'steady', refreshMs: 500 });
    workers.push(doomed, steady);
    await Promise.all([doomed, steady].map((w) => w.next((m) => m.ready === true)));
    doomed.send('go');
    const held = ((await doomed.next((m) => m.held !== undefined)).held as Decided[]).map((d) => d.at);
    steady.send('go');
    await steady.next((m) => m.held !== undefined);
    doomed.kill();
    await doomed.exited;

    const redis = new Redis(handle.url);
    const store = new RedisStore({ redis, prefix });
    const gate = await CallGate.create({ config, store });
    try {
      const holdsAt = async (now?: number) =>
        (await store.holds({ tag: peerTag('pbx'), name: peerBucket('pbx'), now })).holds;
      expect(await holdsAt()).to.equal(6);
      expect((await gate.admit({ callId: 'probe-0', peer: 'pbx' })).reason).to.equal('channels');
      // wait (in real time) until the last doomed hold has lapsed
      const lapse = Math.max(...held) + 3 * S;
      for (;;) {
        const [s, us] = (await redis.time()).map(Number) as [number, number];
        if (s * S + us > lapse + 100_000) break;
        await new Promise((r) => setTimeout(r, 100));
      }
      // each doomed hold ended exactly at its decision + 3 s; the steady ones were refreshed past that
      for (const at of held) {
        const before = await holdsAt(at + 3 * S - 1);
        const after = await holdsAt(at + 3 * S);
        expect(before - after, `the hold decided at ${at} ends at +3 s exactly`).to.equal(1);
      }
      expect(await holdsAt()).to.equal(3);
      const probes = [];
      for (let i = 1; i <= 4; i++) probes.push((await gate.admit({ callId: `probe-${i}`, peer: 'pbx' })).admitted);
      expect(probes).to.deep.equal([true, true, true, false]);
    } finally {
      steady.send('end');
      await steady.exited;
      await gate.close();
      redis.disconnect();
    }
  });
});
