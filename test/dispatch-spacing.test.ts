/**
 * Wire spacing: calls one Dispatcher sends on one carrier leave at least 1/cps apart on its
 * clock, whatever the timer lateness. A late send pushes the next one back; it never squeezes the
 * gap (a real SIP path showed 93.7 ms gaps at cps 10 before: a late send, then an on-time one).
 */
import { expect } from 'chai';
import { SystemClock, VirtualClock, systemClockUs, type Clock } from '../src/clock.js';
import type { CarrierConfig } from '../src/config/types.js';
import { Dispatcher, type DispatchResult } from '../src/dispatch/dispatcher.js';
import { MemoryStore } from '../src/store/memory-store.js';

const T0 = 1_700_000_000_000_000;
const MS = 1_000;

function carriers(spec: Record<string, number>): () => ReadonlyMap<string, CarrierConfig> {
  const map = new Map(
    Object.entries(spec).map(([id, cps]) => [id, { cps, intervalUs: 1e6 / cps, maxWaitUs: 10_000 * MS }]),
  );
  return () => map;
}

/** A VirtualClock whose n-th timer (in the order they are set) fires `late(n)` µs after its time. */
class LateClock implements Clock {
  private n = 0;
  constructor(
    readonly inner: VirtualClock,
    private readonly late: (n: number) => number,
  ) {}
  now(): number {
    return this.inner.now();
  }
  setTimer(atUs: number, fn: () => void): () => void {
    return this.inner.setTimer(atUs + this.late(this.n++), fn);
  }
}

const gaps = (times: number[]) => times.slice(1).map((t, i) => t - times[i]!);

describe('Dispatcher wire spacing', () => {
  it('a late send pushes the next ones on its carrier back by its lateness; other carriers and later calls are not touched', async () => {
    const clock = new LateClock(new VirtualClock(T0), (n) => (n === 0 ? 7 * MS : 0)); // call a2's timer fires 7 ms late
    const d = new Dispatcher({ store: new MemoryStore(), clock, carriers: carriers({ A: 10, B: 10 }) });
    const sent: Record<string, number> = {};
    const send = (id: string) => () => void (sent[id] = clock.now());
    const ps: Promise<DispatchResult>[] = [];
    for (const id of ['a1', 'a2', 'a3', 'a4']) ps.push(d.dispatch({ callId: id, route: ['A'] }, send(id)));
    for (const id of ['b1', 'b2']) ps.push(d.dispatch({ callId: id, route: ['B'] }, send(id)));
    await new Promise((r) => setImmediate(r));
    clock.inner.advance(T0 + 1_000 * MS);
    const results = await Promise.all(ps);
    expect(results.map((r) => r.outcome)).to.deep.equal(Array(6).fill('dispatched'));
    // slots 0, 100, 200, 300 ms; a2 left at 107 ms, so a3 and a4 go 100 ms after the send before
    expect(results.slice(0, 4).map((r) => (r.slotAt! - T0) / MS)).to.deep.equal([0, 100, 200, 300]);
    expect(['a1', 'a2', 'a3', 'a4'].map((id) => (sent[id]! - T0) / MS)).to.deep.equal([0, 107, 207, 307]);
    expect(results.slice(0, 4).map((r) => (r.sentAt! - T0) / MS)).to.deep.equal([0, 107, 207, 307]);
    // B has its own spacing: on its slots
    expect(['b1', 'b2'].map((id) => (sent[id]! - T0) / MS)).to.deep.equal([0, 100]);
    // once the carrier has been idle, a call goes at its slot again
    const late = d.dispatch({ callId: 'a5', route: ['A'] }, send('a5'));
    await new Promise((r) => setImmediate(r));
    clock.inner.advance(T0 + 2_000 * MS);
    const r5 = await late;
    expect(r5.sentAt).to.equal(T0 + 1_000 * MS);
    expect(r5.slotAt).to.equal(T0 + 1_000 * MS);
  });

  it('a call pushed back can still be cancelled: it is never sent, and the next one keeps its spacing', async () => {
    const clock = new LateClock(new VirtualClock(T0), (n) => (n === 0 ? 30 * MS : 0));
    const d = new Dispatcher({ store: new MemoryStore(), clock, carriers: carriers({ A: 10 }) });
    const sent: string[] = [];
    const ps = ['c1', 'c2', 'c3', 'c4'].map((id) => d.dispatch({ callId: id, route: ['A'] }, () => void sent.push(id)));
    await new Promise((r) => setImmediate(r));
    clock.inner.advance(T0 + 210 * MS); // c2 left at 130 ms; c3 (slot 200) is pushed to 230 ms
    expect(sent).to.deep.equal(['c1', 'c2']);
    expect(d.cancel('c3')).to.equal(true);
    clock.inner.advance(T0 + 1_000 * MS);
    const results = await Promise.all(ps);
    expect(results.map((r) => r.outcome)).to.deep.equal(['dispatched', 'dispatched', 'cancelled', 'dispatched']);
    expect(sent).to.deep.equal(['c1', 'c2', 'c4']);
    expect(results[3]!.sentAt).to.equal(T0 + 300 * MS);
  });

  it('a send that settles later (the process held up before the write) pushes the next one back from its end; one that settles after the next send changes nothing', async () => {
    const clock = new VirtualClock(T0);
    const d = new Dispatcher({ store: new MemoryStore(), clock, carriers: carriers({ A: 10 }) });
    const sent: Record<string, number> = {};
    const settle: Record<string, () => void> = {};
    const send = (id: string) => () => {
      sent[id] = clock.now();
      return new Promise<void>((resolve) => (settle[id] = resolve));
    };
    const ps = ['s1', 's2', 's3'].map((id) => d.dispatch({ callId: id, route: ['A'] }, send(id)));
    await new Promise((r) => setImmediate(r));
    expect(Object.keys(sent)).to.deep.equal(['s1']);
    clock.advance(T0 + 30 * MS);
    settle.s1!(); // written 30 ms after the reading: s2 goes 100 ms after that
    await new Promise((r) => setImmediate(r));
    clock.advance(T0 + 129 * MS);
    expect(Object.keys(sent)).to.deep.equal(['s1']);
    clock.advance(T0 + 130 * MS);
    expect(sent.s2).to.equal(T0 + 130 * MS);
    clock.advance(T0 + 240 * MS); // s3 (slot 200 ms) went at 230 ms; s2 settles only now: no effect
    expect(sent.s3).to.equal(T0 + 230 * MS);
    settle.s2!();
    settle.s3!();
    const results = await Promise.all(ps);
    expect(results.map((r) => (r.sentAt! - T0) / MS)).to.deep.equal([0, 130, 230]);
    // s3 was the last send and settled at 240 ms: the next one goes at 340 ms, not at its slot (300 ms)
    const late = d.dispatch({ callId: 's4', route: ['A'] }, send('s4'));
    await new Promise((r) => setImmediate(r));
    clock.advance(T0 + 339 * MS);
    expect(sent.s4).to.equal(undefined);
    clock.advance(T0 + 400 * MS);
    settle.s4!();
    const r4 = await late;
    expect([r4.slotAt, r4.sentAt]).to.deep.equal([T0 + 300 * MS, T0 + 340 * MS]);
  });

  it('SystemClock timers never fire before their time', async () => {
    const clock = new SystemClock();
    const early: number[] = [];
    const late: number[] = [];
    await Promise.all(
      Array.from({ length: 40 }, (_, i) => {
        const at = systemClockUs() + (i % 10) * 1_700 + 300; // 0.3 to 15.6 ms ahead: sleeps, polls, or both
        return new Promise<void>((resolve) =>
          clock.setTimer(at, () => {
            const d = systemClockUs() - at;
            (d < 0 ? early : late).push(d);
            resolve();
          }),
        );
      }),
    );
    expect(early).to.deep.equal([]);
    expect(late).to.have.length(40);
    // a cancelled timer never fires
    let fired = false;
    clock.setTimer(systemClockUs() + 1_000, () => (fired = true))();
    clock.setTimer(systemClockUs() + 5_000, () => (fired = true))();
    await new Promise((r) => setTimeout(r, 10));
    expect(fired).to.equal(false);
  });

  it('live: an event loop blocked for 3 intervals makes the calls due meanwhile leave 1/cps apart, not together', async function () {
    this.timeout(10_000);
    const clock = new SystemClock();
    const d = new Dispatcher({ store: new MemoryStore(), clock, carriers: carriers({ A: 50 }) }); // 20 ms
    const observed: number[] = [];
    const ps: Promise<DispatchResult>[] = [];
    for (let i = 0; i < 15; i++) {
      ps.push(
        d.dispatch({ callId: `l${i}`, route: ['A'] }, () => {
          observed.push(systemClockUs());
          if (i === 4) {
            const until = systemClockUs() + 65 * MS; // block: the calls of slots 5 to 7 come due meanwhile
            while (systemClockUs() < until);
          }
        }),
      );
    }
    const results = await Promise.all(ps);
    expect(results.every((r) => r.outcome === 'dispatched')).to.equal(true);
    const sentAt = results.map((r) => r.sentAt!);
    // on the Dispatcher's own clock readings: never closer than 1/cps
    expect(Math.min(...gaps(sentAt))).to.be.at.least(20 * MS);
    // the call after the block left 20 ms after the end of call 4's send at the earliest
    expect(sentAt[5]! - sentAt[4]!).to.be.at.least(65 * MS);
    // send ran in that order, after the Dispatcher's reading
    results.forEach((r, i) => {
      expect(observed[i]!).to.be.at.least(r.sentAt!);
    });
    // nothing left before its slot
    results.forEach((r) => {
      expect(r.sentAt!).to.be.at.least(Math.floor(r.slotAt!));
    });
  });
});
