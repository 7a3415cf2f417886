/**
 * The sidecar's OpenAPI 3.1 document, served at GET /v1/openapi.json. Requests are described by
 * the very zod schemas the handlers validate with (requests.ts); answers by the zod schemas
 * below, which test/openapi.test.ts holds real answers to. The paths are the routes the app
 * registered (app.ts collects them): a route without an entry here fails at the first request
 * for the document, and so in the tests. Built with z.toJSONSchema, no OpenAPI library: the
 * app validates with zod, not with fastify route schemas, which @fastify/swagger would read.
 */
import { z } from 'zod';
import {
  admitRequest,
  callRequest,
  emptyRequest,
  bansRequest,
  holdsRequest,
  reserveRequest,
  resetRequest,
  stateRequest,
} from './requests.js';

const sip = z
  .strictObject({
    status: z.int().describe('SIP status to answer the caller (503, 403, or the configured channels status)'),
    reason: z.string().describe('Its reason phrase'),
    headers: z.record(z.string(), z.string()).describe('Headers to add (Retry-After, in whole seconds)'),
  })
  .nullable()
  .describe('What to answer the caller when the call does not go on; null when it goes on');

const timeUs = z.number().describe('The decision time, µs since the epoch, on the store clock');

const inbound = {
  call_id: z.string(),
  direction: z.literal('in'),
  time_us: timeUs,
  retry_after_ms: z.int().describe('Whole ms until the rate limits that lacked room have room again; 0 when admitted'),
  duplicate: z.literal(true).optional().describe('A repeat of a call still holding its channels, counted once'),
  degraded: z
    .enum(['fail-closed', 'fail-open', 'local'])
    .optional()
    .describe('The store did not answer in time and this policy decided'),
  sip,
};

export const admitAnswerSchema = z.strictObject({
  ...inbound,
  outcome: z.enum(['admitted', 'rejected']),
  limited_by: z
    .string()
    .optional()
    .describe('On refusal: global, account:<id>, peer:<id>, unknown-peer or store-unavailable'),
  reason: z.enum(['rate', 'channels']).optional().describe('On refusal by a level'),
});

export const recordAnswerSchema = z.strictObject({
  ...inbound,
  outcome: z.literal('admitted'),
  forced: z.literal(true).describe('Counted by record: never refused'),
});

export const reserveAnswerSchema = z.strictObject({
  call_id: z.string(),
  direction: z.literal('out'),
  outcome: z.enum(['dispatched', 'rejected', 'failed']),
  carrier: z.string().nullable().describe('The carrier that takes the call; null when none'),
  delay_ms: z.number().nullable().describe('How long to hold the call before sending it, ms; null when none'),
  rerouted_from: z.array(z.string()).describe('Configured carriers of the route passed over, in order'),
  reason: z.enum(['all-routes-congested', 'store-unavailable']).optional(),
  skipped: z.array(z.string()).optional().describe('Route ids that are not configured carriers, never tried'),
  time_us: timeUs.optional().describe('The decision time, µs on the store clock; absent when failed'),
  slot_us: z.number().optional().describe('The slot taken, µs on the store clock'),
  sip,
});

export const releaseAnswerSchema = z.strictObject({
  call_id: z.string(),
  released: z.boolean(),
  outcome: z.enum(['released', 'not-held', 'deferred']),
});

export const refreshAnswerSchema = z.strictObject({ call_id: z.string(), refreshed: z.boolean() });

export const reloadAnswerSchema = z.strictObject({
  reloaded: z.literal(true),
  changes: z.array(z.strictObject({ path: z.string(), kind: z.enum(['added', 'removed', 'changed']) })),
});

export const holdsAnswerSchema = z.strictObject({
  target: z.string(),
  limit: z.number().int().optional(),
  total: z.number().int(),
  holds: z.array(z.strictObject({ call_id: z.string(), end_us: z.number().int(), left_ms: z.number().int() })),
  time_us: z.number().int(),
});

export const resetAnswerSchema = z.strictObject({
  bucket: z.string(),
  events: z.number().int(),
  windows: z.number().int(),
  holds: z.array(z.string()),
  time_us: z.number().int(),
});

export const bansAnswerSchema = z.strictObject({
  bans: z.array(
    z.strictObject({
      level: z.string(),
      value: z.string(),
      until_us: z.number().int(),
      remaining_ms: z.number().int(),
    }),
  ),
  total: z.number().int().describe('Bans in force, listed or not'),
});

export const unbanAnswerSchema = z.strictObject({ level: z.string(), value: z.string(), lifted: z.boolean() });

export const errorAnswerSchema = z.strictObject({
  error: z.string().describe('bad-request, unauthorized, not-found, invalid-configuration, store-unavailable…'),
  message: z.string(),
  problems: z.array(z.string()).optional().describe('Every problem, located (body.route[1]: expected …)'),
});

export const healthAnswerSchema = z.strictObject({ status: z.literal('ok') });

export const readyAnswerSchema = z.strictObject({
  status: z.enum(['ready', 'unavailable']),
  store: z.string(),
  message: z.string().optional().describe('Why the store is not ready'),
});

export const stateAnswerSchema = z
  .record(z.string(), z.unknown())
  .describe('The live state of every limit, as `callgate inspect --json`');

type Answers = Partial<Record<number, z.ZodType>>;

interface RouteDoc {
  readonly summary: string;
  readonly request?: z.ZodType;
  readonly answers: Answers;
  /** Not JSON: the content type of the 200 answer. */
  readonly text?: string;
  /** Open to any client, even with a token. */
  readonly open?: boolean;
}

const bad = { 400: errorAnswerSchema };

/** What a body must be (app.ts, body-coding.ts): said on every operation that takes one. */
const BODY =
  'UTF-8 as sent: no charset or charset=utf-8, and no Content-Encoding (or identity); a body of ASCII bytes alone may declare an ASCII-compatible charset (us-ascii, iso-8859-1, windows-1252). Another charset, a byte above 0x7F in one of those, or a content coding is a 415, never decoded.';
const UNSUPPORTED =
  'The body is neither JSON nor a form, or is declared in a charset other than UTF-8, or has a Content-Encoding other than identity (the answer then says Accept-Encoding: identity)';
const TOO_LARGE = 'The body is larger than the sidecar takes (`--body-limit`, 16384 bytes by default); it is not read';
const DECISION = 'A decision is always 200: a refusal is an answer, not an error.';

/** Every route the app may register, by path. */
export const ROUTE_DOCS: Readonly<Record<string, RouteDoc>> = {
  '/v1/admit': {
    summary: `May this inbound call in? ${DECISION}`,
    request: admitRequest,
    answers: { 200: admitAnswerSchema, ...bad },
  },
  '/v1/record': {
    summary: 'Count a call that must pass (emergency): never refused.',
    request: admitRequest,
    answers: { 200: recordAnswerSchema, ...bad },
  },
  '/v1/reserve': {
    summary: `The outbound decision: a slot on the first carrier of the route that can take the call in time. ${DECISION}`,
    request: reserveRequest,
    answers: { 200: reserveAnswerSchema, ...bad },
  },
  '/v1/release': {
    summary: 'The call ended: give back its channels on every level and carrier.',
    request: callRequest,
    answers: { 200: releaseAnswerSchema, ...bad },
  },
  '/v1/refresh': {
    summary: 'A long call: its holds last maxCallDuration from now.',
    request: callRequest,
    answers: { 200: refreshAnswerSchema, ...bad, 503: errorAnswerSchema },
  },
  '/v1/reload': {
    summary: 'Reload the configuration file; a bad one leaves the one in force.',
    request: emptyRequest,
    answers: { 200: reloadAnswerSchema, ...bad, 422: errorAnswerSchema, 503: errorAnswerSchema },
  },
  '/v1/state': {
    summary: 'The live state of every limit.',
    request: stateRequest,
    answers: { 200: stateAnswerSchema, ...bad, 501: errorAnswerSchema, 503: errorAnswerSchema },
  },
  '/v1/holds': {
    summary: 'The calls holding a bucket or a carrier now, earliest end first.',
    request: holdsRequest,
    answers: { 200: holdsAnswerSchema, ...bad, 503: errorAnswerSchema },
  },
  '/v1/reset': {
    summary: "Empty a bucket's windows and holds (an operator's hand; logged).",
    request: resetRequest,
    answers: { 200: resetAnswerSchema, ...bad, 503: errorAnswerSchema },
  },
  '/v1/bans': {
    summary: 'The bans of attribute levels in force: at most max (default 1,000), the soonest to end first.',
    request: bansRequest,
    answers: { 200: bansAnswerSchema, ...bad, 503: errorAnswerSchema },
  },
  '/v1/bans/:level/:value': {
    summary: 'Lift the ban of a value on an attribute level, for every process.',
    answers: { 200: unbanAnswerSchema, ...bad, 404: errorAnswerSchema, 503: errorAnswerSchema },
  },
  '/v1/openapi.json': { summary: 'This document.', answers: { 200: z.record(z.string(), z.unknown()) } },
  '/metrics': { summary: 'Prometheus exposition.', answers: {}, text: 'text/plain' },
  '/healthz': { summary: 'Up while the process is.', answers: { 200: healthAnswerSchema }, open: true },
  '/readyz': {
    summary: 'Ready when the store answers.',
    answers: { 200: readyAnswerSchema, 503: readyAnswerSchema },
    open: true,
  },
};

/** A zod schema as an OpenAPI 3.1 schema object (JSON Schema 2020-12, without its $schema). */
export function jsonSchema(schema: z.ZodType, io: 'input' | 'output' = 'output'): Record<string, unknown> {
  const { $schema: _, ...rest } = z.toJSONSchema(schema, { io }) as Record<string, unknown>;
  return rest;
}

function operation(
  method: 'get' | 'post' | 'delete',
  url: string,
  route: RouteDoc,
  token: boolean,
): Record<string, unknown> {
  const op: Record<string, unknown> = { summary: route.summary };
  const pathParams = [...url.matchAll(/:(\w+)/g)].map((m) => m[1]!);
  if (pathParams.length > 0)
    op.parameters = pathParams.map((name) => ({ name, in: 'path', required: true, schema: { type: 'string' } }));
  if (route.request) {
    const schema = jsonSchema(route.request, 'input') as { properties?: Record<string, object>; required?: string[] };
    if (method === 'get') {
      op.parameters = Object.entries(schema.properties ?? {}).map(([name, s]) => ({
        name,
        in: 'query',
        required: schema.required?.includes(name) ?? false,
        schema: s,
      }));
    } else {
      op.requestBody = {
        required: false,
        description: BODY,
        content: { 'application/json': { schema }, 'application/x-www-form-urlencoded': { schema } },
      };
    }
  }
  const responses: Record<string, unknown> = {};
  for (const [status, answer] of Object.entries(route.answers))
    responses[status] = {
      description: status === '200' ? 'OK' : 'Error',
      content: { 'application/json': { schema: jsonSchema(answer!) } },
    };
  if (op.requestBody) {
    responses['413'] = {
      description: TOO_LARGE,
      content: { 'application/json': { schema: jsonSchema(errorAnswerSchema) } },
    };
    responses['415'] = {
      description: UNSUPPORTED,
      content: { 'application/json': { schema: jsonSchema(errorAnswerSchema) } },
    };
  }
  if (route.text) responses['200'] = { description: 'OK', content: { [route.text]: { schema: { type: 'string' } } } };
  if (token && !route.open) responses['401'] = { description: 'Missing or wrong bearer token' };
  op.responses = responses;
  if (token) op.security = route.open ? [] : [{ bearer: [] }];
  return op;
}

/** The document for the routes registered (`routes`: method and path each, HEAD left out). */
export function openApiDocument(
  routes: readonly { method: string; url: string }[],
  opts: { version: string; token: boolean },
): Record<string, unknown> {
  const paths: Record<string, Record<string, unknown>> = {};
  for (const { method, url } of routes) {
    const m = method.toLowerCase();
    if (m !== 'get' && m !== 'post' && m !== 'delete') continue;
    const route = ROUTE_DOCS[url];
    if (route === undefined)
      throw new Error(`route ${method} ${url} has no entry in the OpenAPI document (openapi.ts)`);
    // OpenAPI writes a path parameter {name}; fastify :name
    (paths[url.replace(/:(\w+)/g, '{$1}')] ??= {})[m] = operation(m, url, route, opts.token);
  }
  return {
    openapi: '3.1.0',
    info: {
      title: 'callgate sidecar',
      version: opts.version,
      description:
        'Call admission and outbound pacing over HTTP. Fields come as a JSON body, a form body or query parameters alike; `route` (and `peer` on /v1/state) repeats in a query or form.',
    },
    paths,
    ...(opts.token && {
      components: { securitySchemes: { bearer: { type: 'http', scheme: 'bearer' } } },
    }),
  };
}
