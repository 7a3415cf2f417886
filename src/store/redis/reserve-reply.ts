/** The reservations of a reserve script call (lua/reserve.lua), from its reply. */
import { systemClockUs } from '../../clock.js';
import { skipped, type ClockOffset } from './clock-offset.js';
import type { PendingReserve } from './reserve-args.js';

/**
 * Settle each call of the batch. The reply, per call: m (the carriers tried; -1: skipped), index
 * (1-based, 0: none), waitUs, slotUs, now, then per carrier tried its wait and flag (1: channels
 * full, 2 and 3: a leased carrier's calls or channels share lacked room); then
 * Redis TIME when the call asked for it (`clock`). Every Redis time in it improves the clock
 * offset.
 */
export function settleReservations(
  items: readonly PendingReserve[],
  reply: unknown,
  clock: string,
  offset: ClockOffset,
): void {
  const r = reply as (string | number)[];
  const received = systemClockUs();
  if (clock) offset.sample(Number(r[r.length - 1]), received);
  let at = 0;
  for (const item of items) {
    const m = Number(r[at]);
    if (item.now === '') offset.sample(Number(r[at + 4]), received);
    if (m < 0) {
      item.reject(skipped());
      at += 5;
      continue;
    }
    const waits: number[] = new Array(m);
    const full: boolean[] = new Array(m);
    let lacked: boolean[] | undefined;
    for (let i = 0; i < m; i++) {
      waits[i] = Number(r[at + 5 + 2 * i]);
      const flag = Number(r[at + 6 + 2 * i]);
      full[i] = flag === 1;
      // 2, 3: a leased carrier's calls or channels share lacked room
      if (flag >= 2) (lacked ??= new Array<boolean>(m).fill(false))[i] = true;
    }
    item.resolve({
      index: Number(r[at + 1]) - 1,
      waitUs: Number(r[at + 2]),
      slotUs: Number(r[at + 3]),
      now: Number(r[at + 4]),
      waits,
      full,
      ...(lacked && { shareLacked: lacked }),
    });
    at += 5 + 2 * m;
  }
}
