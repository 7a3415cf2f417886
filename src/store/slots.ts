/**
 * A carrier's pacing state, exact (the memory store's; lua/includes/slots.lua is Redis'): its
 * latest slot as a base (µs) and the k intervals of 1e6 / cps µs given since. A slot as one
 * number of µs since 1970 steps in quarter-µs at today's dates, and each call queued behind the
 * last rounded it again: a backlog drifted, and a wait of exactly maxWait could read as longer.
 * k intervals from the base are one division, k * 1e6 / cps, exact whenever the true offset is
 * a whole number of µs. Both stores compute alike, so their decisions are identical.
 */
import type { Carrier } from './types.js';

export interface SlotState {
  /** Where the queue last started (µs): a slot given at once, at its call's time. */
  base: number;
  /** Intervals given since the base. */
  k: number;
  /** The cps they were given at (0 when k is 0). */
  cps: number;
}

/**
 * The carrier's cps: given, else from its interval, to 15 significant digits (1e6 / (1e6 / 7) is
 * 6.999999999999999: the digits a double's round trip adds are not the configuration's).
 */
export const cpsOf = (c: Carrier): number => c.cps ?? Number((1e6 / c.intervalUs).toPrecision(15));

/** k intervals at `cps`, µs. */
export function slotOffset(k: number, cps: number): number {
  return k === 0 ? 0 : (k * 1e6) / cps;
}

/** The latest slot given (µs; for expiries and displays, not for pacing). */
export function lastSlot(s: SlotState): number {
  return s.base + slotOffset(s.k, s.cps);
}

/**
 * The next slot after `s` (undefined: none) for a call at t at `cps`: slot = max(t, last + I), as
 * a base and k, with its exact wait (0: the slot is t, a base of its own). A state counted at
 * another cps (a reload changed it) is based again at its latest slot first.
 */
export function nextSlot(s: SlotState | undefined, cps: number, t: number): SlotState & { wait: number } {
  if (s === undefined) return { base: t, k: 0, cps, wait: 0 };
  let { base, k } = s;
  if (k > 0 && s.cps !== cps) {
    base += slotOffset(k, s.cps);
    k = 0;
  }
  const off = slotOffset(k + 1, cps);
  const since = t - base;
  return off > since ? { base, k: k + 1, cps, wait: off - since } : { base: t, k: 0, cps, wait: 0 };
}

/**
 * The end of a hold of `forUs` (whole µs) from the slot base + k intervals, rounded up to a whole
 * µs: holds are compared with whole-µs times (an end after t), which rounding up keeps exact,
 * where the slot as one number of µs would be rounded to a quarter-µs.
 */
export function slotHoldEnd(s: SlotState, forUs: number): number {
  const whole = Math.floor(s.base);
  return whole + forUs + Math.ceil(slotOffset(s.k, s.cps) + (s.base - whole));
}
