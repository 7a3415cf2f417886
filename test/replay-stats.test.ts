/**
 * The replay report's count of calls in progress (src/replay/stats.ts, ChannelPeak) against a
 * plain list on seeded random decisions: holds added at rising times, the peak and every count
 * heard the same.
 */
import { expect } from 'chai';
import { ChannelPeak } from '../src/replay/stats.js';

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
