/**
 * Ids are exact bytes or refused: invalid UTF-8 in a query, a form or a JSON body is a 400
 * naming the field; an id means the same over GET, form and JSON; `__proto__`, `constructor`
 * and `prototype` are refused as field names in every form; the library bounds ids as the
 * sidecar does, with InvalidArgumentError.
 */
import { expect } from 'chai';
import type { FastifyInstance } from 'fastify';
import { VirtualClock } from '../src/clock.js';
import { InvalidArgumentError } from '../src/errors/index.js';
import { CallGate } from '../src/gate.js';
import { MAX_ID_LENGTH } from '../src/ids.js';
import { validateTraceFrom } from '../src/replay/trace.js';
import { parseUrlEncoded } from '../src/server/fields.js';
import { buildApp } from '../src/server/app.js';
import { MemoryStore } from '../src/store/memory-store.js';

const T0 = 1_700_000_000_000_000;
const CONFIG = {
  inbound: { peers: { p1: [{ limit: 1000, window: 'PT1S' }, { channels: 100 }] } },
  outbound: { carriers: { A: { cps: 1000, maxWait: 'PT1S' } } },
};
const FORM = { 'content-type': 'application/x-www-form-urlencoded' };
const JSON_TYPE = { 'content-type': 'application/json' };

describe('ids: exact bytes or refused', () => {
  let gate: CallGate;
  let app: FastifyInstance;
  beforeEach(async () => {
    gate = await CallGate.create({ config: CONFIG, store: new MemoryStore(), clock: new VirtualClock(T0) });
    app = buildApp({ gate, ready: async () => {}, reload: async () => [] });
  });
  afterEach(async () => {
    await app.close();
    await gate.close();
  });

  const problems = async (method: 'GET' | 'POST', url: string, payload?: string | Buffer, headers = {}) => {
    const r = await app.inject({ method, url, ...(payload !== undefined && { payload }), headers });
    expect(r.statusCode, r.payload).to.equal(400);
    return (r.json() as { problems: string[] }).problems;
  };
  const released = async (method: 'GET' | 'POST', url: string, payload?: string, headers = {}) => {
    const r = await app.inject({ method, url, ...(payload !== undefined && { payload }), headers });
    expect(r.statusCode, r.payload).to.equal(200);
    return (r.json() as { outcome: string }).outcome;
  };

  it('invalid UTF-8 in a query, a form or a JSON body: a 400 naming the field', async () => {
    const utf8 = /invalid UTF-8/;
    const q = await problems('GET', '/v1/admit?call_id=a%FF&peer=p1');
    expect(q).to.have.length(1);
    expect(q[0])
      .to.match(/^query\.call_id: /)
      .and.match(utf8);
    const f = await problems('POST', '/v1/admit', 'call_id=ok&peer=p%C3', FORM);
    expect(f[0])
      .to.match(/^form\.peer: /)
      .and.match(utf8);
    const raw = Buffer.concat([Buffer.from('{"call_id":"a'), Buffer.from([0xfe]), Buffer.from('","peer":"p1"}')]);
    const j = await problems('POST', '/v1/admit', raw, JSON_TYPE);
    expect(j).to.have.length(1);
    expect(j[0])
      .to.match(/^body\.call_id: /)
      .and.match(utf8);
    // a lone surrogate escaped in JSON has no bytes at all
    const s = await problems('POST', '/v1/admit', '{"call_id":"a\\ud800","peer":"p1"}', JSON_TYPE);
    expect(s[0]).to.match(/^body\.call_id: not well-formed Unicode/);
    // two different raw ids were once one (both decoded to U+FFFD): now neither exists
    for (const id of ['x%FF', 'x%FE']) await problems('GET', `/v1/admit?call_id=${id}&peer=p1`);
    expect(gate.store instanceof MemoryStore && gate.store.size.calls).to.equal(0);
  });

  it('an id means the same over GET, form and JSON: percent-decoding once, + a space', async () => {
    const id = 'a b+c%/é€😀&=';
    const encoded = encodeURIComponent(id);
    // admitted over JSON, released over GET; admitted over GET, released over a form; and so on
    const ways: [string, (id: string) => Promise<string>][] = [
      ['GET', (x) => released('GET', `/v1/release?call_id=${encodeURIComponent(x)}`)],
      ['form', (x) => released('POST', '/v1/release', `call_id=${encodeURIComponent(x)}`, FORM)],
      ['JSON', (x) => released('POST', '/v1/release', JSON.stringify({ call_id: x }), JSON_TYPE)],
    ];
    const admitWays: [string, (id: string) => Promise<unknown>][] = [
      ['GET', (x) => app.inject({ method: 'GET', url: `/v1/admit?call_id=${encodeURIComponent(x)}&peer=p1` })],
      [
        'form',
        (x) =>
          app.inject({
            method: 'POST',
            url: '/v1/admit',
            payload: `call_id=${encodeURIComponent(x)}&peer=p1`,
            headers: FORM,
          }),
      ],
      [
        'JSON',
        (x) =>
          app.inject({
            method: 'POST',
            url: '/v1/admit',
            payload: JSON.stringify({ call_id: x, peer: 'p1' }),
            headers: JSON_TYPE,
          }),
      ],
    ];
    for (const [a, admit] of admitWays) {
      for (const [r, release] of ways) {
        const x = `${id}${a}${r}`;
        await admit(x);
        expect(await release(x), `admitted over ${a}, released over ${r}`).to.equal('released');
      }
    }
    expect(encoded).to.include('%2B');
    // `+` is a space in a query or a form, never in JSON; `%41` in JSON is those three characters
    await app.inject({ method: 'GET', url: '/v1/admit?call_id=p+q&peer=p1' });
    expect(await released('POST', '/v1/release', '{"call_id":"p q"}', JSON_TYPE)).to.equal('released');
    await app.inject({
      method: 'POST',
      url: '/v1/admit',
      payload: '{"call_id":"x%41","peer":"p1"}',
      headers: JSON_TYPE,
    });
    expect(await released('GET', '/v1/release?call_id=x%41')).to.equal('not-held'); // xA
    expect(await released('GET', '/v1/release?call_id=x%2541')).to.equal('released');
    // a % not followed by two hex digits is itself, the same in a query and in a form
    await app.inject({ method: 'GET', url: '/v1/admit?call_id=50%&peer=p1' });
    expect(await released('POST', '/v1/release', 'call_id=50%', FORM)).to.equal('released');
  });

  it('__proto__, constructor and prototype are refused as field names in a query, a form and JSON, at any depth', async () => {
    for (const name of ['__proto__', 'constructor', 'prototype']) {
      expect(await problems('GET', `/v1/admit?call_id=c&peer=p1&${name}=x`), `query ${name}`).to.deep.equal([
        `query.${name}: field name not allowed`,
      ]);
      expect(await problems('POST', '/v1/admit', `call_id=c&peer=p1&${name}=x`, FORM), `form ${name}`).to.deep.equal([
        `form.${name}: field name not allowed`,
      ]);
      expect(
        await problems('POST', '/v1/admit', `{"call_id":"c","peer":"p1","${name}":{"x":1}}`, JSON_TYPE),
        `JSON ${name}`,
      ).to.deep.equal([`body.${name}: field name not allowed`]);
      expect(
        await problems('POST', '/v1/reserve', `{"call_id":"c","route":["A"],"x":{"${name}":1}}`, JSON_TYPE),
      ).to.include(`body.${name}: field name not allowed`);
    }
    // a query's __proto__ never became the prototype of the fields: a strict schema saw nothing
    const parsed = parseUrlEncoded('__proto__=x&call_id=c');
    expect([...parsed.fields.keys()]).to.deep.equal(['call_id']);
    expect(({} as Record<string, unknown>).x).to.equal(undefined);
  });

  it(`the library bounds ids at ${MAX_ID_LENGTH} characters, as the sidecar does, with InvalidArgumentError`, async () => {
    const long = 'x'.repeat(MAX_ID_LENGTH + 1);
    const ok = 'x'.repeat(MAX_ID_LENGTH);
    expect((await gate.admit({ callId: ok, peer: 'p1' })).admitted).to.equal(true);
    const calls: [string, () => Promise<unknown>][] = [
      ['admit callId', () => gate.admit({ callId: long, peer: 'p1' })],
      ['admit peer', () => gate.admit({ callId: 'c', peer: long })],
      ['admit account', () => gate.admit({ callId: 'c', peer: 'p1', account: long })],
      ['record callId', () => gate.record({ callId: long, peer: 'p1' })],
      ['reserve callId', () => gate.reserve({ callId: long, route: ['A'] })],
      ['reserve route', () => gate.reserve({ callId: 'c', route: [long] })],
      ['release', () => gate.release(long)],
      ['refresh', () => gate.refresh(long)],
      ['lone surrogate', () => gate.admit({ callId: 'a\ud800', peer: 'p1' })],
    ];
    for (const [what, call] of calls) {
      let err: unknown;
      try {
        await call();
      } catch (e) {
        err = e;
      }
      expect(err, what).to.be.instanceOf(InvalidArgumentError);
    }
    const r = await problems('POST', '/v1/release', JSON.stringify({ call_id: long }), JSON_TYPE);
    expect(r[0]).to.match(/^body\.call_id: expected a non-empty string of at most 256 characters, got 257 characters$/);
  });

  it('a trace row with an id over the bound is a problem of that row, located', async () => {
    const long = 'x'.repeat(MAX_ID_LENGTH + 1);
    const csv = [
      'time,call_id,direction,peer,route',
      `2026-01-01T00:00:00Z,${long},in,p1,`,
      `2026-01-01T00:00:01Z,c2,in,${long},`,
      `2026-01-01T00:00:02Z,c3,out,,A|${long}`,
      '2026-01-01T00:00:03Z,c4,in,p1,',
    ].join('\n');
    const v = await validateTraceFrom([csv], 'inline');
    expect(v.calls).to.equal(1);
    expect(v.problems.map((p) => [p.line, p.column, p.message])).to.deep.equal([
      [2, 'call_id', 'id must be at most 256 characters (UTF-16 code units), got 257'],
      [3, 'peer', 'id must be at most 256 characters (UTF-16 code units), got 257'],
      [
        4,
        'route',
        'carrier "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx" must be at most 256 characters (UTF-16 code units), got 257',
      ],
    ]);
  });

  it("a trace row's attribute values are held to the bound too, before any decision", async () => {
    // the engine refuses them (admission.ts): passed by the check, a replay stopped part-way
    const long = 'x'.repeat(MAX_ID_LENGTH + 1);
    const csv = [
      'time,call_id,direction,peer,caller,callee,source',
      `2026-01-01T00:00:00Z,c1,in,p1,${long},,`,
      `2026-01-01T00:00:01Z,c2,in,p1,,${long},`,
      `2026-01-01T00:00:02Z,c3,in,p1,,,${long}`,
      `2026-01-01T00:00:03Z,c4,in,p1,${'y'.repeat(MAX_ID_LENGTH)},,`,
    ].join('\n');
    const v = await validateTraceFrom([csv], 'inline');
    expect(v.calls).to.equal(1);
    expect(v.problems.map((p) => [p.line, p.column, p.message])).to.deep.equal([
      [2, 'caller', 'id must be at most 256 characters (UTF-16 code units), got 257'],
      [3, 'callee', 'id must be at most 256 characters (UTF-16 code units), got 257'],
      [4, 'source', 'id must be at most 256 characters (UTF-16 code units), got 257'],
    ]);
  });
});
