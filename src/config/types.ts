import type { Algorithm, Limit } from '../store/types.js';

/** One outbound carrier after normalization. */
export interface CarrierConfig {
  /** Calls per second, as configured. */
  readonly cps: number;
  /** 1e6 / cps: microseconds between two slots; may be fractional. */
  readonly intervalUs: number;
  /** Longest wait a call accepts on this carrier before moving on, in integer µs (default 0). */
  readonly maxWaitUs: number;
  /** Calls in progress on this carrier at once, at most; absent: no channel limit. */
  readonly channels?: number;
}

/** One bucket (the platform, an account, a peer) after normalization: its rate limits and channel limit. */
export interface BucketConfig {
  readonly limits: Limit[];
  /** Calls in progress at once, at most; absent: no channel limit. */
  readonly channels?: number;
}

/** A validated, normalized limit configuration. Ids are Map keys, so any string works as an id. */
export interface CallGateConfig {
  /** How long a call whose end is never reported holds its channels, µs (default 4 h). */
  maxCallDurationUs: number;
  inbound: {
    /** Platform-wide limits; absent when no global bucket is configured. */
    global?: BucketConfig;
    accounts: Map<string, BucketConfig>;
    peers: Map<string, BucketConfig>;
    /** Limits of a peer that has none of its own; absent means such peers are `unknown-peer`. */
    defaultPeer?: BucketConfig;
    /** Attribute levels (caller, callee prefix, source address, a named field), in configuration order. */
    attributes?: readonly AttributeLevelConfig[];
  };
  outbound: {
    carriers: Map<string, CarrierConfig>;
  };
}

/** Which attribute of a call keys an attribute level: a built-in one, or a field the caller passes. */
export type AttributeKey = 'caller' | 'callee' | 'source' | { readonly field: string };

/**
 * How a call's attribute becomes the level's value: the longest configured prefix it starts with
 * (a call matching none skips the level), its first N digits, or its source address's subnet.
 */
export type AttributeMatch =
  | { readonly prefixes: readonly string[] }
  | { readonly digits: number }
  | { readonly subnet: { readonly v4: number; readonly v6: number } };

/** Where an attribute level sits in the check order (global, account, peer). */
export type AttributeOrder = 'first' | 'after-global' | 'after-account' | 'last';

/**
 * A value refused over `over` x its tightest limit within a span is banned for a cooling-off
 * time: `threshold` (refusals by its rate limits within `spanUs`, a fixed window) and `forUs`.
 */
export interface BanConfig {
  readonly over: number;
  readonly spanUs: number;
  readonly forUs: number;
}

/** One attribute level after normalization (see docs/attributes.md). */
export interface AttributeLevelConfig {
  /** The level's name: `limited_by` is `<name>:<value>`. */
  readonly name: string;
  readonly key: AttributeKey;
  readonly match?: AttributeMatch;
  /** The template every value gets. */
  readonly limits: BucketConfig;
  /** Limits of particular values (the value after match), instead of the template. */
  readonly overrides: ReadonlyMap<string, BucketConfig>;
  readonly order: AttributeOrder;
  /** Values outside `overrides` share maxValues buckets (by a hash of the value); absent: one bucket per value. */
  readonly maxValues?: number;
  readonly ban?: BanConfig;
}

/** One attribute level as written. */
export interface AttributeLevelInput {
  name: string;
  key: 'caller' | 'callee' | 'source' | { field: string };
  match?: { prefixes: string[] } | { digits: number } | { subnet: number | { v4?: number; v6?: number } };
  limits: BucketEntryInput[];
  overrides?: IdMap<BucketEntryInput[]>;
  order?: AttributeOrder;
  maxValues?: number;
  ban?: { over: number; within: string; for: string };
}

/** One limit as written in a configuration file. */
export interface LimitInput {
  limit: number;
  /** ISO-8601 (`PT1S`, `PT0.5S`) or `500ms` / `1s` / `1m` / `1h`; strings only. */
  window: string;
  algorithm?: Algorithm;
}

/** A bucket's channel limit as written: at most N of its calls in progress at once. */
export interface ChannelsInput {
  channels: number;
}

/** One entry of a bucket's list: a rate limit or (at most one per bucket) its channel limit. */
export type BucketEntryInput = LimitInput | ChannelsInput;

/** One carrier as written in a configuration file. */
export interface CarrierInput {
  cps: number;
  /** Duration string, default 0. */
  maxWait?: string;
  /** Calls in progress at once on this carrier, at most. */
  channels?: number;
}

/** Ids to entries as written: a plain object (JSON, YAML) or a Map (in code, any string an id). */
export type IdMap<T> = Record<string, T> | ReadonlyMap<string, T>;

/** The configuration as written (JSON / YAML / a literal in code); see DESIGN.md "Limit configuration". */
export interface CallGateConfigInput {
  /** Where editors find the file's JSON Schema (the package's schema/limits.schema.json); ignored. */
  $schema?: string;
  /** Duration string, default `PT4H`. */
  maxCallDuration?: string;
  inbound?: {
    global?: BucketEntryInput[];
    accounts?: IdMap<BucketEntryInput[]>;
    peers?: IdMap<BucketEntryInput[]>;
    defaultPeer?: BucketEntryInput[];
    attributes?: AttributeLevelInput[];
  };
  outbound?: {
    carriers?: IdMap<CarrierInput>;
  };
}
