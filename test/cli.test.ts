/**
 * The callgate command as a user runs it: a real child process, real files, exit codes.
 */
import { expect } from 'chai';
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { getRedis, type RedisHandle } from './helpers/redis.js';
import { runNode, type Run } from './helpers/run.js';

const ROOT = new URL('..', import.meta.url).pathname;
const BIN = join(ROOT, 'bin/callgate.js');
const FIX = join(ROOT, 'fixtures');

function run(args: string[], env: NodeJS.ProcessEnv = {}): Promise<Run> {
  return runNode([BIN, ...args], { cwd: ROOT, env });
}

const replayArgs = (name: string, ...more: string[]) => ['replay', '--config', join(FIX, `${name}.config.json`), '--trace', join(FIX, `${name}.trace.csv`), ...more];

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

  it('--decisions - writes JSON Lines on stdout (one per call) and moves the report to stderr', async () => {
    const r = await run(replayArgs('boundary', '--decisions', '-'));
    expect(r.code, r.stderr).to.equal(0);
    const lines = r.stdout.trim().split('\n').map((l) => JSON.parse(l) as Record<string, unknown>);
    const rows = readFileSync(join(FIX, 'boundary.trace.csv'), 'utf8').split('\n').filter((l) => l.trim() !== '' && !l.startsWith('#'));
    expect(lines).to.have.length(rows.length - 1);
    for (const d of lines) expect(d).to.include.keys('call_id', 'direction', 'outcome');
    expect(r.stderr).to.match(/calls/);
  });

  it('--json prints one JSON object with the proof that every limit held', async () => {
    const r = await run(replayArgs('user-windows', '--json'));
    expect(r.code, r.stderr).to.equal(0);
    const report = JSON.parse(r.stdout) as { all_limits_held: boolean; levels: { limits: { peak: number; limit: number }[] }[] };
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
        '2024-01-01T00:00:03Z,c5,out,,,',
        '2024-01-01T00:00:04Z,c6,in',
        '',
      ].join('\n'),
    );
    const out = join(dir, 'bad.jsonl');
    const r = await run(['replay', '--config', join(FIX, 'boundary.config.json'), '--trace', trace, '--decisions', out]);
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
    writeFileSync(cfg, JSON.stringify({ inbound: { peers: { p1: [{ limit: 0, window: 'abc' }] } }, outbound: { carriers: { A: { cps: -1 } } } }));
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
    const r = await run(['replay', '--config', join(FIX, 'boundary.config.json'), '--trace', join(FIX, 'boundary.trace.csv'), '--store', 'mongo']);
    expect(r.code).to.equal(2);
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

    it('an unreachable Redis: a clear one-line error, no stack trace', async () => {
      const r = await run(replayArgs('boundary', '--store', 'redis', '--redis-url', 'redis://127.0.0.1:1'));
      expect(r.code).to.equal(1);
      expect(r.stderr.trim().split('\n')).to.have.length(1);
      expect(r.stderr).to.match(/cannot reach Redis at redis:\/\/127\.0\.0\.1:1/);
    });
  });
});
