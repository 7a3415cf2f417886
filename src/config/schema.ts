/**
 * The zod schema of the limit configuration (DESIGN.md, "Limit configuration").
 *
 * Input: the configuration as parsed from JSON / YAML (or an object literal). Output: the
 * normalized CallGateConfig (durations in integer µs, ids as Map keys, defaults filled in).
 * Every object is strict (an unknown field is an error); every part is optional. Each schema
 * carries its own error text, so a zod issue's message is already the problem as shown to the
 * user; load.ts only adds the path (and the file name).
 */
import { z } from 'zod';
import type { Algorithm, Limit } from '../store/types.js';
import { parseDuration } from './duration.js';
import { describeValue } from './path.js';
import type { BucketConfig, CallGateConfig, CarrierConfig } from './types.js';

export const ALGORITHMS = ['sliding-log', 'sliding-window', 'fixed-window'] as const satisfies readonly Algorithm[];
export const DEFAULT_ALGORITHM: Algorithm = 'sliding-log';

interface RawIssue {
  readonly code?: string;
  readonly input?: unknown;
}

/** Error text "expected <what>, got <value>", or "missing (expected <what>)" for an absent field. */
function expected(what: string, note?: (input: unknown) => string | undefined) {
  return (iss: RawIssue): string | undefined => {
    if (iss.code === 'unrecognized_keys') return undefined; // expanded per key by the formatter
    if (iss.input === undefined) return `missing (expected ${what})`;
    const extra = note?.(iss.input);
    return `expected ${what}, got ${describeValue(iss.input)}${extra ? ` (${extra})` : ''}`;
  };
}

function durationSchema(positive: boolean) {
  const what = positive ? 'a positive duration' : 'a duration >= 0';
  return z
    .string({
      error: expected(what, (input) =>
        typeof input === 'number' ? 'durations are strings such as "PT1S" or "500ms", not numbers' : undefined,
      ),
    })
    .transform((text, ctx): number => {
      const r = parseDuration(text);
      if (r.ok && (!positive || r.us > 0)) return r.us;
      const reason = r.ok ? undefined : r.reason;
      ctx.issues.push({
        code: 'custom',
        input: text,
        message: `expected ${what}, got ${describeValue(text)}${reason ? ` (${reason})` : ''}`,
      });
      return z.NEVER;
    });
}

const positiveInteger = expected('a positive integer');

const limitSchema = z
  .strictObject(
    {
      limit: z.int({ error: positiveInteger }).positive({ error: positiveInteger }),
      window: durationSchema(true),
      algorithm: z
        .enum(ALGORITHMS, {
          error: expected(
            ALGORITHMS.map((a) => `"${a}"`)
              .join(', ')
              .replace(/, ([^,]*)$/, ' or $1'),
          ),
        })
        .optional(),
    },
    { error: expected('a limit such as {"limit": 10, "window": "PT1S"}') },
  )
  .transform((l): Limit => ({ limit: l.limit, windowUs: l.window, algorithm: l.algorithm ?? DEFAULT_ALGORITHM }));

/** `{ "channels": N }`: at most N of the bucket's calls in progress at once. */
const channelsEntrySchema = z.strictObject(
  { channels: z.int({ error: positiveInteger }).positive({ error: positiveInteger }) },
  { error: expected('a channels entry such as {"channels": 30}') },
);

const isChannelsEntry = (v: unknown): boolean =>
  typeof v === 'object' && v !== null && !Array.isArray(v) && 'channels' in v;

/**
 * One entry of a bucket's list: a rate limit, or (when it names `channels`) the channel limit.
 * Routed by that key rather than by a union, so that a bad entry gets the messages of the one
 * schema it was meant for, at their own paths.
 */
const entrySchema = z.unknown().transform((value, ctx): Limit | { channels: number } => {
  const r = isChannelsEntry(value) ? channelsEntrySchema.safeParse(value) : limitSchema.safeParse(value);
  if (r.success) return r.data;
  for (const issue of r.error.issues) ctx.issues.push(issue as never);
  return z.NEVER;
});

/** A bucket's list: its rate limits and at most one channel limit. */
const bucketSchema = z
  .array(entrySchema, { error: expected('an array of limits') })
  .transform((entries, ctx): BucketConfig => {
    const limits: Limit[] = [];
    let channels: number | undefined;
    let channelsAt = -1;
    entries.forEach((e, i) => {
      if (!('channels' in e)) {
        limits.push(e);
        return;
      }
      if (channels === undefined) {
        channels = e.channels;
        channelsAt = i;
        return;
      }
      ctx.issues.push({
        code: 'custom',
        input: e,
        path: [i],
        message: `a bucket has at most one channels entry (another is at [${channelsAt}])`,
      });
    });
    return channels === undefined ? { limits } : { limits, channels };
  });

const cpsError = expected('a positive finite number');

const carrierSchema = z
  .strictObject(
    {
      // One check, so that a bad cps gives one problem. A cps so small that 1e6 / cps overflows
      // (the interval between calls would be infinite) is refused as "too small".
      cps: z.number({ error: cpsError }).refine((cps) => cps > 0 && Number.isFinite(1e6 / cps), {
        error: expected('a positive finite number', (cps) => ((cps as number) > 0 ? 'too small' : undefined)),
      }),
      maxWait: durationSchema(false).optional(),
      channels: z.int({ error: positiveInteger }).positive({ error: positiveInteger }).optional(),
    },
    { error: expected('a carrier such as {"cps": 4, "maxWait": "PT1S"}') },
  )
  .transform((c): CarrierConfig => {
    const carrier = { cps: c.cps, intervalUs: 1e6 / c.cps, maxWaitUs: c.maxWait ?? 0 };
    return c.channels === undefined ? carrier : { ...carrier, channels: c.channels };
  });

/** Plain objects become Maps before validation, so that ids such as `__proto__` survive. */
function toMap(value: unknown): unknown {
  if (typeof value !== 'object' || value === null || Array.isArray(value) || value instanceof Map) return value;
  return new Map(Object.entries(value));
}

function idMapSchema<T extends z.ZodType>(kind: string, valueSchema: T, valueWhat: string) {
  return z.preprocess(
    toMap,
    z.map(
      z.string({ error: expected(`a non-empty ${kind} id`) }).min(1, { error: `expected a non-empty ${kind} id` }),
      valueSchema,
      {
        error: expected(`an object mapping ${kind} ids to ${valueWhat}`),
      },
    ),
  );
}

const objectError = expected('an object');

const inboundSchema = z.strictObject(
  {
    global: bucketSchema.optional(),
    accounts: idMapSchema('account', bucketSchema, 'arrays of limits').optional(),
    peers: idMapSchema('peer', bucketSchema, 'arrays of limits').optional(),
    defaultPeer: bucketSchema.optional(),
  },
  { error: objectError },
);

const outboundSchema = z.strictObject(
  { carriers: idMapSchema('carrier', carrierSchema, 'carriers').optional() },
  { error: objectError },
);

/** How long a call whose end is never reported holds its channels, by default (DESIGN.md). */
export const DEFAULT_MAX_CALL_DURATION_US = 4 * 3600 * 1_000_000;

/** Validates a raw configuration and yields the normalized CallGateConfig. */
export const configSchema = z
  .strictObject(
    {
      // where an editor finds the JSON Schema (schema/limits.schema.json); not used here
      $schema: z.string({ error: expected('a string (the JSON Schema of the file)') }).optional(),
      maxCallDuration: durationSchema(true).optional(),
      inbound: inboundSchema.optional(),
      outbound: outboundSchema.optional(),
    },
    { error: objectError },
  )
  .transform((c): CallGateConfig => {
    const inbound: CallGateConfig['inbound'] = {
      accounts: c.inbound?.accounts ?? new Map(),
      peers: c.inbound?.peers ?? new Map(),
    };
    if (c.inbound?.global !== undefined) inbound.global = c.inbound.global;
    if (c.inbound?.defaultPeer !== undefined) inbound.defaultPeer = c.inbound.defaultPeer;
    return {
      maxCallDurationUs: c.maxCallDuration ?? DEFAULT_MAX_CALL_DURATION_US,
      inbound,
      outbound: { carriers: c.outbound?.carriers ?? new Map() },
    };
  });
