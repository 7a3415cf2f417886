/**
 * The conformance case of the operator operations (src/store/operations.ts): listing the calls
 * holding a bucket or a carrier, resetting a bucket, and freeing one call by id (release).
 */
import { expect } from 'chai';
import { InvalidArgumentError } from '../../src/errors/index.js';
import { OUTBOUND_TAG, accountBucket, peerBucket } from '../../src/store/keys.js';
import { isOperable } from '../../src/store/operations.js';
import type { Store } from '../../src/store/types.js';
import { FW, MS, S, SL, SW, T0, bucket, carrier } from './cases.js';

const tag = 'a:ops';
// the peer: three kinds of limits and 5 channels; the account above it: 10 channels
const peer = { ...bucket(peerBucket('ops'), SL(10, S), FW(5, S), SW(5, 10 * S), FW(6, S)), channels: 5 };
const account = { ...bucket(accountBucket('ops'), SL(100, S)), channels: 10 };
const buckets = [account, peer];
// ids that keys must encode: a space, braces, a percent sign, a non-ASCII letter, an astral one
const ids = ['c 1{x}', 'c%2', 'cé3\u{1F600}'];

export async function operationsCase(store: Store): Promise<void> {
  expect(isOperable(store)).to.equal(true);
  if (!isOperable(store)) return;
  for (const [i, id] of ids.entries()) {
    const r = await store.admit({ tag, buckets, now: T0 + i * MS, hold: { id, forUs: (i + 1) * S } });
    expect(r.admitted, `admit ${id}`).to.equal(true);
  }
  const ends = ids.map((_, i) => T0 + i * MS + (i + 1) * S);
  const listed = (name: string, now: number, max?: number) => store.listHolds({ tag, name, now, max });

  // every call with its end, earliest first; `max` bounds the list, never the total
  expect(await listed(peer.name, T0 + 10 * MS)).to.deep.equal({
    holds: ids.map((id, i) => ({ id, endUs: ends[i] })),
    total: 3,
    now: T0 + 10 * MS,
  });
  expect(await listed(peer.name, T0 + 10 * MS, 2)).to.deep.include({ total: 3 });
  expect((await listed(peer.name, T0 + 10 * MS, 2)).holds.map((h) => h.id)).to.deep.equal(ids.slice(0, 2));
  // a hold ending exactly at t is over
  expect((await listed(peer.name, ends[0]!)).holds.map((h) => h.id)).to.deep.equal(ids.slice(1));
  expect(await listed('peer:nobody', T0)).to.deep.equal({ holds: [], total: 0, now: T0 });

  // a carrier's holds
  const k = { ...carrier('ops', 100 * MS, S), channels: 2 };
  expect((await store.reserve({ route: [k], now: T0, hold: { id: 'o 1', forUs: 2 * S } })).index).to.equal(0);
  expect((await store.listHolds({ tag: OUTBOUND_TAG, name: k.name, now: T0 + MS })).holds).to.deep.equal([
    { id: 'o 1', endUs: T0 + 2 * S },
  ]);

  // the routing process's periodic check of its ledger (reassert, sync) knows the marker
  const at = T0 + 10 * MS;
  const check = () =>
    store.reassert!({
      tag,
      calls: ids.map((id, i) => ({ id, direction: 'in' as const, names: [account.name, peer.name], end: ends[i]! })),
      mode: 'sync',
      token,
      now: at,
    });
  let token = '';
  token = (await check()).token;

  // reset the peer: its log (3 events), its two window counters (1 s and 10 s) and its 3 holds
  const r = await store.reset({ tag, bucket: peer, now: at });
  expect(r).to.deep.equal({ events: 3, windows: 2, holds: ids.map((id, i) => ({ id, endUs: ends[i] })), now: at });
  expect((await listed(peer.name, at)).total, 'peer holds after reset').to.equal(0);
  // that check does not bring them back: the calls' records no longer name the peer
  expect((await check()).statuses).to.deep.equal(['present', 'present', 'present']);
  expect((await listed(peer.name, at)).total, 'peer holds after the check').to.equal(0);
  expect((await listed(account.name, at)).total, 'the account keeps its holds').to.equal(3);
  expect((await store.count({ tag, bucket: peer.name, windowUs: S, now: at })).count).to.equal(0);
  expect((await store.count({ tag, bucket: account.name, windowUs: S, now: at })).count).to.equal(3);
  // a second reset finds nothing
  expect(await store.reset({ tag, bucket: peer, now: at })).to.deep.equal({
    events: 0,
    windows: 0,
    holds: [],
    now: at,
  });

  // the peer's limits start again from nothing: 5 calls fit its fixed window of 5 (3 were counted before)
  for (let i = 0; i < 5; i++) {
    const a = await store.admit({ tag, buckets, now: at + MS, hold: { id: `n${i}`, forUs: S } });
    expect(a.admitted, `admit n${i} after the reset`).to.equal(true);
  }
  expect((await store.admit({ tag, buckets, now: at + MS, hold: { id: 'n5', forUs: S } })).reason).to.equal('rate');

  // a refresh of a call from before the reset does not bring its peer hold back
  expect((await store.refresh({ id: ids[0]!, forUs: 5 * S, now: at + 2 * MS })).refreshed).to.equal(1);
  expect((await listed(peer.name, at + 2 * MS)).holds.map((h) => h.id)).to.not.include(ids[0]);
  expect((await listed(account.name, at + 2 * MS)).holds.map((h) => h.id)).to.include(ids[0]);

  // freeing one call by id (what `callgate release` does): its holds go everywhere
  expect((await store.release({ id: ids[1]!, now: at + 3 * MS })).released).to.equal(1);
  expect((await listed(account.name, at + 3 * MS)).holds.map((h) => h.id)).to.not.include(ids[1]);
  expect((await store.release({ id: 'o 1', now: at + 3 * MS })).released).to.equal(1);
  expect((await store.listHolds({ tag: OUTBOUND_TAG, name: k.name, now: at + 3 * MS })).total).to.equal(0);

  for (const bad of [
    () => store.listHolds({ tag, name: peer.name, max: 0 }),
    () => store.listHolds({ tag, name: '' }),
    () => store.reset({ tag: '{x', bucket: peer }),
    () => store.reset({ tag, bucket: { name: 'x', limits: [{ ...SL(1, S), windowUs: -1 }] } }),
  ]) {
    let err: unknown;
    try {
      await bad();
    } catch (e) {
      err = e;
    }
    expect(err).to.be.instanceOf(InvalidArgumentError);
  }
}
