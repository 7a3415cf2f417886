/**
 * Generator of large mixed call traces (inbound and outbound, many peers and accounts, odd ids,
 * every time format), for load tests and replay benchmarks. Not committed: generated on demand.
 *
 *   npx tsx scripts/gen-trace.ts --calls 100000 --seed 1 --out .tmp/big.trace.csv
 *     [--config FILE]   (default: FILE with .trace.csv → .config.json, else FILE.config.json)
 *     [--rate 500]      (mean calls per second)
 *     [--unsorted]      (swap neighbouring rows now and then: the replay then sorts)
 *
 * generateTrace(opts) yields the CSV text line by line (header first), in constant memory;
 * generateConfig(opts) gives the matching configuration (JSON form of the contract): rate and
 * channel limits at every level and on carriers. Calls last ~2 s on average (seconds with a
 * fraction, some ISO-8601, some never reported), and now and then an inbound call's id is given
 * again 50 ms later (an INVITE recorded twice: a replay decides it as a call of its own).
 */
import { createWriteStream, writeFileSync } from 'node:fs';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { parseArgs } from 'node:util';
import { fileURLToPath } from 'node:url';
import { csvLine, expGapUs, formatUs, prng, type TimeStyle } from './make-fixtures.js';

export interface GenerateOptions {
  /** Number of data rows. */
  calls: number;
  /** PRNG seed (same seed, same bytes). Default 1. */
  seed?: number;
  /** First time, µs since the epoch. Default 2024-03-05T00:00:00Z. */
  startUs?: number;
  /** Mean calls per second (Poisson). Default 500. */
  rate?: number;
  /** Share of outbound rows, 0..1. Default 0.3. */
  outShare?: number;
  /** Number of inbound peers. Default 200. */
  peers?: number;
  /** When true, about 1 row in 50 is swapped with the next one (times then go backwards). */
  unsorted?: boolean;
}

const PEER_SHAPES = [
  (i: number) => `peer-${i}`,
  (i: number) => `{tenant:${i}} trunk`,
  (i: number) => `sip:gw ${i}, east`,
  (i: number) => `pbx "${i}"`,
  (i: number) => `p#${i}`,
];

/** Peer id number i (0-based): mostly plain, some with `{`, `}`, `:`, spaces, commas, quotes, `#`. */
export function peerId(i: number): string {
  return PEER_SHAPES[i % 10 < 5 ? 0 : i % 5]!(i);
}
export const accountId = (i: number): string => (i % 4 === 3 ? `acct {${i}}: odd` : `acct-${i}`);
export const CARRIERS = ['A', 'B', 'C', 'D', 'E', 'F'] as const;

/** The configuration that goes with generateTrace(opts): every limit kind, three algorithms. */
export function generateConfig(opts: Pick<GenerateOptions, 'peers' | 'rate'> = {}): unknown {
  const peers = opts.peers ?? 200;
  const rate = opts.rate ?? 500;
  const perPeer = (rate * 0.7) / peers;
  const peerLimits: Record<string, unknown> = {};
  const algos = ['sliding-log', 'fixed-window', 'sliding-window'];
  // Every third peer has its own limits (an algorithm each); the others fall back on defaultPeer.
  // Peers are skewed (low numbers busier), so busy peers and the global limit refuse calls.
  for (let i = 0; i < peers; i += 3) {
    peerLimits[peerId(i)] = [
      { limit: Math.max(1, Math.round(perPeer * 2)), window: 'PT1S', algorithm: algos[i % 3] },
      { limit: Math.max(2, Math.round(perPeer * 50)), window: 'PT1M' },
    ];
  }
  // Calls in progress at a level ~ its admitted rate x 2 s (the mean duration): channel limits a
  // little below that bite now and then; every sixth peer with limits has a channel limit too.
  for (let i = 0; i < peers; i += 6)
    (peerLimits[peerId(i)] as unknown[]).push({ channels: Math.max(1, Math.round(perPeer * 2)) });
  const accounts: Record<string, unknown> = {};
  for (let i = 0; i < 20; i += 2) {
    accounts[accountId(i)] = [{ limit: Math.max(1, Math.round((rate * 0.7) / 20)), window: 'PT1S' }];
    if (i % 4 === 0)
      (accounts[accountId(i)] as unknown[]).push({ channels: Math.max(1, Math.round((rate * 0.7) / 20)) });
  }
  return {
    maxCallDuration: 'PT30S',
    inbound: {
      global: [{ limit: Math.round(rate * 0.45), window: 'PT1S' }, { channels: Math.round(rate * 0.7) }],
      accounts,
      peers: peerLimits,
      defaultPeer: [
        { limit: Math.max(1, Math.round(perPeer * 1.5)), window: 'PT1S', algorithm: 'sliding-window' },
        { channels: 3 },
      ],
    },
    outbound: {
      carriers: {
        A: {
          cps: Math.max(1, Math.round(rate * 0.1)),
          maxWait: 'PT1S',
          channels: Math.max(1, Math.round(rate * 0.15)),
        },
        B: { cps: Math.max(0.5, rate * 0.05) + 0.5, maxWait: '500ms' },
        C: {
          cps: Math.max(1, Math.round(rate * 0.08)),
          maxWait: 'PT2S',
          channels: Math.max(1, Math.round(rate * 0.1)),
        },
        D: { cps: 2.5, channels: 3 },
        E: { cps: 0.5, maxWait: 'PT4S' },
        // F is not configured: routes naming it skip it
      },
    },
  };
}

/** A call's duration cell: mostly seconds with a fraction (mean ~2 s), some ISO-8601, some empty. */
function durationCell(rand: () => number): string {
  const r = rand();
  const us = Math.round(expGapUs(rand, 0.5)); // exponential, mean 2 s
  if (r < 0.05) return ''; // never reported: held maxCallDuration
  if (r < 0.15) return `PT${Math.floor(us / 1e6)}.${String(us % 1e6).padStart(6, '0')}S`;
  if (r < 0.17) return '0';
  return `${Math.floor(us / 1e6)}.${
    String(us % 1e6)
      .padStart(6, '0')
      .replace(/0+$/, '') || '0'
  }`;
}

/** The trace as CSV lines (each ending in `\n`), header first; times never decrease unless `unsorted`. */
export async function* generateTrace(opts: GenerateOptions): AsyncGenerator<string> {
  const rand = prng(opts.seed ?? 1);
  const rate = opts.rate ?? 500;
  const outShare = opts.outShare ?? 0.3;
  const peers = opts.peers ?? 200;
  let t = opts.startUs ?? Date.UTC(2024, 2, 5) * 1000;
  const styles: TimeStyle[] = ['Z', 'epoch', '+02:00', 'epoch', '-05:00', '+0200'];
  yield 'time,call_id,direction,peer,account,route,duration\n';
  let held: string | undefined;
  // the latest inbound call, to offer it again now and then (a retransmission)
  let lastIn: { id: string; peer: string; account: string; duration: string } | undefined;
  for (let n = 1; n <= opts.calls; n++) {
    // Every 1000th gap is 0: equal times.
    t += n % 1000 === 0 ? 0 : expGapUs(rand, rate);
    const style = styles[Math.floor(rand() * styles.length)]!;
    const time = formatUs(t, style);
    let line: string;
    if (rand() < outShare) {
      const k = 1 + Math.floor(rand() * 3);
      const route: string[] = [];
      for (let j = 0; j < k; j++) {
        const c = CARRIERS[Math.floor(rand() * CARRIERS.length)]!;
        if (!route.includes(c)) route.push(c);
      }
      line = csvLine([time, `g${n}`, 'out', '', '', route.join('|'), durationCell(rand)]);
    } else if (lastIn !== undefined && n % 97 === 0) {
      // the last inbound call's id again, 50 ms later (an INVITE recorded twice)
      t += 50_000;
      line = csvLine([formatUs(t, style), lastIn.id, 'in', lastIn.peer, lastIn.account, '', lastIn.duration]);
    } else {
      // Skewed: low peer numbers are busier.
      const p = Math.floor(peers * rand() * rand());
      const account = p % 2 === 0 ? accountId(p % 20) : '';
      lastIn = { id: `g${n}`, peer: peerId(p), account, duration: durationCell(rand) };
      line = csvLine([time, lastIn.id, 'in', lastIn.peer, lastIn.account, '', lastIn.duration]);
    }
    if (opts.unsorted) {
      if (held !== undefined) {
        yield line;
        yield held;
        held = undefined;
        continue;
      }
      if (rand() < 0.02) {
        held = line;
        continue;
      }
    }
    if (n % 5000 === 0) yield `# checkpoint ${n}\n`;
    yield line;
  }
  if (held !== undefined) yield held;
}

/** Writes the trace (streaming) and its config. */
export async function writeTrace(out: string, configPath: string, opts: GenerateOptions): Promise<void> {
  await pipeline(Readable.from(generateTrace(opts)), createWriteStream(out));
  writeFileSync(configPath, `${JSON.stringify(generateConfig(opts), null, 2)}\n`);
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      calls: { type: 'string', default: '100000' },
      seed: { type: 'string', default: '1' },
      rate: { type: 'string', default: '500' },
      out: { type: 'string' },
      config: { type: 'string' },
      unsorted: { type: 'boolean', default: false },
    },
  });
  if (values.out === undefined) throw new Error('--out FILE is required');
  const out = values.out;
  const config =
    values.config ?? (out.endsWith('.trace.csv') ? out.replace(/\.trace\.csv$/, '.config.json') : `${out}.config.json`);
  const opts: GenerateOptions = {
    calls: Number(values.calls),
    seed: Number(values.seed),
    rate: Number(values.rate),
    unsorted: values.unsorted,
  };
  await writeTrace(out, config, opts);
  console.log(`${out}: ${opts.calls} calls; config ${config}`);
}

if (process.argv[1] !== undefined && fileURLToPath(import.meta.url) === process.argv[1]) {
  main().catch((err: unknown) => {
    console.error(err);
    process.exit(1);
  });
}
