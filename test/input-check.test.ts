/**
 * Input from JavaScript is checked as the sidecar checks a request: an unknown field (a misspelt
 * optional one would otherwise be ignored) and a wrong type are refused with InvalidArgumentError
 * naming the field, by admit, record, reserve and dispatch alike; nothing is counted.
 */
import { expect } from 'chai';
import { InvalidArgumentError } from '../src/errors/index.js';
import { CallGate } from '../src/gate.js';
import { VirtualClock } from '../src/clock.js';
import { T0 } from './admission/stores.js';

async function refused(run: () => Promise<unknown>, ...words: string[]): Promise<void> {
  let err: unknown;
  try {
    await run();
  } catch (e) {
    err = e;
  }
  expect(err, words.join(' ')).to.be.instanceOf(InvalidArgumentError);
  for (const w of words) expect((err as Error).message).to.include(w);
}

/** What a call rejected with, or undefined when it resolved. */
const caught = (p: Promise<unknown>): Promise<unknown> =>
  p.then(
    () => undefined,
    (e: unknown) => e,
  );

/** Each refusal rejects with an InvalidArgumentError of exactly its message. */
async function expectRefused(cases: [Promise<unknown>, string][]): Promise<void> {
  for (const [refusal, message] of cases) {
    // a case's promise may resolve with the error already (a wrapper's catch) or reject with it
    const err = await refusal.then(
      (v) => v,
      (e: unknown) => e,
    );
    expect(err, message).to.be.instanceOf(InvalidArgumentError);
    expect((err as Error).message).to.equal(message);
  }
}

describe('call input from JavaScript', () => {
  let gate: CallGate;
  beforeEach(async () => {
    gate = await CallGate.create({
      config: {
        inbound: { peers: { p: [{ limit: 1, window: 'PT1S' }] } },
        outbound: { carriers: { c1: { cps: 1 } } },
      },
      clock: new VirtualClock(T0),
    });
  });
  afterEach(() => gate.close());

  it('unknown fields are refused, every one named, before anything is counted', async () => {
    const admit = gate.admit as (x: unknown) => Promise<unknown>;
    const record = gate.record as (x: unknown) => Promise<unknown>;
    const reserve = gate.reserve as (x: unknown) => Promise<unknown>;
    const dispatch = gate.dispatch as (x: unknown) => Promise<unknown>;
    await refused(() => admit.call(gate, { callId: 'a', peer: 'p', acount: 'x' }), '"acount"', 'account');
    await refused(() => record.call(gate, { callId: 'a', peer: 'p', foo: 1, bar: 2 }), '"foo", "bar"');
    await refused(() => reserve.call(gate, { callId: 'o', route: ['c1'], routes: [] }), '"routes"');
    await refused(() => dispatch.call(gate, { callId: 'o', route: ['c1'], durationMs: 5 }), '"durationMs"');
    // none of them counted: the peer's one call per second and the carrier's slot are still free
    expect(await gate.admit({ callId: 'a', peer: 'p' })).to.include({ admitted: true });
    expect(await gate.reserve({ callId: 'o', route: ['c1'] })).to.include({ outcome: 'dispatched', delayMs: 0 });
  });

  it('wrong types are refused, the field named', async () => {
    const admit = (x: unknown) => gate.admit(x as never);
    const reserve = (x: unknown) => gate.reserve(x as never);
    await refused(() => admit(null), 'must be an object');
    await refused(() => admit('a'), 'must be an object');
    await refused(() => admit({ callId: 7, peer: 'p' }), 'callId', '7');
    await refused(() => admit({ callId: 'a', peer: null }), 'peer', 'null');
    await refused(() => admit({ callId: 'a', peer: 'p', account: 5 }), 'account', '5');
    await refused(() => admit({ callId: 'a', peer: 'p', at: 1.5 }), 'at');
    await refused(() => admit({ callId: 'a', peer: 'p', at: 10n }), 'at');
    await refused(() => admit({ callId: 10n, peer: 'p' }), 'callId', '10n');
    await refused(() => admit({ callId: 'a', peer: 'p', durationUs: -1 }), 'durationUs');
    await refused(() => reserve({ callId: 'o', route: 'c1' }), 'route', '"c1"');
    await refused(() => reserve({ callId: 'o', route: [1] }), 'route');
    await refused(() => reserve({ callId: '', route: ['c1'] }), 'callId');
    await refused(() => gate.release(10n as never), 'callId', '10n');
  });

  it('a route entry that is not a carrier id is refused at its position, a hole of a sparse array too', async () => {
    const reserve = gate.reserve as (x: unknown) => Promise<unknown>;
    const dispatch = gate.dispatch as (x: unknown) => Promise<unknown>;
    // biome-ignore lint/suspicious/noSparseArray: the hole is the case
    const sparse = [, 'c1'];
    const cases: [unknown[], string][] = [
      [sparse, 'route[0] must be a string, got a hole (route is a sparse array)'],
      [['c1', undefined], 'route[1] must be a string, got undefined'],
      [[null, 'c1'], 'route[0] must be a string, got null'],
      [['c1', 'c1', 3], 'route[2] must be a string, got 3'],
      [['c1', ''], 'route[1] must not be empty'],
    ];
    for (const [route, message] of cases) {
      for (const op of [reserve, dispatch]) {
        await expectRefused([[op.call(gate, { callId: 'o', route }), message]]);
      }
    }
    // nothing taken: the carrier's slot is still free
    expect(await gate.reserve({ callId: 'o', route: ['c1'] })).to.include({ outcome: 'dispatched', delayMs: 0 });
  });

  it('reserve and dispatch say what their input must be and what came, the value as given', async () => {
    const reserve = (x: unknown) => caught(gate.reserve(x as never));
    const dispatch = (x: unknown, send?: unknown, opts?: unknown) =>
      caught(gate.dispatch(x as never, send as never, opts as never));
    const cases: [Promise<unknown>, string][] = [
      [reserve(null), 'reserve input must be an object { callId, route }, got null'],
      [reserve('o'), 'reserve input must be an object { callId, route }, got "o"'],
      // an array was refused for an unknown field "0"
      [reserve(['c1']), 'reserve input must be an object { callId, route }, got ["c1"]'],
      [dispatch(undefined), 'dispatch input must be an object { callId, route }, got undefined'],
      [
        reserve({ callId: 'o', rout: ['c1'] }),
        'reserve input: unknown field "rout" (accepted: callId, route, at, durationUs)',
      ],
      // a string was shown without its quotes, as if it were the number
      [
        reserve({ callId: 'o', route: ['c1'], at: '5' }),
        'at must be a non-negative integer number of microseconds, got "5"',
      ],
      [
        reserve({ callId: 'o', route: ['c1'], at: {} }),
        'at must be a non-negative integer number of microseconds, got {}',
      ],
      [
        reserve({ callId: 'o', route: ['c1'], durationUs: 10n }),
        'durationUs must be a non-negative integer number of microseconds, got 10n',
      ],
      [dispatch({ callId: 'o', route: ['c1'] }, 'c1'), 'send must be a function, got "c1"'],
      [dispatch({ callId: 'o', route: ['c1'] }, undefined, { onReserved: 1 }), 'onReserved must be a function, got 1'],
    ];
    await expectRefused(cases);
  });

  it('admit says what its input must be and what came, the value as given', async () => {
    const admit = (x: unknown) => caught(gate.admit(x as never));
    const cases: [Promise<unknown>, string][] = [
      [admit(undefined), 'admit input must be an object { callId, peer }, got undefined'],
      [admit('a'), 'admit input must be an object { callId, peer }, got "a"'],
      // an array was refused for an unknown field "0"
      [admit(['a']), 'admit input must be an object { callId, peer }, got ["a"]'],
      // a string was shown without its quotes, as if it were the number; an object as [object Object]
      [admit({ callId: 'a', peer: 'p', at: '5' }), 'at must be a non-negative integer number of microseconds, got "5"'],
      [admit({ callId: 'a', peer: 'p', at: {} }), 'at must be a non-negative integer number of microseconds, got {}'],
      [
        admit({ callId: 'a', peer: 'p', durationUs: Number.NaN }),
        'durationUs must be a non-negative integer number of microseconds, got NaN',
      ],
    ];
    await expectRefused(cases);
  });

  it('a refusal shows what came as it is: NaN is not null, a Set is not {}, a function is not its source', async () => {
    const reserve = (x: unknown) => caught(gate.reserve(x as never));
    const cases: [unknown, string][] = [
      [{ callId: Number.NaN, route: ['c1'] }, 'callId must be a string, got NaN'],
      [{ callId: -Infinity, route: ['c1'] }, 'callId must be a string, got -Infinity'],
      [{ callId: () => 'o', route: ['c1'] }, 'callId must be a string, got a function'],
      [{ callId: new Date(0), route: ['c1'] }, 'callId must be a string, got a Date'],
      [{ callId: 'o', route: new Set(['c1']) }, 'route must be an array of carrier ids (strings), got a Set'],
      [{ callId: 'o', route: new Map() }, 'route must be an array of carrier ids (strings), got a Map'],
      [{ callId: 'o', route: { 0: 'c1' } }, 'route must be an array of carrier ids (strings), got {"0":"c1"}'],
      [{ callId: 'o', route: [Number.NaN] }, 'route[0] must be a string, got NaN'],
    ];
    for (const [input, message] of cases) {
      const err = await reserve(input);
      expect(err, message).to.be.instanceOf(InvalidArgumentError);
      expect((err as Error).message).to.equal(message);
    }
  });
});
