/**
 * The sliding window's test is exact (src/store/window.ts): fractionBelow against BigInt
 * products on random whole numbers up to 2^53, equal fractions and neighbours among them, where
 * the products a * d and c * b pass what a double holds.
 */
import { expect } from 'chai';
import { fractionBelow } from '../src/store/window.js';
import { prng } from '../scripts/make-fixtures.js';

const below = (a: number, b: number, c: number, d: number) => BigInt(a) * BigInt(d) < BigInt(c) * BigInt(b);

describe('fractionBelow: a / b < c / d, exactly', () => {
  it('agrees with BigInt products on random, equal and neighbouring fractions up to 2^53', () => {
    const rand = prng(11);
    const int = (max: number) => Math.floor(rand() * max);
    let cases = 0;
    let equal = 0;
    for (let i = 0; i < 20_000; i++) {
      const max = [1e3, 1e6, 6e11, 2 ** 53][i % 4]!;
      const b = int(max) + 1;
      const d = int(max) + 1;
      const a = int(b + 1);
      // c / d equal to a / b (scaled), or one off, or unrelated
      const m = int(5) + 1;
      const pick = i % 3;
      const [cc, dd] =
        pick === 0 && a * m < 2 ** 53 && b * m < 2 ** 53 ? [Math.max(0, a * m + int(3) - 1), b * m] : [int(d + 1), d];
      const got = fractionBelow(a, b, cc, dd);
      expect(got, `${a}/${b} < ${cc}/${dd}`).to.equal(below(a, b, cc, dd));
      if (BigInt(a) * BigInt(dd) === BigInt(cc) * BigInt(b)) equal++;
      cases++;
    }
    expect(cases).to.equal(20_000);
    expect(equal, 'equal fractions among the cases').to.be.above(1_000);
  });

  it('is false for equal fractions a double would call unequal, and true one µs past them', () => {
    // the sliding window's tie: p (W - r) / W against L - c, with W = 1 s, p = 50, c = 17
    expect(fractionBelow(660_000, 1_000_000, 33, 50)).to.equal(false);
    expect(17 + 50 * (1 - 340_000 / 1e6) < 50, 'the same test in doubles').to.equal(true);
    expect(fractionBelow(659_999, 1_000_000, 33, 50)).to.equal(true);
    // large: (2^53 - 1) / (2^53 - 2) against itself and its neighbour
    const n = 2 ** 53 - 1;
    expect(fractionBelow(n - 1, n, n - 1, n)).to.equal(false);
    expect(fractionBelow(n - 2, n, n - 1, n)).to.equal(true);
    expect(fractionBelow(0, 5, 0, 7)).to.equal(false);
    expect(fractionBelow(0, 5, 1, n)).to.equal(true);
  });
});
