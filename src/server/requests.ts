/**
 * The sidecar's requests: one zod schema per operation, read from a JSON body, a form body or
 * the query string alike. Every problem is located (`body.call_id`, `query.route[1]`) and says
 * what was expected and what came; nothing reaches the engine unchecked.
 *
 * Query strings and form bodies carry strings only: `route` may repeat (`route=A&route=B`, one
 * carrier each, in order); any other field given twice is a problem, not a silent pick.
 */
import { z } from 'zod';
import { describeValue, formatPath } from '../config/path.js';
import { BadRequest, UrlEncoded } from './fields.js';

import { MAX_ID_LENGTH } from '../ids.js';

/** Longest id accepted (call id, peer, account, carrier): the library's bound (ids.ts). */
export { MAX_ID_LENGTH };
/** Most carriers in one route. */
export const MAX_ROUTE = 32;

export { BadRequest } from './fields.js';

function expected(what: string) {
  return (iss: { code?: string; input?: unknown }): string | undefined => {
    if (iss.code === 'unrecognized_keys') return undefined;
    if (iss.input === undefined) return `missing (expected ${what})`;
    return `expected ${what}, got ${describeValue(iss.input)}`;
  };
}

const idWhat = `a non-empty string of at most ${MAX_ID_LENGTH} characters`;
/**
 * At most MAX_ID_LENGTH UTF-16 code units, as the library counts them (src/ids.ts). zod's max()
 * counts code points, so 129 emoji (258 units) passed it and were refused by the library as a
 * 500: the refine counts units. max() stays for the OpenAPI document's maxLength (JSON Schema
 * counts code points too), and stops the checks where it fails, so a field gets one problem.
 */
const atMostIdLength =
  (what: string, max = MAX_ID_LENGTH) =>
  (s: z.ZodString) => {
    const error = (iss: { input?: unknown }) =>
      `expected ${what}, got ${String((iss.input as string).length)} characters`;
    return s.max(max, { error, abort: true }).refine((v) => v.length <= max, { error });
  };

const id = atMostIdLength(idWhat)(z.string({ error: expected(idWhat) }).min(1, { error: expected(idWhat) }));

/** A bucket as operators name it: `<kind>:<id>`, a level name (at most 64) and an id (locateBucket checks the id). */
const MAX_BUCKET_LABEL = 64 + 1 + MAX_ID_LENGTH;
const bucketWhat = `a non-empty string of at most ${MAX_BUCKET_LABEL} characters`;
const bucketLabel = atMostIdLength(
  bucketWhat,
  MAX_BUCKET_LABEL,
)(z.string({ error: expected(bucketWhat) }).min(1, { error: expected(bucketWhat) }));

/** An account may be empty ('' counts as none, as in a trace). */
const accountWhat = `a string of at most ${MAX_ID_LENGTH} characters`;
const account = atMostIdLength(accountWhat)(z.string({ error: expected(accountWhat) }));

const routeWhat = `an array of 1 to ${MAX_ROUTE} carrier ids`;
/**
 * A route's bounds say what came in their own words: "got an array" for `[]` read as if any
 * array were refused, and "got 33" for 33 entries as if the number 33 had come.
 */
const route = z
  .array(id, { error: expected(routeWhat) })
  .min(1, { error: `expected ${routeWhat}, got an empty array (a route names at least one carrier)` })
  .max(MAX_ROUTE, {
    error: (iss) => `expected ${routeWhat}, got an array of ${String((iss.input as unknown[]).length)}`,
  })
  .describe(
    `Carrier ids in order of preference, 1 to ${MAX_ROUTE}: ids that are not configured carriers are skipped (listed in \`skipped\`), an id named twice is tried twice`,
  );

const object = { error: expected('an object') };

/** Attributes for attribute levels (docs/attributes.md): optional, '' counts as none. */
export const admitRequest = z.strictObject(
  {
    call_id: id,
    peer: id,
    account: account.optional(),
    caller: account.optional(),
    callee: account.optional(),
    source: account.optional(),
  },
  object,
);
export const reserveRequest = z.strictObject({ call_id: id, route }, object);
export const callRequest = z.strictObject({ call_id: id }, object);
/** Reload takes no field: `{}`, an empty body or no body. */
export const emptyRequest = z.strictObject({}, object);
/** State: peers to show besides the configured ones (`peer=a&peer=b`). */
export const stateRequest = z.strictObject(
  {
    peer: z
      .array(id, { error: expected('an array of peer ids') })
      .max(1000, { error: 'expected at most 1000 peers' })
      .optional(),
    /** Values of attribute levels to show: `value=caller:+15551234567` (docs/attributes.md). */
    value: z
      .array(id, { error: expected('an array of <level>:<value>') })
      .max(1000, { error: 'expected at most 1000 values' })
      .optional(),
  },
  object,
);

export type AdmitRequest = z.infer<typeof admitRequest>;
export type ReserveRequest = z.infer<typeof reserveRequest>;
export type CallRequest = z.infer<typeof callRequest>;

/** Fields that may repeat in a query string or a form body (kept as arrays), per schema. */
const LIST_FIELDS = new Map<z.ZodType, ReadonlySet<string>>([
  [reserveRequest, new Set(['route'])],
  [stateRequest, new Set(['peer', 'value'])],
]);
const NONE: ReadonlySet<string> = new Set();

/**
 * A parsed query string or form body (fields.ts) shaped for a schema, in a null-prototype object:
 * a list field becomes an array even when given once; any other field given twice is a problem,
 * as is a field that could not be read (not UTF-8, a forbidden name).
 */
function fromStrings(input: unknown, where: string, lists: ReadonlySet<string>): unknown {
  const out: Record<string, unknown> = Object.create(null) as Record<string, unknown>;
  if (!(input instanceof UrlEncoded)) return out;
  const problems = input.problems.map((p) => `${where}.${p}`);
  for (const [key, values] of input.fields) {
    if (lists.has(key)) out[key] = values;
    else if (values.length > 1) problems.push(`${where}.${key}: expected one value, got ${values.length}`);
    else out[key] = values[0];
  }
  if (problems.length > 0) throw new BadRequest(problems);
  return out;
}

/**
 * Validate `input` from `where` ('body' for JSON, 'form' for a form body, 'query'); throws
 * BadRequest listing every problem.
 */
export function parseRequest<T extends z.ZodType>(
  schema: T,
  input: unknown,
  where: 'body' | 'form' | 'query',
): z.output<T> {
  const value =
    where === 'body'
      ? input === undefined || input === ''
        ? {}
        : input // (a JSON body of `null` is no object: said so, not read as one without fields)
      : fromStrings(input, where, LIST_FIELDS.get(schema) ?? NONE);
  const r = schema.safeParse(value);
  if (r.success) return r.data;
  const lines: string[] = [];
  for (const issue of r.error.issues) {
    const keys = issue.code === 'unrecognized_keys' ? issue.keys.map((k) => [...issue.path, k]) : [issue.path];
    for (const path of keys) {
      const p = formatPath(path);
      const at = p === '' ? where : p.startsWith('[') ? `${where}${p}` : `${where}.${p}`;
      lines.push(`${at}: ${issue.code === 'unrecognized_keys' ? 'unknown field' : issue.message}`);
    }
  }
  throw new BadRequest([...new Set(lines)]);
}

/** `max` of an operator's listing (a query string): 1 to 10,000. */
const listMax = z
  .string({ error: expected('an integer from 1 to 10000') })
  .regex(/^[1-9]\d{0,4}$/, { error: expected('an integer from 1 to 10000') })
  .transform(Number)
  .refine((n) => n <= 10_000, { error: expected('an integer from 1 to 10000') });

/** GET /v1/holds: `bucket` (global, account:<id>, peer:<id>) or `carrier`, and at most `max` calls listed. */
export const holdsRequest = z.strictObject(
  {
    bucket: bucketLabel.optional(),
    carrier: id.optional(),
    max: listMax.optional(),
  },
  object,
);

/** GET /v1/bans: at most `max` bans listed (the soonest to end first). */
export const bansRequest = z.strictObject({ max: listMax.optional() }, object);
/** POST /v1/reset: the bucket to empty. */
export const resetRequest = z.strictObject({ bucket: bucketLabel }, object);
