/**
 * Large generated traces (scripts/gen-trace.ts), made here rather than committed: an unsorted
 * mixed trace decided identically by the memory store, Redis and the reference model; and a
 * 200k-call trace replayed by the command inside a small heap (memory stays flat).
 */
import { expect } from 'chai';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { parseConfig } from '../src/config/load.js';
import { replay, type DecisionLine } from '../src/replay/replay.js';
import { MemoryStore } from '../src/store/memory-store.js';
import { RedisStore } from '../src/store/redis/redis-store.js';
import type { Store } from '../src/store/types.js';
import { generateConfig, writeTrace } from '../scripts/gen-trace.js';
import { getRedis, type RedisHandle } from './helpers/redis.js';
import { runNode } from './helpers/run.js';
import { loadTraceForModel, runModel } from './reference/model.js';

const ROOT = new URL('..', import.meta.url).pathname;

describe('large generated traces', function () {
  this.timeout(180_000);
  let dir: string;
  before(() => {
    dir = mkdtempSync(join(tmpdir(), 'callgate-large-'));
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  describe('20k mixed calls, unsorted: memory = Redis = reference model', () => {
    let handle: RedisHandle;
    let redis: Redis;
    const trace = () => join(dir, 'mixed.trace.csv');
    const cfg = () => join(dir, 'mixed.config.json');
    before(async () => {
      handle = await getRedis();
      redis = new Redis(handle.url);
      await writeTrace(trace(), cfg(), { calls: 20_000, seed: 7, unsorted: true });
    });
    after(async () => {
      redis?.disconnect();
      await handle?.stop();
    });

    let channelPeaks: { what: string; peak: number; limit: number }[] = [];
    async function decisions(store: Store, sortRunRows?: number): Promise<string[]> {
      const out: string[] = [];
      const toContract = (d: DecisionLine) => {
        const { time_us: _t, ...rest } = d;
        if ('retry_after_ms' in rest) delete (rest as { retry_after_ms?: number }).retry_after_ms;
        return JSON.stringify(rest);
      };
      const r = await replay({
        config: parseConfig(generateConfig()),
        tracePath: trace(),
        store,
        onDecision: (d) => void out.push(toContract(d)),
        sortRunRows,
      });
      channelPeaks = [
        ...[...r.levels]
          .filter(([, l]) => l.channels)
          .map(([k, l]) => ({ what: k, peak: l.channels!.peak, limit: l.channels!.channels })),
        ...[...r.carriers]
          .filter(([, c]) => c.channels)
          .map(([k, c]) => ({ what: `carrier ${k}`, peak: c.channels!.peak, limit: c.channels!.channels })),
      ];
      return out;
    }

    it('decides every call as the model does, on both stores', async () => {
      const model = runModel(JSON.parse(readFileSync(cfg(), 'utf8')), loadTraceForModel(trace())).map((d) =>
        JSON.stringify(d),
      );
      const mem = await decisions(new MemoryStore());
      // sorted in runs of 1,500 rows spilled to disk and merged: the same calls in the same order
      expect(await decisions(new MemoryStore(), 1_500)).to.deep.equal(mem);
      const store = new RedisStore({ redis, prefix: `t:large:${Date.now()}:` });
      const red = await decisions(store);
      await store.clear();
      // one decision per call from each: the comparison below runs over all of them
      expect(model, 'decisions of the reference model').to.have.length(20_000);
      expect(mem, 'decisions on the memory store').to.have.length(20_000);
      expect(red, 'decisions on Redis').to.have.length(20_000);
      // the story: refusals at every level, reroutes and congestion all happen
      const all = mem.join('\n');
      const story = [
        '"limited_by":"global"',
        '"limited_by":"account:',
        '"limited_by":"peer:',
        'all-routes-congested',
        '"rerouted_from":["',
      ];
      story.push('"limited_by":"global","reason":"channels"', '"reason":"channels"');
      // no call is a duplicate: a call id the generator gives twice is two calls
      expect(all).to.not.include('"duplicate"');
      for (const s of story) {
        expect(all, s).to.include(s);
      }
      // channel limits were reached (and held) at a level and on a carrier
      expect(
        channelPeaks.every((c) => c.peak <= c.limit),
        JSON.stringify(channelPeaks),
      ).to.equal(true);
      expect(channelPeaks.some((c) => c.what === 'global' && c.peak === c.limit)).to.equal(true);
      expect(
        channelPeaks.some((c) => c.what.startsWith('carrier') && c.peak === c.limit),
        JSON.stringify(channelPeaks),
      ).to.equal(true);
      for (let i = 0; i < model.length; i++) {
        expect(JSON.parse(mem[i]!), `memory, call ${i + 1}`).to.deep.equal(JSON.parse(model[i]!));
        expect(red[i], `redis, call ${i + 1}`).to.equal(mem[i]);
      }
    });
  });

  it('200k calls stream through the command in a 48 MB heap, one decision per call', async () => {
    const trace = join(dir, 'big.trace.csv');
    const cfg = join(dir, 'big.config.json');
    await writeTrace(trace, cfg, { calls: 200_000, seed: 3 });
    const out = join(dir, 'big.jsonl');
    const r = await runNode(
      [
        '--max-old-space-size=48',
        join(ROOT, 'bin/callgate.js'),
        'replay',
        '--config',
        cfg,
        '--trace',
        trace,
        '--decisions',
        out,
        '--json',
      ],
      { cwd: ROOT, timeoutMs: 150_000 },
    );
    expect(r.code, r.stderr).to.equal(0);
    const report = JSON.parse(r.stdout) as { calls: number; all_limits_held: boolean; calls_per_second: number };
    expect(report.calls).to.equal(200_000);
    expect(report.all_limits_held).to.equal(true);
    let lines = 0;
    const text = readFileSync(out, 'utf8');
    for (let i = text.indexOf('\n'); i >= 0; i = text.indexOf('\n', i + 1)) lines++;
    expect(lines).to.equal(200_000);
    console.log(`      200k calls replayed at ${report.calls_per_second} calls/s in a 48 MB heap`);
  });
});
