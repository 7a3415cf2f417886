/**
 * The callgate command as a user runs it: a real child process, real files, exit codes.
 */
import { expect } from 'chai';
import { spawn, spawnSync } from 'node:child_process';
import { once } from 'node:events';
import {
  chmodSync,
  createReadStream,
  existsSync,
  linkSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  readdirSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { laneTag } from '../src/lease/lanes.js';
import { writeTrace } from '../scripts/gen-trace.js';
import { hasUnprintable } from '../src/ids.js';
import { getRedis, type RedisHandle } from './helpers/redis.js';
import { runNode, type Run } from './helpers/run.js';

const ROOT = new URL('..', import.meta.url).pathname;
const BIN = join(ROOT, 'bin/callgate.js');
const FIX = join(ROOT, 'fixtures');

function run(args: string[], env: NodeJS.ProcessEnv = {}): Promise<Run> {
  return runNode([BIN, ...args], { cwd: ROOT, env });
}

const replayArgs = (name: string, ...more: string[]) => [
  'replay',
  '--config',
  join(FIX, `${name}.config.json`),
  '--trace',
  join(FIX, `${name}.trace.csv`),
  ...more,
];

/** Exit 2 and exactly one `error: ` line matching `message`, no stack trace. */
function expectOneLine(r: Run, message: RegExp): void {
  expect(r.code, r.stderr).to.equal(2);
  const lines = r.stderr.trimEnd().split('\n');
  expect(lines, r.stderr).to.have.length(1);
  expect(lines[0]).to.match(/^error: /);
  expect(lines[0]).to.match(message);
}

/** The temporary decisions files left in `dir`. */
const temporaries = (dir: string) => readdirSync(dir).filter((f) => f.includes('.tmp-'));

/**
 * A copy of /dev/null (minor 3) or /dev/full (minor 7) made for the test (mknod, as root, in a
 * directory of its own), so that a regression can never replace the machine's own device; the
 * real one only for other users, who cannot replace it. Root without mknod skips the test.
 */
function device(ctx: Mocha.Context, dir: string, name: 'null' | 'full'): string {
  const path = join(mkdtempSync(join(dir, 'dev-')), name);
  if (spawnSync('mknod', ['-m', '666', path, 'c', '1', name === 'null' ? '3' : '7']).status === 0) return path;
  if (process.getuid?.() === 0) ctx.skip();
  return `/dev/${name}`;
}

describe('callgate replay (the command)', function () {
  this.timeout(120_000);
  let dir: string;
  before(() => {
    dir = mkdtempSync(join(tmpdir(), 'callgate-cli-'));
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  it('replays a fixture and prints the report (exit 0)', async () => {
    const r = await run(replayArgs('campaign'));
    expect(r.code, r.stderr).to.equal(0);
    expect(r.stdout).to.match(/callgate replay on the memory store: 2450 calls/);
    expect(r.stdout).to.match(/Every limit held in every window\./);
    expect(r.stderr).to.equal('');
  });

  it("ids from traffic reach the terminal escaped: a caller's escape sequence does not act", async () => {
    // a caller number, a peer and call ids with an OSC title, a screen clear, a bidi override
    const evil = '+1\u001b]0;OWNED\u0007\u001b[2J\u202e';
    const rows = Array.from({ length: 60 }, (_, i) => `${1709640000 + i / 100},c${i}${evil},in,p${evil},,,,"${evil}"`);
    const trace = join(dir, 'evil.trace.csv');
    writeFileSync(trace, `time,call_id,direction,peer,account,route,duration,caller\n${rows.join('\n')}\n`);
    const tight = join(dir, 'tight.json');
    writeFileSync(tight, JSON.stringify({ inbound: { defaultPeer: [{ limit: 5, window: '1s' }] } }));
    for (const args of [
      ['replay', '--config', 'examples/limits/attributes.json', '--trace', trace],
      ['replay', '--config', tight, '--compare', 'examples/limits/attributes.json', '--trace', trace],
    ]) {
      const r = await run(args);
      expect(r.code, r.stderr).to.equal(0);
      const raw = r.stdout.split('\n').filter(hasUnprintable);
      expect(raw, args.join(' ')).to.deep.equal([]);
      expect(r.stdout).to.include('\\u001b]0;OWNED\\u0007\\u001b[2J\\u202e');
    }
  });

  it('--html - writes the page on stdout and moves the report to stderr; not beside --decisions -', async () => {
    const r = await run(replayArgs('boundary', '--html', '-'));
    expect(r.code, r.stderr).to.equal(0);
    expect(r.stdout).to.match(/^<!doctype html>/i);
    expect(r.stderr).to.match(/^callgate replay on the memory store/);
    expect(existsSync(join(ROOT, '-')), 'a file named -').to.equal(false);
    const both = await run(replayArgs('boundary', '--html', '-', '--decisions', '-'));
    expect([both.code, both.stderr]).to.deep.equal([
      2,
      'error: --decisions - and --html -: both would go to standard output, mixed; name a file for one\n',
    ]);
    // by the name of standard output's file too
    const named = await run(replayArgs('boundary', '--html', '-', '--decisions', '/dev/stdout'));
    expect([named.code, named.stderr]).to.deep.equal([
      2,
      'error: --decisions "/dev/stdout" and --html -: both would go to standard output, mixed; name a file for one\n',
    ]);
  });

  it('--decisions - writes JSON Lines on stdout (one per call) and moves the report to stderr', async () => {
    const r = await run(replayArgs('boundary', '--decisions', '-'));
    expect(r.code, r.stderr).to.equal(0);
    const lines = r.stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as Record<string, unknown>);
    const rows = readFileSync(join(FIX, 'boundary.trace.csv'), 'utf8')
      .split('\n')
      .filter((l) => l.trim() !== '' && !l.startsWith('#'));
    expect(lines).to.have.length(rows.length - 1);
    for (const d of lines) expect(d).to.include.keys('call_id', 'direction', 'outcome');
    expect(r.stderr).to.match(/calls/);
  });

  it('--json prints one JSON object with the proof that every limit held', async () => {
    const r = await run(replayArgs('user-windows', '--json'));
    expect(r.code, r.stderr).to.equal(0);
    const report = JSON.parse(r.stdout) as {
      all_limits_held: boolean;
      levels: { limits: { peak: number; limit: number }[] }[];
    };
    expect(report.all_limits_held).to.equal(true);
    const limits = report.levels.flatMap((l) => l.limits);
    expect(limits.length).to.be.greaterThan(0);
    for (const l of limits) expect(l.peak).to.be.at.most(l.limit);
  });

  it('a malformed trace: exit 2, one line per problem with file and line, no stack trace, no decisions file', async () => {
    const trace = join(dir, 'bad.trace.csv');
    writeFileSync(
      trace,
      [
        'time,call_id,direction,peer,account,route',
        '2024-01-01T00:00:00Z,c1,in,p1,,',
        'yesterday,c2,in,p1,,',
        '2024-01-01T00:00:01Z,c3,sideways,p1,,',
        '2024-01-01T00:00:02Z,c4,in,,,',
        // (an empty route is a call naming no carrier, decided: a carrier id over the bound is a problem)
        `2024-01-01T00:00:03Z,c5,out,,,${'x'.repeat(300)}`,
        '2024-01-01T00:00:04Z,c6,in',
        '',
      ].join('\n'),
    );
    const out = join(dir, 'bad.jsonl');
    const r = await run([
      'replay',
      '--config',
      join(FIX, 'boundary.config.json'),
      '--trace',
      trace,
      '--decisions',
      out,
    ]);
    expect(r.code).to.equal(2);
    const lines = r.stderr.trim().split('\n');
    expect(lines).to.have.length(5);
    expect(lines[0]).to.match(/bad\.trace\.csv:3: column "time"/);
    expect(lines[1]).to.match(/bad\.trace\.csv:4: column "direction"/);
    expect(lines[2]).to.match(/bad\.trace\.csv:5: column "peer"/);
    expect(lines[3]).to.match(/bad\.trace\.csv:6: column "route"/);
    expect(lines[4]).to.match(/bad\.trace\.csv:7: /);
    expect(r.stderr).not.to.match(/\n\s+at /);
    expect(existsSync(out)).to.equal(false);
    expect(readdirSync(dir).filter((f) => f.startsWith('bad.jsonl'))).to.deep.equal([]);
  });

  it('an invalid configuration: exit 2 with every problem and its path', async () => {
    const cfg = join(dir, 'bad.config.json');
    writeFileSync(
      cfg,
      JSON.stringify({
        inbound: { peers: { p1: [{ limit: 0, window: 'abc' }] } },
        outbound: { carriers: { A: { cps: -1 } } },
      }),
    );
    const r = await run(['replay', '--config', cfg, '--trace', join(FIX, 'boundary.trace.csv')]);
    expect(r.code).to.equal(2);
    expect(r.stderr).to.match(/inbound\.peers\.p1\[0\]\.limit/);
    expect(r.stderr).to.match(/inbound\.peers\.p1\[0\]\.window: expected a positive duration, got "abc"/);
    expect(r.stderr).to.match(/outbound\.carriers\.A\.cps/);
    expect(r.stderr).not.to.match(/\n\s+at /);
  });

  it('an unreadable file: exit 2 naming it', async () => {
    const r = await run(['replay', '--config', join(FIX, 'boundary.config.json'), '--trace', join(dir, 'missing.csv')]);
    expect(r.code).to.equal(2);
    expect(r.stderr).to.match(/missing\.csv/);
    expect(r.stderr).not.to.match(/\n\s+at /);
  });

  it('a bad option: exit 2', async () => {
    const r = await run([
      'replay',
      '--config',
      join(FIX, 'boundary.config.json'),
      '--trace',
      join(FIX, 'boundary.trace.csv'),
      '--store',
      'mongo',
    ]);
    expect(r.code).to.equal(2);
  });

  describe('bad input on the command line: exit 2, one line, no stack trace', () => {
    const cfg = join(FIX, 'boundary.config.json');
    const trace = join(FIX, 'boundary.trace.csv');
    let sub: string;
    before(() => {
      sub = mkdtempSync(join(dir, 'bad-'));
      mkdirSync(join(sub, 'a-directory'));
    });

    it('--decisions in a missing directory', async () => {
      const target = join(sub, 'missing', 'out.jsonl');
      expectOneLine(
        await run(['replay', '--config', cfg, '--trace', trace, '--decisions', target]),
        /cannot write decisions to .*missing\/out\.jsonl: no such file or directory \(ENOENT\)$/,
      );
      expect(existsSync(join(sub, 'missing'))).to.equal(false);
    });

    it('--decisions naming a directory: refused, left as it is', async () => {
      const target = join(sub, 'a-directory');
      expectOneLine(
        await run(['replay', '--config', cfg, '--trace', trace, '--decisions', target]),
        /cannot write decisions to .*a-directory: it is a directory$/,
      );
      expect(statSync(target).isDirectory()).to.equal(true);
      expect(temporaries(sub)).to.deep.equal([]);
    });

    it('--decisions empty, or a link to nothing', async () => {
      const link = join(sub, 'dangling');
      symlinkSync(join(sub, 'nothing'), link);
      const [empty, dangling] = await Promise.all([
        run(['replay', '--config', cfg, '--trace', trace, '--decisions', '']),
        run(['replay', '--config', cfg, '--trace', trace, '--decisions', link]),
      ]);
      expectOneLine(empty, /cannot write decisions to "": an empty file name$/);
      expectOneLine(dangling, /it is a symbolic link to a missing file$/);
      expect(existsSync(join(sub, 'nothing'))).to.equal(false);
    });

    it('--redis-url that is no URL', async () => {
      const redisRun = (url: string) =>
        run(['replay', '--config', cfg, '--trace', trace, '--store', 'redis', '--redis-url', url]);
      const [notUrl, badPort] = await Promise.all([redisRun('notaurl::'), redisRun('redis://127.0.0.1:99999')]);
      expectOneLine(notUrl, /invalid --redis-url "notaurl::": expected redis:\/\/host:port or rediss:\/\/…$/);
      expectOneLine(badPort, /invalid --redis-url "redis:\/\/127\.0\.0\.1:99999": Invalid URL$/);
    });

    it('a missing --config file, a --config or --trace that is a directory, an unknown --store', async () => {
      const [missing, configDir, traceDir, store] = await Promise.all([
        run(['replay', '--config', join(sub, 'none.json'), '--trace', trace]),
        run(['replay', '--config', join(sub, 'a-directory'), '--trace', trace]),
        run(['replay', '--config', cfg, '--trace', join(sub, 'a-directory')]),
        run(['replay', '--config', cfg, '--trace', trace, '--store', 'mongo']),
      ]);
      expectOneLine(missing, /none\.json: cannot read file: no such file or directory \(ENOENT\)$/);
      expectOneLine(configDir, /a-directory: cannot read file: .*\(EISDIR\)$/);
      expectOneLine(traceDir, /a-directory: cannot read the trace: it is a directory$/);
      expectOneLine(store, /'mongo' is invalid\. Allowed choices are memory, redis\.$/);
    });

    it('a --trace that is a FIFO (read only once; a replay reads its trace twice)', async () => {
      const fifo = join(sub, 'trace-fifo');
      expect(spawnSync('mkfifo', [fifo]).status).to.equal(0);
      expectOneLine(
        await run(['replay', '--config', cfg, '--trace', fifo]),
        /trace-fifo: cannot read the trace: it is a FIFO, and a replay reads its trace twice$/,
      );
      // merge-traces too reads each input twice: it hung on the FIFO's second open, then merged
      // what the next writer sent; a directory was a raw EISDIR
      const merged = join(sub, 'merged.csv');
      expectOneLine(
        await run(['merge-traces', '--out', merged, fifo]),
        /trace-fifo: cannot read the trace: it is a FIFO, and merge-traces reads each input twice$/,
      );
      expectOneLine(
        await run(['merge-traces', '--out', merged, join(FIX, 'boundary.trace.csv'), sub]),
        /: cannot read the trace: it is a directory$/,
      );
      expect(existsSync(merged)).to.equal(false);
    });

    it('standard output closed by its reader (| true): the report, or the decisions', async () => {
      const closedStdout = (args: string[]) =>
        new Promise<Run>((resolve) => {
          const child = spawn(process.execPath, [BIN, ...args], { cwd: ROOT });
          child.stdout.destroy(); // nobody reads: every write gets EPIPE
          let stderr = '';
          child.stderr.on('data', (b: Buffer) => (stderr += b));
          child.on('close', (code) => resolve({ code, stdout: '', stderr }));
        });
      const [report, decisions] = await Promise.all([
        closedStdout(replayArgs('boundary')),
        closedStdout(replayArgs('boundary', '--decisions', '-')),
      ]);
      expectOneLine(report, /^error: cannot write the report to standard output: its reader closed it \(EPIPE\)$/);
      expectOneLine(decisions, /^error: cannot write decisions to standard output: its reader closed it \(EPIPE\)$/);
    });

    it('a device that is full: the write error, no stack trace, no file left', async function () {
      const full = device(this, sub, 'full');
      expectOneLine(
        await run(replayArgs('campaign', '--decisions', full)),
        /cannot write decisions to .*full: no space left on device.*\(ENOSPC\)$/,
      );
      expect(statSync(full).isCharacterDevice()).to.equal(true);
      expect(temporaries(dirname(full))).to.deep.equal([]);
    });

    it('an output that fails after another was written whole: neither replaces its file', async function () {
      const full = device(this, sub, 'full');
      const keep = join(sub, 'keep.jsonl');
      writeFileSync(keep, 'OLD\n');
      // the decisions were renamed over keep.jsonl before the HTML report failed
      expectOneLine(
        await run(replayArgs('campaign', '--decisions', keep, '--html', full)),
        /^error: cannot write the HTML report .*full: no space left on device.*\(ENOSPC\)$/,
      );
      expect(readFileSync(keep, 'utf8')).to.equal('OLD\n');
      expect(temporaries(sub)).to.deep.equal([]);
    });
  });

  describe('--decisions never replaces what is not a regular file', () => {
    let sub: string;
    let expected: string;
    before(async () => {
      sub = mkdtempSync(join(dir, 'targets-'));
      const r = await run(replayArgs('campaign', '--decisions', '-'));
      expect(r.code, r.stderr).to.equal(0);
      expected = r.stdout;
      expect(expected.split('\n')).to.have.length(2451); // 2450 calls and the last newline
    });

    it('a FIFO is written in place: its reader gets every decision, and it stays a FIFO', async function () {
      this.timeout(30_000); // renamed over, the FIFO never gets a writer: the reader would wait forever
      const fifo = join(sub, 'fifo');
      expect(spawnSync('mkfifo', [fifo]).status).to.equal(0);
      const chunks: Buffer[] = [];
      const reader = createReadStream(fifo);
      reader.on('data', (b) => chunks.push(Buffer.from(b)));
      const [r] = await Promise.all([run(replayArgs('campaign', '--decisions', fifo)), once(reader, 'close')]);
      expect(r.code, r.stderr).to.equal(0);
      expect(Buffer.concat(chunks).toString()).to.equal(expected);
      expect(statSync(fifo).isFIFO()).to.equal(true);
      expect(r.stdout).to.match(/2450 calls/); // the report stays on stdout
      expect(temporaries(sub)).to.deep.equal([]);
    });

    it('a character device (/dev/null) is written in place and stays that device', async function () {
      const nul = device(this, sub, 'null');
      const before = statSync(nul);
      const r = await run(replayArgs('campaign', '--decisions', nul));
      expect(r.code, r.stderr).to.equal(0);
      const after = statSync(nul);
      expect(after.isCharacterDevice()).to.equal(true);
      expect([after.ino, after.rdev, after.mode]).to.deep.equal([before.ino, before.rdev, before.mode]);
      expect(temporaries(dirname(nul))).to.deep.equal([]);
    });

    it('an output that names an input, or another output, is refused before anything is read', async () => {
      // --decisions over its own trace replaced the trace with decisions, exit 0
      const config = join(sub, 'same.config.json');
      const trace = join(sub, 'same.trace.csv');
      writeFileSync(config, readFileSync(join(FIX, 'boundary.config.json')));
      writeFileSync(trace, readFileSync(join(FIX, 'boundary.trace.csv')));
      const traceBefore = readFileSync(trace, 'utf8');
      const alias = join(sub, 'same.alias.csv');
      linkSync(trace, alias); // another name of the same file
      const base = ['replay', '--config', config, '--trace', trace];
      const [overTrace, overConfig, overLink, twoOutputs, kamailio] = await Promise.all([
        run([...base, '--decisions', trace]),
        run([...base, '--html', config]),
        run([...base, '--decisions', alias]),
        run([...base, '--decisions', join(sub, 'both.out'), '--html', join(sub, 'both.out')]),
        run(['kamailio', '--config', config, '--out', config]),
      ]);
      expectOneLine(
        overTrace,
        /^error: --decisions ".*same\.trace\.csv" is the file of --trace: an output never replaces an input$/,
      );
      expectOneLine(
        overConfig,
        /^error: --html ".*same\.config\.json" is the file of --config: an output never replaces an input$/,
      );
      expectOneLine(overLink, /^error: --decisions ".*same\.alias\.csv" is the file of --trace: /);
      expectOneLine(
        twoOutputs,
        /^error: --html ".*both\.out" is the file of --decisions too: one output would replace the other$/,
      );
      expectOneLine(
        kamailio,
        /^error: --out ".*same\.config\.json" is the file of --config: an output never replaces an input$/,
      );
      expect(readFileSync(trace, 'utf8')).to.equal(traceBefore);
      expect(readFileSync(config, 'utf8')).to.equal(readFileSync(join(FIX, 'boundary.config.json'), 'utf8'));
      expect(existsSync(join(sub, 'both.out'))).to.equal(false);
      expect(temporaries(sub)).to.deep.equal([]);
    });

    it('--html and merge-traces --out follow the same rules: a device stays, a directory is refused', async function () {
      const nul = device(this, sub, 'null');
      const before = statSync(nul);
      const directory = mkdtempSync(join(sub, 'out-dir-'));
      const [html, merge, htmlDir, mergeDir] = await Promise.all([
        run(replayArgs('boundary', '--html', nul)),
        run(['merge-traces', '--out', nul, join(FIX, 'boundary.trace.csv')]),
        run(replayArgs('boundary', '--html', directory)),
        run(['merge-traces', '--out', directory, join(FIX, 'boundary.trace.csv')]),
      ]);
      expect(html.code, html.stderr).to.equal(0);
      expect(merge.code, merge.stderr).to.equal(0);
      const after = statSync(nul);
      expect(after.isCharacterDevice()).to.equal(true);
      expect([after.ino, after.rdev]).to.deep.equal([before.ino, before.rdev]);
      expectOneLine(htmlDir, /^error: cannot write the HTML report .*out-dir-\w+: it is a directory$/);
      expectOneLine(mergeDir, /^error: cannot write the merged trace .*out-dir-\w+: it is a directory$/);
      expect(statSync(directory).isDirectory()).to.equal(true);
      expect(temporaries(sub)).to.deep.equal([]);
      expect(temporaries(dirname(nul))).to.deep.equal([]);
    });

    it('a regular file is replaced by an atomic rename, keeping its mode; a link keeps naming it', async () => {
      const file = join(sub, 'out.jsonl');
      writeFileSync(file, 'old content\n');
      chmodSync(file, 0o640);
      const oldName = join(sub, 'old-inode');
      linkSync(file, oldName); // a second name for the old file: a rename leaves it untouched
      const link = join(sub, 'link.jsonl');
      symlinkSync(file, link);
      const r = await run(replayArgs('campaign', '--decisions', link));
      expect(r.code, r.stderr).to.equal(0);
      expect(readFileSync(file, 'utf8')).to.equal(expected);
      expect(readFileSync(oldName, 'utf8')).to.equal('old content\n');
      expect(statSync(file).ino).not.to.equal(statSync(oldName).ino);
      expect(statSync(file).mode & 0o777).to.equal(0o640);
      expect(readFileSync(link, 'utf8')).to.equal(expected); // still a link to the file
      expect(temporaries(sub)).to.deep.equal([]);
    });

    it('a name of standard output (/dev/stdout) takes standard output, as - does', async () => {
      // /proc/self/fd/1 is what /dev/stdout links to; unlike /dev, /proc takes no new file, so a
      // regression that renames over the target cannot replace the machine's /dev/stdout
      const r = await run(replayArgs('campaign', '--decisions', '/proc/self/fd/1'));
      expect(r.code, r.stderr).to.equal(0);
      expect(r.stdout).to.equal(expected);
      expect(r.stderr).to.match(/2450 calls/);
    });
  });

  describe('many problems: the first 20, then a count of the rest', () => {
    it('a trace with 50 bad rows', async () => {
      const trace = join(dir, 'fifty.trace.csv');
      const rows = Array.from({ length: 50 }, (_, i) => `bad-${i},c${i},in,p1,,`);
      writeFileSync(trace, ['time,call_id,direction,peer,account,route', ...rows, ''].join('\n'));
      const r = await run(['replay', '--config', join(FIX, 'boundary.config.json'), '--trace', trace]);
      expect(r.code).to.equal(2);
      const lines = r.stderr.trimEnd().split('\n');
      expect(lines).to.have.length(21);
      expect(lines[0]).to.equal(`error: ${trace}:2: column "time": bad time "bad-0"`);
      expect(lines[19]).to.equal(`error: ${trace}:21: column "time": bad time "bad-19"`);
      expect(lines[20]).to.equal('error: … and 30 more problems');
    });

    it('a trace with more bad rows than the validation keeps (1,000): all are counted', async () => {
      const trace = join(dir, 'many.trace.csv');
      const rows = Array.from({ length: 1500 }, (_, i) => `2024-01-01T00:00:00Z,c${i},sideways,p1,,`);
      writeFileSync(trace, ['time,call_id,direction,peer,account,route', ...rows, ''].join('\n'));
      const r = await run(['replay', '--config', join(FIX, 'boundary.config.json'), '--trace', trace]);
      expect(r.code).to.equal(2);
      const lines = r.stderr.trimEnd().split('\n');
      expect(lines).to.have.length(21);
      expect(lines[20]).to.equal('error: … and 1480 more problems');
    });

    it('a configuration with 2,000 problems (200,000 in config.test.ts)', async () => {
      const cfg = join(dir, 'many-problems.config.json');
      const peers = Object.fromEntries(
        Array.from({ length: 2_000 }, (_, i) => [`p${i}`, [{ limit: 0, window: '1s' }]]),
      );
      writeFileSync(cfg, JSON.stringify({ inbound: { peers } }));
      const r = await run(['replay', '--config', cfg, '--trace', join(FIX, 'boundary.trace.csv')]);
      expect(r.code).to.equal(2);
      const lines = r.stderr.trimEnd().split('\n');
      expect(lines).to.have.length(21);
      expect(lines[0]).to.equal(`error: ${cfg}: inbound.peers.p0[0].limit: expected a positive integer, got 0`);
      expect(lines[20]).to.equal('error: … and 1980 more problems');
    });
  });

  describe('SIGINT / SIGTERM during a replay', () => {
    let sub: string;
    let trace: string;
    let config: string;
    before(async function () {
      this.timeout(120_000);
      sub = mkdtempSync(join(dir, 'signal-'));
      trace = join(sub, 'big.trace.csv');
      config = join(sub, 'big.config.json');
      await writeTrace(trace, config, { calls: 100_000, seed: 7 });
    });

    /**
     * Starts a replay of the large trace into `out`, waits until the temporary file holds
     * decisions (or, with `early`, until it exists: the trace is still being validated), sends
     * `signal`, and returns how the process ended.
     */
    async function interrupt(
      signal: 'SIGINT' | 'SIGTERM',
      out: string,
      extra: string[] = [],
      early = false,
    ): Promise<Run> {
      const child = spawn(
        process.execPath,
        [BIN, 'replay', '--config', config, '--trace', trace, '--decisions', out, ...extra],
        { cwd: ROOT },
      );
      let stdout = '';
      let stderr = '';
      child.stdout.on('data', (b: Buffer) => (stdout += b));
      child.stderr.on('data', (b: Buffer) => (stderr += b));
      const closed = once(child, 'close');
      const deadline = Date.now() + 60_000;
      for (;;) {
        const tmp = temporaries(sub).find((f) => f.startsWith('out'));
        if (tmp !== undefined && (early || statSync(join(sub, tmp)).size > 0)) break;
        if (child.exitCode !== null || Date.now() > deadline)
          throw new Error(`the replay never started writing: ${stderr}`);
        await new Promise((r) => setTimeout(r, 20));
      }
      child.kill(signal);
      const [code] = (await closed) as [number | null];
      return { code, stdout, stderr };
    }

    for (const [signal, code] of [
      ['SIGINT', 130],
      ['SIGTERM', 143],
    ] as const) {
      it(`${signal} after the first decisions are written: exit ${code}, no temporary file, no decisions file`, async () => {
        const out = join(sub, `out-${signal}.jsonl`);
        const r = await interrupt(signal, out);
        expect(r.code, r.stderr).to.equal(code);
        expect(r.stderr).to.equal(`error: interrupted by ${signal}\n`);
        expect(temporaries(sub)).to.deep.equal([]);
        expect(existsSync(out)).to.equal(false);
      });
    }

    it('SIGINT while the trace is still being validated', async () => {
      const out = join(sub, 'out-early.jsonl');
      const r = await interrupt('SIGINT', out, [], true);
      expect(r.code, r.stderr).to.equal(130);
      expect(temporaries(sub)).to.deep.equal([]);
      expect(existsSync(out)).to.equal(false);
    });

    it('an existing decisions file is left as it was', async () => {
      const out = join(sub, 'out-kept.jsonl');
      writeFileSync(out, 'previous run\n');
      const r = await interrupt('SIGTERM', out);
      expect(r.code, r.stderr).to.equal(143);
      expect(readFileSync(out, 'utf8')).to.equal('previous run\n');
      expect(temporaries(sub)).to.deep.equal([]);
    });
  });

  describe('--store redis', () => {
    let handle: RedisHandle;
    before(async () => {
      handle = await getRedis();
    });
    after(async () => handle?.stop());

    it('gives the same decisions file as the memory store, and leaves no key behind', async () => {
      const mem = join(dir, 'mem.jsonl');
      const red = join(dir, 'red.jsonl');
      const a = await run(replayArgs('campaign', '--decisions', mem));
      const b = await run(replayArgs('campaign', '--decisions', red, '--store', 'redis', '--redis-url', handle.url));
      expect(a.code, a.stderr).to.equal(0);
      expect(b.code, b.stderr).to.equal(0);
      expect(b.stdout).to.match(/on the redis store/);
      expect(readFileSync(red, 'utf8')).to.equal(readFileSync(mem, 'utf8'));
      const { Redis } = await import('ioredis');
      const redis = new Redis(handle.url);
      try {
        expect(await redis.keys('callgate:replay:*')).to.deep.equal([]);
      } finally {
        redis.disconnect();
      }
    });

    it('SIGINT during a replay on Redis: exit 130, no temporary file, no key left', async function () {
      this.timeout(180_000);
      const sub = mkdtempSync(join(dir, 'redis-signal-'));
      const trace = join(sub, 'big.trace.csv');
      const config = join(sub, 'big.config.json');
      await writeTrace(trace, config, { calls: 100_000, seed: 3 });
      const out = join(sub, 'out.jsonl');
      const child = spawn(
        process.execPath,
        [
          BIN,
          'replay',
          '--config',
          config,
          '--trace',
          trace,
          '--decisions',
          out,
          '--store',
          'redis',
          '--redis-url',
          handle.url,
        ],
        { cwd: ROOT },
      );
      let stderr = '';
      child.stderr.on('data', (b: Buffer) => (stderr += b));
      const closed = once(child, 'close');
      const deadline = Date.now() + 120_000;
      for (;;) {
        const tmp = temporaries(sub)[0];
        if (tmp !== undefined && statSync(join(sub, tmp)).size > 0) break;
        if (child.exitCode !== null || Date.now() > deadline)
          throw new Error(`the replay never started writing: ${stderr}`);
        await new Promise((r) => setTimeout(r, 20));
      }
      child.kill('SIGINT');
      const [code] = (await closed) as [number | null];
      expect(code, stderr).to.equal(130);
      expect(temporaries(sub)).to.deep.equal([]);
      expect(existsSync(out)).to.equal(false);
      const { Redis } = await import('ioredis');
      const redis = new Redis(handle.url);
      try {
        expect(await redis.keys('callgate:replay:*')).to.deep.equal([]);
      } finally {
        redis.disconnect();
      }
    });

    it('an unreachable Redis: a clear one-line error, no stack trace', async () => {
      const r = await run(replayArgs('boundary', '--store', 'redis', '--redis-url', 'redis://127.0.0.1:1'));
      expect(r.code).to.equal(1);
      expect(r.stderr.trim().split('\n')).to.have.length(1);
      expect(r.stderr).to.match(/cannot reach Redis at redis:\/\/127\.0\.0\.1:1/);
    });
  });
});

describe('callgate (the program)', function () {
  this.timeout(60_000);
  const COMMANDS = ['replay', 'serve', 'inspect', 'merge-traces', 'holds', 'release', 'reset', 'unban', 'kamailio'];

  it('--help names every command, one line each', async () => {
    const r = await run(['--help']);
    expect(r.code, r.stderr).to.equal(0);
    const list = r.stdout
      .slice(r.stdout.indexOf('Commands:\n') + 'Commands:\n'.length)
      .trimEnd()
      .split('\n');
    // a summary too long for 80 columns wraps, and its tail would read as a command of its own
    expect(
      list.map((l) => l.trim().split(' ')[0]),
      'the commands, one line each (a wrapped summary shows as an extra entry)',
    ).to.deep.equal([...COMMANDS, 'help']);
    for (const line of list) expect(line, 'a summary on the same line').to.match(/^ {2}\S.*\S {2,}\S/);
  });

  it("an operator's wrong bucket, level or value is exit 2 before Redis is reached, not an outage", async () => {
    // checked only once connected, they said "cannot reach Redis" (exit 1) with Redis away,
    // and reset asked its [y/N] about a bucket that does not exist
    const dir = mkdtempSync(join(tmpdir(), 'callgate-operate-'));
    try {
      const attr = join(dir, 'attr.json');
      writeFileSync(
        attr,
        JSON.stringify({
          inbound: {
            defaultPeer: [{ limit: 5, window: '1s' }],
            attributes: [{ name: 'caller', key: 'caller', limits: [{ limit: 3, window: '1s' }] }],
          },
        }),
      );
      const away = ['--redis-url', 'redis://127.0.0.1:1'];
      const [holds, reset, unban, inspect] = await Promise.all([
        run(['holds', '--config', attr, '--bucket', 'nope', ...away]),
        run(['reset', '--config', attr, '--bucket', 'account:x', '--yes', ...away]),
        run(['unban', '--config', attr, '--level', 'caller', '--value', 'x', ...away]),
        run(['inspect', '--config', attr, '--value', 'nope:1', ...away]),
      ]);
      expectOneLine(holds, /^error: bucket "nope": expected global, account:<id> or peer:<id>, or caller:<value>$/);
      expectOneLine(reset, /^error: bucket account:x: the configuration has no account "x"$/);
      expectOneLine(unban, /^error: the attribute level "caller" has no ban$/);
      expectOneLine(inspect, /^error: expected <level>:<value> of a configured attribute level, got "nope:1"$/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('kamailio: the include on standard output; a prefix it cannot say: exit 2, one line', async () => {
    const cfg = 'examples/kamailio/limits.json';
    const ok = await run(['kamailio', '--config', cfg]);
    expect(ok.code, ok.stderr).to.equal(0);
    expect(ok.stdout).to.include('route[CALLGATE_TABLES]').and.include('route[CALLGATE_LOAD]');
    const bad = await run(['kamailio', '--config', cfg, '--prefix', 'a b']);
    expect(bad.code).to.equal(2);
    expect(bad.stderr.trim().split('\n')).to.have.length(1);
    expect(bad.stderr).to.match(/^error: prefix must not contain/);
    const share = await run(['kamailio', '--config', cfg, '--local-share', 'abc']);
    expect([share.code, share.stderr]).to.deep.equal([
      2,
      'error: --local-share: expected a number > 0 and <= 1, got "abc"\n',
    ]);
    // a reader that went away (| head -1): one line, as the replay's outputs, not a stack trace
    const closed = await new Promise<{ code: number | null; stderr: string }>((resolve) => {
      const child = spawn(process.execPath, [BIN, 'kamailio', '--config', cfg], { cwd: ROOT });
      child.stdout.destroy();
      let stderr = '';
      child.stderr.on('data', (b: Buffer) => (stderr += b));
      child.on('close', (code) => resolve({ code, stderr }));
    });
    expect([closed.code, closed.stderr]).to.deep.equal([
      2,
      'error: cannot write the include to standard output: its reader closed it (EPIPE)\n',
    ]);
  });

  it('release --call-id and inspect --peer: ids bound as everywhere (empty, over 256): exit 2, one line', async () => {
    for (const [args, line] of [
      [
        ['release', '--call-id', 'x'.repeat(257)],
        'error: --call-id must be at most 256 characters (UTF-16 code units), got 257',
      ],
      [['release', '--call-id', ''], 'error: --call-id must not be empty'],
      [['inspect', '--config', 'examples/limits/complete.json', '--peer', ''], 'error: --peer must not be empty'],
    ] as const) {
      const r = await run([...args]);
      expect([r.code, r.stderr], args.join(' ').slice(0, 60)).to.deep.equal([2, `${line}\n`]);
    }
  });

  it('kamailio --out: written whole; a directory, a missing directory or a full device: exit 2, one line', async function () {
    const cfg = 'examples/kamailio/limits.json';
    const dir = mkdtempSync(join(tmpdir(), 'callgate-kamailio-out-'));
    try {
      const full = device(this, dir, 'full');
      const out = join(dir, 'callgate-redis.cfg');
      const ok = await run(['kamailio', '--config', cfg, '--out', out]);
      expect([ok.code, ok.stdout, ok.stderr]).to.deep.equal([0, '', '']);
      expect(readFileSync(out, 'utf8')).to.include('route[CALLGATE_TABLES]');
      for (const [target, reason] of [
        [dir, 'it is a directory'],
        [join(dir, 'none', 'x.cfg'), 'no such file or directory (ENOENT)'],
        [full, 'no space left on device, write (ENOSPC)'],
      ] as const) {
        const bad = await run(['kamailio', '--config', cfg, '--out', target]);
        expect([bad.code, bad.stderr], target).to.deep.equal([
          2,
          `error: cannot write the include to ${target}: ${reason}\n`,
        ]);
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('kamailio on lanes: --hash-tags, --lease-lanes, --lease-pin, --lease-overflow; what cannot be leased: exit 2, one line', async () => {
    const leased = 'examples/limits/leased.json';
    const tags = await run(['kamailio', '--config', leased, '--hash-tags']);
    expect(tags.code, tags.stderr).to.equal(0);
    expect(tags.stdout).to.include('callgate:{in}:call:in:').and.not.include('global:share');
    const lanes = await run(['kamailio', '--config', leased, '--lease-lanes', '4', '--lease-pin', 'peer:p1=2']);
    expect(lanes.code, lanes.stderr).to.equal(0);
    expect(lanes.stdout)
      .to.include(`callgate:{${laneTag(2, 4)}}:global:share`)
      .and.not.include('spill:');
    const overflow = await run(['kamailio', '--config', leased, '--lease-lanes', '4', '--lease-overflow']);
    expect(overflow.code, overflow.stderr).to.equal(0);
    expect(overflow.stdout).to.include('callgate:{in:overflow}:global:share').and.include('"spill::p1"');
    for (const [args, message] of [
      [['--config', leased, '--lease-lanes', '0'], /^error: --lease-lanes: expected an integer from 1/],
      [['--config', leased, '--lease-pin', 'peer:p1=0'], /^error: --lease-pin needs --lease-lanes/],
      [
        ['--config', 'examples/kamailio/limits.json', '--lease-lanes', '4'],
        /^error: a leased global level must be configured/,
      ],
    ] as const) {
      const bad = await run(['kamailio', ...args]);
      expect(bad.code, args.join(' ')).to.equal(2);
      expect(bad.stderr.trim().split('\n')).to.have.length(1);
      expect(bad.stderr).to.match(message);
    }
  });

  it('no --help shows the password of $REDIS_URL', async () => {
    const env = { REDIS_URL: 'redis://u:hunter2-secret@127.0.0.1:6379' };
    for (const name of ['replay', 'serve', 'inspect', 'unban']) {
      const r = await run([name, '--help'], env);
      expect(r.code, r.stderr).to.equal(0);
      expect(r.stdout, name).to.include('--redis-url');
      expect(r.stdout, name).not.to.include('hunter2');
    }
  });

  it('a --redis-url that is no URL: exit 2, one line, in every command on Redis', async () => {
    const cfg = join(FIX, 'boundary.config.json');
    const url = 'notaurl::';
    const [replay, inspect] = await Promise.all([
      run(replayArgs('boundary', '--store', 'redis', '--redis-url', url)),
      run(['inspect', '--config', cfg, '--redis-url', url]),
    ]);
    expectOneLine(replay, /invalid --redis-url "notaurl::": expected redis:\/\/host:port or rediss:\/\/…$/);
    expectOneLine(inspect, /invalid --redis-url "notaurl::": expected redis:\/\/host:port or rediss:\/\/…$/);
  });
});
