/**
 * A carrier's k intervals stay exact where k r passes 2^53 (src/store/slots.ts mulDivMod, and
 * lua/includes/slots.lua's): against BigInt on random values, and a burst at a cps of 15 digits,
 * whose backlog passes 2^53 at 731 intervals, on the memory store and on Redis alike.
 */
import { expect } from 'chai';
import { MemoryStore } from '../src/store/memory-store.js';
import { RedisStore } from '../src/store/redis/redis-store.js';
import { mulDivMod } from '../src/store/slots.js';
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
