/**
 * The Batcher's lanes (src/store/redis/batcher.ts): a lane that every batch uses stays in its map
 * while idle (not taken out and put back for each batch), and idle lanes of many keys (tags on
 * a Cluster) do not pile up past the bound.
 */
import { expect } from 'chai';
import { Batcher, type Pending } from '../src/store/redis/batcher.js';

type Item = Pending<number>;

function batcher(sent: number[][]): Batcher<Item> {
  return new Batcher<Item>({
    maxBatch: 64,
    maxInFlight: 1,
    ready: () => true,
    whenReady: () => Promise.resolve(),
    unavailable: (err) => err,
    send: async (items) => {
      sent.push(items.map((_, i) => i));
      await new Promise((r) => setImmediate(r));
      items.forEach((item, i) => {
        item.resolve(i);
      });
    },
  });
}

const call = (b: Batcher<Item>, key: string) =>
  new Promise<number>((resolve, reject) => b.add(key, { signal: undefined, resolve, reject }));
const lanes = (b: Batcher<Item>) =>
  (b as unknown as { lanes: Map<string, { items: unknown[]; inFlight: number }> }).lanes;

describe('Batcher lanes', () => {
  it('a lane used by one batch after another stays, idle, the same lane', async () => {
    const sent: number[][] = [];
    const b = batcher(sent);
    await call(b, 'one');
    const lane = lanes(b).get('one');
    expect(lane, 'the idle lane is kept').to.not.equal(undefined);
    for (let k = 0; k < 20; k++) await Promise.all([call(b, 'one'), call(b, 'one')]);
    expect(lanes(b).get('one')).to.equal(lane);
    expect(lanes(b).size).to.equal(1);
    expect(sent.length).to.be.greaterThanOrEqual(21);
  });

  it('idle lanes of many keys are dropped past 64, and a dropped key gets a new lane', async () => {
    const b = batcher([]);
    await Promise.all(Array.from({ length: 300 }, (_, i) => call(b, `tag${i}`)));
    expect(lanes(b).size).to.be.at.most(64);
    for (const lane of lanes(b).values()) expect(lane.items.length + lane.inFlight).to.equal(0);
    expect(await call(b, 'tag299')).to.equal(0);
    expect(lanes(b).size).to.be.at.most(65);
  });
});
