/**
 * The sidecar's HTTP API on fastify (the fastest well-kept Node framework, with body limits,
 * graceful close and 503-while-closing built in). Routes, in README "Sidecar":
 *
 *   POST|GET /v1/admit    /v1/record    /v1/reserve    /v1/release    /v1/refresh
 *   POST     /v1/reload    /v1/reset
 *   GET      /v1/state    /v1/holds     /v1/openapi.json    /metrics    /healthz    /readyz
 *
 * A decision is always HTTP 200 with the decision as JSON (a refusal is an answer, not an
 * error). Bad input is a 400 naming every problem (`body.route[1]: expected ...`), never a 500;
 * a body over `bodyLimit` is a 413; one that is not JSON or a form, in UTF-8 as sent (no other
 * charset, no content coding), a 415. With a token, every route but /healthz and /readyz needs
 * `Authorization: Bearer <token>`.
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import { type IncomingMessage, STATUS_CODES, type ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import Fastify, {
  LogController,
  type FastifyError,
  type FastifyInstance,
  type FastifyReply,
  type FastifyRequest,
} from 'fastify';
import type { z } from 'zod';
import type { SipOptions } from '../admission/sip.js';
import type { ConfigChange } from '../config/diff.js';
import { ConfigError } from '../errors/config-error.js';
import { DispatcherClosedError } from '../errors/dispatcher-closed-error.js';
import { InvalidArgumentError, StoreUnavailableError } from '../errors/index.js';
import type { CallGate } from '../gate.js';
import { listHolds, resetBucket, resetLine } from '../observe/operate.js';
import { OPERATOR_TIMEOUT_MS, pastDeadline, withDeadline } from '../store/timeout.js';
import { packageVersion } from '../package-root.js';
import { MAX_ID_LENGTH } from '../ids.js';
import { admitAnswer, reserveAnswer, reserveFailed } from './answers.js';
import { checkBodyCoding, UnsupportedBody } from './body-coding.js';
import { parseJsonBody, parseUrlEncoded, UrlEncoded } from './fields.js';
import { openApiDocument } from './openapi.js';
import { bansPage, liftBan, listBans } from '../observe/bans.js';
import type { AdmitInput } from '../admission/admission.js';
import {
  BadRequest,
  admitRequest,
  callRequest,
  emptyRequest,
  bansRequest,
  holdsRequest,
  parseRequest,
  resetRequest,
  reserveRequest,
  stateRequest,
  type AdmitRequest as AdmitRequestBody,
} from './requests.js';

export interface AppOptions {
  readonly gate: CallGate;
  /** Required on every route but /healthz and /readyz when set. */
  readonly token?: string;
  /** Largest request body, bytes (default 16 KiB). */
  readonly bodyLimit?: number;
  /** Resolves when the store answers, rejects otherwise (/readyz). */
  readonly ready: () => Promise<void>;
  /** Reload the configuration from its file (POST /v1/reload). */
  readonly reload: () => Promise<ConfigChange[]>;
  /** Live state for GET /v1/state (`peers`: shown besides the configured ones). */
  readonly state?: (peers: string[], values?: string[]) => Promise<unknown>;
  /** Prometheus exposition for GET /metrics. */
  readonly metrics?: { readonly contentType: string; metrics(): Promise<string> };
  /** Retry-After jitter and friends for refusals (toSipResponse). */
  readonly sip?: SipOptions;
  /** fastify's logger option (default: none). */
  readonly logger?: boolean | Record<string, unknown>;
}

export const DEFAULT_BODY_LIMIT = 16 * 1024;

/**
 * `Authorization: Bearer <token>`, the scheme in any case, one space or more: the token, all the
 * rest (a token may hold spaces: the sidecar takes any of 16 characters or more).
 */
const BEARER = /^bearer +(.+)$/i;

/** An operator's read, bounded (OPERATOR_TIMEOUT_MS). */
const operatorRead = <T>(run: () => Promise<T>): Promise<T> => withDeadline(run, OPERATOR_TIMEOUT_MS);

/** An operator's write, bounded: one that timed out may still land when Redis answers, and says so. */
function operatorWrite<T>(what: string, run: () => Promise<T>): Promise<T> {
  return withDeadline(run, OPERATOR_TIMEOUT_MS).catch((err: unknown) => {
    if (pastDeadline(err))
      throw new StoreUnavailableError(
        `${(err as Error).message}: ${what} was sent and may still apply when Redis answers`,
        err,
      );
    throw err;
  });
}

/** An admit request's fields as the gate takes them ('' attributes count as none). */
function admitInput(r: AdmitRequestBody): AdmitInput {
  return {
    callId: r.call_id,
    peer: r.peer,
    account: r.account,
    ...(r.caller && { caller: r.caller }),
    ...(r.callee && { callee: r.callee }),
    ...(r.source && { source: r.source }),
  };
}

/** What a 415 for a body of another media type says the sidecar reads. */
const BODIES_READ =
  'the sidecar reads application/json or application/x-www-form-urlencoded, in UTF-8 (charset=utf-8 or none; an ASCII body in latin1 or us-ascii too) with no content-encoding';

/** Routes any client may call without the token (probes). */
const OPEN_ROUTES = new Set(['/healthz', '/readyz']);

function digest(s: string): Buffer {
  return createHash('sha256').update(s).digest();
}

/**
 * The answer to a request Node's HTTP parser refused (the server's 'clientError'), written on the
 * socket itself, as fastify's own handler does, but in the API's error shape: 431 `headers-too-large`,
 * 408 `timeout`, else 400 `bad-request` naming the parser's error code.
 */
function writeClientError(err: Error & { code?: string }, socket: Duplex): void {
  // a reset connection has nothing to answer to
  if (err.code === 'ECONNRESET' || socket.destroyed) return;
  // Bad bytes pipelined behind a good request (or bundled in one TCP read with it): that request
  // is already being decided (a call admitted, a channel held). Its answer is owed first; written
  // now, the error would be read as its answer and the decision lost. (Bad bytes in the body of
  // the request in flight, or its timeout, are that request's own error: answered at once.)
  const owed = (socket as Duplex & { _httpMessage?: ServerResponse | null })._httpMessage;
  if (owed && !owed.writableFinished && owed.req?.complete === true) {
    owed.once('finish', () => setImmediate(() => writeClientError(err, socket)));
    owed.once('close', () => setImmediate(() => writeClientError(err, socket)));
    return;
  }
  const [status, error, message] =
    err.code === 'HPE_HEADER_OVERFLOW'
      ? [431, 'headers-too-large', 'request headers too large']
      : err.code === 'ERR_HTTP_REQUEST_TIMEOUT'
        ? [408, 'timeout', 'request not received in time']
        : [400, 'bad-request', `request: not valid HTTP (${err.code ?? err.message})`];
  writeAnswer(socket, status, error, message, err);
}

/** The API's error body for one problem: `message` is it, `problems` lists it alone. */
function errorBody(error: string, message: string): { error: string; message: string; problems: string[] } {
  return { error, message, problems: [message] };
}

/** An answer in the API's error shape written on the socket itself, which is then closed. */
function writeAnswer(socket: Duplex, status: number, error: string, message: string, err?: Error): void {
  const body = JSON.stringify(errorBody(error, message));
  if (socket.writable)
    socket.write(
      `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\nContent-Length: ${Buffer.byteLength(body)}\r\n` +
        `Content-Type: application/json; charset=utf-8\r\nConnection: close\r\n\r\n${body}`,
    );
  if (err) socket.destroy(err);
  else socket.end();
}

/**
 * A body that starts with a UTF-8 byte order mark: refused by name (it is invisible in the
 * message JSON.parse or the form's unknown first field gave).
 */
function refuseBom(body: Buffer): void {
  if (body.length >= 3 && body[0] === 0xef && body[1] === 0xbb && body[2] === 0xbf)
    throw new BadRequest(['body: starts with a byte order mark (EF BB BF); send it without one']);
}

export function buildApp(opts: AppOptions): FastifyInstance {
  const { gate } = opts;
  const sip = opts.sip ?? {};
  const app = Fastify({
    bodyLimit: opts.bodyLimit ?? DEFAULT_BODY_LIMIT,
    logger: opts.logger ?? false,
    logController: new LogController({ disableRequestLogging: true }),
    return503OnClosing: true,
    // no HEAD twin of each GET route: a HEAD of /v1/admit would take a channel unseen (a
    // prefetcher, a monitor's probe); the API's routes are GET and POST only
    exposeHeadRoutes: false,
    // a client that never finishes its request does not hold a socket forever
    requestTimeout: 30_000,
    // an HTTP/1.1 request without Host: refused by the hook below in the API's error shape
    // (Node's own answer was a bare 400 without a body)
    http: { requireHostHeader: false },
    // a path fastify cannot decode (`/v1/bans/%ff/%`): the API's error shape, not fastify's
    frameworkErrors: (err, _req, reply) => {
      const message = `path: ${err.message}`;
      void (reply as unknown as FastifyReply).code(400).send(errorBody('bad-request', message));
    },
    // requests Node's HTTP parser refuses (headers too large, bad framing, a client too slow)
    // never reach a route: their answer in the API's error shape too
    clientErrorHandler: writeClientError,
    // the query read as form bodies are (fields.ts): exact UTF-8 or refused, decoded once
    routerOptions: {
      // a path parameter (DELETE /v1/bans/:level/:value) is an id of up to MAX_ID_LENGTH
      // characters, decoded: find-my-way's default of 100 answered a longer ban value with a 400
      maxParamLength: MAX_ID_LENGTH,
      querystringParser: (query: string) => parseUrlEncoded(query) as unknown as Record<string, string>,
    },
  });

  // Two requests Node answers before fastify sees them, in the API's error shape too: CONNECT
  // (a tunnel: Node closed the socket without a word) is a method the API does not name, a 404
  // as any other; an Expect other than 100-continue gets its 417 with a body
  app.server.on('connect', (req: IncomingMessage, socket: Duplex) => {
    writeAnswer(socket, 404, 'not-found', `no route CONNECT ${req.url ?? ''}`);
  });
  app.server.on('checkExpectation', (req: IncomingMessage, res: ServerResponse) => {
    const message = `Expect: ${JSON.stringify(req.headers.expect ?? '')} is not supported (only 100-continue)`;
    const body = JSON.stringify(errorBody('expectation-failed', message));
    res
      .writeHead(417, {
        'content-type': 'application/json; charset=utf-8',
        'content-length': Buffer.byteLength(body),
        connection: 'close',
      })
      .end(body);
  });

  // Expect: 100-continue: the 100 is sent once the request has passed the token and its declared
  // length is within the body limit (preParsing), not at once as Node does: a client told to go
  // on sent its whole body to a sidecar that then answered 401 or 413. Refused before its body,
  // the request's connection is closed after the answer (Node: no 100 sent, no keep-alive).
  app.server.on('checkContinue', (req: IncomingMessage, res: ServerResponse) => {
    app.server.emit('request', req, res);
  });
  app.addHook('preParsing', (req, reply, payload, done) => {
    const declared = Number(req.headers['content-length'] ?? 0);
    const limit = req.routeOptions.bodyLimit ?? opts.bodyLimit ?? DEFAULT_BODY_LIMIT;
    if (/(?:^|\W)100-continue(?:$|\W)/i.test(req.headers.expect ?? '') && !(declared > limit))
      reply.raw.writeContinue();
    done(null, payload);
  });

  // every route, for the OpenAPI document (generated once, at its first request)
  const routes: { method: string; url: string }[] = [];
  app.addHook('onRoute', (r) => {
    for (const method of [r.method].flat()) routes.push({ method, url: r.url });
  });
  let openapi: Record<string, unknown> | undefined;
  app.get('/v1/openapi.json', async () => {
    openapi ??= openApiDocument(routes, { version: packageVersion(), token: opts.token !== undefined });
    return openapi;
  });

  // Closing: a keep-alive connection is closed after the answer in flight on it, so that close()
  // ends once those answers are out instead of waiting for the clients' idle timeouts.
  let closing = false;
  app.addHook('preClose', async () => {
    closing = true;
  });
  app.addHook('onSend', (_req, reply, payload, done) => {
    if (closing) reply.header('connection', 'close');
    done(null, payload);
  });

  // JSON and form bodies are read from their bytes (fields.ts): exact UTF-8 or refused by field,
  // no prototype field names. An empty JSON body is no body (curl -X POST -H 'content-type: application/json').
  // fastify reads text/plain by default: a body of any other type than these two is a 415, and so
  // is one declared in another charset or sent compressed (body-coding.ts): fastify would hand
  // over its bytes all the same, and they would be read as UTF-8 text.
  app.removeContentTypeParser('text/plain');
  app.addContentTypeParser('application/json', { parseAs: 'buffer' }, (req, body, done) => {
    try {
      checkBodyCoding(req.headers, 'application/json', body as Buffer);
      refuseBom(body as Buffer);
      done(null, parseJsonBody(body as Buffer));
    } catch (err) {
      if (err instanceof SyntaxError) done(new BadRequest([`body: invalid JSON: ${err.message}`]), undefined);
      else done(err as Error, undefined);
    }
  });
  // Form bodies (what many SIP servers' HTTP clients send by default) read like a query string.
  app.addContentTypeParser('application/x-www-form-urlencoded', { parseAs: 'buffer' }, (req, body, done) => {
    checkBodyCoding(req.headers, 'application/x-www-form-urlencoded', body as Buffer);
    refuseBom(body as Buffer);
    // an empty form is no body (curl -d '' with the fields in the query), as an empty JSON body is
    done(null, (body as Buffer).length === 0 ? undefined : { form: parseUrlEncoded(body as Buffer) });
  });

  app.addHook('onRequest', async (req, reply) => {
    if (req.raw.httpVersion === '1.1' && req.headers.host === undefined) {
      const message = 'request: HTTP/1.1 without a Host header';
      return reply.code(400).header('connection', 'close').send(errorBody('bad-request', message));
    }
  });

  if (opts.token !== undefined) {
    const expected = digest(opts.token);
    app.addHook('onRequest', async (req, reply) => {
      if (OPEN_ROUTES.has(req.url.split('?')[0]!)) return;
      // the scheme's name in any case, as HTTP's auth-scheme is (RFC 9110, 11.1): `bearer x` too
      const given = BEARER.exec(req.headers.authorization ?? '')?.[1];
      if (given === undefined || !timingSafeEqual(digest(given), expected)) {
        return reply
          .code(401)
          .header('www-authenticate', 'Bearer')
          .send({ error: 'unauthorized', message: 'missing or wrong "Authorization: Bearer <token>" header' });
      }
    });
  }

  /**
   * The fields of a form body, as its parser left them; undefined for any other body. Told by
   * what the parser made, not by the header again: a media type is case-insensitive (fastify
   * gives `Application/X-WWW-Form-Urlencoded` to the form parser), a string prefix is not.
   */
  const formOf = (req: FastifyRequest): UrlEncoded | undefined => {
    const body = req.body as { form?: unknown } | null | undefined;
    return typeof body === 'object' && body !== null && body.form instanceof UrlEncoded ? body.form : undefined;
  };

  /** Whether a request came with a body (a length above 0, or chunks), read or not. */
  const hasBody = (req: FastifyRequest): boolean =>
    req.headers['transfer-encoding'] !== undefined || Number(req.headers['content-length'] ?? 0) > 0;

  /** The request's fields: the query for GET (and for a POST without body), else the body. */
  const read = <T extends z.ZodType>(schema: T, req: FastifyRequest): z.output<T> => {
    const body = req.body;
    // a GET's body is not read (fastify parses none): ignored, the client meant something else
    if (req.method === 'GET' && hasBody(req))
      throw new BadRequest(['body: a GET takes its fields from the query alone (or send them in a body with POST)']);
    if (req.method === 'GET' || body === undefined) return parseRequest(schema, req.query, 'query');
    // fields in the query beside a body would be ignored: the client meant something else
    const query = req.query as unknown as UrlEncoded;
    if (query.fields.size > 0 || query.problems.length > 0)
      throw new BadRequest([
        'query: a request with a body takes its fields from the body alone (or send them all in the query, without a body)',
      ]);
    const form = formOf(req);
    if (form !== undefined) return parseRequest(schema, form, 'form');
    return parseRequest(schema, body, 'body');
  };

  /** Where read() took the fields from, for messages. */
  const whereOf = (req: FastifyRequest): 'query' | 'form' | 'body' =>
    req.method === 'GET' || req.body === undefined ? 'query' : formOf(req) !== undefined ? 'form' : 'body';

  const both = (path: string, handler: (req: FastifyRequest, reply: FastifyReply) => Promise<unknown>) => {
    app.post(path, handler);
    app.get(path, handler);
  };

  both('/v1/admit', async (req) => {
    const r = read(admitRequest, req);
    return admitAnswer(await gate.admit(admitInput(r)), sip);
  });

  both('/v1/record', async (req) => {
    const r = read(admitRequest, req);
    return admitAnswer(await gate.record(admitInput(r)), sip);
  });

  both('/v1/reserve', async (req) => {
    const r = read(reserveRequest, req);
    try {
      return reserveAnswer(await gate.reserve({ callId: r.call_id, route: r.route }));
    } catch (err) {
      if (err instanceof StoreUnavailableError) return reserveFailed(r.call_id);
      throw err;
    }
  });

  both('/v1/release', async (req) => {
    const r = read(callRequest, req);
    // deferred: the store is out of reach; the engine retries until it lands or the hold lapses
    const outcome = await gate.release(r.call_id);
    return { call_id: r.call_id, released: outcome === 'released', outcome };
  });

  both('/v1/refresh', async (req, reply) => {
    const r = read(callRequest, req);
    try {
      return { call_id: r.call_id, refreshed: await gate.refresh(r.call_id) };
    } catch (err) {
      if (err instanceof StoreUnavailableError)
        return reply.code(503).send({ error: 'store-unavailable', message: err.message });
      throw err;
    }
  });

  app.post('/v1/reload', async (req, reply) => {
    read(emptyRequest, req);
    try {
      const changes = await opts.reload();
      return { reloaded: true, changes: changes.map((c) => ({ path: c.path, kind: c.kind })) };
    } catch (err) {
      // a file the gate cannot take (a leased level it cannot lease: InvalidArgumentError) is
      // as bad a file as one that does not parse
      if (err instanceof ConfigError || err instanceof InvalidArgumentError)
        return reply.code(422).send({
          error: 'invalid-configuration',
          message: 'the configuration in force is unchanged',
          problems: err instanceof ConfigError ? err.problems : [err.message],
        });
      throw err;
    }
  });

  // bans of attribute levels (docs/attributes.md): the list (at most `max`, the soonest to end
  // first, and their total), and lifting one; no other field: a query or a body is refused, not
  // ignored (a `?level=source` read as a filter that silently did nothing)
  app.get('/v1/bans', async (req) => {
    const { max } = read(bansRequest, req);
    return bansPage((await operatorRead(() => listBans(gate.store, gate.clock.now()))) ?? [], max);
  });
  app.delete('/v1/bans/:level/:value', async (req, reply) => {
    read(emptyRequest, req);
    const { level, value } = req.params as { level: string; value: string };
    if (value === '') throw new BadRequest(['path: the value is empty (DELETE /v1/bans/<level>/<value>)']);
    try {
      const lifted = await operatorWrite('the ban', () =>
        liftBan(gate.config, gate.store, level, value, gate.clock.now()),
      );
      return { level, value, ...lifted };
    } catch (err) {
      if (err instanceof InvalidArgumentError)
        return reply.code(404).send({ error: 'not-found', message: err.message });
      throw err;
    }
  });

  // An operator's read or hand (src/observe/operate.ts): the state of buckets, the calls holding
  // a bucket or carrier, a reset. A value or bucket the configuration does not have is the
  // caller's mistake: 400 naming the field.
  const operatorInput = async <T>(where: string, run: () => Promise<T>): Promise<T> => {
    try {
      return await run();
    } catch (err) {
      if (err instanceof InvalidArgumentError) throw new BadRequest([`${where}: ${err.message}`]);
      throw err;
    }
  };

  app.get('/v1/state', async (req, reply) => {
    const r = read(stateRequest, req);
    if (!opts.state) return reply.code(501).send({ error: 'not-implemented', message: 'no state here' });
    const state = opts.state;
    // only an attribute value can be wrong (a peer the configuration lacks has its default limits)
    return operatorInput('query.value', () => operatorRead(() => state(r.peer ?? [], r.value ?? [])));
  });

  app.get('/v1/holds', async (req) => {
    const r = read(holdsRequest, req);
    if ((r.bucket === undefined) === (r.carrier === undefined))
      throw new BadRequest(['query: expected one of bucket (global, account:<id>, peer:<id>) or carrier']);
    const target = r.bucket !== undefined ? { bucket: r.bucket } : { carrier: r.carrier! };
    const where = r.bucket !== undefined ? 'query.bucket' : 'query.carrier';
    return operatorInput(where, () =>
      operatorRead(() =>
        listHolds(gate.config, gate.store, target, {
          now: gate.clock.now(),
          ...(r.max !== undefined && { max: r.max }),
        }),
      ),
    );
  });

  app.post('/v1/reset', async (req) => {
    const r = read(resetRequest, req);
    const report = await operatorInput(`${whereOf(req)}.bucket`, () =>
      operatorWrite('the reset', () => resetBucket(gate.config, gate.store, r.bucket, { now: gate.clock.now() })),
    );
    req.log.warn({ bucket: report.bucket, holds: report.holds.length }, resetLine(report));
    return report;
  });

  if (opts.metrics) {
    const registry = opts.metrics;
    app.get('/metrics', async (_req, reply) => {
      const text = await registry.metrics();
      return reply.type(registry.contentType).send(text);
    });
  }

  app.get('/healthz', async () => ({ status: 'ok' }));

  app.get('/readyz', async (_req, reply) => {
    try {
      await opts.ready();
      return { status: 'ready', store: gate.store.kind };
    } catch (err) {
      return reply.code(503).send({ status: 'unavailable', store: gate.store.kind, message: (err as Error).message });
    }
  });

  app.setNotFoundHandler((req, reply) => {
    reply.code(404).send({ error: 'not-found', message: `no route ${req.method} ${req.url.split('?')[0]}` });
  });

  app.setErrorHandler((err: FastifyError, req, reply) => {
    if (err instanceof BadRequest) {
      return reply.code(400).send({ error: 'bad-request', message: err.problems[0], problems: err.problems });
    }
    if (err instanceof UnsupportedBody) {
      if (err.coding) reply.header('accept-encoding', 'identity');
      return reply
        .code(415)
        .send({ error: 'unsupported-media-type', message: err.problems[0], problems: err.problems });
    }
    // the library refused what the client sent (a check the request schema missed): still the
    // client's, never a 500
    if (err instanceof InvalidArgumentError) return reply.code(400).send(errorBody('bad-request', err.message));
    if (err instanceof DispatcherClosedError)
      return reply.code(503).send({ error: 'closing', message: 'the sidecar is shutting down' });
    // an operator's route (state, holds, reset, bans…) while Redis is away: an outage, not a bug
    if (err instanceof StoreUnavailableError)
      return reply.code(503).send({ error: 'store-unavailable', message: err.message });
    // a body of a type no parser reads (text/plain, none at all): what came, and what is read
    if (err.code === 'FST_ERR_CTP_INVALID_MEDIA_TYPE') {
      const type = req.headers['content-type'];
      const message = `body: got ${type === undefined ? 'no content-type' : `content-type ${JSON.stringify(type)}`}; ${BODIES_READ}`;
      return reply.code(415).send(errorBody('unsupported-media-type', message));
    }
    const status = err.statusCode ?? 500;
    if (status >= 400 && status < 500) {
      // fastify's own refusals (invalid JSON, body too large, unsupported media type): say where
      const message = err.code?.startsWith('FST_ERR_CTP') ? `body: ${err.message}` : err.message;
      return reply
        .code(status)
        .send(
          errorBody(status === 413 ? 'too-large' : status === 415 ? 'unsupported-media-type' : 'bad-request', message),
        );
    }
    req.log.error({ err }, 'request failed');
    return reply.code(500).send({ error: 'internal', message: err.message });
  });

  return app;
}
