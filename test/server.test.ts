/**
 * The sidecar's HTTP API (src/server/app.ts) in process, through fastify's inject (the full
 * request path: parsing, hooks, handlers, error handler; no socket). Decisions on a
 * VirtualClock are exact; a seeded fuzz of bad bodies and queries gets 4xx with a located
 * message, never a 500.
 */
import { expect } from 'chai';
import { InvalidArgumentError } from '../src/errors/index.js';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createConnection } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { brotliCompressSync, deflateSync, gzipSync } from 'node:zlib';
import type { FastifyInstance } from 'fastify';
import { VirtualClock } from '../src/clock.js';
import { CallGate } from '../src/gate.js';
import { inspectGate } from '../src/observe/inspect.js';
import { buildApp } from '../src/server/app.js';
import { MemoryStore } from '../src/store/memory-store.js';
import { prng } from '../scripts/make-fixtures.js';

const T0 = 1_700_000_000_000_000;
const CONFIG = {
  inbound: {
    accounts: { acme: [{ limit: 3, window: 'PT1S' }] },
    peers: { p1: [{ limit: 2, window: 'PT1S' }], 'odd {id}:x': [{ limit: 1, window: 'PT1S' }] },
  },
  outbound: { carriers: { A: { cps: 10, maxWait: '150ms' }, B: { cps: 10, maxWait: '0ms' } } },
};

interface Setup {
  app: FastifyInstance;
  gate: CallGate;
  clock: VirtualClock;
  dir: string;
  configPath: string;
}

async function setup(opts: { token?: string; bodyLimit?: number } = {}): Promise<Setup> {
  const dir = mkdtempSync(join(tmpdir(), 'callgate-server-'));
  const configPath = join(dir, 'limits.json');
  writeFileSync(configPath, JSON.stringify(CONFIG));
  const clock = new VirtualClock(T0);
  const gate = await CallGate.create({ config: configPath, store: new MemoryStore(), clock });
  const app = buildApp({
    gate,
    token: opts.token,
    bodyLimit: opts.bodyLimit,
    ready: async () => {},
    reload: () => gate.reload(configPath),
    state: (peers) => inspectGate(gate, { peers }),
    sip: { jitterSeconds: 0 },
  });
  await app.ready();
  return { app, gate, clock, dir, configPath };
}

async function teardown(s: Setup | undefined): Promise<void> {
  if (!s) return;
  await s.app.close();
  await s.gate.close();
  rmSync(s.dir, { recursive: true, force: true });
}

type Json = Record<string, unknown>;

async function post(app: FastifyInstance, url: string, body: unknown, headers: Record<string, string> = {}) {
  const r = await app.inject({
    method: 'POST',
    url,
    payload: body as string,
    headers: { 'content-type': 'application/json', ...headers },
  });
  return { status: r.statusCode, json: r.json() as Json };
}

async function get(app: FastifyInstance, url: string, headers: Record<string, string> = {}) {
  const r = await app.inject({ method: 'GET', url, headers });
  return { status: r.statusCode, json: r.json() as Json };
}

describe('sidecar HTTP API (in process)', () => {
  let s: Setup | undefined;
  afterEach(async () => {
    await teardown(s);
    s = undefined;
  });

  it('admit: exact decisions, the SIP answer of a refusal, the same through JSON, query and form', async () => {
    s = await setup();
    const a1 = await post(s.app, '/v1/admit', { call_id: 'c1', peer: 'p1' });
    expect(a1).to.deep.equal({
      status: 200,
      json: { call_id: 'c1', direction: 'in', outcome: 'admitted', retry_after_ms: 0, time_us: T0, sip: null },
    });
    s.clock.advance(T0 + 250_000);
    const a2 = await get(s.app, '/v1/admit?call_id=c2&peer=p1');
    expect(a2.json).to.include({ outcome: 'admitted', time_us: T0 + 250_000 });
    s.clock.advance(T0 + 400_000);
    const form = await s.app.inject({
      method: 'POST',
      url: '/v1/admit',
      payload: 'call_id=c3&peer=p1',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
    });
    // the oldest of the two calls in (T0 - 600 ms, T0 + 400 ms] leaves at T0 + 1 s: 600 ms from now
    expect(form.json()).to.deep.equal({
      call_id: 'c3',
      direction: 'in',
      outcome: 'rejected',
      limited_by: 'peer:p1',
      reason: 'rate',
      retry_after_ms: 600,
      time_us: T0 + 400_000,
      sip: { status: 503, reason: 'Service Unavailable', headers: { 'Retry-After': '1' } },
    });
    // a media type is case-insensitive: fastify gives this one to the form parser, and it is a form
    // (it was read as a JSON body: `body.form: unknown field`)
    const upper = await s.app.inject({
      method: 'POST',
      url: '/v1/admit',
      payload: 'call_id=c3&peer=p1',
      headers: { 'content-type': 'Application/X-WWW-Form-Urlencoded; Charset=UTF-8' },
    });
    expect([upper.statusCode, upper.json()]).to.deep.equal([200, form.json()]);
    // an empty form body is no body, as an empty JSON body is: the fields come from the query
    // (`curl -d '' '…/v1/admit?call_id=…'`; a 400 "a request with a body takes its fields from
    // the body alone" before)
    const emptyForm = await s.app.inject({
      method: 'POST',
      url: '/v1/admit?call_id=c4&peer=p2',
      payload: '',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
    });
    expect([emptyForm.statusCode, emptyForm.json().call_id]).to.deep.equal([200, 'c4']);
    const reset = await s.app.inject({
      method: 'POST',
      url: '/v1/reset',
      payload: 'bucket=peer:nobody',
      headers: { 'content-type': 'APPLICATION/X-WWW-FORM-URLENCODED' },
    });
    expect([reset.statusCode, (reset.json() as Json).message]).to.deep.equal([
      400,
      'form.bucket: bucket peer:nobody: the configuration has no peer "nobody" and no defaultPeer',
    ]);
    // a POST without a body reads the query string
    const q = await s.app.inject({ method: 'POST', url: '/v1/admit?call_id=c4&peer=nobody' });
    expect(q.json()).to.deep.include({
      outcome: 'rejected',
      limited_by: 'unknown-peer',
      sip: { status: 403, reason: 'Forbidden', headers: {} },
    });
  });

  it('HEAD decides nothing: 404, as every method the API does not name', async () => {
    s = await setup();
    for (const url of ['/v1/admit?call_id=h1&peer=p1', '/v1/release?call_id=h1', '/healthz']) {
      const head = await s.app.inject({ method: 'HEAD', url });
      expect(head.statusCode, url).to.equal(404);
    }
    // the HEAD took no channel and counted no call: h1 is a new call, not a duplicate
    const a = await get(s.app, '/v1/admit?call_id=h1&peer=p1');
    expect(a.json).to.include({ outcome: 'admitted' });
    expect(a.json).to.not.have.property('duplicate');
  });

  it('admit with an account: the account level refuses first; ids with any character work', async () => {
    s = await setup();
    for (let i = 0; i < 3; i++)
      expect(
        (await post(s.app, '/v1/admit', { call_id: `a${i}`, peer: i === 0 ? 'odd {id}:x' : 'p1', account: 'acme' }))
          .json.outcome,
      ).to.equal('admitted');
    const r = await post(s.app, '/v1/admit', { call_id: 'a3', peer: 'odd {id}:x', account: 'acme' });
    expect(r.json).to.include({ outcome: 'rejected', limited_by: 'account:acme', retry_after_ms: 1000 });
    const odd = await get(s.app, `/v1/admit?call_id=a4&peer=${encodeURIComponent('odd {id}:x')}`);
    expect(odd.json).to.include({ outcome: 'rejected', limited_by: 'peer:odd {id}:x' });
  });

  it('record: counted, never refused', async () => {
    s = await setup();
    for (let i = 0; i < 4; i++) {
      const r = await post(s.app, '/v1/record', { call_id: `e${i}`, peer: 'p1' });
      expect(r.json).to.include({ outcome: 'admitted', forced: true });
    }
    expect((await post(s.app, '/v1/admit', { call_id: 'x', peer: 'p1' })).json).to.include({
      outcome: 'rejected',
      limited_by: 'peer:p1',
    });
  });

  it('reserve: the slot, the reroute, the refusal with its SIP answer', async () => {
    s = await setup();
    const route = ['A', 'B'];
    const r = async (id: string) => (await post(s!.app, '/v1/reserve', { call_id: id, route })).json;
    expect(await r('o1')).to.deep.equal({
      call_id: 'o1',
      direction: 'out',
      outcome: 'dispatched',
      carrier: 'A',
      delay_ms: 0,
      rerouted_from: [],
      time_us: T0,
      slot_us: T0,
      sip: null,
    });
    expect(await r('o2')).to.include({ carrier: 'A', delay_ms: 100, slot_us: T0 + 100_000 });
    // A's next slot is 200 ms away (> maxWait 150 ms): B, at once
    expect(await r('o3')).to.deep.include({ carrier: 'B', delay_ms: 0, rerouted_from: ['A'] });
    expect(await r('o4')).to.deep.equal({
      call_id: 'o4',
      direction: 'out',
      outcome: 'rejected',
      carrier: null,
      delay_ms: null,
      rerouted_from: ['A', 'B'],
      reason: 'all-routes-congested',
      time_us: T0,
      sip: { status: 503, reason: 'Service Unavailable', headers: {} },
    });
    const g = await get(s.app, '/v1/reserve?call_id=o5&route=nowhere&route=B');
    expect(g.json).to.include({ outcome: 'rejected' });
    expect(g.json.rerouted_from).to.deep.equal(['B']);
  });

  it('channels: a refusal by channels, release and refresh, carriers passed over when full, the state', async () => {
    s = await setup();
    writeFileSync(
      s.configPath,
      JSON.stringify({
        inbound: { peers: { p1: [{ limit: 100, window: 'PT1S' }, { channels: 2 }] } },
        outbound: { carriers: { K: { cps: 1000, maxWait: 'PT1S', channels: 1 }, L: { cps: 1000 } } },
      }),
    );
    await s.gate.reload(s.configPath);
    const admit = async (id: string) => (await post(s!.app, '/v1/admit', { call_id: id, peer: 'p1' })).json;
    expect((await admit('c1')).outcome).to.equal('admitted');
    expect((await admit('c2')).outcome).to.equal('admitted');
    expect(await admit('c3')).to.deep.include({
      outcome: 'rejected',
      limited_by: 'peer:p1',
      reason: 'channels',
      retry_after_ms: 0,
      sip: { status: 503, reason: 'Service Unavailable', headers: {} },
    });
    expect((await admit('c1')).duplicate, 'a retransmission: the same decision, counted once').to.equal(true);
    expect((await post(s.app, '/v1/release', { call_id: 'c1' })).json).to.deep.equal({
      call_id: 'c1',
      released: true,
      outcome: 'released',
    });
    expect((await get(s.app, '/v1/release?call_id=c1')).json).to.deep.equal({
      call_id: 'c1',
      released: false,
      outcome: 'not-held',
    });
    expect((await admit('c3')).outcome).to.equal('admitted');
    expect((await post(s.app, '/v1/refresh', { call_id: 'c2' })).json).to.deep.equal({
      call_id: 'c2',
      refreshed: true,
    });
    expect((await post(s.app, '/v1/refresh', { call_id: 'nobody' })).json).to.deep.equal({
      call_id: 'nobody',
      refreshed: false,
    });
    const reserve = async (id: string) => (await post(s!.app, '/v1/reserve', { call_id: id, route: ['K', 'L'] })).json;
    expect(await reserve('o1')).to.deep.include({ carrier: 'K', rerouted_from: [] });
    expect(await reserve('o2')).to.deep.include({ carrier: 'L', rerouted_from: ['K'] });
    const state = (await get(s.app, '/v1/state')).json as {
      buckets: { channels?: unknown }[];
      carriers: { carrier: string; channels?: unknown }[];
    };
    expect(state.buckets[0]!.channels).to.deep.equal({ limit: 2, in_use: 2 });
    expect(state.carriers.map((c) => [c.carrier, c.channels])).to.deep.equal([
      ['K', { limit: 1, in_use: 1 }],
      ['L', undefined],
    ]);
    await post(s.app, '/v1/release', { call_id: 'o1' });
    expect(await reserve('o3')).to.deep.include({ carrier: 'K', rerouted_from: [] });
  });

  it('reload: applies a new file and lists the changes; a bad file is a 422 and the old limits stay', async () => {
    s = await setup();
    writeFileSync(
      s.configPath,
      JSON.stringify({ ...CONFIG, inbound: { ...CONFIG.inbound, peers: { p1: [{ limit: 1, window: 'PT1S' }] } } }),
    );
    const r = await post(s.app, '/v1/reload', undefined);
    expect(r.status).to.equal(200);
    expect(r.json.changes).to.deep.include({ path: 'inbound.peers.p1', kind: 'changed' });
    expect((await post(s.app, '/v1/admit', { call_id: 'c1', peer: 'p1' })).json.outcome).to.equal('admitted');
    expect((await post(s.app, '/v1/admit', { call_id: 'c2', peer: 'p1' })).json.outcome).to.equal('rejected');
    writeFileSync(s.configPath, '{"inbound": {"peers": {"p1": [{"limit": 0, "window": "PT1S"}]}}}');
    const bad = await s.app.inject({ method: 'POST', url: '/v1/reload' });
    expect(bad.statusCode).to.equal(422);
    expect(bad.json().problems).to.deep.equal([
      `${s.configPath}: inbound.peers.p1[0].limit: expected a positive integer, got 0`,
    ]);
    expect(s.gate.config.inbound.peers.get('p1')!.limits[0]!.limit).to.equal(1);
    // a file the gate refuses though it parses (a leased store's level it cannot lease): 422 too
    const refusing = buildApp({
      gate: s.gate,
      ready: async () => {},
      reload: async () => {
        throw new InvalidArgumentError('the global level cannot be leased: it has no limit');
      },
      state: (peers) => inspectGate(s!.gate, { peers }),
    });
    try {
      const r2 = await refusing.inject({ method: 'POST', url: '/v1/reload' });
      expect([r2.statusCode, r2.json()]).to.deep.equal([
        422,
        {
          error: 'invalid-configuration',
          message: 'the configuration in force is unchanged',
          problems: ['the global level cannot be leased: it has no limit'],
        },
      ]);
    } finally {
      await refusing.close();
    }
  });

  it('a token: every route but the probes needs it; a wrong one is a 401', async () => {
    const token = 'a-token-of-at-least-16';
    s = await setup({ token });
    expect((await post(s.app, '/v1/admit', { call_id: 'c', peer: 'p1' })).status).to.equal(401);
    expect(
      (await post(s.app, '/v1/admit', { call_id: 'c', peer: 'p1' }, { authorization: 'Bearer wrong' })).status,
    ).to.equal(401);
    expect((await get(s.app, '/v1/state')).status).to.equal(401);
    expect(
      (await post(s.app, '/v1/admit', { call_id: 'c', peer: 'p1' }, { authorization: `Bearer ${token}` })).json.outcome,
    ).to.equal('admitted');
    // the scheme's name in any case (RFC 9110: case-insensitive); the token itself exactly
    for (const authorization of [`bearer ${token}`, `BEARER ${token}`, `Bearer  ${token}`])
      expect((await get(s.app, '/v1/state', { authorization })).status, authorization).to.equal(200);
    for (const authorization of [`Bearer ${token.toUpperCase()}`, `Basic ${token}`, token, `Bearer ${token} x`])
      expect((await get(s.app, '/v1/state', { authorization })).status, authorization).to.equal(401);
    await teardown(s);
    // a token with spaces (a passphrase) is taken whole
    s = await setup({ token: 'correct horse battery staple' });
    const spaced = { authorization: 'bearer correct horse battery staple' };
    expect((await get(s.app, '/v1/state', spaced)).status).to.equal(200);
    expect((await get(s.app, '/healthz')).status).to.equal(200);
    expect((await get(s.app, '/readyz')).json).to.deep.equal({ status: 'ready', store: 'memory' });
  });

  it('Expect: 100-continue: the 100 only once the token and the length pass, on a real socket', async () => {
    const token = 'a-token-of-at-least-16';
    s = await setup({ token, bodyLimit: 1024 });
    const address = await s.app.listen({ host: '127.0.0.1', port: 0 });
    const port = Number(new URL(address).port);
    const body = '{"call_id":"e1","peer":"p1"}';
    /** Send the head, then the body once the sidecar says 100; all it wrote, and whether the body went. */
    const exchange = (headers: string, contentLength = body.length) =>
      new Promise<{ answer: string; bodySent: boolean }>((resolve, reject) => {
        const head =
          `POST /v1/admit HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n` +
          `Content-Length: ${contentLength}\r\nExpect: 100-continue\r\nConnection: close\r\n${headers}\r\n`;
        const socket = createConnection({ host: '127.0.0.1', port }, () => socket.write(head));
        let answer = '';
        let bodySent = false;
        socket.setEncoding('utf8');
        socket.on('data', (d: string) => {
          answer += d;
          if (!bodySent && answer.startsWith('HTTP/1.1 100 Continue\r\n\r\n')) {
            bodySent = true;
            socket.write(body);
          }
        });
        socket.on('error', reject);
        socket.on('close', () => resolve({ answer, bodySent }));
      });
    const status = (answer: string) => answer.replace(/^HTTP\/1\.1 100 Continue\r\n\r\n/, '').split(' ')[1];
    // the token right: 100, then the body, then the decision
    const ok = await exchange(`Authorization: Bearer ${token}\r\n`);
    expect([ok.bodySent, status(ok.answer)]).to.deep.equal([true, '200']);
    expect(ok.answer).to.include('"outcome":"admitted"');
    // no token, or a body declared over the limit: the final answer without a 100 (Node sent the
    // 100 at once, and the client its whole body to be refused)
    const unauthorized = await exchange('');
    expect([unauthorized.bodySent, status(unauthorized.answer)]).to.deep.equal([false, '401']);
    expect(unauthorized.answer).to.include('"error":"unauthorized"');
    const large = await exchange(`Authorization: Bearer ${token}\r\n`, 4096);
    expect([large.bodySent, status(large.answer)]).to.deep.equal([false, '413']);
  });

  it('a body over the limit is a 413 (and is not read into memory)', async () => {
    s = await setup({ bodyLimit: 1024 });
    const r = await post(s.app, '/v1/admit', JSON.stringify({ call_id: 'c', peer: 'p1', pad: 'x'.repeat(2000) }));
    expect(r.status).to.equal(413);
    expect(r.json.error).to.equal('too-large');
  });

  it('a body in another charset or with a content coding: a 415 naming it, on every route that reads a body', async () => {
    s = await setup();
    const app = s.app;
    const send = async (method: 'POST' | 'DELETE', url: string, payload: Buffer, headers: Record<string, string>) => {
      const r = await app.inject({ method, url, payload, headers });
      return { status: r.statusCode, json: r.json() as Json, acceptEncoding: r.headers['accept-encoding'] };
    };
    const reads = (type: string) =>
      `the sidecar reads ${type} in UTF-8 (charset=utf-8 or none; an ASCII body in latin1 or us-ascii too) with no content-encoding`;
    const refused = (problems: string[], acceptEncoding?: string) => ({
      status: 415,
      json: { error: 'unsupported-media-type', message: problems[0], problems },
      acceptEncoding,
    });
    const JSON_TYPE = 'application/json';
    const FORM_TYPE = 'application/x-www-form-urlencoded';
    // every route that takes a body (the POST routes of the API's own document), and one that
    // takes none but whose body fastify reads all the same
    const doc = (await get(app, '/v1/openapi.json')).json as { paths: Record<string, Record<string, unknown>> };
    const posts = Object.entries(doc.paths)
      .filter(([, ops]) => 'post' in ops)
      .map(([path]) => path);
    const bodies: Record<string, object> = {
      '/v1/admit': { call_id: 'Ã©', peer: 'p1' },
      '/v1/record': { call_id: 'Ã©', peer: 'p1' },
      '/v1/reserve': { call_id: 'Ã©', route: ['A'] },
      '/v1/release': { call_id: 'Ã©' },
      '/v1/refresh': { call_id: 'Ã©' },
      // a byte above 0x7F in every body: an ASCII body declared latin1 is read (below)
      '/v1/reload': { note: 'Ã©' },
      '/v1/reset': { bucket: 'peer:Ã©' },
    };
    expect(posts.sort()).to.deep.equal(Object.keys(bodies).sort());
    const routes: ['POST' | 'DELETE', string, object][] = [
      ...Object.entries(bodies).map(([url, body]): ['POST', string, object] => ['POST', url, body]),
      ['DELETE', '/v1/bans/caller/x', { note: 'Ã©' }],
    ];
    for (const [method, url, body] of routes) {
      const text = JSON.stringify(body);
      // latin1 bytes of `Ã©` are the UTF-8 bytes of `é`: read as UTF-8 they were another id
      const latin1 = await send(method, url, Buffer.from(text, 'latin1'), {
        'content-type': 'application/json; charset=latin1',
      });
      expect(latin1, `${method} ${url} latin1`).to.deep.equal(
        refused([`body: got content-type "application/json; charset=latin1"; ${reads(JSON_TYPE)}`]),
      );
      const gzip = await send(method, url, gzipSync(text), { 'content-type': JSON_TYPE, 'content-encoding': 'gzip' });
      expect(gzip, `${method} ${url} gzip`).to.deep.equal(
        refused([`body: got content-encoding "gzip"; ${reads(JSON_TYPE)}`], 'identity'),
      );
    }
    // any charset but UTF-8, in any case, quoted or not; any coding but identity
    const latin1Body = Buffer.from(JSON.stringify(bodies['/v1/admit']), 'latin1');
    for (const type of [
      'application/json; charset=ISO-8859-1',
      'Application/JSON;Charset="Latin1"',
      'application/json; charset=us-ascii',
      'application/json; charset=utf-16',
      'application/json; charset=',
      'application/json; charset=utf-8; charset=latin1',
    ]) {
      const r = await send('POST', '/v1/admit', latin1Body, { 'content-type': type });
      expect(r, type).to.deep.equal(refused([`body: got content-type ${JSON.stringify(type)}; ${reads(JSON_TYPE)}`]));
    }
    const text = JSON.stringify({ call_id: 'z', peer: 'p1' });
    const encoded: [string, Buffer][] = [
      ['deflate', deflateSync(text)],
      ['br', brotliCompressSync(text)],
      ['GZIP', gzipSync(text)],
      ['identity, gzip', gzipSync(text)],
      ['x-unknown', Buffer.from(text)],
    ];
    for (const [coding, payload] of encoded) {
      const r = await send('POST', '/v1/admit', payload, { 'content-type': JSON_TYPE, 'content-encoding': coding });
      expect(r, coding).to.deep.equal(
        refused([`body: got content-encoding ${JSON.stringify(coding)}; ${reads(JSON_TYPE)}`], 'identity'),
      );
    }
    // both: both named
    const both = await send('POST', '/v1/admit', gzipSync(latin1Body), {
      'content-type': 'application/json; charset=latin1',
      'content-encoding': 'gzip',
    });
    expect(both).to.deep.equal(
      refused(
        [
          `body: got content-type "application/json; charset=latin1"; ${reads(JSON_TYPE)}`,
          `body: got content-encoding "gzip"; ${reads(JSON_TYPE)}`,
        ],
        'identity',
      ),
    );
    // form bodies too (`%C3%A9` is `é` in UTF-8, `Ã©` in latin1)
    const form = Buffer.from('call_id=%C3%A9&peer=p1');
    expect(await send('POST', '/v1/admit', form, { 'content-type': `${FORM_TYPE}; charset=ISO-8859-1` })).to.deep.equal(
      refused([`body: got content-type "${FORM_TYPE}; charset=ISO-8859-1"; ${reads(FORM_TYPE)}`]),
    );
    expect(
      await send('POST', '/v1/admit', gzipSync(form), { 'content-type': FORM_TYPE, 'content-encoding': 'gzip' }),
    ).to.deep.equal(refused([`body: got content-encoding "gzip"; ${reads(FORM_TYPE)}`], 'identity'));
    // refused whole: none of them counted (p1 takes 2 calls a second, and the clock stood still)
    expect((await post(app, '/v1/admit', { call_id: 'n1', peer: 'p1' })).json.outcome).to.equal('admitted');
    expect((await post(app, '/v1/admit', { call_id: 'n2', peer: 'p1' })).json.outcome).to.equal('admitted');
    // UTF-8, said so or not, sent as is: read, `é` the same id each way
    const utf8 = Buffer.from(JSON.stringify({ call_id: 'é' }));
    const ok = { status: 200, json: { call_id: 'é', released: false, outcome: 'not-held' }, acceptEncoding: undefined };
    for (const headers of [
      { 'content-type': 'application/json' } as Record<string, string>,
      { 'content-type': 'application/json; charset=utf-8' },
      { 'content-type': 'application/json; charset="UTF-8"' },
      { 'content-type': 'Application/Json;CHARSET=Utf-8' },
      { 'content-type': 'application/json; charset=utf8' },
      { 'content-type': 'application/json', 'content-encoding': 'identity' },
      { 'content-type': 'application/json; charset=utf-8', 'content-encoding': 'Identity' },
    ])
      expect(await send('POST', '/v1/release', utf8, headers), JSON.stringify(headers)).to.deep.equal(ok);
    for (const type of [FORM_TYPE, `${FORM_TYPE}; charset=UTF-8`])
      expect(
        await send('POST', '/v1/release', Buffer.from('call_id=%C3%A9'), { 'content-type': type }),
        type,
      ).to.deep.equal(ok);
    // ASCII alone reads the same in every ASCII-compatible charset: declared latin1 (Java's form
    // clients do) or us-ascii, it is read; `%41` is an escape of `A`, below 0x80
    const okA = { ...ok, json: { ...ok.json, call_id: 'a-A' } };
    for (const type of [`${JSON_TYPE}; charset=ISO-8859-1`, `${JSON_TYPE}; charset=us-ascii`])
      expect(
        await send('POST', '/v1/release', Buffer.from('{"call_id":"a-A"}'), { 'content-type': type }),
        type,
      ).to.deep.equal(okA);
    for (const type of [`${FORM_TYPE}; charset=ISO-8859-1`, `${FORM_TYPE}; charset=windows-1252`])
      expect(
        await send('POST', '/v1/release', Buffer.from('call_id=a-%41'), { 'content-type': type }),
        type,
      ).to.deep.equal(okA);
    // but not UTF-16, whose ASCII is not ASCII bytes, nor an escape of a byte above 0x7F in a form
    expect(
      await send('POST', '/v1/release', Buffer.from('call_id=a-%e9'), {
        'content-type': `${FORM_TYPE}; charset=latin1`,
      }),
    ).to.deep.equal(refused([`body: got content-type "${FORM_TYPE}; charset=latin1"; ${reads(FORM_TYPE)}`]));
    expect(
      await send('POST', '/v1/release', Buffer.from('{"call_id":"a-A"}'), {
        'content-type': `${JSON_TYPE}; charset=utf-16`,
      }),
    ).to.deep.equal(refused([`body: got content-type "${JSON_TYPE}; charset=utf-16"; ${reads(JSON_TYPE)}`]));
  });

  it("requests Node's HTTP parser refuses get the API's error shape (431, 400), on a real socket", async () => {
    s = await setup();
    const address = await s.app.listen({ host: '127.0.0.1', port: 0 });
    const port = Number(new URL(address).port);
    // the raw answer to `request`, read until the sidecar closes the connection
    const exchange = (request: string) =>
      new Promise<string>((resolve, reject) => {
        const socket = createConnection({ host: '127.0.0.1', port }, () => socket.end(request));
        let answer = '';
        socket.setEncoding('utf8');
        socket.on('data', (d: string) => (answer += d));
        socket.on('error', reject);
        socket.on('close', () => resolve(answer));
      });
    const parse = (answer: string) => {
      const [head, body] = answer.split('\r\n\r\n');
      return { status: Number(head!.split(' ')[1]), json: JSON.parse(body!) as Json };
    };
    // headers past Node's 16 KiB
    const big = parse(await exchange(`GET /healthz HTTP/1.1\r\nHost: x\r\nX-Pad: ${'a'.repeat(20_000)}\r\n\r\n`));
    expect(big).to.deep.equal({
      status: 431,
      json: {
        error: 'headers-too-large',
        message: 'request headers too large',
        problems: ['request headers too large'],
      },
    });
    const garbage = parse(await exchange('NOT HTTP AT ALL\r\n\r\n'));
    expect([garbage.status, garbage.json.error]).to.deep.equal([400, 'bad-request']);
    expect(garbage.json.message).to.match(/^request: not valid HTTP \(HPE_/);
    // and the server still answers
    const ok = await exchange('GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n');
    expect(ok.split(' ')[1]).to.equal('200');
    // bytes that are not HTTP behind a whole request (pipelined, or in the same TCP read): the
    // request is decided (a call admitted), so its answer comes first, then the 400. The 400
    // came alone, read by the client as the admit's answer, while the call held its channel.
    const both = await exchange('GET /v1/admit?call_id=pg1&peer=p1 HTTP/1.1\r\nHost: x\r\n\r\nNOT-HTTP\r\n\r\n');
    const [first, second] = both.split(/(?=HTTP\/1\.1 )/);
    expect(parse(first!).status).to.equal(200);
    expect(parse(first!).json).to.include({ call_id: 'pg1', outcome: 'admitted' });
    expect(parse(second!).status).to.equal(400);
    // CONNECT (Node closed the socket without an answer) and an Expect it cannot meet (Node's 417
    // without a body): in the API's error shape
    const connect = parse(await exchange('CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n'));
    expect(connect).to.deep.equal({
      status: 404,
      json: {
        error: 'not-found',
        message: 'no route CONNECT example.com:443',
        problems: ['no route CONNECT example.com:443'],
      },
    });
    // HTTP/1.1 without Host: Node's bare 400 had no body
    const hostless = parse(await exchange('GET /healthz HTTP/1.1\r\nConnection: close\r\n\r\n'));
    expect(hostless).to.deep.equal({
      status: 400,
      json: {
        error: 'bad-request',
        message: 'request: HTTP/1.1 without a Host header',
        problems: ['request: HTTP/1.1 without a Host header'],
      },
    });
    const expectation = parse(await exchange('GET /healthz HTTP/1.1\r\nHost: x\r\nExpect: teapot\r\n\r\n'));
    expect([expectation.status, expectation.json.error]).to.deep.equal([417, 'expectation-failed']);
  });

  it('bad requests: 400 naming the field and what was expected', async () => {
    s = await setup();
    const cases: [string, unknown, string[]][] = [
      [
        '/v1/admit',
        {},
        [
          'body.call_id: missing (expected a non-empty string of at most 256 characters)',
          'body.peer: missing (expected a non-empty string of at most 256 characters)',
        ],
      ],
      [
        '/v1/admit',
        { call_id: 'c', peer: 42 },
        ['body.peer: expected a non-empty string of at most 256 characters, got 42'],
      ],
      ['/v1/admit', { call_id: 'c', peer: 'p1', pear: 'x' }, ['body.pear: unknown field']],
      ['/v1/admit', [1, 2], ['body: expected an object, got an array']],
      // it was read as an object without fields: "body.call_id: missing", "body.peer: missing"
      ['/v1/admit', null, ['body: expected an object, got null']],
      [
        '/v1/reserve',
        { call_id: 'c', route: ['A', 7] },
        ['body.route[1]: expected a non-empty string of at most 256 characters, got 7'],
      ],
      // an empty route was "got an array", as if an array were not expected
      [
        '/v1/reserve',
        { call_id: 'c', route: [] },
        [
          'body.route: expected an array of 1 to 32 carrier ids, got an empty array (a route names at least one carrier)',
        ],
      ],
      // 33 entries were "got 33", as if the number had come
      [
        '/v1/reserve',
        { call_id: 'c', route: Array.from({ length: 33 }, (_, i) => `c${i}`) },
        ['body.route: expected an array of 1 to 32 carrier ids, got an array of 33'],
      ],
      [
        '/v1/reserve',
        { call_id: 'c', route: [null, 'A', ''] },
        [
          'body.route[0]: expected a non-empty string of at most 256 characters, got null',
          'body.route[2]: expected a non-empty string of at most 256 characters, got ""',
        ],
      ],
      ['/v1/reserve', { call_id: 'c', route: 'A' }, ['body.route: expected an array of 1 to 32 carrier ids, got "A"']],
      [
        '/v1/reserve',
        { call_id: 'x'.repeat(300), route: ['A'] },
        ['body.call_id: expected a non-empty string of at most 256 characters, got 300 characters'],
      ],
      ['/v1/release', { call_id: '' }, ['body.call_id: expected a non-empty string of at most 256 characters, got ""']],
      // 256 characters are UTF-16 code units, as everywhere (129 emoji are 258 of them)
      [
        '/v1/admit',
        { call_id: '😀'.repeat(129), peer: 'p1', account: '😀'.repeat(129) },
        [
          'body.call_id: expected a non-empty string of at most 256 characters, got 258 characters',
          'body.account: expected a string of at most 256 characters, got 258 characters',
        ],
      ],
    ];
    for (const [url, body, problems] of cases) {
      const r = await post(s.app, url, JSON.stringify(body));
      expect(r.status, JSON.stringify(body)).to.equal(400);
      expect(r.json.problems, JSON.stringify(body)).to.deep.equal(problems);
      expect(r.json.message).to.equal(problems[0]);
    }
    // a byte order mark, named (it was "invalid JSON: Unexpected token '\ufeff'", and in a form an
    // unknown field whose name showed nothing wrong)
    const bom = ['body: starts with a byte order mark (EF BB BF); send it without one'];
    const jsonBom = await post(s.app, '/v1/admit', '\ufeff{"call_id":"b","peer":"p1"}');
    expect([jsonBom.status, jsonBom.json.problems]).to.deep.equal([400, bom]);
    const formBom = await s.app.inject({
      method: 'POST',
      url: '/v1/admit',
      payload: '\ufeffcall_id=b&peer=p1',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
    });
    expect([formBom.statusCode, formBom.json().problems]).to.deep.equal([400, bom]);
    // a body nested thousands deep: refused before it is walked (it overflowed the stack: a 500)
    const deep = await post(s.app, '/v1/admit', `{"call_id":${'['.repeat(2000)}${']'.repeat(2000)},"peer":"p1"}`);
    expect([deep.status, deep.json.problems]).to.deep.equal([400, ['body: nested deeper than 64 levels']]);
    expect((await post(s.app, '/v1/admit', JSON.stringify({ call_id: '😀'.repeat(128), peer: 'p1' }))).status).to.equal(
      200,
    );
    // a path that does not decode: the API's shape (fastify's own before)
    const badPath = await s.app.inject({ method: 'DELETE', url: '/v1/bans/%ff/%' });
    expect([badPath.statusCode, (badPath.json() as Json).error]).to.deep.equal([400, 'bad-request']);
    // a body the sidecar does not read (text/plain too, which fastify reads by default): 415,
    // naming what came and what the sidecar reads
    const reads =
      'the sidecar reads application/json or application/x-www-form-urlencoded, in UTF-8 (charset=utf-8 or none; an ASCII body in latin1 or us-ascii too) with no content-encoding';
    for (const type of ['text/plain', 'application/xml', 'text/plain; charset=utf-8', 'json']) {
      const r = await post(s.app, '/v1/admit', 'call_id=c&peer=p1', { 'content-type': type });
      const message = `body: got content-type ${JSON.stringify(type)}; ${reads}`;
      expect(r, type).to.deep.equal({
        status: 415,
        json: { error: 'unsupported-media-type', message, problems: [message] },
      });
    }
    const untyped = await s.app.inject({ method: 'POST', url: '/v1/admit', payload: 'call_id=c&peer=p1' });
    const message = `body: got no content-type; ${reads}`;
    expect([untyped.statusCode, untyped.json()]).to.deep.equal([
      415,
      { error: 'unsupported-media-type', message, problems: [message] },
    ]);
    // a key given twice in a JSON body (JSON.parse keeps the last): refused, nested too
    const twice = await post(s.app, '/v1/admit', '{"call_id":"dk2","call_id":"dk3","peer":"p1"}');
    expect([twice.status, twice.json.problems]).to.deep.equal([400, ['body.call_id: given twice']]);
    const twiceEscaped = await post(
      s.app,
      '/v1/admit',
      '{"call_id":"dk2","peer":"p1","attributes":{"caller":"1","\\u0063aller":"2"}}',
    );
    expect(twiceEscaped.json.problems).to.deep.equal(['body.attributes.caller: given twice']);
    // inside an array, named by its index
    const inArray = await post(s.app, '/v1/reserve', '{"call_id":"c","route":["A"],"x":[{"a":1},{"b":1,"b":2}]}');
    expect(inArray.json.problems).to.include('body.x[1].b: given twice');
    // fields in the query beside a body: refused, not ignored
    const both = await post(s.app, '/v1/admit?bogus=1&call_id=zzz', JSON.stringify({ call_id: 'c9', peer: 'p1' }));
    expect([both.status, both.json.message]).to.deep.equal([
      400,
      'query: a request with a body takes its fields from the body alone (or send them all in the query, without a body)',
    ]);
    // a GET with a body: refused, not decided on its query with the body dropped (fastify parses it)
    const getBody = await s.app.inject({
      method: 'GET',
      url: '/v1/admit?call_id=q5&peer=p1',
      headers: { 'content-type': 'application/json' },
      payload: JSON.stringify({ call_id: 'zz', peer: 'p1' }),
    });
    expect([getBody.statusCode, getBody.json().problems]).to.deep.equal([
      400,
      ['body: a GET takes its fields from the query alone (or send them in a body with POST)'],
    ]);
    const q = await get(s.app, '/v1/admit?call_id=c&peer=a&peer=b&extra=1');
    expect(q.json.problems).to.deep.equal(['query.peer: expected one value, got 2']);
    const q2 = await get(s.app, '/v1/reserve?call_id=c&extra=1');
    expect(q2.json.problems).to.deep.equal([
      'query.route: missing (expected an array of 1 to 32 carrier ids)',
      'query.extra: unknown field',
    ]);
    const q3 = await get(s.app, `/v1/reserve?call_id=c${'&route=A'.repeat(33)}`);
    expect(q3.json.problems).to.deep.equal([
      'query.route: expected an array of 1 to 32 carrier ids, got an array of 33',
    ]);
  });

  it('fuzz: 600 malformed bodies and queries get 4xx with a located message, never a 500; the engine still decides', async function () {
    this.timeout(60_000);
    s = await setup({ bodyLimit: 4096 });
    const rand = prng(14);
    const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rand() * xs.length)]!;
    const junkValue = (depth = 0): unknown => {
      switch (Math.floor(rand() * 10)) {
        case 0:
          return null;
        case 1:
          return rand() * 1e6 - 5e5;
        case 2:
          return rand() < 0.5;
        case 3:
          return '';
        case 4:
          return 'x'.repeat(Math.floor(rand() * 400));
        case 5:
          return String.fromCharCode(...Array.from({ length: 8 }, () => Math.floor(rand() * 0xffff)));
        case 6:
          return depth > 2 ? [] : Array.from({ length: Math.floor(rand() * 4) }, () => junkValue(depth + 1));
        case 7:
          return depth > 2
            ? {}
            : { [pick(['call_id', 'peer', 'route', '__proto__', 'constructor', 'a'])]: junkValue(depth + 1) };
        case 8:
          return pick(['p1', 'A', 'acme', 'B']);
        default:
          return Number.NaN;
      }
    };
    const fields = ['call_id', 'peer', 'account', 'route', 'extra', '__proto__'];
    const urls = [
      '/v1/admit',
      '/v1/record',
      '/v1/reserve',
      '/v1/release',
      '/v1/refresh',
      '/v1/reload',
      '/v1/state',
      '/v1/nope',
    ];
    const encode = (v: unknown): string => {
      try {
        return encodeURIComponent(String(v));
      } catch {
        return '%ED%A0%80'; // a lone surrogate: invalid UTF-8 on the wire
      }
    };
    const statuses = new Map<number, number>();
    for (let i = 0; i < 600; i++) {
      const url = pick(urls);
      let res: Awaited<ReturnType<FastifyInstance['inject']>>;
      const kind = i % 4;
      if (kind === 0) {
        // a JSON body: an object with junk fields, or junk itself
        const body: Record<string, unknown> = {};
        for (const f of fields) if (rand() < 0.5) body[f] = junkValue();
        const text = rand() < 0.8 ? JSON.stringify(body) : JSON.stringify(junkValue());
        res = await s.app.inject({
          method: 'POST',
          url,
          payload: text ?? 'undefined',
          headers: { 'content-type': 'application/json' },
        });
      } else if (kind === 1) {
        // broken JSON, other content types, oversized bodies
        const payload = pick([
          '{',
          '{"call_id":',
          'null',
          '[]',
          '"str"',
          '{"call_id":"c","peer":"p1"}}',
          '\u0000\u0001',
          'x'.repeat(5000),
          `{"a":${'['.repeat(500)}`,
        ]);
        const type = pick([
          'application/json',
          'text/plain',
          'application/xml',
          'application/x-www-form-urlencoded',
          'multipart/form-data; boundary=x',
        ]);
        res = await s.app.inject({
          method: pick(['POST', 'PUT', 'DELETE', 'PATCH']),
          url,
          payload,
          headers: { 'content-type': type },
        });
      } else {
        // query strings: repeated, empty, encoded junk
        const parts: string[] = [];
        for (const f of fields) {
          const n = Math.floor(rand() * 3);
          for (let k = 0; k < n; k++) parts.push(`${rand() < 0.9 ? f : '%ZZ'}=${encode(junkValue())}`);
        }
        if (rand() < 0.2) parts.push('&&=&%');
        res = await s.app.inject({ method: kind === 2 ? 'GET' : 'POST', url: `${url}?${parts.join('&')}` });
      }
      statuses.set(res.statusCode, (statuses.get(res.statusCode) ?? 0) + 1);
      expect(res.statusCode, `${url} ${res.payload}`).to.be.oneOf([200, 400, 404, 413, 415]);
      const json = res.json() as Json;
      if (res.statusCode === 400) {
        expect(json.message, res.payload).to.match(/^(body|query|form)\b/);
        expect(json.problems, res.payload).to.be.an('array').that.is.not.empty;
      }
    }
    expect(statuses.get(400), 'most requests are refused').to.be.above(300);
    expect((await post(s.app, '/v1/admit', { call_id: 'after', peer: 'nobody' })).json.limited_by).to.equal(
      'unknown-peer',
    );
  });
});
