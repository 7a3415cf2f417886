/**
 * Durations of the limit configuration, in integer microseconds.
 *
 * Accepted forms:
 * - ISO-8601 durations, validated by luxon's `Duration.fromISO`: `PT1S`, `PT0.5S`, `PT30M`,
 *   `PT1,5S`, `P1D`, `P1W`, `P1DT12H`. Days count as 24 h and weeks as 7 days (elapsed time, no
 *   calendar or DST). Years and months (`P1Y`, `P1M`) are rejected: they have no fixed length.
 *   Negative durations (`-PT1S`, `PT-1S`) and the empty `P` / `PT` are rejected.
 * - Short forms: a decimal number and one of the units `ms`, `s`, `m`, `h`:
 *   `500ms`, `1s`, `1.5s`, `0.5s`, `1m`, `1h`. No sign, no exponent, no spaces.
 *
 * The value must be a whole number of microseconds (`PT0.0000015S` and `0.0005ms` are invalid)
 * and at most Number.MAX_SAFE_INTEGER µs. Arithmetic is exact (decimal digits, BigInt): luxon
 * is used to decide what is a valid ISO duration, but it keeps unit values as doubles and floors
 * fractions of a second to milliseconds, so the value itself is computed from the digits.
 */
import { Duration } from 'luxon';

export type DurationParse =
  | { readonly ok: true; readonly us: number }
  /** `reason` explains a refusal that is not a plain syntax error (calendar unit, precision, size). */
  | { readonly ok: false; readonly reason?: string };

const US_PER_MS = 1_000n;
const US_PER_S = 1_000_000n;
const US_PER_M = 60n * US_PER_S;
const US_PER_H = 60n * US_PER_M;
const US_PER_D = 24n * US_PER_H;
const US_PER_W = 7n * US_PER_D;

const SHORT_UNITS: Readonly<Record<string, bigint>> = { ms: US_PER_MS, s: US_PER_S, m: US_PER_M, h: US_PER_H };
const SHORT_FORM = /^(\d+)(?:\.(\d+))?(ms|s|m|h)$/;

const NOT_WHOLE_US = 'not a whole number of microseconds';
/** The reason of a duration past Number.MAX_SAFE_INTEGER µs. */
export const TOO_LONG = 'too long';

/** Exact `int.frac × unitUs`, or undefined when that is not a whole number of microseconds. */
function decimalTimes(int: string, frac: string, unitUs: bigint): bigint | undefined {
  const scale = 10n ** BigInt(frac.length);
  const numerator = (BigInt(int) * scale + BigInt(frac === '' ? '0' : frac)) * unitUs;
  return numerator % scale === 0n ? numerator / scale : undefined;
}

function finish(total: bigint): DurationParse {
  return total > BigInt(Number.MAX_SAFE_INTEGER) ? { ok: false, reason: TOO_LONG } : { ok: true, us: Number(total) };
}

function parseShort(input: string): DurationParse | undefined {
  const m = SHORT_FORM.exec(input);
  if (!m) return undefined;
  const us = decimalTimes(m[1] as string, m[2] ?? '', SHORT_UNITS[m[3] as string] as bigint);
  return us === undefined ? { ok: false, reason: NOT_WHOLE_US } : finish(us);
}

function parseIso(input: string): DurationParse {
  if (!input.startsWith('P')) return { ok: false };
  // Negative durations are never valid here; luxon would accept `-PT1S` and `PT-1S`. Nor is a
  // time part with nothing in it (`P1DT`), which ISO 8601 does not allow and luxon does.
  if (input.includes('-') || input.endsWith('T')) return { ok: false };
  // ISO 8601 allows a decimal comma on any component; luxon takes one on seconds only
  const d = Duration.fromISO(input.replaceAll(',', '.'));
  if (!d.isValid) return { ok: false };
  const parts = d.toObject();
  if (Object.keys(parts).length === 0) return { ok: false }; // bare `P` / `PT`
  if (parts.years !== undefined || parts.months !== undefined) {
    return { ok: false, reason: 'years and months have no fixed length' };
  }
  // luxon has validated the grammar; read each component's exact digits.
  let total = 0n;
  let inTime = false;
  for (const m of input.slice(1).matchAll(/T|(\d+)(?:[.,](\d+))?([WDHMS])/g)) {
    if (m[0] === 'T') {
      inTime = true;
      continue;
    }
    const unit = m[3];
    const unitUs =
      unit === 'W'
        ? US_PER_W
        : unit === 'D'
          ? US_PER_D
          : unit === 'H'
            ? US_PER_H
            : unit === 'M'
              ? inTime
                ? US_PER_M
                : undefined
              : US_PER_S;
    if (unitUs === undefined) return { ok: false, reason: 'years and months have no fixed length' };
    const us = decimalTimes(m[1] as string, m[2] ?? '', unitUs);
    if (us === undefined) return { ok: false, reason: NOT_WHOLE_US };
    total += us;
  }
  return finish(total);
}

/** Parses a duration and says why it was refused when there is more to say than "bad syntax". */
export function parseDuration(input: string): DurationParse {
  if (typeof input !== 'string') return { ok: false };
  return parseShort(input) ?? parseIso(input);
}

/** A duration (ISO-8601 or `500ms` / `1.5s` / `1m` / `1h`) in integer microseconds, or undefined. */
export function parseDurationUs(input: string): number | undefined {
  const r = parseDuration(input);
  return r.ok ? r.us : undefined;
}

/** `digits / 10^decimals` written exactly, without trailing zeros (`1500000, 6` → `1.5`). */
function fixedPoint(value: number, decimals: number): string {
  const scale = 10 ** decimals;
  const int = Math.floor(value / scale);
  const frac = String(value % scale)
    .padStart(decimals, '0')
    .replace(/0+$/, '');
  return frac === '' ? String(int) : `${int}.${frac}`;
}

/**
 * A short human form of a duration in microseconds: `0s`, `2h`, `30m`, `1.5s`, `90s`, `500ms`,
 * `0.25ms`. For a non-negative safe integer the result is a short form that parseDurationUs reads
 * back to the same value. Fractional inputs (such as an interval of 1e6 / 3 µs) are rounded to
 * the nanosecond for display.
 */
export function formatDuration(us: number): string {
  if (!Number.isFinite(us)) return String(us);
  if (us < 0) return `-${formatDuration(-us)}`;
  if (!Number.isSafeInteger(us)) {
    return us >= 1e6 ? `${Number((us / 1e6).toFixed(9))}s` : `${Number((us / 1e3).toFixed(6))}ms`;
  }
  if (us === 0) return '0s';
  const h = Number(US_PER_H);
  const m = Number(US_PER_M);
  if (us % h === 0) return `${us / h}h`;
  if (us % m === 0) return `${us / m}m`;
  if (us >= 1e6) return `${fixedPoint(us, 6)}s`;
  return `${fixedPoint(us, 3)}ms`;
}
