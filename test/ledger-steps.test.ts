/**
 * The call ledger read in steps (src/holds/ledger.ts, byTagInSteps), as the holds keeper's
 * passes read it: the same calls as one read, each step heard before the event loop turns, and
 * the loop turning between steps, so that a ledger of tens of thousands of calls does not stop
 * the process's decisions while it is read.
 */
import { expect } from 'chai';
import { HoldLedger, type LedgerCall } from '../src/holds/ledger.js';

const bucket = (name: string, channels?: number) => ({ name, limits: [], ...(channels !== undefined && { channels }) });
const held = [bucket('global', 100), bucket('peer:p', 10)];
const notHeld = [bucket('peer:q')];

function ledgerOf(n: number): HoldLedger {
  const ledger = new HoldLedger();
  for (let i = 0; i < n; i++) {
    // every 7th call ended, every 5th holds no channel, every 3rd on another tag
    const end = i % 7 === 0 ? 500 : 5_000;
    const tag = i % 3 === 0 ? 'in:a' : 'in:b';
    ledger.add(`c${i}`, 'in', { tag, buckets: i % 5 === 0 ? notHeld : held, end });
  }
  return ledger;
}

const ids = (m: Map<string, LedgerCall[]>) =>
  [...m].map(([tag, calls]) => [tag, calls.map((c) => c.id)] as const).sort(([a], [b]) => a.localeCompare(b));

describe('call ledger: read in steps', () => {
  it('reads what one read does, each step heard before the event loop turns, the loop turning between steps', async () => {
    const steps: string[][] = [];
    let turns = 0;
    let turning = true;
    const turn = () => {
      turns++;
      if (turning) setImmediate(turn);
    };
    setImmediate(turn);
    const stepped = await ledgerOf(10_000).byTagInSteps(
      1_000,
      true,
      true,
      (calls) => {
        steps.push(calls.map((c) => c.id));
      },
      undefined,
      1_000,
    );
    turning = false;
    expect(ids(stepped)).to.deep.equal(ids(ledgerOf(10_000).byTag(1_000, true, true)));
    // 10 steps of 1,000 entries, then the rest (none): every call read heard once, in order
    expect(steps).to.have.length(11);
    const heard = steps.flat();
    expect(heard).to.deep.equal(
      [...stepped.values()]
        .flat()
        .map((c) => c.id)
        .sort((a, b) => Number(a.slice(1)) - Number(b.slice(1))),
    );
    expect(turns, 'the event loop turned between steps').to.be.at.least(10);
  });

  it('forgets ended calls on the way, as one read does', async () => {
    const ledger = ledgerOf(700);
    await ledger.byTagInSteps(1_000, true, true, () => undefined, undefined, 64);
    expect(ledger.size).to.equal(600); // the 100 calls ending at 500 µs are gone
    expect(ledger.get('c7')).to.equal(undefined);
    expect(ledger.get('c8')).to.not.equal(undefined);
  });
});
