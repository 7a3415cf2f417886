/**
 * A carrier's k intervals stay exact where k r passes 2^53 (src/store/slots.ts mulDivMod, and
 * lua/includes/slots.lua's): against BigInt on random values, and a burst at a cps of 15 digits,
 * whose backlog passes 2^53 at 731 intervals, on the memory store and on Redis alike.
 */
import { expect } from 'chai';
import { MemoryStore } from '../src/store/memory-store.js';
import { RedisStore } from '../src/store/redis/redis-store.js';
import { exactWait, mulDivMod, rateOf } from '../src/store/slots.js';
import type { Store } from '../src/store/types.js';
import { prng } from '../scripts/make-fixtures.js';
import { redisForSuite } from './helpers/redis.js';

const T0 = 1_700_000_000_000_000;

describe('slots: k intervals exact past 2^53', () => {
  it('mulDivMod gives floor(k r / p) and k r mod p as BigInt does', () => {
    const rand = prng(5);
    for (let i = 0; i < 20_000; i++) {
      const p = Math.floor(rand() * 2 ** (10 + (i % 40))) + 1;
      const r = Math.floor(rand() * p);
      const k = Math.floor(rand() * 2 ** (1 + (i % 52))) + 1;
      const kr = BigInt(k) * BigInt(r);
      const want = [Number(kr / BigInt(p)), Number(kr % BigInt(p))];
      expect(mulDivMod(k, r, p), `${k} * ${r} / ${p}`).to.deep.equal(want);
    }
  });

  it('exactWait compares with whole µs, rounds (halves up) and rounds up as the exact wait does', () => {
    const rand = prng(11);
    let nudged = 0;
    for (let i = 0; i < 50_000; i++) {
      const p = Math.floor(rand() * 2 ** (1 + (i % 50))) + 1;
      // fractions near 0, near a half and near 1 too, where the plain sum loses them
      const pick = i % 4;
      const rest =
        pick === 0
          ? Math.min(p - 1, Math.floor(rand() * 3))
          : pick === 1
            ? Math.min(p - 1, Math.max(0, Math.floor(p / 2) + Math.floor(rand() * 3) - 1))
            : pick === 2
              ? Math.max(0, p - 1 - Math.floor(rand() * 3))
              : Math.floor(rand() * p);
      const ahead = Math.floor(rand() * 2 ** (1 + (i % 45)));
      const w = exactWait(ahead, rest, p);
      if (w !== ahead + rest / p) nudged++;
      const label = `${ahead} + ${rest}/${p}`;
      // exact: ahead + rest / p against whole M (M = ahead and ahead + 1 are the only close calls)
      expect(w <= ahead, label).to.equal(rest === 0);
      expect(w <= ahead + 1, label).to.equal(true);
      expect(Math.ceil(w), label).to.equal(rest === 0 ? ahead : ahead + 1);
      // halves up: ahead + 1 iff 2 rest >= p
      expect(Math.round(w), label).to.equal(2 * rest >= p ? ahead + 1 : ahead);
    }
    // the two waits an independent probe found decided wrong
    expect(exactWait(17, 1, 588235294117647) <= 17).to.equal(false);
    expect(Math.round(exactWait(34928, 71574788496, 143149576993))).to.equal(34928);
    expect(nudged, 'cases where the plain sum was wrong').to.be.above(100);
  });

  it('a cps with more than 9 decimals paces as its nearest billionth, a half up, exactly', () => {
    const rand = prng(17);
    let checked = 0;
    for (let i = 0; i < 20_000; i++) {
      // a 5 alone past the 9th decimal: a tie, which the double product x × 1e9 put on either side
      const int = Math.floor(rand() * 10 ** (i % 7));
      const frac = `${String(Math.floor(rand() * 1e9)).padStart(9, '0')}5`;
      const text = `${int}.${frac}`;
      const cps = Number(text);
      if (String(cps) !== text) continue; // its shortest spelling is another decimal
      checked++;
      const up = BigInt(int) * 1_000_000_000n + BigInt(frac.slice(0, 9)) + 1n;
      const [p, q] = rateOf(cps).text.split('/').map(BigInt);
      expect(p! * 1_000_000_000n, text).to.equal(up * q!);
    }
    expect(checked).to.be.above(10_000);
    expect(rateOf(8.5044248245).text).to.equal('340176993/40000000'); // 8.504424825: went down
    expect(rateOf(0.0000000015).text).to.equal('1/500000000'); // 2 billionths
    expect(rateOf(0.333333333333).text).to.equal('333333333/1000000000'); // below the half: down
    expect(rateOf(8123456.987654321).text).to.equal('101543212345679/12500000'); // to 8 decimals
  });

  describe('a burst of 800 calls at cps 123456.789012345', () => {
    const suite = redisForSuite();

    // interval 1e6 q / p with p / q = 123456789012345 / 1e9: k intervals, exactly, as µs
    const exactWait = (k: number): number => {
      const num = BigInt(k) * 1_000_000n * 1_000_000_000n;
      const p = 123_456_789_012_345n;
      return Number(num / p) + Number(num % p) / Number(p);
    };

    async function waits(store: Store): Promise<number[]> {
      const carrier = { name: 'wide', cps: 123456.789012345, intervalUs: 1e6 / 123456.789012345, maxWaitUs: 1e6 };
      const out: number[] = [];
      for (let i = 0; i < 800; i++) {
        const r = await store.reserve({ route: [carrier], now: T0 });
        expect(r.index, `call ${i}`).to.equal(0);
        out.push(r.waitUs);
      }
      return out;
    }

    it('waits k intervals exactly, the same on memory and Redis', async () => {
      const mem = await waits(new MemoryStore());
      const store = new RedisStore({ redis: suite.redis, prefix: `t:slots-exact:${Date.now()}:` });
      const red = await waits(store);
      await store.clear();
      expect(red).to.deep.equal(mem);
      // past 731 intervals k r passes 2^53 (r = 1e15 mod p, about 1.2e13)
      for (const k of [1, 730, 731, 799]) expect(Math.abs(mem[k]! - exactWait(k)), `k ${k}`).to.be.below(1e-6);
    });
  });
});
