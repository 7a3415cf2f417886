/**
 * What operators read and type back: ids from traffic (call ids, peers, callers' numbers) are
 * shown so that nothing a caller sent acts on the terminal and two ids never look alike; a ban
 * shown is one `unban` can lift; a bucket the sidecar lists is one it can name.
 */
import { expect } from 'chai';
import { VirtualClock } from '../src/clock.js';
import { InvalidArgumentError } from '../src/errors/index.js';
import { CallGate } from '../src/gate.js';
import { printable, printableJson } from '../src/ids.js';
import { liftBan, listBans } from '../src/observe/bans.js';
import { inspectGate, stateText } from '../src/observe/inspect.js';
import { locateBucket } from '../src/observe/operate.js';
import { parseConfig } from '../src/config/index.js';
import { buildApp } from '../src/server/app.js';
import { MemoryStore } from '../src/store/memory-store.js';

const T0 = 1_700_000_000_000_000;
/** An attribute level on callers' numbers, 1 call per 10 s; `extra`: more of its fields. */
const callerLevel = (extra: object = {}) => ({
  name: 'caller',
  key: 'caller' as const,
  limits: [{ limit: 1, window: 'PT10S' }],
  ...extra,
});
/** A ban at the first refusal past the limit, for 5 minutes. */
const BANNED = { ban: { over: 1, within: 'PT10S', for: 'PT5M' } };
const ESC = '\u001b';

describe('operator output: ids from traffic', () => {
  it('printable: controls, C1, bidi and zero-width characters escaped; a backslash doubled', () => {
    const ids = [
      `v${ESC}[2J`,
      'v\\u001b[2J',
      'a\u200bb',
      'ab',
      'rtl\u202eevil',
      'rlm\u200f',
      'c1\u009b31m',
      'bom\ufeff',
    ];
    const shown = ids.map(printable);
    expect(shown).to.deep.equal([
      'v\\u001b[2J',
      'v\\\\u001b[2J',
      'a\\u200bb',
      'ab',
      'rtl\\u202eevil',
      'rlm\\u200f',
      'c1\\u009b31m',
      'bom\\ufeff',
    ]);
    expect(new Set(shown).size, 'two ids never look alike').to.equal(ids.length);
    // JSON quotes and escapes backslashes itself; what it leaves raw is escaped
    expect(printableJson('q"\\\u202e')).to.equal('"q\\"\\\\\\u202e"');
  });

  it('inspect: a banned caller number and a peer from traffic are shown escaped', async () => {
    const config = {
      inbound: {
        defaultPeer: [],
        attributes: [callerLevel(BANNED)],
      },
    };
    const clock = new VirtualClock(T0);
    const gate = await CallGate.create({ config, store: new MemoryStore(), clock });
    try {
      const caller = `${ESC}]0;PWNED\u0007${ESC}[31mRED`;
      const peer = `esc${ESC}]0;P\u0007`;
      for (let i = 0; i < 4; i++) await gate.admit({ callId: `c${i}`, peer, caller });
      const text = stateText(await inspectGate(gate, { peers: [peer], bans: true }));
      expect(text).to.not.include(ESC);
      expect(text).to.not.include('\u0007');
      expect(text).to.include('\\u001b]0;PWNED\\u0007\\u001b[31mRED');
      expect(text).to.include('peer:esc\\u001b]0;P\\u0007');
    } finally {
      await gate.close();
    }
  });

  it("unban: a caller's value '#5' is that value where the level has no maxValues; a slot past maxValues is refused", async () => {
    const level = (extra: object) => callerLevel({ ...BANNED, ...extra });
    const gate = await CallGate.create({
      config: { inbound: { defaultPeer: [], attributes: [level({})] } },
      store: new MemoryStore(),
      clock: new VirtualClock(T0),
    });
    try {
      for (let i = 0; i < 4; i++) await gate.admit({ callId: `h${i}`, peer: 'p', caller: '#5' });
      expect((await listBans(gate.store, T0))!.map((b) => b.value)).to.deep.equal(['#5']);
      expect(await liftBan(gate.config, gate.store, 'caller', '#5', T0)).to.deep.equal({ lifted: true });
      expect(await listBans(gate.store, T0)).to.deep.equal([]);
    } finally {
      await gate.close();
    }
    const slotted = await CallGate.create({
      config: { inbound: { defaultPeer: [], attributes: [level({ maxValues: 100 })] } },
      store: new MemoryStore(),
      clock: new VirtualClock(T0),
    });
    try {
      await liftBan(slotted.config, slotted.store, 'caller', '#99', T0); // a slot there is
      let err: unknown;
      await liftBan(slotted.config, slotted.store, 'caller', '#100', T0).catch((e: unknown) => (err = e));
      expect(err).to.be.instanceOf(InvalidArgumentError);
      expect((err as Error).message).to.match(/#0 to #99: there is no #100/);
    } finally {
      await slotted.close();
    }
  });

  it('the sidecar lists and resets the bucket of a peer of 256 characters', async () => {
    const peer = 'p'.repeat(256);
    const gate = await CallGate.create({
      config: { inbound: { peers: { [peer]: [{ channels: 5 }] } } },
      store: new MemoryStore(),
      clock: new VirtualClock(T0),
    });
    const app = buildApp({ gate, ready: async () => {}, reload: async () => [] });
    try {
      expect((await gate.admit({ callId: 'long1', peer })).admitted).to.equal(true);
      const listed = await app.inject({ method: 'GET', url: `/v1/holds?bucket=peer:${peer}` });
      expect(listed.statusCode, listed.payload).to.not.equal(400);
      const reset = await app.inject({ method: 'POST', url: '/v1/reset', payload: { bucket: `peer:${peer}` } });
      expect(reset.statusCode, reset.payload).to.not.equal(400);
      const over = await app.inject({ method: 'GET', url: `/v1/holds?bucket=peer:${peer}p` });
      expect(over.statusCode).to.equal(400);
      expect(over.payload).to.match(/at most 256 characters/);
    } finally {
      await app.close();
      await gate.close();
    }
  });

  it('bans are listed 1,000 at most by default, the soonest to end first, with their total', async () => {
    const gate = await CallGate.create({
      config: {
        inbound: {
          defaultPeer: [],
          attributes: [callerLevel(BANNED)],
        },
      },
      store: new MemoryStore(),
      clock: new VirtualClock(T0),
    });
    const app = buildApp({ gate, ready: async () => {}, reload: async () => [] });
    try {
      // 1,200 callers banned, each a microsecond after the one before (its ban ends later too)
      for (let v = 0; v < 1_200; v++)
        for (let i = 0; i < 3; i++) await gate.admit({ callId: `b${v}-${i}`, peer: 'p', caller: `c${v}`, at: T0 + v });
      const listed = (await app.inject({ method: 'GET', url: '/v1/bans' })).json() as {
        bans: { value: string }[];
        total: number;
      };
      expect([listed.bans.length, listed.total, listed.bans[0]!.value]).to.deep.equal([1_000, 1_200, 'c0']);
      const few = (await app.inject({ method: 'GET', url: '/v1/bans?max=2' })).json() as { bans: { value: string }[] };
      expect(few.bans.map((b) => b.value)).to.deep.equal(['c0', 'c1']);
      expect((await app.inject({ method: 'GET', url: '/v1/bans?max=0' })).statusCode).to.equal(400);
      const text = stateText(await inspectGate(gate, { bans: true }));
      expect(text).to.include('(200 more bans not listed; --json lists them all)');
    } finally {
      await app.close();
      await gate.close();
    }
  });

  it('holds and reset name a bucket shared past maxValues as the bans listing shows it: #<slot>', () => {
    const level = callerLevel;
    const slotted = parseConfig({ inbound: { defaultPeer: [], attributes: [level({ maxValues: 100 })] } });
    expect(locateBucket(slotted, 'caller:#34', false).bucket.name).to.equal('attr:caller:#34');
    expect(() => locateBucket(slotted, 'caller:#100', false)).to.throw(
      InvalidArgumentError,
      /#0 to #99: there is no #100/,
    );
    // without maxValues, #34 is a caller's value like any other
    const plain = parseConfig({ inbound: { defaultPeer: [], attributes: [level({})] } });
    expect(locateBucket(plain, 'caller:#34', false).bucket.name).to.equal('attr:caller:%002334');
  });
});
