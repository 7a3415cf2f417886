/**
 * CallIdTable (src/admission/call-id-table.ts), the table of decisions in flight by call id: the
 * same answers as a Map under a seeded random mix of adds, replacements, lookups and removals
 * (with growth past its first capacity and keys that share buckets), and what a removal leaves
 * behind (nothing: its slot no longer points at the value).
 */
import { expect } from 'chai';
import { prng } from '../scripts/make-fixtures.js';
import { CallIdTable } from '../src/admission/call-id-table.js';

describe('CallIdTable (decisions in flight by call id)', () => {
  it('answers as a Map over a seeded random mix of set, get and delete, through growth', () => {
    const rand = prng(11);
    const table = new CallIdTable<number>(8);
    const model = new Map<string, number>();
    // few distinct keys so that sets replace, deletes hit and buckets are shared
    const keyOf = (n: number) => (n % 3 === 0 ? `${n}@10.0.0.1` : `a84b4c76e66710-${n}`);
    for (let step = 0; step < 60_000; step++) {
      // the live set swells to ~600 keys, then falls back: growth, then reuse of freed entries
      const phase = Math.floor(step / 10_000) % 2 === 0 ? 0.65 : 0.35;
      const key = keyOf(Math.floor(rand() * 1500));
      const r = rand();
      if (r < phase) {
        table.set(key, step);
        model.set(key, step);
      } else if (r < phase + 0.25) {
        expect(table.delete(key), `delete ${key} at step ${step}`).to.equal(model.delete(key));
      } else {
        expect(table.get(key), `get ${key} at step ${step}`).to.equal(model.get(key));
      }
      expect(table.size).to.equal(model.size);
    }
    expect(model.size).to.be.greaterThan(0);
    for (const [key, value] of model) expect(table.get(key)).to.equal(value);
    for (const key of [...model.keys()]) expect(table.delete(key)).to.equal(true);
    expect(table.size).to.equal(0);
    expect(table.get(keyOf(3))).to.equal(undefined);
    expect(table.delete(keyOf(3))).to.equal(false);
  });

  it('keys that differ in one character, the empty key, and non-ASCII keys are distinct', () => {
    const table = new CallIdTable<string>();
    const keys = ['', 'a', 'b', 'ab', 'ba', 'call-1', 'call-2', 'call-10', 'appel-é', 'appel-è', '呼叫', '\u0000'];
    for (const k of keys) table.set(k, `v:${k}`);
    for (const k of keys) expect(table.get(k)).to.equal(`v:${k}`);
    expect(table.size).to.equal(keys.length);
    expect(table.delete('ab')).to.equal(true);
    expect(table.get('ab')).to.equal(undefined);
    expect(table.get('ba')).to.equal('v:ba');
  });

  it('a removed entry no longer holds its value (nothing a finished call made stays reachable)', () => {
    const table = new CallIdTable<object>();
    const value = { decided: true };
    table.set('c1', value);
    table.delete('c1');
    const held = (table as unknown as { vals: unknown[]; keys: unknown[] }).vals.includes(value);
    expect(held, 'the removed value is still referenced by the table').to.equal(false);
    expect((table as unknown as { keys: unknown[] }).keys.includes('c1')).to.equal(false);
  });
});
