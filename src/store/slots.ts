/**
 * A carrier's pacing state, exact (the memory store's; lua/includes/slots.lua is Redis'): its
 * latest slot as a base (µs) and the k intervals given since. A slot as one number of µs since
 * 1970 steps in quarter-µs at today's dates, and each call queued behind the last rounded it
 * again: a backlog drifted, and a wait of exactly maxWait could read as longer.
 *
 * The interval is 1e6 / cps µs with cps the decimal the configuration wrote, p / q (0.7 is 7 /
 * 10: the double 0.7 is not, and k * 1e6 / 0.7 gave 30,000,000.000000004 µs for k = 21). With
 * A = floor(1e6 q / p) and r = 1e6 q - A p, k intervals are k A + floor(k r / p) whole µs and a
 * fraction (k r mod p) / p: integers computed exactly, so a whole offset is exactly whole. Both
 * stores compute alike, so their decisions are identical.
 */
import type { Carrier } from './types.js';

/** A cps as the exact fraction p / q of its decimal spelling, and its interval's parts. */
export interface Rate {
  /** `p/q`: how a state names the rate it was counted at. */
  readonly text: string;
  readonly p: number;
  /** 1e6 q / p = A + r / p. */
  readonly A: number;
  readonly r: number;
}

export interface SlotState {
  /** Where the queue last started (µs): a slot given at once, at its call's time. */
  base: number;
  /** Intervals given since the base. */
  k: number;
  /** The rate they were given at (unused when k is 0). */
  rate: Rate;
}

const gcd = (a: number, b: number): number => (b === 0 ? a : gcd(b, a % b));

const rates = new Map<string, Rate>();

/** The rate under `key` (`c<cps>`, `i<interval>`), made once: carriers are few, their rates asked per call. */
function cached(key: string, make: () => Rate): Rate {
  let rate = rates.get(key);
  if (rate === undefined) {
    rate = make();
    if (rates.size > 1024) rates.clear();
    rates.set(key, rate);
  }
  return rate;
}

/** A positive number's shortest decimal spelling: its digits and their exponent (x = digits × 10^exp). */
function spelling(x: number): { digits: string; exp: number } | undefined {
  const m = /^(\d+)(?:\.(\d+))?(?:e([+-]\d+))?$/.exec(String(x));
  if (m === null) return undefined;
  const digits = (m[1]! + (m[2] ?? '')).replace(/^0+(?=\d)/, '');
  return { digits, exp: Number(m[3] ?? 0) - (m[2] ?? '').length };
}

/** A positive number's shortest decimal spelling as an exact fraction a / b (b a power of 10), or undefined past 15 digits or 9 decimals. */
function decimal(x: number): [a: number, b: number] | undefined {
  const d = spelling(x);
  if (d === undefined || d.digits.length > 15 || d.exp < -9) return undefined;
  return d.exp > 0 ? [Number(d.digits) * 10 ** d.exp, 1] : [Number(d.digits), 10 ** -d.exp];
}

/**
 * `x` to `decimals` decimals, as the whole number of 10^-decimals it rounds to: exactly, from its
 * decimal spelling, a half up (0.0000000015 to 9 decimals: 2). In doubles, `x × 10^9` fell on
 * either side of a half (8.5044248245 × 1e9 just below it), so ties went either way.
 */
function roundedDecimal(x: number, decimals: number): number {
  const { digits, exp } = spelling(x)!;
  const shift = exp + decimals;
  if (shift >= 0) return Number(BigInt(digits) * 10n ** BigInt(shift));
  const unit = 10n ** BigInt(-shift);
  return Number((BigInt(digits) + unit / 2n) / unit);
}

/** The rate of calls per second p / q (whole numbers), reduced, with its interval's parts. */
function rateOfFraction(p: number, q: number): Rate {
  const g = gcd(p, q);
  p /= g;
  q /= g;
  const whole = 1e6 * q;
  const r = whole % p; // (exact, where Math.floor(whole / p) could round up to the next integer)
  return { text: `${p}/${q}`, p, A: (whole - r) / p, r };
}

/** The rate of `cps`, p / q from its shortest decimal spelling, as slots count it. */
export function rateOf(cps: number): Rate {
  return cached(`c${cps}`, () => {
    const f = decimal(cps);
    if (f !== undefined) return rateOfFraction(f[0], f[1]);
    // past what whole doubles carry exactly: the cps to a billionth, or to as many decimals as
    // keep p below 1e15 (mulDivMod's sums stay exact below 2^53; 8123456.987654321 to 8)
    let decimals = 9;
    while (decimals > 0 && roundedDecimal(cps, decimals) >= 1e15) decimals--;
    return rateOfFraction(roundedDecimal(cps, decimals), 10 ** decimals);
  });
}

/**
 * The rate of a carrier given by its interval alone: its cps when 1e6 / I reads as a short
 * decimal (1e6 / (1e6 / 7) is 6.999999999999999: 7 to 15 digits), else the interval's own
 * decimal a / b (1000.5 µs is 2001 / 2: cps 2e6 / 2001).
 */
function rateOfInterval(intervalUs: number): Rate {
  return cached(`i${intervalUs}`, () => {
    const cps = Number((1e6 / intervalUs).toPrecision(15));
    const f = decimal(cps);
    const i = decimal(intervalUs);
    if (f !== undefined && f[1] <= 1e6) return rateOfFraction(f[0], f[1]);
    if (i !== undefined && i[1] * 1e6 <= Number.MAX_SAFE_INTEGER) return rateOfFraction(i[1] * 1e6, i[0]);
    return rateOf(cps);
  });
}

/** The carrier's rate: its cps when given, else from its interval. */
export const carrierRate = (c: Carrier): Rate => (c.cps !== undefined ? rateOf(c.cps) : rateOfInterval(c.intervalUs));

/** The text a script takes for a carrier's rate (lua/includes/slots.lua): `p/q`. */
export const rateText = (c: Carrier): string => carrierRate(c).text;

/**
 * floor(k r / p) and k r mod p, exactly (r < p < 2^50, from at most 15 digits): at once while
 * k r is a whole double, else over k's bits, doubling and adding with the remainder kept below p
 * (a cps of many digits, 123456.789012345, has r near 1.2e13: 731 intervals pass 2^53).
 */
export function mulDivMod(k: number, r: number, p: number): [quotient: number, rest: number] {
  const kr = k * r;
  if (kr <= Number.MAX_SAFE_INTEGER) {
    const rest = kr % p;
    return [(kr - rest) / p, rest];
  }
  let bit = 1;
  while (bit * 2 <= k) bit *= 2;
  let q = 0;
  let rest = 0;
  for (; bit >= 1; bit /= 2) {
    q *= 2;
    rest *= 2;
    if (rest >= p) {
      rest -= p;
      q++;
    }
    if (k >= bit) {
      k -= bit;
      rest += r;
      if (rest >= p) {
        rest -= p;
        q++;
      }
    }
  }
  return [q, rest];
}

/** k intervals at `rate`: whole µs, and the fraction's numerator over p. */
function offsetParts(k: number, rate: Rate): [whole: number, rest: number] {
  if (k === 0) return [0, 0];
  const [q, rest] = mulDivMod(k, rate.r, rate.p);
  return [k * rate.A + q, rest];
}

/** k intervals at `rate`, µs. */
export function slotOffset(k: number, rate: Rate): number {
  const [whole, rest] = offsetParts(k, rate);
  return whole + rest / rate.p;
}

/** The latest slot given (µs; for expiries and displays, not for pacing). */
export function lastSlot(s: SlotState): number {
  return s.base + slotOffset(s.k, s.rate);
}

const bits = new Float64Array(1);
const bitsAsInt = new BigInt64Array(bits.buffer);

/** The double next to x (a positive double), above it (+1) or below it (-1). */
function adjacent(x: number, direction: 1 | -1): number {
  bits[0] = x;
  bitsAsInt[0]! += BigInt(direction);
  return bits[0]!;
}

/**
 * The wait `ahead + rest / p` µs (ahead whole, 0 <= rest < p) as the double that compares with
 * any whole µs (maxWait), rounds to the nearest µs (halves up: delay_ms) and rounds up (a
 * hold's end) as the exact value does. The plain sum did not: 17 + 1/588235294117647 µs is the
 * double 17, a wait taken under a maxWait of 17 µs it exceeds, and 34928 + 0.49999999999999650
 * is the double 34928.5, a delay rounded up. So a fraction lost in the sum is kept as the next
 * double above `ahead`, and the side of the half µs as the exact value's (lua/includes/slots.lua
 * computes the same doubles).
 */
export function exactWait(ahead: number, rest: number, p: number): number {
  if (rest === 0) return ahead;
  let wait = ahead + rest / p;
  if (wait <= ahead) wait = adjacent(ahead, 1);
  const half = ahead + 0.5;
  if (2 * rest < p) {
    if (wait >= half) wait = adjacent(half, -1);
  } else if (wait < half) wait = half;
  return wait;
}

/**
 * The next slot after `s` (undefined: none) for a call at t at `rate`: slot = max(t, last + I),
 * as a base and k, with its wait (0: the slot is t, a base of its own; else exactWait: whole µs
 * exact, its fraction on the right side of every whole and half µs).
 * A state counted at another rate (a reload changed it) is based again at its latest slot first.
 */
export function nextSlot(s: SlotState | undefined, rate: Rate, t: number): SlotState & { wait: number } {
  if (s === undefined) return { base: t, k: 0, rate, wait: 0 };
  let { base, k } = s;
  if (k > 0 && s.rate.text !== rate.text) {
    base += slotOffset(k, s.rate);
    k = 0;
  }
  const [whole, rest] = offsetParts(k + 1, rate);
  // since the base, whole µs first: exact while the base is a whole µs (a call's own time)
  const ahead = whole - (t - base);
  return ahead > 0 || (ahead === 0 && rest > 0)
    ? { base, k: k + 1, rate, wait: exactWait(ahead, rest, rate.p) }
    : { base: t, k: 0, rate, wait: 0 };
}

/** Whether the next slot after `s` is at or before t, exactly: a call at t would start a base of its own (the state can go). */
export function nextSlotPassed(s: SlotState, t: number): boolean {
  return nextSlot(s, s.rate, t).k === 0;
}

/**
 * The end of a hold of `forUs` (whole µs) from the slot base + k intervals, rounded up to a whole
 * µs: holds are compared with whole-µs times (an end after t), which rounding up keeps exact,
 * where the slot as one number of µs would be rounded to a quarter-µs.
 */
export function slotHoldEnd(s: SlotState, forUs: number): number {
  const [whole, rest] = offsetParts(s.k, s.rate);
  const baseWhole = Math.floor(s.base);
  return baseWhole + forUs + whole + Math.ceil(s.base - baseWhole + rest / s.rate.p);
}
