/**
 * Progress of long replays and what-ifs (50,000 calls or more): a bar on a terminal (run under
 * `script`, which gives the command a pseudo-terminal), one final line otherwise; nothing for a
 * short run.
 */
import { expect } from 'chai';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { runNode } from './helpers/run.js';

const ROOT = new URL('..', import.meta.url).pathname;
const BIN = join(ROOT, 'bin/callgate.js');
const CALLS = 50_000;

describe('progress of long replays and what-ifs', function () {
  this.timeout(120_000);
  let dir: string;
  let trace: string;
  let config: string;
  let old: string;
  before(() => {
    dir = mkdtempSync(join(tmpdir(), 'callgate-progress-'));
    trace = join(dir, 'long.csv');
    config = join(dir, 'new.json');
    old = join(dir, 'old.json');
    const rows = ['time,call_id,direction,peer'];
    for (let i = 0; i < CALLS; i++) rows.push(`${1_700_000_000 + i / 1000},c${i},in,p${i % 10}`);
    writeFileSync(trace, `${rows.join('\n')}\n`);
    const peers = (limit: number) => ({
      inbound: {
        peers: Object.fromEntries(Array.from({ length: 10 }, (_, i) => [`p${i}`, [{ limit, window: 'PT1S' }]])),
      },
    });
    writeFileSync(config, JSON.stringify(peers(60)));
    writeFileSync(old, JSON.stringify(peers(50)));
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  it('not on a terminal: one final line per long run on stderr, the report unchanged on stdout', async () => {
    const r = await runNode([BIN, 'replay', '--config', config, '--trace', trace], { cwd: ROOT });
    expect(r.code, r.stderr).to.equal(0);
    expect(r.stderr).to.match(
      /^replay: 50000 calls in \d+\.\d s, \d+ calls\/s, the trace's check and sort included\n$/,
    );
    expect(r.stdout).to.match(/^callgate replay on the memory store: 50000 calls/);

    const c = await runNode([BIN, 'replay', '--config', config, '--compare', old, '--trace', trace], { cwd: ROOT });
    expect(c.code, c.stderr).to.equal(0);
    expect(c.stderr).to.match(
      /^what-if: 50000 calls in \d+\.\d s, \d+ calls\/s, the trace's check and sort included\n$/,
    );
    // 10 peers at 60/s instead of 50/s, 100 calls/s offered each for 50 s: 10 more admitted per peer and second
    expect(c.stdout).to.match(/\n5000 of 50000 calls decided differently/);

    const quiet = await runNode([BIN, 'replay', '--config', config, '--trace', trace, '--no-progress'], { cwd: ROOT });
    expect(quiet.stderr).to.equal('');
  });

  it('on a terminal: a progress bar for the what-if that reaches 100%', () => {
    // script(1) runs the command on a pseudo-terminal and copies what it printed
    const cmd = [process.execPath, BIN, 'replay', '--config', config, '--compare', old, '--trace', trace]
      .map((a) => `'${a}'`)
      .join(' ');
    const out = execFileSync('script', ['-qec', `${cmd} > /dev/null`, '/dev/null'], {
      cwd: ROOT,
      encoding: 'utf8',
      timeout: 100_000,
    });
    expect(out).to.match(/what-if \[[█░]+\] \d+% \d+\/50000 calls/);
    expect(out).to.match(/what-if \[█+\] 100% 50000\/50000 calls/);
    expect(out).not.to.match(/what-if: 50000 calls in/);
  });
});
