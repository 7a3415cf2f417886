/**
 * The configuration file as written (JSON or YAML), as a zod schema whose only use is its JSON
 * Schema (z.toJSONSchema): editors complete and check `limits.json` / `limits.yaml` with it.
 * schema.ts stays the validator in force (its preprocessing into Maps, exact durations and one
 * channels entry per bucket have no JSON Schema form); test/config-schema.test.ts holds the two
 * to the same verdict on every fixture, example and a set of broken configurations, and the
 * committed schema/limits.schema.json to what this file generates (`npm run schema`).
 */
import { z } from 'zod';
import { ALGORITHMS } from './schema.js';

/** Descriptions and $defs names, in a registry of this file's own (the global one is left alone). */
const docs = z.registry<{ id?: string; description: string }>();
const doc = <T extends z.ZodType>(schema: T, description: string, id?: string): T => {
  docs.add(schema, id === undefined ? { description } : { id, description });
  return schema;
};

/** The ISO-8601 forms (no years or months) and the short forms of duration.ts, as one pattern. */
const ISO = String.raw`P(?!$)(?:\d+(?:[.,]\d+)?W)?(?:\d+(?:[.,]\d+)?D)?(?:T(?=\d)(?:\d+(?:[.,]\d+)?H)?(?:\d+(?:[.,]\d+)?M)?(?:\d+(?:[.,]\d+)?S)?)?`;
const SHORT = String.raw`\d+(?:\.\d+)?(?:ms|s|m|h)`;
const FORMS =
  'ISO-8601 ("PT1S", "PT0.5S", "PT30M", "P1D"; no years or months) or a number and ms, s, m or h ("500ms", "1s", "1.5s", "1m", "1h"); a whole number of microseconds';

const duration = (what: string) => doc(z.string().regex(new RegExp(`^(?:${ISO}|${SHORT})$`)), `${what}. ${FORMS}.`);
const count = (what: string) => doc(z.int().positive(), what);

const limit = doc(
  z.strictObject({
    limit: count('Calls admitted at most in any window.'),
    window: duration('The window'),
    algorithm: doc(
      z.enum(ALGORITHMS),
      'How the window is counted: "sliding-log" (default, exact), "sliding-window" (estimate) or "fixed-window" (calendar-aligned).',
    ).optional(),
  }),
  'A rate limit: at most `limit` calls in any `window`.',
  'limit',
);

const channels = doc(
  z.strictObject({ channels: count('Calls of the bucket in progress at once, at most.') }),
  'The channel limit (at most one per bucket).',
  'channels',
);

const bucket = doc(
  z.array(z.union([limit, channels])),
  'A bucket: its rate limits and at most one channels entry. Every limit is checked.',
  'bucket',
);

const ids = <T extends z.ZodType>(what: string, value: T) =>
  doc(z.record(z.string().min(1), value), `${what}, by id (any non-empty string).`);

const carrier = doc(
  z.strictObject({
    cps: doc(
      z.number().min(1e-9).lt(1e15),
      'Calls per second sent to the carrier at most (1/cps apart); a fraction works, counted to 9 decimals (at least 1e-9, below 1e15).',
    ),
    maxWait: duration(
      'The longest a call may wait for its slot before the next carrier of its route is tried (default 0; under 2^51 µs, about 71 years)',
    ).optional(),
    channels: count('Calls in progress on the carrier at once, at most.').optional(),
  }),
  'A carrier: its pacing (leaky bucket) and channel limit.',
  'carrier',
);

const bits = (max: number) => z.int().min(1).max(max);

const attributeLevel = doc(
  z.strictObject({
    name: doc(
      z.string().regex(/^[A-Za-z0-9_-]{1,64}$/),
      "The level's name, as `limited_by` shows it (`<name>:<value>`); not global, account, peer, unknown-peer or store-unavailable.",
    ),
    key: doc(
      z.union([z.enum(['caller', 'callee', 'source']), z.strictObject({ field: z.string().min(1).max(64) })]),
      'The attribute that keys the level: "caller", "callee", "source" or {"field": "<name>"} (a field the caller passes).',
    ),
    match: doc(
      z.union([
        z.strictObject({ prefixes: z.array(z.string().min(1).max(32)).min(1) }),
        z.strictObject({ digits: z.int().positive().max(32) }),
        z.strictObject({
          subnet: z.union([bits(32), z.strictObject({ v4: bits(32).optional(), v6: bits(128).optional() })]),
        }),
      ]),
      'How a value is grouped: the longest matching prefix of a list, the first N digits, or the source\'s subnet (IPv4 bits, or {v4, v6}); a subnet needs key "source".',
    ).optional(),
    limits: doc(bucket, 'The limits applied to every value (rates and channels).'),
    overrides: ids('Limits of particular values', bucket).optional(),
    order: doc(
      z.enum(['first', 'after-global', 'after-account', 'last']),
      'Where the level sits in the check order (default "last").',
    ).optional(),
    maxValues: count('Values tracked at once, at most; see docs/attributes.md for what happens past it.').optional(),
    ban: doc(
      z.strictObject({
        over: doc(z.number().min(1), "Refusals over this many times the level's limit within the span ban the value."),
        within: duration('The span'),
        for: duration('How long a ban lasts'),
      }),
      'Refuse a flooding value outright for a while (reason "banned").',
    ).optional(),
  }),
  'An attribute level: limits on every value of one attribute of a call.',
  'attributeLevel',
);

export const configDocumentSchema = doc(
  z.strictObject({
    $schema: doc(z.string(), 'The JSON Schema of this file, for editors (callgate ignores it).').optional(),
    maxCallDuration: duration(
      'How long a call whose end is never reported holds its channels (default "PT4H")',
    ).optional(),
    inbound: doc(
      z.strictObject({
        global: doc(bucket.optional(), 'The whole platform: every call counts here.'),
        accounts: ids('Customer accounts (a call names its account)', bucket).optional(),
        peers: ids('Peers, where calls come from', bucket).optional(),
        defaultPeer: doc(
          bucket.optional(),
          'The limits of a peer without its own (each such peer counted apart); without it such a call is refused as unknown-peer.',
        ),
        attributes: doc(
          z.array(attributeLevel),
          'Attribute levels: caller number, destination prefix, source address or a named field (docs/attributes.md).',
        ).optional(),
      }),
      'Inbound admission: rate limits and channels per level (global, account, peer).',
    ).optional(),
    outbound: doc(
      z.strictObject({ carriers: ids('Carriers that routes name', carrier).optional() }),
      'Outbound pacing per carrier.',
    ).optional(),
  }),
  'callgate limit configuration: see docs/configuration.md.',
);

/** The JSON Schema document, as committed in schema/limits.schema.json. */
export function configJsonSchema(): Record<string, unknown> {
  return { title: 'callgate limits', ...z.toJSONSchema(configDocumentSchema, { metadata: docs }) };
}
