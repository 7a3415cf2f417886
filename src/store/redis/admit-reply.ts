/** The decisions of an admit script call (admit.lua, admit-lone.lua), from its reply. */
import { systemClockUs } from '../../clock.js';
import type { PendingAdmit } from './admit-args.js';
import { skipped, type ClockOffset } from './clock-offset.js';
import type { KnownLogs } from './known-logs.js';

/**
 * Settle each call of the batch. The reply, per call: limitedBy (0: admitted, else 1-based),
 * retryAfterUs, now, flags (1: channels, 2: duplicate, 4: skipped, 8: banned, 16: refused by a
 * leased level's calls share alone, the rest having room); then Redis TIME when the
 * call asked for it (`clock`). Every Redis time in it improves the clock offset.
 */
export function settleAdmissions(
  items: readonly PendingAdmit[],
  reply: unknown,
  clock: string,
  offset: ClockOffset,
  known: KnownLogs,
): void {
  const r = reply as number[];
  const received = systemClockUs();
  if (clock) offset.sample(r[r.length - 1]!, received);
  for (let i = 0; i < items.length; i++) {
    const item = items[i]!;
    const limitedBy = r[4 * i]!;
    const flags = r[4 * i + 3]!;
    const now = r[4 * i + 2]!;
    if (item.now === '') offset.sample(now, received);
    if (flags === 4) item.reject(skipped());
    else if (limitedBy !== 0) {
      item.resolve({
        admitted: false,
        limitedBy: limitedBy - 1,
        reason: flags === 1 ? 'channels' : flags === 8 ? 'banned' : 'rate',
        retryAfterUs: r[4 * i + 1]!,
        now,
        ...(flags === 16 && { spillable: true }),
      });
    } else if (flags === 2) item.resolve({ admitted: true, limitedBy: -1, retryAfterUs: 0, now, duplicate: true });
    else {
      // on Redis TIME, an admitted call's logs have their expiry and were trimmed at the bound of its time
      if (item.now === '') known.admitted(item.buckets, now);
      item.resolve({ admitted: true, limitedBy: -1, retryAfterUs: 0, now });
    }
  }
}
