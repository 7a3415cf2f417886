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
import { idProblem } from '../ids.js';
import { describeValue } from './path.js';
import type { AttributeLevelConfig, BucketConfig, CallGateConfig, CarrierConfig } from './types.js';

export const ALGORITHMS = ['sliding-log', 'sliding-window', 'fixed-window'] as const satisfies readonly Algorithm[];
export const DEFAULT_ALGORITHM: Algorithm = 'sliding-log';

interface RawIssue {
  readonly code?: string;
  readonly input?: unknown;
}

/** Error text "expected <what>, got <value>", or "missing (expected <what>)" for an absent field. */
/**
 * Why a number the file gave reads as another one: past 2^53 - 1 a JSON or YAML reader keeps only
 * the nearest double (9007199254740993 reads 9007199254740992).
 */
function beyondExact(input: unknown): string | undefined {
  if (typeof input !== 'number' || !Number.isFinite(input)) return undefined;
  return Math.abs(input) > Number.MAX_SAFE_INTEGER
    ? 'above 2^53 - 1, the largest whole number read exactly'
    : undefined;
}

function expected(what: string, note?: (input: unknown) => string | undefined, topLevel = false) {
  return (iss: RawIssue): string | undefined => {
    if (iss.code === 'unrecognized_keys') return undefined; // expanded per key by the formatter
    if (iss.input === undefined) return `missing (expected ${what})`;
    // below the top, null is mostly a YAML key with nothing after it (`inbound:` alone)
    const extra =
      iss.input === null && !topLevel
        ? 'an empty value: in YAML, a key with nothing after it'
        : (note?.(iss.input) ?? beyondExact(iss.input));
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
/** The least cps: slots count a cps in billionths (src/store/slots.ts). */
export const MIN_CPS = 1e-9;
/**
 * The cps is below this: slots count it as p / q with p under 2^50 (src/store/slots.ts), and a
 * larger one reached Redis as "1e+21/1", which its scripts could not read.
 */
export const MAX_CPS = 1e15;
/**
 * A maxWait is under this (2^51 µs, about 71 years): past it a double steps in half-µs and more,
 * and a wait compared with maxWait or rounded to delay_ms could be a µs off the exact one.
 */
export const MAX_WAIT_US = 2 ** 51;

const carrierSchema = z
  .strictObject(
    {
      // One check, so that a bad cps gives one problem. Slots count the cps in billionths
      // (src/store/slots.ts): one below a billionth, a call every 31.7 years, is refused as
      // "too small", as one whose interval 1e6 / cps overflows would be.
      cps: z.number({ error: cpsError }).refine((cps) => cps >= MIN_CPS && cps < MAX_CPS, {
        error: expected('a positive finite number', (cps) =>
          (cps as number) >= MAX_CPS && Number.isFinite(cps)
            ? 'too large: below 1e15'
            : (cps as number) > 0 && (cps as number) < MIN_CPS
              ? `too small: at least ${MIN_CPS}, a call every 31.7 years`
              : undefined,
        ),
      }),
      maxWait: durationSchema(false)
        .refine((us) => us < MAX_WAIT_US, {
          error: (iss) => `expected a duration under 2^51 µs (about 71 years), got ${String(iss.input)} µs`,
        })
        .optional(),
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

/**
 * A map of `kind` ids to values. `routed`: the ids are carriers, which a trace names in its
 * `route` column, split on '|' and trimmed: an id with '|' or spaces around it could never be
 * named there.
 */
function idMapSchema<T extends z.ZodType>(kind: string, valueSchema: T, valueWhat: string, routed = false) {
  return z.preprocess(
    toMap,
    z.map(
      z
        .string({ error: expected(`a non-empty ${kind} id`) })
        .min(1, { error: `expected a non-empty ${kind} id` })
        // as the calls' ids are bound (src/ids.ts): an id no call can name would never match
        .refine((id) => id === '' || idProblem(id) === undefined, {
          error: (iss) => `${kind} id ${idProblem(iss.input)}`,
        })
        .refine((id) => !routed || (id.trim() === id && !id.includes('|')), {
          error: (iss) =>
            `${kind} id ${JSON.stringify(iss.input)} ${String(iss.input).includes('|') ? "holds '|'" : 'has spaces around it'}: a trace's route could never name it (its ids are split on '|' and trimmed)`,
        }),
      valueSchema,
      {
        error: expected(`an object mapping ${kind} ids to ${valueWhat}`),
      },
    ),
  );
}

const objectError = expected('an object');

/** Names an attribute level may not take: they are the other levels' `limited_by` values. */
export const RESERVED_LEVEL_NAMES = ['global', 'account', 'peer', 'unknown-peer', 'store-unavailable'] as const;
const levelNameWhat = 'a level name of letters, digits, "_" or "-"';
const prefixWhat = 'a non-empty string of at most 32 characters';

const subnetBits = (max: number) => {
  const what = `an integer from 1 to ${max}`;
  return z
    .int({ error: expected(what) })
    .min(1, { error: expected(what) })
    .max(max, { error: expected(what) });
};

const matchSchema = z.union(
  [
    z.strictObject({
      prefixes: z
        .array(
          z
            .string({ error: expected(prefixWhat) })
            .min(1, { error: expected(prefixWhat) })
            .max(32),
          {
            error: expected('an array of prefixes'),
          },
        )
        .min(1, { error: 'expected at least one prefix' }),
    }),
    z.strictObject({ digits: z.int({ error: positiveInteger }).positive({ error: positiveInteger }).max(32) }),
    z.strictObject({
      subnet: z.union([
        subnetBits(32).transform((v4) => ({ v4, v6: 64 })),
        z
          .strictObject({ v4: subnetBits(32).optional(), v6: subnetBits(128).optional() })
          .transform((s) => ({ v4: s.v4 ?? 32, v6: s.v6 ?? 128 })),
      ]),
    }),
  ],
  { error: expected('a match such as {"prefixes": ["882"]}, {"digits": 6} or {"subnet": 24}') },
);

const banSchema = z
  .strictObject(
    {
      over: z.number({ error: expected('a number >= 1') }).min(1, { error: expected('a number >= 1') }),
      within: durationSchema(true),
      for: durationSchema(true),
    },
    { error: expected('a ban such as {"over": 3, "within": "10s", "for": "5m"}') },
  )
  .transform((b) => ({ over: b.over, spanUs: b.within, forUs: b.for }));

const attributeLevelSchema = z
  .strictObject(
    {
      name: z
        .string({ error: expected(levelNameWhat) })
        .regex(/^[A-Za-z0-9_-]{1,64}$/, { error: expected(levelNameWhat) })
        .refine((n) => !(RESERVED_LEVEL_NAMES as readonly string[]).includes(n), {
          error: (iss) => `the name ${describeValue(iss.input)} is taken by another level`,
        }),
      key: z.union([z.enum(['caller', 'callee', 'source']), z.strictObject({ field: z.string().min(1).max(64) })], {
        error: expected('"caller", "callee", "source" or {"field": "<name>"}'),
      }),
      match: matchSchema.optional(),
      limits: bucketSchema,
      overrides: idMapSchema('value', bucketSchema, 'arrays of limits').optional(),
      order: z
        .enum(['first', 'after-global', 'after-account', 'last'], {
          error: expected('"first", "after-global", "after-account" or "last"'),
        })
        .optional(),
      maxValues: z
        .int({ error: positiveInteger })
        .positive({ error: positiveInteger })
        .max(2 ** 31)
        .optional(),
      ban: banSchema.optional(),
    },
    { error: expected('an attribute level such as {"name": "caller", "key": "caller", "limits": [...]}') },
  )
  .superRefine((l, ctx) => {
    if (l.ban !== undefined && l.limits.limits.length === 0)
      ctx.addIssue({ code: 'custom', path: ['ban'], message: "a ban needs a rate limit in the level's limits" });
    if (l.match !== undefined && 'subnet' in l.match && l.key !== 'source')
      ctx.addIssue({ code: 'custom', path: ['match'], message: 'a subnet match needs key "source"' });
  })
  .transform((l): AttributeLevelConfig => {
    const level: AttributeLevelConfig = {
      name: l.name,
      key: l.key,
      limits: l.limits,
      overrides: l.overrides ?? new Map(),
      order: l.order ?? 'last',
      ...(l.match !== undefined && { match: l.match }),
      ...(l.maxValues !== undefined && { maxValues: l.maxValues }),
      ...(l.ban !== undefined && { ban: l.ban }),
    };
    return level;
  });

const attributesSchema = z
  .array(attributeLevelSchema, { error: expected('an array of attribute levels') })
  .superRefine((levels, ctx) => {
    const seen = new Map<string, number>();
    levels.forEach((l, i) => {
      const at = seen.get(l.name);
      if (at !== undefined)
        ctx.addIssue({ code: 'custom', path: [i, 'name'], message: `the name "${l.name}" is taken by [${at}]` });
      else seen.set(l.name, i);
    });
  });

const inboundSchema = z.strictObject(
  {
    global: bucketSchema.optional(),
    accounts: idMapSchema('account', bucketSchema, 'arrays of limits').optional(),
    peers: idMapSchema('peer', bucketSchema, 'arrays of limits').optional(),
    defaultPeer: bucketSchema.optional(),
    attributes: attributesSchema.optional(),
  },
  { error: objectError },
);

const outboundSchema = z.strictObject(
  { carriers: idMapSchema('carrier', carrierSchema, 'carriers', true).optional() },
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
    { error: expected('an object', undefined, true) },
  )
  .transform((c): CallGateConfig => {
    const inbound: CallGateConfig['inbound'] = {
      accounts: c.inbound?.accounts ?? new Map(),
      peers: c.inbound?.peers ?? new Map(),
    };
    if (c.inbound?.attributes !== undefined) inbound.attributes = c.inbound.attributes;
    if (c.inbound?.global !== undefined) inbound.global = c.inbound.global;
    if (c.inbound?.defaultPeer !== undefined) inbound.defaultPeer = c.inbound.defaultPeer;
    return {
      maxCallDurationUs: c.maxCallDuration ?? DEFAULT_MAX_CALL_DURATION_US,
      inbound,
      outbound: { carriers: c.outbound?.carriers ?? new Map() },
    };
  });
