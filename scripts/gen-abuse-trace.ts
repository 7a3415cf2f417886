/**
 * A trace of normal inbound traffic with three attacks mixed in, and the configuration with
 * attribute levels that stops them (docs/attributes.md, "Proof"). Generated on demand:
 *
 *   npx tsx scripts/gen-abuse-trace.ts --out DIR [--seed 1] [--no-attacks]
 *
 * writes DIR/abuse.trace.csv and DIR/abuse.config.json. Normal traffic: 10 peers (p0..p9, one
 * account each, sources 10.0.<i>.<n>) at ~4 calls/s each for 60 s, callers drawn from 100,000
 * numbers, callees national numbers. The attacks:
 * - robocaller: one caller number (+15550001111) from 40 trunks (r0..r39, sources 192.0.2.<i>),
 *   20 calls/s from t = 10 s to 25 s;
 * - IRSF: account `victim` (peer pbx-victim) calls premium numbers (+88234...) at 30 calls/s from
 *   t = 30 s to 40 s;
 * - scanner: source 198.51.100.7 (peer scan) at 500 calls/s, a new caller number every call,
 *   from t = 45 s to 50 s.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { fileURLToPath } from 'node:url';
import { csvLine, expGapUs, formatUs, prng } from './make-fixtures.js';

export const ABUSE_START_US = 1_764_000_000_000_000; // a whole second
const S = 1_000_000;

/** The attacks' windows and identities (for checks). */
export const ATTACKS = {
  robocaller: { caller: '+15550001111', fromUs: 10 * S, toUs: 25 * S, rate: 20 },
  irsf: { account: 'victim', peer: 'pbx-victim', prefix: '+882', fromUs: 30 * S, toUs: 40 * S, rate: 30 },
  scanner: { source: '198.51.100.7', peer: 'scan', fromUs: 45 * S, toUs: 50 * S, rate: 500 },
} as const;

export interface AbuseRow {
  time: number;
  callId: string;
  peer: string;
  account?: string;
  caller: string;
  callee: string;
  source: string;
  durationS: number;
  /** Which attack the row belongs to ('' = normal traffic). */
  attack: '' | keyof typeof ATTACKS;
}

/** The configuration (JSON form): platform, account and peer limits, and three attribute levels. */
export function abuseConfig(): unknown {
  const peers: Record<string, unknown> = {};
  const accounts: Record<string, unknown> = { victim: [{ limit: 50, window: '1s' }] };
  for (let i = 0; i < 10; i++) {
    peers[`p${i}`] = [{ limit: 15, window: '1s' }, { channels: 400 }];
    accounts[`acct${i}`] = [{ limit: 20, window: '1s' }];
  }
  return {
    inbound: {
      global: [{ limit: 1000, window: '1s' }],
      accounts,
      peers,
      defaultPeer: [{ limit: 600, window: '1s' }],
      attributes: [
        {
          name: 'source',
          key: 'source',
          match: { subnet: { v4: 32, v6: 64 } },
          limits: [{ limit: 50, window: '1s' }],
          order: 'first',
          maxValues: 100_000,
          ban: { over: 2, within: '1s', for: '5m' },
        },
        {
          name: 'caller',
          key: 'caller',
          limits: [
            { limit: 2, window: '1s' },
            { limit: 10, window: '1m' },
          ],
          maxValues: 1_000_000,
          ban: { over: 3, within: '10s', for: '10m' },
        },
        {
          name: 'premium',
          key: 'callee',
          match: { prefixes: ['+882', '+881', '+979', '+3364'] },
          limits: [
            { limit: 2, window: '1s' },
            { limit: 10, window: '10m' },
          ],
        },
      ],
    },
  };
}

/** The rows, in time order (normal traffic, then attacks, merged). */
export function abuseRows(opts: { seed?: number; attacks?: boolean } = {}): AbuseRow[] {
  const rand = prng(opts.seed ?? 1);
  const rows: AbuseRow[] = [];
  let n = 0;
  const digits = (k: number) => String(Math.floor(rand() * 10 ** k)).padStart(k, '0');
  // normal traffic: each peer a Poisson stream; drawn first so that attacks do not change it
  for (let i = 0; i < 10; i++) {
    for (let t = expGapUs(rand, 4); t < 60 * S; t += expGapUs(rand, 4)) {
      rows.push({
        time: ABUSE_START_US + t,
        callId: `n${++n}`,
        peer: `p${i}`,
        account: `acct${i}`,
        caller: `+1555${String(Math.floor(rand() * 100_000)).padStart(7, '0')}`,
        callee: `+1${digits(10)}`,
        source: `10.0.${i}.${1 + Math.floor(rand() * 4)}`,
        durationS: Math.round((20 + rand() * 160) * 1000) / 1000,
        attack: '',
      });
    }
  }
  if (opts.attacks !== false) {
    const a = ATTACKS;
    let k = 0;
    for (let t = a.robocaller.fromUs; t < a.robocaller.toUs; t += expGapUs(rand, a.robocaller.rate)) {
      const trunk = k++ % 40;
      rows.push({
        time: ABUSE_START_US + t,
        callId: `r${k}`,
        peer: `r${trunk}`,
        caller: a.robocaller.caller,
        callee: `+1${digits(10)}`,
        source: `192.0.2.${trunk + 1}`,
        durationS: 30,
        attack: 'robocaller',
      });
    }
    k = 0;
    for (let t = a.irsf.fromUs; t < a.irsf.toUs; t += expGapUs(rand, a.irsf.rate)) {
      rows.push({
        time: ABUSE_START_US + t,
        callId: `i${++k}`,
        peer: a.irsf.peer,
        account: a.irsf.account,
        caller: `+4420${digits(7)}`,
        callee: `${a.irsf.prefix}34${digits(6)}`,
        source: '203.0.113.9',
        durationS: 600,
        attack: 'irsf',
      });
    }
    k = 0;
    for (let t = a.scanner.fromUs; t < a.scanner.toUs; t += expGapUs(rand, a.scanner.rate)) {
      rows.push({
        time: ABUSE_START_US + t,
        callId: `s${++k}`,
        peer: a.scanner.peer,
        caller: `${100 + k}`,
        callee: `${1000 + (k % 9000)}`,
        source: a.scanner.source,
        durationS: 0,
        attack: 'scanner',
      });
    }
  }
  return rows
    .map((r, i) => ({ r, i }))
    .sort((x, y) => x.r.time - y.r.time || x.i - y.i)
    .map((x) => x.r);
}

export const ABUSE_HEADER = 'time,call_id,direction,peer,account,caller,callee,source,duration\n';

export function abuseCsv(rows: readonly AbuseRow[]): string {
  let out = ABUSE_HEADER;
  for (const r of rows) {
    out += csvLine([
      formatUs(r.time, 'epoch'),
      r.callId,
      'in',
      r.peer,
      r.account ?? '',
      r.caller,
      r.callee,
      r.source,
      String(r.durationS),
    ]);
  }
  return out;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const { values } = parseArgs({
    options: { out: { type: 'string' }, seed: { type: 'string' }, 'no-attacks': { type: 'boolean' } },
  });
  const dir = values.out ?? '.';
  mkdirSync(dir, { recursive: true });
  const rows = abuseRows({ seed: Number(values.seed ?? 1), attacks: !values['no-attacks'] });
  writeFileSync(join(dir, 'abuse.trace.csv'), abuseCsv(rows));
  writeFileSync(join(dir, 'abuse.config.json'), `${JSON.stringify(abuseConfig(), null, 2)}\n`);
  console.log(`${rows.length} calls in ${join(dir, 'abuse.trace.csv')}`);
}
