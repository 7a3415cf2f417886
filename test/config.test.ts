import { expect } from 'chai';
import { execFileSync, spawn } from 'node:child_process';
import { PIPE_WAIT_MS } from '../src/read-user-file.js';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CallGateError } from '../src/errors/call-gate-error.js';
import { SHOWN_PROBLEMS, capProblems } from '../src/problem-list.js';
import { MAX_ALIAS_NODES } from '../src/config/yaml.js';
import {
  ConfigError,
  diffConfig,
  formatDuration,
  loadConfig,
  loadConfigFile,
  parseConfig,
  parseDurationUs,
  type CallGateConfig,
} from '../src/config/index.js';

const CONTRACT_EXAMPLE = {
  inbound: {
    global: [{ limit: 100, window: 'PT1S' }],
    accounts: { acme: [{ limit: 20, window: 'PT1S' }] },
    peers: {
      peer45: [
        { limit: 10, window: 'PT1S' },
        { limit: 300, window: 'PT1M' },
      ],
    },
    defaultPeer: [{ limit: 5, window: '1s' }],
  },
  outbound: {
    carriers: { A: { cps: 4, maxWait: 'PT1S' }, B: { cps: 2.5, maxWait: '500ms' } },
  },
};

const CONTRACT_YAML = `# the contract example, in YAML
inbound:
  global:
    - { limit: 100, window: PT1S }
  accounts:
    acme:
      - limit: 20
        window: PT1S
  peers:
    peer45:
      - { limit: 10, window: PT1S }
      - { limit: 300, window: PT1M }
  defaultPeer:
    - { limit: 5, window: 1s }
outbound:
  carriers:
    A: { cps: 4, maxWait: PT1S }
    B: { cps: 2.5, maxWait: 500ms }
`;

const sec = (limit: number, windowUs = 1_000_000) => ({ limit, windowUs, algorithm: 'sliding-log' as const });

const EXPECTED: CallGateConfig = {
  maxCallDurationUs: 4 * 3600 * 1_000_000,
  inbound: {
    global: { limits: [sec(100)] },
    accounts: new Map([['acme', { limits: [sec(20)] }]]),
    peers: new Map([['peer45', { limits: [sec(10), sec(300, 60_000_000)] }]]),
    defaultPeer: { limits: [sec(5)] },
  },
  outbound: {
    carriers: new Map([
      ['A', { cps: 4, intervalUs: 250_000, maxWaitUs: 1_000_000 }],
      ['B', { cps: 2.5, intervalUs: 400_000, maxWaitUs: 500_000 }],
    ]),
  },
};

/** The problems of the ConfigError that `fn` throws. */
function problemsOf(fn: () => unknown): readonly string[] {
  try {
    fn();
  } catch (e) {
    expect(e).to.be.instanceOf(ConfigError);
    return (e as ConfigError).problems;
  }
  expect.fail('expected a ConfigError');
}

async function problemsOfAsync(p: Promise<unknown>): Promise<readonly string[]> {
  try {
    await p;
  } catch (e) {
    expect(e).to.be.instanceOf(ConfigError);
    return (e as ConfigError).problems;
  }
  expect.fail('expected a ConfigError');
}

/** Config with one peer `p` whose single limit entry is `entry`. */
const peerEntry = (entry: unknown) => ({ inbound: { peers: { p: [entry] } } });

describe('config', () => {
  describe('parseDurationUs', () => {
    const valid: [string, number][] = [
      ['PT1S', 1_000_000],
      ['PT0.5S', 500_000],
      ['PT0,5S', 500_000],
      ['PT30M', 1_800_000_000],
      ['PT1M', 60_000_000],
      ['PT1H', 3_600_000_000],
      ['PT0.1H', 360_000_000],
      ['PT1.5M', 90_000_000],
      // a decimal comma on any component, as a dot
      ['PT1,5M', 90_000_000],
      ['PT0,1H', 360_000_000],
      ['P0,5D', 43_200_000_000],
      ['P1DT0,5H', 88_200_000_000],
      ['P1D', 86_400_000_000],
      ['P1DT1H', 90_000_000_000],
      ['P1W', 604_800_000_000],
      ['PT0.000001S', 1],
      ['PT0.0005S', 500],
      ['PT0S', 0],
      ['500ms', 500_000],
      ['1s', 1_000_000],
      ['1.5s', 1_500_000],
      ['0.5s', 500_000],
      ['1m', 60_000_000],
      ['1h', 3_600_000_000],
      ['0.001ms', 1],
      ['0s', 0],
    ];
    for (const [text, us] of valid) {
      it(`${text} → ${us}`, () => expect(parseDurationUs(text)).to.equal(us));
    }

    const invalid = [
      'abc',
      '',
      '1',
      '1000',
      '1 s',
      ' 1s',
      '1s ',
      '1S',
      '1sec',
      '1d',
      '1us',
      '.5s',
      '1.s',
      '-1s',
      '+1s',
      '1e3ms',
      'P',
      'PT',
      'pt1s',
      'P1Y',
      'P1M',
      'P1Y2M',
      '-PT1S',
      'PT-1S',
      'T1S',
      'PT0.0000015S',
      'PT1,,5S',
      'P1DT',
      'PT,5M',
      'PT1,5.5M',
      '0.0005ms',
      '1.0000001s', // finer than a microsecond
      'PT99999999999999999999H',
      '9999999999999h', // beyond Number.MAX_SAFE_INTEGER µs
    ];
    for (const text of invalid) {
      it(`rejects ${JSON.stringify(text)}`, () => expect(parseDurationUs(text)).to.equal(undefined));
    }

    it('is exact where doubles are not (0.1 h, 1.1 s)', () => {
      expect(parseDurationUs('PT0.1H')).to.equal(360_000_000);
      expect(parseDurationUs('1.1s')).to.equal(1_100_000);
      expect(parseDurationUs('PT1.1S')).to.equal(1_100_000);
    });
  });

  describe('formatDuration', () => {
    const cases: [number, string][] = [
      [0, '0s'],
      [1, '0.001ms'],
      [1_500, '1.5ms'],
      [500_000, '500ms'],
      [1_000_000, '1s'],
      [1_500_000, '1.5s'],
      [90_000_000, '90s'],
      [60_000_000, '1m'],
      [1_800_000_000, '30m'],
      [3_600_000_000, '1h'],
      [86_400_000_000, '24h'],
    ];
    for (const [us, text] of cases) {
      it(`${us} → ${text}, and back`, () => {
        expect(formatDuration(us)).to.equal(text);
        expect(parseDurationUs(text)).to.equal(us);
      });
    }
    it('shows fractional intervals', () => expect(formatDuration(1e6 / 3)).to.equal('333.333333ms'));
  });

  describe('parseConfig', () => {
    it('normalizes the contract example exactly', () => {
      expect(parseConfig(CONTRACT_EXAMPLE)).to.deep.equal(EXPECTED);
    });

    it('accepts an empty configuration (every part optional)', () => {
      expect(parseConfig({})).to.deep.equal({
        maxCallDurationUs: 4 * 3600 * 1_000_000,
        inbound: { accounts: new Map(), peers: new Map() },
        outbound: { carriers: new Map() },
      });
      expect(parseConfig({ inbound: {}, outbound: {} })).to.deep.equal(parseConfig({}));
      expect(parseConfig({}).inbound).to.not.have.property('global');
      expect(parseConfig({}).inbound).to.not.have.property('defaultPeer');
    });

    it('defaults maxWait to 0 and algorithm to sliding-log; keeps a named algorithm', () => {
      const c = parseConfig({
        inbound: {
          global: [
            { limit: 1, window: '1s' },
            { limit: 2, window: '1m', algorithm: 'fixed-window' },
            { limit: 3, window: '1h', algorithm: 'sliding-window' },
          ],
        },
        outbound: { carriers: { X: { cps: 0.5 } } },
      });
      expect(c.inbound.global).to.deep.equal({
        limits: [
          { limit: 1, windowUs: 1_000_000, algorithm: 'sliding-log' },
          { limit: 2, windowUs: 60_000_000, algorithm: 'fixed-window' },
          { limit: 3, windowUs: 3_600_000_000, algorithm: 'sliding-window' },
        ],
      });
      expect(c.outbound.carriers.get('X')).to.deep.equal({ cps: 0.5, intervalUs: 2_000_000, maxWaitUs: 0 });
    });

    it('keeps a fractional interval (cps 3 → 333333.33… µs) and accepts maxWait 0', () => {
      const c = parseConfig({ outbound: { carriers: { X: { cps: 3, maxWait: 'PT0S' } } } });
      expect(c.outbound.carriers.get('X')).to.deep.equal({ cps: 3, intervalUs: 1e6 / 3, maxWaitUs: 0 });
    });

    it('allows empty limit arrays (a known peer with no limit)', () => {
      const c = parseConfig({ inbound: { global: [], peers: { open: [] }, defaultPeer: [] } });
      expect(c.inbound.global).to.deep.equal({ limits: [] });
      expect(c.inbound.peers.get('open')).to.deep.equal({ limits: [] });
      expect(c.inbound.defaultPeer).to.deep.equal({ limits: [] });
    });

    it('takes __proto__, constructor and other awkward ids as plain ids', () => {
      const json = `{
        "inbound": {
          "accounts": { "constructor": [{ "limit": 2, "window": "1s" }] },
          "peers": {
            "__proto__": [{ "limit": 1, "window": "1s" }],
            "hasOwnProperty": [],
            "a b": [], "{tag}": [], "x:y": [], "45": []
          }
        },
        "outbound": { "carriers": { "__proto__": { "cps": 1 }, "toString": { "cps": 2 } } }
      }`;
      const c = parseConfig(JSON.parse(json));
      expect([...c.inbound.peers.keys()]).to.have.members(['__proto__', 'hasOwnProperty', 'a b', '{tag}', 'x:y', '45']);
      expect(c.inbound.peers.get('__proto__')).to.deep.equal({ limits: [sec(1)] });
      expect(c.inbound.accounts.get('constructor')).to.deep.equal({ limits: [sec(2)] });
      expect(c.outbound.carriers.get('__proto__')).to.deep.equal({ cps: 1, intervalUs: 1_000_000, maxWaitUs: 0 });
      expect([...c.outbound.carriers.keys()]).to.deep.equal(['__proto__', 'toString']);
      expect(c.inbound.peers.has('constructor')).to.equal(false);
    });

    it('also takes Maps for id maps in programmatic configs', () => {
      const c = parseConfig({ inbound: { peers: new Map([['x y', [{ limit: 1, window: '1s' }]]]) } });
      expect(c.inbound.peers).to.deep.equal(new Map([['x y', { limits: [sec(1)] }]]));
    });

    it('reports a bad limit entry with its exact path and message', () => {
      const cases: [unknown, string][] = [
        [{ limit: 0, window: '1s' }, 'inbound.peers.p[0].limit: expected a positive integer, got 0'],
        [{ limit: -3, window: '1s' }, 'inbound.peers.p[0].limit: expected a positive integer, got -3'],
        [{ limit: 1.5, window: '1s' }, 'inbound.peers.p[0].limit: expected a positive integer, got 1.5'],
        [{ limit: '10', window: '1s' }, 'inbound.peers.p[0].limit: expected a positive integer, got "10"'],
        [
          { limit: 1e20, window: '1s' },
          'inbound.peers.p[0].limit: expected a positive integer, got 100000000000000000000 (above 2^53 - 1, the largest whole number read exactly)',
        ],
        // 9007199254740993 in the file reads 9007199254740992: the message says why
        [
          { limit: 2 ** 53, window: '1s' },
          'inbound.peers.p[0].limit: expected a positive integer, got 9007199254740992 (above 2^53 - 1, the largest whole number read exactly)',
        ],

        [{ window: '1s' }, 'inbound.peers.p[0].limit: missing (expected a positive integer)'],
        [{ limit: 1 }, 'inbound.peers.p[0].window: missing (expected a positive duration)'],
        [{ limit: 1, window: 'abc' }, 'inbound.peers.p[0].window: expected a positive duration, got "abc"'],
        [{ limit: 1, window: '0s' }, 'inbound.peers.p[0].window: expected a positive duration, got "0s"'],
        [{ limit: 1, window: 'PT0S' }, 'inbound.peers.p[0].window: expected a positive duration, got "PT0S"'],
        [{ limit: 1, window: '-PT1S' }, 'inbound.peers.p[0].window: expected a positive duration, got "-PT1S"'],
        [
          { limit: 1, window: 1000 },
          'inbound.peers.p[0].window: expected a positive duration, got 1000 (durations are strings such as "PT1S" or "500ms", not numbers)',
        ],
        [
          { limit: 1, window: null },
          'inbound.peers.p[0].window: expected a positive duration, got null (an empty value: in YAML, a key with nothing after it)',
        ],
        [
          { limit: 1, window: 'P1M' },
          'inbound.peers.p[0].window: expected a positive duration, got "P1M" (years and months have no fixed length)',
        ],
        [
          { limit: 1, window: 'PT0.0000001S' },
          'inbound.peers.p[0].window: expected a positive duration, got "PT0.0000001S" (not a whole number of microseconds)',
        ],
        [
          { limit: 1, window: 'PT99999999999999999999H' },
          'inbound.peers.p[0].window: expected a positive duration, got "PT99999999999999999999H" (too long)',
        ],
        [
          { limit: 1, window: '1s', algorithm: 'token-bucket' },
          'inbound.peers.p[0].algorithm: expected "sliding-log", "sliding-window" or "fixed-window", got "token-bucket"',
        ],
        [{ limit: 1, window: '1s', limt: 2 }, 'inbound.peers.p[0].limt: unknown field'],
        [7, 'inbound.peers.p[0]: expected a limit such as {"limit": 10, "window": "PT1S"}, got 7'],
        [[], 'inbound.peers.p[0]: expected a limit such as {"limit": 10, "window": "PT1S"}, got an array'],
      ];
      for (const [entry, line] of cases) {
        expect(
          problemsOf(() => parseConfig(peerEntry(entry))),
          JSON.stringify(entry),
        ).to.deep.equal([line]);
      }
    });

    it('reports a bad carrier with its exact path and message', () => {
      const cases: [unknown, string][] = [
        [{ cps: 0 }, 'outbound.carriers.A.cps: expected a positive finite number, got 0'],
        [{ cps: -1 }, 'outbound.carriers.A.cps: expected a positive finite number, got -1'],
        [{ cps: '4' }, 'outbound.carriers.A.cps: expected a positive finite number, got "4"'],
        [{ cps: Infinity }, 'outbound.carriers.A.cps: expected a positive finite number, got Infinity'],
        [{ cps: NaN }, 'outbound.carriers.A.cps: expected a positive finite number, got NaN'],
        [
          { cps: 1e-320 },
          'outbound.carriers.A.cps: expected a positive finite number, got 1e-320 (too small: at least 1e-9, a call every 31.7 years)',
        ],
        // slots count a cps in billionths: below one it counted as 0 (a memory replay spun, Redis failed)
        [
          { cps: 2e-10 },
          'outbound.carriers.A.cps: expected a positive finite number, got 2e-10 (too small: at least 1e-9, a call every 31.7 years)',
        ],
        // counted as p / q with p under 2^50: 1e21 reached Redis as "1e+21/1", which no script read
        [
          { cps: 1e15 },
          'outbound.carriers.A.cps: expected a positive finite number, got 1000000000000000 (too large: below 1e15)',
        ],
        [
          { cps: 1e21 },
          'outbound.carriers.A.cps: expected a positive finite number, got 1e+21 (too large: below 1e15)',
        ],
        // past 2^51 µs a wait as a double steps in half-µs: no longer compared with maxWait exactly
        [
          { cps: 1, maxWait: 'PT2251799813.685248S' },
          'outbound.carriers.A.maxWait: expected a duration under 2^51 µs (about 71 years), got 2251799813685248 µs',
        ],
        [{ maxWait: '1s' }, 'outbound.carriers.A.cps: missing (expected a positive finite number)'],
        [{ cps: 1, maxWait: 'soon' }, 'outbound.carriers.A.maxWait: expected a duration >= 0, got "soon"'],
        [{ cps: 1, maxWait: '-1s' }, 'outbound.carriers.A.maxWait: expected a duration >= 0, got "-1s"'],
        [
          { cps: 1, maxWait: 0 },
          'outbound.carriers.A.maxWait: expected a duration >= 0, got 0 (durations are strings such as "PT1S" or "500ms", not numbers)',
        ],
        [{ cps: 1, maxwait: '1s' }, 'outbound.carriers.A.maxwait: unknown field'],
        [4, 'outbound.carriers.A: expected a carrier such as {"cps": 4, "maxWait": "PT1S"}, got 4'],
      ];
      for (const [carrier, line] of cases) {
        const cfg = { outbound: { carriers: { A: carrier } } };
        expect(
          problemsOf(() => parseConfig(cfg)),
          JSON.stringify(carrier),
        ).to.deep.equal([line]);
      }
    });

    it('reports bad sections and maps with their paths', () => {
      const cases: [unknown, string[]][] = [
        [[], ['top level: expected an object, got an array']],
        [null, ['top level: expected an object, got null']],
        ['{}', ['top level: expected an object, got "{}"']],
        [
          { inbound: null },
          ['inbound: expected an object, got null (an empty value: in YAML, a key with nothing after it)'],
        ],
        [{ outbound: [] }, ['outbound: expected an object, got an array']],
        [{ inbound: { global: {} } }, ['inbound.global: expected an array of limits, got an object']],
        [{ inbound: { defaultPeer: 5 } }, ['inbound.defaultPeer: expected an array of limits, got 5']],
        [
          { inbound: { peers: [] } },
          ['inbound.peers: expected an object mapping peer ids to arrays of limits, got an array'],
        ],
        [
          { inbound: { accounts: 'acme' } },
          ['inbound.accounts: expected an object mapping account ids to arrays of limits, got "acme"'],
        ],
        [
          { outbound: { carriers: [] } },
          ['outbound.carriers: expected an object mapping carrier ids to carriers, got an array'],
        ],
        [{ inbound: { peers: { '': [] } } }, ['inbound.peers[""]: expected a non-empty peer id']],
        [
          { inbound: { peers: { p: { limit: 1, window: '1s' } } } },
          ['inbound.peers.p: expected an array of limits, got an object'],
        ],
      ];
      for (const [cfg, lines] of cases) {
        expect(
          problemsOf(() => parseConfig(cfg)),
          JSON.stringify(cfg),
        ).to.deep.equal(lines);
      }
    });

    it('quotes ids that are not plain identifiers in paths', () => {
      const bad = [{ limit: 0, window: '1s' }];
      const cfg = {
        inbound: { peers: { 'a b': bad, '{x}:y': bad, '45': bad, 'peer-1': bad, 'q"': bad, __proto__ok: bad } },
      };
      expect(problemsOf(() => parseConfig(cfg))).to.have.members([
        'inbound.peers["a b"][0].limit: expected a positive integer, got 0',
        'inbound.peers["{x}:y"][0].limit: expected a positive integer, got 0',
        'inbound.peers["45"][0].limit: expected a positive integer, got 0',
        'inbound.peers["peer-1"][0].limit: expected a positive integer, got 0',
        'inbound.peers["q\\""][0].limit: expected a positive integer, got 0',
        'inbound.peers.__proto__ok[0].limit: expected a positive integer, got 0',
      ]);
      const proto = JSON.parse('{"inbound":{"peers":{"__proto__":[{"limit":0,"window":"1s"}]}}}');
      expect(problemsOf(() => parseConfig(proto))).to.deep.equal([
        'inbound.peers.__proto__[0].limit: expected a positive integer, got 0',
      ]);
    });

    it('rejects unknown fields at every level', () => {
      const cfg = JSON.parse(`{
        "version": 1,
        "inbound": { "global": [], "peer": {}, "accounts": { "a": [{ "limit": 1, "window": "1s", "burst": 2 }] } },
        "outbound": { "carriers": { "A": { "cps": 1, "__proto__": 1 } }, "routes": {} }
      }`);
      expect(problemsOf(() => parseConfig(cfg))).to.deep.equal([
        'inbound.accounts.a[0].burst: unknown field',
        'inbound.peer: unknown field',
        'outbound.carriers.A.__proto__: unknown field',
        'outbound.routes: unknown field',
        'version: unknown field',
      ]);
    });

    it('reports every problem at once', () => {
      const cfg = {
        inbound: {
          global: [{ limit: 0, window: '1s' }],
          peers: {
            peer45: [
              { limit: 10, window: 'PT1S' },
              { limit: 300, window: 'abc' },
            ],
            'a b': [{ limt: 1, window: '1s' }],
          },
          defaultPeer: [{ limit: 5, window: '1s', algorithm: 'leaky' }],
        },
        outbound: { carriers: { A: { cps: 0 }, B: { cps: 1, maxWait: 'P1Y' } } },
      };
      let error: unknown;
      try {
        parseConfig(cfg, 'limits.json');
      } catch (e) {
        error = e;
      }
      const expected = [
        'limits.json: inbound.global[0].limit: expected a positive integer, got 0',
        'limits.json: inbound.peers.peer45[1].window: expected a positive duration, got "abc"',
        'limits.json: inbound.peers["a b"][0].limit: missing (expected a positive integer)',
        'limits.json: inbound.peers["a b"][0].limt: unknown field',
        'limits.json: inbound.defaultPeer[0].algorithm: expected "sliding-log", "sliding-window" or "fixed-window", got "leaky"',
        'limits.json: outbound.carriers.A.cps: expected a positive finite number, got 0',
        'limits.json: outbound.carriers.B.maxWait: expected a duration >= 0, got "P1Y" (years and months have no fixed length)',
      ];
      expect(error).to.be.instanceOf(ConfigError);
      expect(error).to.be.instanceOf(CallGateError);
      const ce = error as ConfigError;
      expect(ce.code).to.equal('ERR_CONFIG');
      expect(ce.name).to.equal('ConfigError');
      expect(ce.problems).to.deep.equal(expected);
      expect(ce.message).to.equal(expected.join('\n'));
    });

    it('lists 20 problems in its message and counts the rest, keeping them all in `problems`', () => {
      const cfg = {
        inbound: {
          peers: Object.fromEntries(Array.from({ length: 200_000 }, (_, i) => [`p${i}`, [{ limit: 0, window: '1s' }]])),
        },
      };
      const problems = problemsOf(() => parseConfig(cfg, 'big.json'));
      expect(problems).to.have.length(200_000);
      const lines = new ConfigError(problems).message.split('\n');
      expect(lines).to.have.length(21);
      expect(lines[0]).to.equal('big.json: inbound.peers.p0[0].limit: expected a positive integer, got 0');
      expect(lines[19]).to.equal('big.json: inbound.peers.p19[0].limit: expected a positive integer, got 0');
      expect(lines[20]).to.equal('… and 199980 more problems');
    });
  });

  describe('capProblems (one cap for configuration and trace problems)', () => {
    const list = (n: number) => Array.from({ length: n }, (_, i) => `problem ${i + 1}`);
    it('shows up to 20 problems as they are', () => {
      expect(SHOWN_PROBLEMS).to.equal(20);
      expect(capProblems(list(0))).to.deep.equal([]);
      expect(capProblems(list(20))).to.deep.equal(list(20));
    });
    it('counts the rest', () => {
      expect(capProblems(list(21))).to.deep.equal([...list(20), '… and 1 more problem']);
      expect(capProblems(list(200_000))).to.deep.equal([...list(20), '… and 199980 more problems']);
    });
    it('counts problems found but not kept', () => {
      expect(capProblems(list(5), 1500)).to.deep.equal([...list(5), '… and 1495 more problems']);
      expect(capProblems(list(1000), 1500)).to.deep.equal([...list(20), '… and 1480 more problems']);
    });
  });

  describe('channels and maxCallDuration', () => {
    it('normalizes the contract example: one channels entry per bucket, channels on a carrier, maxCallDuration', () => {
      const c = parseConfig({
        maxCallDuration: 'PT2H',
        inbound: {
          global: [{ channels: 500 }],
          accounts: { acme: [{ limit: 20, window: 'PT1S' }, { channels: 40 }] },
          peers: { peer45: [{ limit: 10, window: 'PT1S' }, { channels: 30 }, { limit: 300, window: 'PT1M' }] },
          defaultPeer: [{ channels: 2 }],
        },
        outbound: { carriers: { A: { cps: 4, maxWait: 'PT1S', channels: 120 } } },
      });
      expect(c.maxCallDurationUs).to.equal(2 * 3600 * 1_000_000);
      expect(c.inbound.global).to.deep.equal({ limits: [], channels: 500 });
      expect(c.inbound.accounts.get('acme')).to.deep.equal({ limits: [sec(20)], channels: 40 });
      expect(c.inbound.peers.get('peer45')).to.deep.equal({ limits: [sec(10), sec(300, 60_000_000)], channels: 30 });
      expect(c.inbound.defaultPeer).to.deep.equal({ limits: [], channels: 2 });
      expect(c.outbound.carriers.get('A')).to.deep.equal({
        cps: 4,
        intervalUs: 250_000,
        maxWaitUs: 1_000_000,
        channels: 120,
      });
      expect(parseConfig({}).maxCallDurationUs, 'default PT4H').to.equal(4 * 3600 * 1_000_000);
    });

    it('reports bad channel limits with their exact path and message', () => {
      const cases: [unknown, string[]][] = [
        [
          { inbound: { peers: { pbx7: [{ limit: 1, window: '1s' }, {}, { channels: 0 }] } } },
          [
            'inbound.peers.pbx7[1].limit: missing (expected a positive integer)',
            'inbound.peers.pbx7[1].window: missing (expected a positive duration)',
            'inbound.peers.pbx7[2].channels: expected a positive integer, got 0',
          ],
        ],
        [
          { inbound: { peers: { pbx7: [{ channels: 2.5 }] } } },
          ['inbound.peers.pbx7[0].channels: expected a positive integer, got 2.5'],
        ],
        [
          { inbound: { peers: { pbx7: [{ channels: '30' }] } } },
          ['inbound.peers.pbx7[0].channels: expected a positive integer, got "30"'],
        ],
        [{ inbound: { global: [{ channels: 3, limit: 5 }] } }, ['inbound.global[0].limit: unknown field']],
        [
          { inbound: { defaultPeer: [{ channels: 3 }, { limit: 1, window: '1s' }, { channels: 4 }] } },
          ['inbound.defaultPeer[2]: a bucket has at most one channels entry (another is at [0])'],
        ],
        [
          { outbound: { carriers: { A: { cps: 1, channels: -1 } } } },
          ['outbound.carriers.A.channels: expected a positive integer, got -1'],
        ],
        [
          { outbound: { carriers: { A: { cps: 1, channels: null } } } },
          [
            'outbound.carriers.A.channels: expected a positive integer, got null (an empty value: in YAML, a key with nothing after it)',
          ],
        ],
        [{ maxCallDuration: 'PT0S' }, ['maxCallDuration: expected a positive duration, got "PT0S"']],
        [
          { maxCallDuration: 3600 },
          [
            'maxCallDuration: expected a positive duration, got 3600 (durations are strings such as "PT1S" or "500ms", not numbers)',
          ],
        ],
      ];
      for (const [input, lines] of cases)
        expect(
          problemsOf(() => parseConfig(input)),
          JSON.stringify(input),
        ).to.deep.equal(lines);
    });

    it('diff: a channel limit changed, added to a carrier, or a new maxCallDuration is a change', () => {
      const a = parseConfig({
        inbound: { peers: { p: [{ limit: 1, window: '1s' }, { channels: 2 }] } },
        outbound: { carriers: { A: { cps: 1 } } },
      });
      const b = parseConfig({
        maxCallDuration: 'PT1H',
        inbound: { peers: { p: [{ channels: 3 }, { limit: 1, window: '1s' }] } },
        outbound: { carriers: { A: { cps: 1, channels: 5 } } },
      });
      expect(diffConfig(a, b)).to.deep.equal([
        { path: 'maxCallDuration', kind: 'changed', section: 'maxCallDuration' },
        { path: 'inbound.peers.p', kind: 'changed', section: 'peer', id: 'p' },
        { path: 'outbound.carriers.A', kind: 'changed', section: 'carrier', id: 'A' },
      ]);
      const reordered = parseConfig({
        inbound: { peers: { p: [{ channels: 2 }, { limit: 1, window: '1s' }] } },
        outbound: { carriers: { A: { cps: 1 } } },
      });
      expect(diffConfig(a, reordered)).to.deep.equal([]);
    });
  });

  describe('loading files', () => {
    let dir: string;
    before(async () => {
      dir = await mkdtemp(join(tmpdir(), 'callgate-config-'));
    });
    after(async () => {
      await rm(dir, { recursive: true, force: true });
    });
    const file = async (name: string, text: string) => {
      const path = join(dir, name);
      await writeFile(path, text);
      return path;
    };

    it('loads the contract example from JSON', async () => {
      const path = await file('limits.json', JSON.stringify(CONTRACT_EXAMPLE, null, 2));
      expect(await loadConfigFile(path)).to.deep.equal(EXPECTED);
      expect(await loadConfig(path)).to.deep.equal(EXPECTED);
    });

    it('loads JSON with a byte-order mark and JSON from a file without extension', async () => {
      const path = await file('limits', `\uFEFF${JSON.stringify(CONTRACT_EXAMPLE)}`);
      expect(await loadConfigFile(path)).to.deep.equal(EXPECTED);
    });

    it('loads the contract example from YAML (.yaml and .yml)', async () => {
      expect(await loadConfigFile(await file('limits.yaml', CONTRACT_YAML))).to.deep.equal(EXPECTED);
      expect(await loadConfigFile(await file('limits.YML', CONTRACT_YAML))).to.deep.equal(EXPECTED);
    });

    it('keeps __proto__ as a peer id in JSON and YAML files', async () => {
      const json = await file('proto.json', '{"inbound":{"peers":{"__proto__":[{"limit":1,"window":"1s"}]}}}');
      const yaml = await file('proto.yaml', 'inbound:\n  peers:\n    __proto__:\n      - { limit: 1, window: 1s }\n');
      for (const path of [json, yaml]) {
        const c = await loadConfigFile(path);
        expect([...c.inbound.peers.keys()]).to.deep.equal(['__proto__']);
        expect(c.inbound.peers.get('__proto__')).to.deep.equal({ limits: [sec(1)] });
      }
    });

    it('reads a named pipe without blocking: one nobody writes to is empty, a writer’s is read to its end', async () => {
      const fifo = join(dir, 'pipe.json');
      execFileSync('mkfifo', [fifo]);
      // no writer: refused at once as empty JSON (a blocked open kept the process from exiting)
      const started = Date.now();
      expect(await problemsOfAsync(loadConfigFile(fifo))).to.deep.equal([
        `${fifo}: the file holds no configuration (it is empty): the smallest one is {} (every part is optional)`,
      ]);
      expect(Date.now() - started, 'ms').to.be.below(1_000);
      // a writer that opens it first and writes a little later, in two parts (a shell's <(…))
      const writer = spawn('sh', [
        '-c',
        `exec 3>"$1"; sleep 0.2; printf '{"inbound":' >&3; sleep 0.1; printf '{}}' >&3`,
        'sh',
        fifo,
      ]);
      await new Promise((r) => setTimeout(r, 100));
      const c = await loadConfigFile(fifo);
      expect(c.inbound.peers.size).to.equal(0);
      await new Promise((r) => writer.once('exit', r));
    });

    it('a named pipe whose writer never closes it: refused after PIPE_WAIT_MS, nothing left open', async function () {
      this.timeout(PIPE_WAIT_MS + 10_000);
      const fifo = join(dir, 'stuck.json');
      execFileSync('mkfifo', [fifo]);
      // writes a little, then holds the pipe open
      const writer = spawn('sh', ['-c', `exec 3>"$1"; printf '{' >&3; exec sleep 60`, 'sh', fifo]);
      try {
        await new Promise((r) => setTimeout(r, 100));
        expect(await problemsOfAsync(loadConfigFile(fifo))).to.deep.equal([
          `${fifo}: cannot read file: its writer did not close it within ${PIPE_WAIT_MS / 1000} s`,
        ]);
      } finally {
        writer.kill('SIGKILL');
      }
    });

    it('a JSON file nested thousands deep: one line naming where, not a stack overflow', async () => {
      const path = await file('deep.json', `{"inbound":${'['.repeat(5000)}${']'.repeat(5000)}}`);
      expect(await problemsOfAsync(loadConfigFile(path))).to.deep.equal([
        `${path}: invalid JSON at line 1, column 75: nested deeper than 64 levels`,
      ]);
      // brackets inside strings do not count
      const fine = await file('brackets.json', `{"inbound":{"peers":{"${'['.repeat(100)}":[]}}}`);
      expect([...(await loadConfigFile(fine)).inbound.peers.keys()]).to.deep.equal(['['.repeat(100)]);
    });

    it('ids no call can name are refused (a lone surrogate, over 256 characters); a file that is not UTF-8 too', async () => {
      expect(problemsOf(() => parseConfig({ inbound: { peers: { '\ud800x': [] } } }))).to.deep.equal([
        'inbound.peers["\\ud800x"]: peer id must be well-formed Unicode (it holds a lone surrogate)',
      ]);
      expect(
        problemsOf(() => parseConfig({ outbound: { carriers: { ['c'.repeat(257)]: { cps: 1 } } } })),
      ).to.deep.equal([
        `outbound.carriers.${'c'.repeat(257)}: carrier id must be at most 256 characters (UTF-16 code units), got 257`,
      ]);
      expect([
        ...parseConfig({ inbound: { accounts: { ['😀'.repeat(128)]: [] } } }).inbound.accounts.keys(),
      ]).to.have.length(1);
      // a carrier id a trace's route cannot name (split on '|', trimmed); a peer's spaces are its own
      expect(
        problemsOf(() =>
          parseConfig({ outbound: { carriers: { ' A ': { cps: 1 }, 'A|B': { cps: 1 }, 'A B': { cps: 1 } } } }),
        ),
      ).to.deep.equal([
        `outbound.carriers[" A "]: carrier id " A " has spaces around it: a trace's route could never name it (its ids are split on '|' and trimmed)`,
        `outbound.carriers["A|B"]: carrier id "A|B" holds '|': a trace's route could never name it (its ids are split on '|' and trimmed)`,
      ]);
      expect([...parseConfig({ inbound: { peers: { ' p ': [] } } }).inbound.peers.keys()]).to.deep.equal([' p ']);
      // spaces only too: the library and the sidecar can name it (a trace cannot: docs/configuration.md)
      expect([...parseConfig({ inbound: { peers: { ' ': [] } } }).inbound.peers.keys()]).to.deep.equal([' ']);
      const latin1 = join(dir, 'latin1.json');
      await writeFile(
        latin1,
        Buffer.concat([Buffer.from('{"inbound":{\n"peers":{"caf'), Buffer.from([0xe9]), Buffer.from('":[]}}}')]),
      );
      expect(await problemsOfAsync(loadConfigFile(latin1))).to.deep.equal([
        `${latin1}: line 2: not UTF-8 (a configuration is UTF-8 text)`,
      ]);
    });

    it('loadConfig also takes an object', async () => {
      expect(await loadConfig(CONTRACT_EXAMPLE)).to.deep.equal(EXPECTED);
    });

    it('prefixes validation problems with the file name', async () => {
      const path = await file(
        'bad.json',
        JSON.stringify({ inbound: { peers: { peer45: [{ limit: 1, window: 'abc' }] } } }),
      );
      expect(await problemsOfAsync(loadConfigFile(path))).to.deep.equal([
        `${path}: inbound.peers.peer45[0].window: expected a positive duration, got "abc"`,
      ]);
      const ypath = await file(
        'bad.yaml',
        'inbound:\n  peers:\n    peer45:\n      - { limit: 1, window: 1000 }\n  extra: 1\n',
      );
      expect(await problemsOfAsync(loadConfigFile(ypath))).to.deep.equal([
        `${ypath}: inbound.peers.peer45[0].window: expected a positive duration, got 1000 (durations are strings such as "PT1S" or "500ms", not numbers)`,
        `${ypath}: inbound.extra: unknown field`,
      ]);
    });

    it('names line and column of a JSON syntax error', async () => {
      const cases: [string, string][] = [
        ['{\n  "inbound": {\n    "global": [ x ]\n  }\n}', "line 3, column 17: Unexpected token 'x'"],
        ['{\n  "inbound": {},\n  "outbound": {},\n}\n', 'line 4, column 1: Expected double-quoted property name'],
        ['{\n "inbound": {}\n "outbound": {}\n}', "line 3, column 2: Expected ',' or '}' after property value"],
        ['{"inbound": {', "line 1, column 14: Expected property name or '}'"],
        ['{"inbound": {"peers": [', 'line 1, column 24: Unexpected end of JSON input'],
        ['{}\n}', 'line 2, column 1: Unexpected non-whitespace character after JSON'],
      ];
      for (const [text, where] of cases) {
        const path = await file('syntax.json', text);
        expect(await problemsOfAsync(loadConfigFile(path)), JSON.stringify(text)).to.deep.equal([
          `${path}: invalid JSON at ${where}`,
        ]);
      }
    });

    it('names line and column of a YAML syntax error, and refuses duplicate keys', async () => {
      const path = await file('syntax.yaml', 'inbound:\n  peers: [\n');
      const [line] = await problemsOfAsync(loadConfigFile(path));
      expect(line).to.match(
        new RegExp(`^${path.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}: invalid YAML at line \\d+, column \\d+: \\S`),
      );
      // two documents: said in the file author's words, not the library's advice to its callers
      const two = await file('two.yaml', 'inbound:\n  global: []\n---\ninbound: {}\n');
      expect(await problemsOfAsync(loadConfigFile(two))).to.deep.equal([
        `${two}: invalid YAML at line 3, column 1: a second document ('---'): a configuration is one YAML document`,
      ]);
      const dup = await file('dup.yaml', 'inbound:\n  global: []\n  global: []\n');
      expect(await problemsOfAsync(loadConfigFile(dup))).to.deep.equal([
        `${dup}: inbound.global: duplicate key at line 3, column 3 (first at line 2, column 3)`,
      ]);
      // a map or a list as a key: it would be named by its text, an id nobody meant
      const complex = await file('complex.yaml', 'inbound:\n  peers:\n    ? {a: 1}\n    : []\n    ? [x]\n    : []\n');
      expect(await problemsOfAsync(loadConfigFile(complex))).to.deep.equal([
        `${complex}: inbound.peers["{\\"a\\":1}"]: a key must be a plain value, not a map or a list (at line 3, column 7)`,
        `${complex}: inbound.peers["[\\"x\\"]"]: a key must be a plain value, not a map or a list (at line 5, column 7)`,
      ]);
    });

    it('refuses every repeated key of a YAML file with its path, keys compared as JavaScript names them', async () => {
      const path = await file(
        'dups.yaml',
        [
          'inbound:',
          '  peers:',
          '    p1: [{ limit: 5, window: PT1S, limit: 500000 }]',
          '    1: []',
          '    "1": []',
          '    p1: []',
          'k: &k p2',
          'outbound: { carriers: { p2: { cps: 1 }, *k : { cps: 2 } } }',
        ].join('\n'),
      );
      expect(await problemsOfAsync(loadConfigFile(path))).to.deep.equal([
        `${path}: inbound.peers.p1[0].limit: duplicate key at line 3, column 36 (first at line 3, column 12)`,
        `${path}: inbound.peers["1"]: duplicate key at line 5, column 5 (first at line 4, column 5)`,
        `${path}: inbound.peers.p1: duplicate key at line 6, column 5 (first at line 3, column 5)`,
        `${path}: outbound.carriers.p2: duplicate key at line 8, column 41 (first at line 8, column 25)`,
      ]);
    });

    it('names a YAML key by its text as written, where YAML would read a number, a boolean or null', async () => {
      const path = await file(
        'ids.yaml',
        [
          'inbound:',
          '  accounts:',
          '    007: [{ limit: 3, window: 1s }]',
          '  peers:',
          '    00123: [{ limit: 1, window: 1s }]',
          '    1.10: [{ limit: 2, window: 1s }]',
          '    0x1F: []',
          '    true: []',
          '    ~: []',
          '    1: []',
          '  attributes:',
          '    - { name: caller, key: caller, limits: [{ limit: 1, window: 1h }],',
          '        overrides: { +18005550100: [{ limit: 50, window: 1s }] } }',
          'outbound: { carriers: { 1e3: { cps: 2 } } }',
        ].join('\n'),
      );
      const c = await loadConfigFile(path);
      // (sorted: a JavaScript object puts an integer-like key such as '1' first)
      expect([...c.inbound.peers.keys()].sort()).to.deep.equal(['00123', '0x1F', '1', '1.10', 'true', '~']);
      expect([...c.inbound.accounts.keys()]).to.deep.equal(['007']);
      expect([...c.outbound.carriers.keys()]).to.deep.equal(['1e3']);
      expect([...c.inbound.attributes![0]!.overrides!.keys()]).to.deep.equal(['+18005550100']);
      // and the same text, quoted or not, is one key; 1 and 1.0 are two
      const dup = await file(
        'ids-dup.yaml',
        'inbound:\n  peers:\n    00123: []\n    "00123": []\n    1: []\n    1.0: []\n',
      );
      expect(await problemsOfAsync(loadConfigFile(dup))).to.deep.equal([
        `${dup}: inbound.peers["00123"]: duplicate key at line 4, column 5 (first at line 3, column 5)`,
      ]);
    });

    it('refuses repeated keys in JSON with their path, where JSON.parse would keep the last one', async () => {
      const limit = await file(
        'dup-limit.json',
        '{"inbound": {"peers": {"p1": [\n  {"limit": 5, "window": "PT1S",\n   "limit": 500000}\n]}}}',
      );
      expect(await problemsOfAsync(loadConfigFile(limit))).to.deep.equal([
        `${limit}: inbound.peers.p1[0].limit: duplicate key at line 3, column 4 (first at line 2, column 4)`,
      ]);
      // a repeated peer id, one of them escaped; and the same key in two objects is no repeat
      const peer = await file(
        'dup-peer.json',
        '{"inbound": {"peers": {\n  "peer 1": [{"limit": 5, "window": "1s"}],\n  "p1": [],\n  "peer\\u00201": []\n}},\n "outbound": {"carriers": {"A": {"cps": 1}, "B": {"cps": 1}}}}',
      );
      expect(await problemsOfAsync(loadConfigFile(peer))).to.deep.equal([
        `${peer}: inbound.peers["peer 1"]: duplicate key at line 4, column 3 (first at line 2, column 3)`,
      ]);
      const top = await file('dup-top.json', '{"inbound": {}, "outbound": {}, "inbound": {}, "outbound": {}}');
      expect(await problemsOfAsync(loadConfigFile(top))).to.deep.equal([
        `${top}: inbound: duplicate key at line 1, column 33 (first at line 1, column 2)`,
        `${top}: outbound: duplicate key at line 1, column 48 (first at line 1, column 17)`,
      ]);
    });

    it('loads 100,000 peers sharing one YAML anchor (yaml refuses more than 100 aliases by default)', async function () {
      this.timeout(120_000);
      const n = 100_000;
      const lines = [
        'inbound:',
        '  defaultPeer: &std',
        '    - { limit: 5, window: PT1S }',
        '    - { limit: 100, window: PT1M }',
        '  peers:',
      ];
      for (let i = 0; i < n; i++) lines.push(`    peer-${i}: *std`);
      const path = await file('shared.yaml', lines.join('\n'));
      const config = await loadConfigFile(path);
      expect(config.inbound.peers.size).to.equal(n);
      const expected = { limits: [sec(5), sec(100, 60_000_000)] };
      expect(config.inbound.defaultPeer).to.deep.equal(expected);
      expect(config.inbound.peers.get('peer-0')).to.deep.equal(expected);
      expect(config.inbound.peers.get(`peer-${n - 1}`)).to.deep.equal(expected);
    });

    it('refuses an alias bomb (nested aliases) at the alias that expands past the bound, before expanding it', async () => {
      // 9 levels of 10 aliases each: 10^9 scalars once expanded, from 10 lines
      const lines = ['a0: &a0 [x, x, x, x, x, x, x, x, x, x]'];
      for (let i = 1; i <= 9; i++)
        lines.push(
          `a${i}: &a${i} [${Array(10)
            .fill(`*a${i - 1}`)
            .join(', ')}]`,
        );
      lines.push('inbound: { peers: { p: *a9 } }');
      const path = await file('bomb.yaml', lines.join('\n'));
      // a_k is s_k = 1 + 10 s_(k-1) nodes (s_0 = 11): lines 2 to 6 add 10 (s_0 + … + s_4) =
      // 1,234,550; each *a5 on line 7 adds s_5 = 1,111,111, so the 4th takes the total past 5 M
      expect(await problemsOfAsync(loadConfigFile(path))).to.deep.equal([
        `${path}: invalid YAML at line 7, column ${'a6: &a6 ['.length + 1 + 3 * '*a5, '.length}: aliases expand the configuration by more than 5,000,000 nodes here (an alias bomb?)`,
      ]);
    });

    it("refuses one big anchor used many times (a linear bomb yaml's own count lets through)", async () => {
      // an anchor of 1,000 limits is 1 + 1,000 × 5 = 5,001 nodes; 10,000 aliases of it would be 50 M
      const lines = ['inbound:', '  defaultPeer: &big'];
      for (let i = 0; i < 1000; i++) lines.push(`    - { limit: ${i + 1}, window: PT1S }`);
      lines.push('  peers:');
      for (let i = 0; i < 10_000; i++) lines.push(`    p${i}: *big`);
      const path = await file('linear.yaml', lines.join('\n'));
      const crossing = Math.floor(MAX_ALIAS_NODES / 5001) + 1; // the alias that takes the total past the bound
      expect(await problemsOfAsync(loadConfigFile(path))).to.deep.equal([
        `${path}: invalid YAML at line ${3 + 1000 + crossing}, column ${`    p${crossing - 1}: `.length + 1}: aliases expand the configuration by more than 5,000,000 nodes here (an alias bomb?)`,
      ]);
    });

    it('refuses an alias before its anchor, or to no anchor, with its place (not a ReferenceError)', async () => {
      const later = await file('later.yaml', 'inbound:\n  peers:\n    q: *a\n    p: &a [{limit: 10, window: 1s}]\n');
      expect(await problemsOfAsync(loadConfigFile(later))).to.deep.equal([
        `${later}: inbound.peers.q: alias *a at line 3, column 8 has no anchor &a before it (an anchor must come before its aliases)`,
      ]);
      const none = await file('none.yaml', 'inbound:\n  peers:\n    q: *nope\n');
      expect(await problemsOfAsync(loadConfigFile(none))).to.deep.equal([
        `${none}: inbound.peers.q: alias *nope at line 3, column 8 has no anchor &nope before it (an anchor must come before its aliases)`,
      ]);
    });

    it('refuses an alias inside its own anchor', async () => {
      const path = await file('cycle.yaml', 'inbound:\n  peers: &p\n    p1: *p\n');
      expect(await problemsOfAsync(loadConfigFile(path))).to.deep.equal([
        `${path}: inbound.peers.p1: alias *p at line 3, column 9 is inside its own anchor (a recursive structure)`,
      ]);
    });

    it('a file of nothing, blanks or comments holds no configuration, and says so', async () => {
      for (const [name, text, empty] of [
        ['empty.yaml', '', true],
        ['empty.json', '', true],
        ['comments.yaml', '# limits to come\n\n  # later\n', false],
        ['blank.json', ' \n\t\n', false],
      ] as const) {
        const path = await file(name, text);
        expect(await problemsOfAsync(loadConfigFile(path)), name).to.deep.equal([
          `${path}: the file holds no configuration${empty ? ' (it is empty)' : ''}: the smallest one is {} (every part is optional)`,
        ]);
      }
      // a comment is not a comment in JSON: the parser says where it stands
      const json = await file('comment.json', '# x\n');
      expect((await problemsOfAsync(loadConfigFile(json)))[0]).to.match(/invalid JSON at line 1, column 1/);
    });

    it('a YAML key with nothing after it is named as such', async () => {
      const path = await file('bare.yaml', 'inbound:\noutbound:\n  carriers:\n');
      expect(await problemsOfAsync(loadConfigFile(path))).to.deep.equal([
        `${path}: inbound: expected an object, got null (an empty value: in YAML, a key with nothing after it)`,
        `${path}: outbound.carriers: expected an object mapping carrier ids to carriers, got null (an empty value: in YAML, a key with nothing after it)`,
      ]);
    });

    it('names the file and the OS reason when it cannot be read', async () => {
      const missing = join(dir, 'missing.json');
      expect(await problemsOfAsync(loadConfigFile(missing))).to.deep.equal([
        `${missing}: cannot read file: no such file or directory (ENOENT)`,
      ]);
      expect(await problemsOfAsync(loadConfig(dir))).to.deep.equal([
        `${dir}: cannot read file: illegal operation on a directory, read (EISDIR)`,
      ]);
    });
  });

  describe('diffConfig', () => {
    const base = () => parseConfig(CONTRACT_EXAMPLE);

    it('reports nothing for equal configurations, or limits only reordered', () => {
      expect(diffConfig(base(), base())).to.deep.equal([]);
      const reordered = structuredClone(CONTRACT_EXAMPLE);
      reordered.inbound.peers.peer45.reverse();
      reordered.inbound.peers.peer45[0]!.window = '1m'; // same value, other spelling
      expect(diffConfig(base(), parseConfig(reordered))).to.deep.equal([]);
      // a cps that paces alike (the scripts take 5/2 for both), prefixes in another order
      const level = (prefixes: string[]) => ({ name: 'dst', key: 'callee', match: { prefixes }, limits: [] });
      const a = parseConfig({
        inbound: { attributes: [level(['1', '44'])] },
        outbound: { carriers: { A: { cps: 2.5 } } },
      });
      const b = parseConfig({
        inbound: { attributes: [level(['44', '1'])] },
        outbound: { carriers: { A: { cps: 2.5000000001 } } },
      });
      expect(diffConfig(a, b)).to.deep.equal([]);
      const c = parseConfig({
        inbound: { attributes: [level(['44', '2'])] },
        outbound: { carriers: { A: { cps: 2.500000001 } } },
      });
      expect(diffConfig(a, c).map((x) => x.path)).to.deep.equal(['inbound.attributes.dst', 'outbound.carriers.A']);
    });

    it('reports added, removed and changed buckets and carriers', () => {
      const next = parseConfig({
        inbound: {
          accounts: { acme: [{ limit: 20, window: 'PT1S' }], 'big co': [{ limit: 50, window: '1s' }] },
          peers: {
            peer45: [
              { limit: 10, window: 'PT1S' },
              { limit: 300, window: 'PT1M', algorithm: 'fixed-window' },
            ],
            peer46: [],
          },
          defaultPeer: [{ limit: 6, window: '1s' }],
        },
        outbound: { carriers: { A: { cps: 4, maxWait: '1s' }, B: { cps: 2.5 }, C: { cps: 1 } } },
      });
      expect(diffConfig(base(), next)).to.deep.equal([
        { path: 'inbound.global', kind: 'removed', section: 'global' },
        { path: 'inbound.accounts["big co"]', kind: 'added', section: 'account', id: 'big co' },
        { path: 'inbound.peers.peer45', kind: 'changed', section: 'peer', id: 'peer45' },
        { path: 'inbound.peers.peer46', kind: 'added', section: 'peer', id: 'peer46' },
        { path: 'inbound.defaultPeer', kind: 'changed', section: 'defaultPeer' },
        { path: 'outbound.carriers.B', kind: 'changed', section: 'carrier', id: 'B' },
        { path: 'outbound.carriers.C', kind: 'added', section: 'carrier', id: 'C' },
      ]);
      expect(diffConfig(next, base())).to.deep.equal([
        { path: 'inbound.global', kind: 'added', section: 'global' },
        { path: 'inbound.accounts["big co"]', kind: 'removed', section: 'account', id: 'big co' },
        { path: 'inbound.peers.peer45', kind: 'changed', section: 'peer', id: 'peer45' },
        { path: 'inbound.peers.peer46', kind: 'removed', section: 'peer', id: 'peer46' },
        { path: 'inbound.defaultPeer', kind: 'changed', section: 'defaultPeer' },
        { path: 'outbound.carriers.B', kind: 'changed', section: 'carrier', id: 'B' },
        { path: 'outbound.carriers.C', kind: 'removed', section: 'carrier', id: 'C' },
      ]);
    });

    it('treats an empty limit list as present', () => {
      const a = parseConfig({});
      const b = parseConfig({ inbound: { global: [], peers: { __proto__x: [] } } });
      expect(diffConfig(a, b)).to.deep.equal([
        { path: 'inbound.global', kind: 'added', section: 'global' },
        { path: 'inbound.peers.__proto__x', kind: 'added', section: 'peer', id: '__proto__x' },
      ]);
    });

    it('handles __proto__ ids', () => {
      const a = parseConfig(JSON.parse('{"inbound":{"peers":{"__proto__":[]}}}'));
      const b = parseConfig(JSON.parse('{"inbound":{"peers":{"__proto__":[{"limit":1,"window":"1s"}]}}}'));
      expect(diffConfig(a, b)).to.deep.equal([
        { path: 'inbound.peers.__proto__', kind: 'changed', section: 'peer', id: '__proto__' },
      ]);
    });
  });
});
