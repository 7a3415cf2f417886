/**
 * The end-to-end tests' reading of sipp's records: the decision bracket of an admitted call and
 * the count of admitted calls proven decided within one second. No sipp needed: message logs as
 * sipp writes them (a dashed line with the local time, then the message).
 */
import { expect } from 'chai';
import { callsOf } from './helpers/sip-edge.js';
import { parseMessageLog, provenInOneSecond, type SippReport } from './helpers/sipp.js';

const stamp = (ms: number) => {
  const d = new Date(2026, 10, 27, 12, 0, 0, 0);
  d.setTime(d.getTime() + Math.floor(ms));
  const p = (n: number, w = 2) => String(n).padStart(w, '0');
  const us = Math.round((ms - Math.floor(ms)) * 1000) + d.getMilliseconds() * 1000;
  return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())} ${p(d.getHours())}:${p(d.getMinutes())}:${p(d.getSeconds())}.${p(us, 6)}`;
};
const block = (ms: number, dir: 'sent' | 'received', first: string, callId: string, cseq: string) =>
  `----------------------------------------------- ${stamp(ms)}\nUDP message ${dir} [300] bytes:\n\n${first}\r\nCall-ID: ${callId}\r\nCSeq: ${cseq}\r\n\r\n\n`;
const report = (text: string) => ({ messages: parseMessageLog(text) }) as unknown as SippReport;
const T0 = new Date(2026, 10, 27, 12, 0, 0, 0).getTime() * 1000;

describe('sipp records: decision brackets', () => {
  it('an INVITE left after the entry logged before it, not at its own (post-send) time', () => {
    const log =
      block(0, 'received', 'SIP/2.0 200 OK', 'x', '1 INVITE') +
      block(5, 'sent', 'INVITE sip:s@h SIP/2.0', 'c1', '1 INVITE') +
      block(7, 'received', 'SIP/2.0 100 Trying', 'c1', '1 INVITE') +
      block(9, 'sent', 'INVITE sip:s@h SIP/2.0', 'c1', '1 INVITE') +
      block(12, 'received', 'SIP/2.0 200 OK', 'c1', '1 INVITE');
    const c = callsOf(report(log)).get('c1')!;
    expect(c.invite).to.equal(T0 + 5000);
    expect(c.leftAfter).to.equal(T0);
    expect(c.trying).to.equal(T0 + 7000);
    expect(c.final!.status).to.equal(200);
  });

  it('L + 1 brackets inside one window shorter than 1 s are counted; one reaching outside is not', () => {
    const inside = Array.from({ length: 11 }, (_, i) => ({ a: i * 95_000, b: i * 95_000 + 5_000 }));
    expect(provenInOneSecond(inside)).to.equal(11);
    // the first one's bracket begins earlier: the 11 no longer fit in one window shorter than 1 s
    const widened = [{ a: -50_000, b: 5_000 }, ...inside.slice(1)];
    expect(provenInOneSecond(widened)).to.equal(10);
  });
});
