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
  };
  outbound: {
    carriers: Map<string, CarrierConfig>;
  };
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
  };
  outbound?: {
    carriers?: IdMap<CarrierInput>;
  };
}
