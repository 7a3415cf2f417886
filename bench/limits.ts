/**
 * The limits the benchmarks decide with: one per-peer limit (1 level), or global + account + peer
 * with two windows each, with channels, or with two attribute levels on top. Shared by
 * bench/bench.ts and bench/redis-instructions.ts, so that both measure the same decisions.
 */
import type { Limit } from '../src/store/types.js';

export const W1 = 1_000_000;
export const W10 = 10_000_000;
export const sl = (limit: number, windowUs: number): Limit => ({ limit, windowUs, algorithm: 'sliding-log' });
export const PEER_1: Limit[] = [sl(40, W1)];
export const GLOBAL_3: Limit[] = [sl(15_000, W1), sl(100_000, W10)];
export const ACCOUNT_3: Limit[] = [sl(1_500, W1), sl(10_000, W10)];
export const PEER_3: Limit[] = [sl(40, W1), sl(250, W10)];
export const ACCOUNTS = 20;

export const peerName = (p: number) => `peer${p}`;
export const accountName = (p: number) => `acct${p % ACCOUNTS}`;
export const windowText = (us: number) => `${us / 1000}ms`;
export const limitInput = (l: Limit) => ({ limit: l.limit, window: windowText(l.windowUs), algorithm: l.algorithm });

export const CONFIG_1 = { inbound: { defaultPeer: PEER_1.map(limitInput) } };
export const CONFIG_3 = {
  inbound: {
    global: GLOBAL_3.map(limitInput),
    accounts: Object.fromEntries(Array.from({ length: ACCOUNTS }, (_, a) => [`acct${a}`, ACCOUNT_3.map(limitInput)])),
    defaultPeer: PEER_3.map(limitInput),
  },
};
/**
 * The same three levels, each with a channel limit too; every admitted call holds its channels
 * for HOLD_US (maxCallDuration: the bench never hangs up). A busy peer admits 40/s for 2 s, so
 * its 30 channels bind; the account's and the global ones are there to be checked and recorded.
 */
export const CHANNELS_3 = { global: 100_000, account: 5_000, peer: 30 };
export const HOLD_US = 2_000_000;
export const CONFIG_3CH = {
  maxCallDuration: 'PT2S',
  inbound: {
    global: [...CONFIG_3.inbound.global, { channels: CHANNELS_3.global }],
    accounts: Object.fromEntries(
      Object.entries(CONFIG_3.inbound.accounts).map(([a, l]) => [a, [...l, { channels: CHANNELS_3.account }]]),
    ),
    defaultPeer: [...CONFIG_3.inbound.defaultPeer, { channels: CHANNELS_3.peer }],
  },
};

/**
 * The three levels and two attribute levels on top (docs/attributes.md): a caller number shared
 * by a few peers (300 numbers over the peers) limited to 30/1s, and the /24 of a source address
 * (50 subnets) limited to 400/1s; no ban, so that the row is the cost of two more buckets.
 */
export const CALLER_1: Limit[] = [sl(30, W1)];
export const SOURCE_1: Limit[] = [sl(400, W1)];
export const CONFIG_3A = {
  inbound: {
    ...CONFIG_3.inbound,
    attributes: [
      { name: 'caller', key: 'caller', limits: CALLER_1.map(limitInput) },
      { name: 'source', key: 'source', match: { subnet: 24 }, limits: SOURCE_1.map(limitInput) },
    ],
  },
};
export const callerOf = (p: number) => `+1555${String(p % 300).padStart(7, '0')}`;
export const sourceOf = (p: number) => `10.0.${p % 50}.${1 + (p % 7)}`;
