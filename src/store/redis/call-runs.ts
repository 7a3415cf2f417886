/** The calls of a batch (admit, reserve) in runs that share a time (lua/includes/runs.lua). */
import { num } from './bucket-args.js';

/**
 * now, count, then the arguments of each call of the run (`args(i, out)` pushes call i's), run
 * after run. `virtual`: some call gave its own now.
 */
export function runsOf(
  items: readonly { readonly now: string }[],
  args: (i: number, out: string[]) => void,
): { calls: string[]; virtual: boolean } {
  const calls: string[] = [];
  let virtual = false;
  for (let i = 0; i < items.length; ) {
    const now = items[i]!.now;
    let j = i + 1;
    while (j < items.length && items[j]!.now === now) j++;
    calls.push(now, num(j - i));
    for (let k = i; k < j; k++) args(k, calls);
    if (now !== '') virtual = true;
    i = j;
  }
  return { calls, virtual };
}
