/**
 * The sidecar's OpenAPI document (GET /v1/openapi.json): it lists exactly the routes the app
 * serves, real answers match its response schemas, and docs/sidecar.md's route table names the
 * same routes, request fields and answer fields.
 */
import { expect } from 'chai';
import { Ajv2020 } from 'ajv/dist/2020.js';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import { Registry } from 'prom-client';
import { VirtualClock } from '../src/clock.js';
import { CallGate } from '../src/gate.js';
import { buildApp } from '../src/server/app.js';
import { OPENAPI_FILE, servedOpenApi } from '../scripts/openapi.js';
import { T0 } from './admission/stores.js';

const ROOT = new URL('..', import.meta.url).pathname;

interface Operation {
  parameters?: { name: string; required: boolean }[];
  requestBody?: { content: Record<string, { schema: { properties?: Record<string, unknown> } }> };
  responses: Record<string, { content?: Record<string, { schema: object }> }>;
  security?: unknown[];
}
type Doc = { openapi: string; paths: Record<string, Record<'get' | 'post', Operation>> };

const CONFIG = {
  inbound: { peers: { p1: [{ limit: 1, window: 'PT1S' }, { channels: 5 }] } },
  outbound: { carriers: { A: { cps: 1 } } },
};

describe('sidecar OpenAPI document (GET /v1/openapi.json)', () => {
  let dir: string;
  let gate: CallGate;
  let app: FastifyInstance;
  let doc: Doc;
  let configPath: string;

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'callgate-openapi-'));
    configPath = join(dir, 'limits.json');
    writeFileSync(configPath, JSON.stringify(CONFIG));
    gate = await CallGate.create({ config: configPath, clock: new VirtualClock(T0) });
    app = buildApp({
      gate,
      ready: async () => {},
      reload: () => gate.reload(configPath),
      state: async () => ({ levels: [] }),
      metrics: new Registry(),
      sip: { jitterSeconds: 0 },
    });
    const r = await app.inject({ method: 'GET', url: '/v1/openapi.json' });
    expect(r.statusCode).to.equal(200);
    doc = r.json() as Doc;
  });
  after(async () => {
    await app.close();
    await gate.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('is OpenAPI 3.1 and lists exactly the routes served, with their methods', async () => {
    expect(doc.openapi).to.equal('3.1.0');
    const listed = Object.entries(doc.paths).flatMap(([path, ops]) => Object.keys(ops).map((m) => `${m} ${path}`));
    expect(listed.sort()).to.deep.equal(
      [
        ...['admit', 'record', 'reserve', 'release', 'refresh'].flatMap((op) => [`get /v1/${op}`, `post /v1/${op}`]),
        'post /v1/reload',
        'post /v1/reset',
        'get /v1/state',
        'get /v1/holds',
        'get /v1/bans',
        'delete /v1/bans/{level}/{value}',
        'get /v1/openapi.json',
        'get /metrics',
        'get /healthz',
        'get /readyz',
      ].sort(),
    );
    for (const entry of listed) {
      const [method, url] = entry.split(' ') as [string, string];
      const route = url.replace(/\{(\w+)\}/g, ':$1');
      expect(app.hasRoute({ method: method.toUpperCase() as 'GET', url: route }), entry).to.equal(true);
    }
  });

  it('real answers match the response schemas; GET takes the request fields as query parameters', async () => {
    const ajv = new Ajv2020({ strict: false });
    const check = async (method: 'GET' | 'POST' | 'DELETE', url: string, payload?: object, status = 200) => {
      const r = await app.inject({ method, url, ...(payload && { payload }) });
      expect(r.statusCode, `${method} ${url}: ${r.body}`).to.equal(status);
      const path = url.split('?')[0]!;
      const op =
        doc.paths[path.startsWith('/v1/bans/') ? '/v1/bans/{level}/{value}' : path]![
          method.toLowerCase() as 'get' | 'post'
        ];
      const schema = op.responses[String(status)]!.content!['application/json']!.schema;
      const validate = ajv.compile(schema);
      expect(validate(r.json()), `${method} ${url} ${r.body}: ${JSON.stringify(validate.errors)}`).to.equal(true);
      return r.json() as Record<string, unknown>;
    };
    await check('POST', '/v1/admit', { call_id: 'a1', peer: 'p1' });
    expect(await check('GET', '/v1/admit?call_id=a2&peer=p1')).to.include({ outcome: 'rejected', reason: 'rate' });
    await check('GET', '/v1/admit?call_id=a1&peer=p1'); // duplicate
    await check('POST', '/v1/admit', { call_id: 'u', peer: 'nobody' });
    await check('POST', '/v1/record', { call_id: 'r1', peer: 'p1', account: '' });
    await check('POST', '/v1/reserve', { call_id: 'o1', route: ['A'] });
    await check('GET', '/v1/reserve?call_id=o2&route=A&route=typo');
    await check('POST', '/v1/release', { call_id: 'a1' });
    await check('POST', '/v1/refresh', { call_id: 'r1' });
    await check('POST', '/v1/reload');
    await check('GET', '/v1/state?peer=p1');
    await check('GET', '/v1/holds?bucket=peer:p1');
    await check('POST', '/v1/reset', { bucket: 'peer:p1' });
    await check('GET', '/v1/bans');
    await check('DELETE', '/v1/bans/caller/x', undefined, 404);
    await check('GET', '/healthz');
    await check('GET', '/readyz');
    await check('POST', '/v1/admit', { call_id: 'x', peer: 'p1', pear: 1 }, 400);
    writeFileSync(configPath, '{"inbound": 5}');
    await check('POST', '/v1/reload', undefined, 422);
    // every operation that takes a body lists the 415 of a body in another charset or compressed,
    // and the 413 of one over the body limit
    for (const [path, ops] of Object.entries(doc.paths))
      if (ops.post) expect(Object.keys(ops.post.responses), path).to.include.members(['413', '415']);
    const tooLarge = await app.inject({
      method: 'POST',
      url: '/v1/reserve',
      payload: JSON.stringify({ call_id: 'big', route: ['A'], pad: 'x'.repeat(20_000) }),
      headers: { 'content-type': 'application/json' },
    });
    expect(tooLarge.statusCode).to.equal(413);
    const validate413 = ajv.compile(
      doc.paths['/v1/reserve']!.post.responses['413']!.content!['application/json']!.schema,
    );
    expect(validate413(tooLarge.json()), tooLarge.body).to.equal(true);
    const latin1 = await app.inject({
      method: 'POST',
      url: '/v1/admit',
      payload: Buffer.from('{"peer":"Ã©"}', 'latin1'),
      headers: { 'content-type': 'application/json; charset=latin1' },
    });
    expect(latin1.statusCode).to.equal(415);
    const validate = ajv.compile(doc.paths['/v1/admit']!.post.responses['415']!.content!['application/json']!.schema);
    expect(validate(latin1.json()), latin1.body).to.equal(true);
    // every request field listed is one the sidecar takes; an unknown one is refused
    const admitFields = doc.paths['/v1/admit']!.get.parameters!.map((p) => p.name);
    expect(admitFields).to.deep.equal(['call_id', 'peer', 'account', 'caller', 'callee', 'source']);
  });

  /** docs/sidecar.md's route table: `METHODS /path` | request fields | answer. */
  function docsTable(): { methods: string[]; path: string; fields: string; answer: string }[] {
    const text = readFileSync(join(ROOT, 'docs/sidecar.md'), 'utf8');
    const rows = [...text.matchAll(/^\| `((?:POST|GET|DELETE)(?:\/(?:POST|GET))?) (\/[^`]+)` \|([^|]*)\|(.*)\|$/gm)];
    return rows.map((m) => ({
      methods: m[1]!.split('/'),
      path: m[2]!.replace(/:(\w+)/g, '{$1}'),
      fields: m[3]!.trim(),
      answer: m[4]!.trim(),
    }));
  }

  it("docs/sidecar.md's route table names the same routes and methods", () => {
    const docs = docsTable().flatMap((r) => r.methods.map((m) => `${m.toLowerCase()} ${r.path}`));
    const listed = Object.entries(doc.paths).flatMap(([path, ops]) => Object.keys(ops).map((m) => `${m} ${path}`));
    expect(docs.sort()).to.deep.equal(listed.sort());
  });

  it("docs/sidecar.md names each route's request fields and every field of its answer", () => {
    for (const row of docsTable()) {
      const op = doc.paths[row.path]![row.methods[0]!.toLowerCase() as 'get' | 'post'];
      const fields =
        op.parameters?.map((p) => p.name) ??
        Object.keys(op.requestBody?.content['application/json']?.schema.properties ?? {});
      const named = [...row.fields.matchAll(/`([a-z_]+)`/g)].map((m) => m[1]);
      expect(named, `${row.path}: request fields`).to.deep.equal(fields);
      const answer = op.responses['200']?.content?.['application/json']?.schema as
        | { properties?: Record<string, unknown> }
        | undefined;
      for (const name of Object.keys(answer?.properties ?? {}))
        expect(row.answer, `${row.path}: the answer's ${name}`).to.match(new RegExp(`\\b${name}\\b`));
    }
  });

  it('docs/openapi.json is the document a sidecar serves (run `npm run openapi` after changing the API)', async () => {
    expect(readFileSync(OPENAPI_FILE, 'utf8')).to.equal(await servedOpenApi());
  });

  it('with a token: every route needs it but the probes', async () => {
    const guarded = buildApp({ gate, token: 's3cret', ready: async () => {}, reload: async () => [] });
    try {
      const r = await guarded.inject({
        method: 'GET',
        url: '/v1/openapi.json',
        headers: { authorization: 'Bearer s3cret' },
      });
      const d = r.json() as Doc;
      expect(d.paths['/v1/admit']!.post.security).to.deep.equal([{ bearer: [] }]);
      expect(d.paths['/healthz']!.get.security).to.deep.equal([]);
      expect((await guarded.inject({ method: 'GET', url: '/v1/openapi.json' })).statusCode).to.equal(401);
    } finally {
      await guarded.close();
    }
  });
});
