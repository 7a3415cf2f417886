import type { Algorithm, Limit } from '../store/types.js';

/** One outbound carrier after normalization. */
export interface CarrierConfig {
  /** Calls per second, as configured. */
  readonly cps: number;
  /** 1e6 / cps: microseconds between two slots; may be fractional. */
  readonly intervalUs: number;
  /** Longest wait a call accepts on this carrier before moving on, in integer µs (default 0). */
  readonly maxWaitUs: number;
}

/** A validated, normalized limit configuration. Ids are Map keys, so any string works as an id. */
export interface CallgateConfig {
  inbound: {
    /** Platform-wide limits; absent when no global bucket is configured. */
    global?: Limit[];
    accounts: Map<string, Limit[]>;
    peers: Map<string, Limit[]>;
    /** Limits of a peer that has none of its own; absent means such peers are `unknown-peer`. */
    defaultPeer?: Limit[];
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

/** One carrier as written in a configuration file. */
export interface CarrierInput {
  cps: number;
  /** Duration string, default 0. */
  maxWait?: string;
}

type IdMap<T> = Record<string, T> | ReadonlyMap<string, T>;

/** The configuration as written (JSON / YAML / a literal in code); see DESIGN.md "Limit configuration". */
export interface CallgateConfigInput {
  inbound?: {
    global?: LimitInput[];
    accounts?: IdMap<LimitInput[]>;
    peers?: IdMap<LimitInput[]>;
    defaultPeer?: LimitInput[];
  };
  outbound?: {
    carriers?: IdMap<CarrierInput>;
  };
}
