/**
 * The lines of some bytes that are not UTF-8, by index (0-based), and how many line breaks the
 * bytes hold. A configuration and a trace are UTF-8 text: decoded lossily, two ids with
 * different bytes would read as one. Natively (Buffer's isUtf8), and line by line only where
 * the whole fails. Lines are cut at '\n', which never occurs inside a UTF-8 sequence.
 */
import { isUtf8 } from 'node:buffer';

export function nonUtf8Lines(buf: Buffer): { bad: number[]; breaks: number } {
  const whole = isUtf8(buf);
  const bad: number[] = [];
  let breaks = 0;
  for (let from = 0; from < buf.length; ) {
    const nl = buf.indexOf(10, from);
    const end = nl === -1 ? buf.length : nl + 1;
    if (!whole && !isUtf8(buf.subarray(from, end))) bad.push(breaks);
    if (nl === -1) break;
    breaks++;
    from = end;
  }
  return { bad, breaks };
}
