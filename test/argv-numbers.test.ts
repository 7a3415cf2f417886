/**
 * num(): integers as the decimal strings the scripts read, joined from constant digit groups for
 * large ones (see src/store/redis/bucket-args.ts: String() would keep each in V8's number cache, which
 * promoted them). It must give exactly what String() gives, for every kind of value it meets.
 */
import { expect } from 'chai';
import { num } from '../src/store/redis/bucket-args.js';
import { prng } from '../scripts/make-fixtures.js';

describe('num: integers as script arguments', () => {
  it('writes every integer as String() does: small ones, group boundaries, µs times, the largest safe integer', () => {
    const values = [
      0,
      1,
      9,
      10,
      999,
      1000,
      1001,
      4095,
      4096,
      9999,
      10_000,
      100_000,
      999_999,
      1_000_000,
      1_000_001,
      1_000_000_000,
      1_700_000_000_000_000,
      1_700_000_000_000_001,
      Number.MAX_SAFE_INTEGER,
    ];
    for (let k = 1; k < 16; k++) values.push(10 ** k - 1, 10 ** k, 10 ** k + 1, 10 ** k + 7 * 10 ** Math.max(0, k - 3));
    const rand = prng(7);
    for (let i = 0; i < 20_000; i++) values.push(Math.floor(rand() * 2 ** (1 + Math.floor(rand() * 52))));
    for (const v of values) expect(num(v), String(v)).to.equal(String(v));
  });

  it('leaves what is not a non-negative safe integer to String()', () => {
    for (const v of [-1, -4096, -1_700_000_000_000_000, 1.5, 4096.5, 2 ** 53, 2 ** 60, NaN, Infinity, -Infinity, -0])
      expect(num(v)).to.equal(String(v));
  });
});
