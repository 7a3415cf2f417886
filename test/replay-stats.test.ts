/**
 * The replay report's count of calls in progress (src/replay/stats.ts, ChannelPeak) against a
 * plain list on seeded random decisions: holds added at rising times, the peak and every count
 * heard the same.
 */
import { expect } from 'chai';
import { ChannelPeak, WindowPeak } from '../src/replay/stats.js';

describe('replay stats: calls in progress (ChannelPeak)', () => {
  it('adds and ends count as a plain list does, on 5,000 seeded decisions', () => {
    let seed = 11;
    const rnd = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;
    const peak = new ChannelPeak(10);
    const heard: [number, number][] = [];
    const listHeard: [number, number][] = [];
    const list: number[] = [];
    let listPeak = 0;
    let t = 0;
    for (let i = 0; i < 5_000; i++) {
      t += Math.floor(rnd() * 50);
      const end = t + Math.floor(rnd() * 400);
      peak.add(t, end, (at, n) => heard.push([at, n]));
      for (const e of [...list].sort((a, b) => a - b)) {
        if (e > t) break;
        list.splice(list.indexOf(e), 1);
        listHeard.push([e, list.length]);
      }
      if (end > t) list.push(end);
      listPeak = Math.max(listPeak, list.length);
      listHeard.push([t, list.length]);
    }
    expect(peak.peak).to.equal(listPeak);
    expect(peak.peak).to.be.above(5);
    // every count heard: at each decision and each end
    expect(heard.length).to.be.above(5_000);
    expect(heard).to.deep.equal(listHeard);
  });
});

describe('replay stats: a sliding window held (WindowPeak)', () => {
  it('is judged exactly, where the estimate shown (a double) rounds to L', () => {
    // a week's window: 37,839 calls in the window before, 170,678 in this one, then a call whose
    // estimate 170,678 + 37,839 (1 - r / W) is below 196,892, and reads 196,892 in doubles
    const [W, L, c, p, r] = [604_800_000_000, 196_892, 170_678, 37_839, 185_808_293_031];
    const k = 3_000;
    const peak = new WindowPeak({ limit: L, windowUs: W, algorithm: 'sliding-window' });
    for (let i = 0; i < p; i++) peak.add((k - 1) * W);
    for (let i = 0; i < c; i++) peak.add(k * W + r - 1);
    expect(peak.add(k * W + r), 'the estimate shown').to.equal(L);
    expect(peak.held).to.equal(true);
    // one call more at that time is over the limit
    peak.add(k * W + r);
    expect(peak.held).to.equal(false);
  });
});
