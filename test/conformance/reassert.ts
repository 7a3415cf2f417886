/**
 * The conformance case of the reassert operation (ReassertRequest in types.ts): a store that
 * lost a call's holds gets them back with the original end, a hold still present is not counted
 * twice, an ended call is not written, and a sync under an unchanged marker tells a call released
 * elsewhere (gone) from one never seen (unknown).
 */
import { expect } from 'chai';
import { carrierTag, OUTBOUND_TAG } from '../../src/store/keys.js';
import type { Store } from '../../src/store/types.js';
import { MS, S, SL, T0, bucket, carrier } from './cases.js';

const tag = 'p:reas';
const peer = { ...bucket('peer:reas', SL(100, S)), channels: 3 };
const glob = { ...bucket('global', SL(100, S)), channels: 5 };
const c1 = { ...carrier('carrier:reas', 100 * MS, 10 * S), channels: 2 };

export async function reassertCase(store: Store): Promise<void> {
  if (store.reassert === undefined) throw new Error('the store has no reassert');
  const holds = async (name: string, now: number, t = tag) => (await store.holds({ tag: t, name, now })).holds;
  // a: admitted and still there; b: never written (as if lost); c: ended already
  const a = await store.admit({ tag, buckets: [glob, peer], now: T0, hold: { id: 'ra', forUs: 10 * S } });
  expect(a.admitted).to.equal(true);
  const calls = [
    { id: 'ra', direction: 'in' as const, names: ['global', 'peer:reas'], end: T0 + 10 * S },
    { id: 'rb', direction: 'in' as const, names: ['global', 'peer:reas'], end: T0 + 8 * S },
    { id: 'rc', direction: 'in' as const, names: ['peer:reas'], end: T0 + 1 * MS },
  ];
  const first = await store.reassert({ tag, calls, now: T0 + 1 * S, graceUs: 2 * S });
  expect(first.statuses).to.deep.equal(['present', 'written', 'ended']);
  expect(first.markerMissing).to.equal(true);
  expect(first.graceUntil).to.equal(T0 + 3 * S);
  expect(await holds('peer:reas', T0 + 1 * S)).to.equal(2);
  expect(await holds('global', T0 + 1 * S)).to.equal(2);
  // again: idempotent, nothing counted twice; the marker stays
  const again = await store.reassert({ tag, calls, now: T0 + 2 * S, token: first.token });
  expect(again.statuses).to.deep.equal(['present', 'present', 'ended']);
  expect(again.markerMissing).to.equal(false);
  expect(again.token).to.equal(first.token);
  expect(await holds('peer:reas', T0 + 2 * S)).to.equal(2);
  // the re-asserted call holds until its original end, and its release finds it
  expect(await holds('peer:reas', T0 + 8 * S - 1)).to.equal(2);
  expect(await holds('peer:reas', T0 + 8 * S)).to.equal(1);
  expect((await store.release({ id: 'rb', now: T0 + 3 * S })).released).to.equal(1);
  // sync under the same marker: a missing record was released elsewhere (gone), or unknown without a token
  const sync = { tag, calls: calls.slice(0, 2), now: T0 + 4 * S, mode: 'sync' as const };
  expect((await store.reassert({ ...sync, token: first.token })).statuses).to.deep.equal(['present', 'gone']);
  expect((await store.reassert({ ...sync })).statuses).to.deep.equal(['present', 'unknown']);
  expect(await holds('peer:reas', T0 + 4 * S)).to.equal(1);
  // sync under another marker (the store lost it): written again
  const other = await store.reassert({ ...sync, token: 'not-the-marker' });
  expect(other.statuses).to.deep.equal(['present', 'written']);
  expect(await holds('peer:reas', T0 + 4 * S)).to.equal(2);
  // a hold added to a call already holding (a channel limit turned on): one more hold, same record
  const wider = await store.reassert({
    tag,
    calls: [{ id: 'ra', direction: 'in', names: ['global', 'peer:reas', 'account:reas'], end: T0 + 10 * S }],
    now: T0 + 5 * S,
  });
  expect(wider.statuses).to.deep.equal(['written']);
  expect(await holds('account:reas', T0 + 5 * S)).to.equal(1);
  expect((await store.release({ id: 'ra', now: T0 + 5 * S })).released).to.equal(1);
  expect(await holds('account:reas', T0 + 5 * S)).to.equal(0);
  expect(await holds('global', T0 + 5 * S)).to.equal(1);
  // the processes sharing the tag: each learns how many others were seen lately
  const seenBy = async (process: string) =>
    (await store.reassert!({ tag, calls: [], now: T0 + 5 * S, process })).others;
  expect(await seenBy('pa')).to.equal(0);
  expect(await seenBy('pb')).to.equal(1);
  expect(await seenBy('pa')).to.equal(1);
  // outbound: on the carrier's own tag
  const out = await store.reassert({
    tag: carrierTag(c1.name),
    calls: [{ id: 'ro', direction: 'out', names: [c1.name], end: T0 + 9 * S }],
    now: T0 + 5 * S,
  });
  expect(out.statuses).to.deep.equal(['written']);
  expect(await holds(c1.name, T0 + 5 * S, OUTBOUND_TAG)).to.equal(1);
  expect((await store.release({ id: 'ro', direction: 'out', now: T0 + 6 * S })).released).to.equal(1);
  expect(await holds(c1.name, T0 + 6 * S, OUTBOUND_TAG)).to.equal(0);
}
