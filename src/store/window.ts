/**
 * floor(t / W) for integer µs, corrected for the rounding of the double division (t / W can
 * round up to the next integer when t is just below a multiple of a large W). The Lua scripts
 * do the same (lua/includes/common.lua windowIndex).
 */
export function windowIndex(t: number, w: number): number {
  let k = Math.floor(t / w);
  if (k * w > t) k--;
  else if ((k + 1) * w <= t) k++;
  return k;
}
