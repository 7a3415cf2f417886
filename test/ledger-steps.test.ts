/**
 * The call ledger read in steps (src/holds/ledger.ts, eachInSteps), as the holds keeper's
 * passes read it: the same calls as one read, call by call, the event loop turning between
 * steps, so that a ledger of tens of thousands of calls does not stop the process's decisions
 * while it is read, and a pass holds no more of it as objects than it is writing.
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
  it('reads what one read does, call by call, the event loop turning between steps', async () => {
    const heard: LedgerCall[] = [];
    let turns = 0;
    let turning = true;
    const turnsAt: number[] = [];
    const turn = () => {
      turns++;
      turnsAt.push(heard.length);
      if (turning) setImmediate(turn);
    };
    setImmediate(turn);
    await ledgerOf(10_000).eachInSteps(1_000, true, true, undefined, (call) => void heard.push(call), 1_000);
    turning = false;
    const byTag = new Map<string, LedgerCall[]>();
    for (const c of heard) byTag.set(c.hold.tag, [...(byTag.get(c.hold.tag) ?? []), c]);
    expect(ids(byTag)).to.deep.equal(ids(ledgerOf(10_000).byTag(1_000, true, true)));
    // in the ledger's order
    expect(heard.map((c) => Number(c.id.slice(1)))).to.deep.equal(
      heard.map((c) => Number(c.id.slice(1))).sort((a, b) => a - b),
    );
    expect(turns, 'the event loop turned between steps').to.be.at.least(10);
    // it never turned within a step: each turn came after a whole step of entries
    expect(new Set(turnsAt).size, 'turns at distinct points of the read').to.be.at.least(10);
  });

  it('waits for the promise a call returns before reading the next', async () => {
    const order: string[] = [];
    await ledgerOf(30).eachInSteps(1_000, true, true, undefined, async (call) => {
      order.push(`read ${call.id}`);
      await new Promise((r) => setTimeout(r, 1));
      order.push(`done ${call.id}`);
    });
    for (let i = 0; i + 1 < order.length; i += 2) {
      expect(order[i]!.replace('read', 'done')).to.equal(order[i + 1]);
    }
  });

  it('reads only the holds asked for, and not the entries added while it reads', async () => {
    const ledger = ledgerOf(100);
    ledger.add('u1', 'in', { tag: 'in:a', buckets: held, end: 5_000, unwritten: true });
    const unwritten: string[] = [];
    await ledger.eachInSteps(
      1_000,
      true,
      true,
      (h) => h.unwritten === true,
      (c) => void unwritten.push(c.id),
    );
    expect(unwritten).to.deep.equal(['u1']);
    let n = 0;
    await ledger.eachInSteps(1_000, true, true, undefined, () => {
      n++;
      ledger.add(`new${n}`, 'in', { tag: 'in:a', buckets: held, end: 5_000 }); // each read adds one
    });
    expect(n, 'the calls there at the start').to.equal(
      ids(ledgerOf(100).byTag(1_000, true, true)).flatMap(([, c]) => c).length + 1,
    );
  });

  it('forgets ended calls on the way, as one read does', async () => {
    const ledger = ledgerOf(700);
    await ledger.eachInSteps(1_000, true, true, undefined, () => undefined, 64);
    expect(ledger.size).to.equal(600); // the 100 calls ending at 500 µs are gone
    expect(ledger.get('c7')).to.equal(undefined);
    expect(ledger.get('c8')).to.not.equal(undefined);
  });
});
