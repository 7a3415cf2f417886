/**
 * Every shell example of README.md and docs/*.md runs, with the real CLI: each ```sh block (but
 * the few marked ```sh no-run: installs, systemd, sipp and Kamailio sessions, benches, paths of
 * a user's own) runs in bash from the checkout's root, `npx callgate` being the checkout's
 * bin/callgate.js (what npx runs there). Only what cannot be the user's here is changed, and
 * said: redis://127.0.0.1:6379 becomes a Redis of the test's own, /tmp/ a temp dir, port 8790
 * a free port; a sidecar started in the foreground (`callgate serve`, which runs until stopped)
 * is started in the background and awaited, and stopped at the end. A block must exit 0, write
 * nothing to standard error (but the line `callgate reset` logs there by design), and print what
 * it shows; some outputs are checked further below.
 */
import { expect } from 'chai';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { docBlocks, type DocBlock } from './helpers/doc-blocks.js';
import { freePort, startRedisServer, type RedisServer } from './helpers/redis.js';
import { runProcess, type Run } from './helpers/run.js';

const ROOT = new URL('..', import.meta.url).pathname;
const RUN_TIMEOUT_MS = 60_000;

/** The block as bash runs it here (see the header). */
function script(block: DocBlock, ctx: { redisUrl: string; tmp: string; port: number }): string {
  const lines = block.code
    .replaceAll('redis://127.0.0.1:6379', ctx.redisUrl)
    .replaceAll('/tmp/', `${ctx.tmp}/`)
    .replaceAll('0.0.0.0:8790', `127.0.0.1:${ctx.port}`)
    .replaceAll('127.0.0.1:8790', `127.0.0.1:${ctx.port}`)
    .split('\n')
    .map((line) => {
      if (!/\b(npx callgate|bin\/callgate\.js) serve\b/.test(line)) return line;
      const command = line.replace(/\s+#.*$/, '').replace(/\s*&\s*$/, '');
      const listen = /--listen\b/.test(command) ? '' : ` --listen 127.0.0.1:${ctx.port}`;
      // in the background whether or not the block puts it there; its log kept apart
      return line.trimEnd().endsWith('&')
        ? `${command}${listen} >>"$CG_TMP/serve.log" 2>&1 &`
        : `cg_stop; ${command}${listen} >>"$CG_TMP/serve.log" 2>&1 & CG_SERVE=$!; cg_wait`;
    });
  return [
    'set -euo pipefail',
    `export CG_TMP=${JSON.stringify(ctx.tmp)}`,
    `npx() { if [ "$1" = callgate ]; then shift; node ${JSON.stringify(join(ROOT, 'bin/callgate.js'))} "$@"; else command npx "$@"; fi; }`,
    'CG_SERVE=',
    // cg_wait: up to 45 s for /healthz (a loaded machine once took over 20 s to start one)
    // `npx callgate serve … &` runs the function above in a subshell: its node child must be
    // stopped too, or it outlives the block (stray sidecars after a test run)
    'cg_stop() { if [ -n "$CG_SERVE" ]; then pkill -TERM -P "$CG_SERVE" 2>/dev/null || true; kill "$CG_SERVE" 2>/dev/null || true; wait "$CG_SERVE" 2>/dev/null || true; CG_SERVE=; fi; }',
    `cg_wait() { for _ in $(seq 225); do curl -sf 127.0.0.1:${ctx.port}/healthz >/dev/null && return 0; sleep 0.2; done; echo "the sidecar did not start: $(cat "$CG_TMP/serve.log")" >&2; return 1; }`,
    'trap cg_stop EXIT',
    ...lines,
  ].join('\n');
}

/** The block in bash; on a timeout its background processes are killed too. */
function bash(text: string): Promise<Run> {
  return runProcess('bash', ['-c', text], { cwd: ROOT, timeoutMs: RUN_TIMEOUT_MS, group: true, noteTimeout: true });
}

/**
 * Standard error but for what `callgate reset` logs there by design (what it removed, one line
 * per reset), which must be there: one such line for each reset the block runs.
 */
function withoutResetLog(block: DocBlock, stderr: string): string {
  const resets = block.code.split('\n').filter((l) => /\bcallgate reset\b/.test(l)).length;
  const lines = stderr.trim() === '' ? [] : stderr.trim().split('\n');
  const log = /^\d{4}-\d\d-\d\dT[\d:.]+Z reset \S+: removed \d+ events, \d+ window counters, \d+ holds/;
  expect(
    lines.filter((l) => log.test(l)),
    'the log line of each reset',
  ).to.have.length(resets);
  return lines.filter((l) => !log.test(l)).join('\n');
}

type Json = Record<string, unknown>;
const jsonLines = (text: string): Json[] =>
  text
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as Json);

/** An answer without what changes from run to run (times, the wait until a window has room). */
function stable(d: Json): Json {
  const { time_us: _t, slot_us: _s, retry_after_ms: _r, ...rest } = d;
  const sip = rest.sip as { headers?: Record<string, string> } | null | undefined;
  if (sip?.headers?.['Retry-After'] !== undefined) rest.sip = { ...sip, headers: { 'Retry-After': '…' } };
  return rest;
}

/** The answers the document shows are the ones the run gave (but for times). */
function sameAnswers(stdout: string, shown: string | undefined): void {
  expect(shown, 'the output shown after the block').to.be.a('string');
  const actual = jsonLines(stdout).filter((d) => !('level' in d)); // the sidecar's own log lines aside
  expect(actual.map(stable)).to.deep.equal(jsonLines(shown!).map(stable));
}

/** Checks beyond "exits 0, quiet on stderr, prints something", by a line of the block. */
const CHECKS: [string, (stdout: string, shown: string | undefined) => void][] = [
  [
    'head -3 /tmp/trunks.jsonl',
    (out) => expect(jsonLines(out).map((d) => typeof d.call_id)).to.deep.equal(['string', 'string', 'string']),
  ],
  [
    '--trace /tmp/calls.csv --decisions -',
    (out) => expect(jsonLines(out).map((d) => [d.call_id, d.outcome])).to.deep.include.members([['o1', 'dispatched']]),
  ],
  [
    "curl -s -w '\\n' 127.0.0.1:8790/v1/release -d 'call_id=c1'",
    (out, shown) => {
      sameAnswers(out, shown);
      const answers = jsonLines(out).filter((d) => !('level' in d));
      expect(answers.map((d) => d.outcome ?? d.error ?? d.status ?? d.reloaded)).to.deep.equal([
        'admitted',
        'admitted',
        'admitted',
        'rejected',
        'admitted',
        'admitted',
        'dispatched',
        'dispatched',
        'released',
        'not-held',
        undefined, // refresh: { call_id, refreshed }
        'bad-request',
        true,
        'ok',
        'ready',
      ]);
      expect(answers[3]).to.include({ call_id: 'c4', limited_by: 'peer:pbx-17' });
      expect(answers[4]).to.include({ call_id: 'c2', duplicate: true });
      expect(answers[7]).to.include({ carrier: 'carrier-b' });
      expect(answers[10]).to.deep.equal({ call_id: 'c2', refreshed: true });
    },
  ],
  [
    "curl -s '127.0.0.1:8790/v1/admit?call_id=c1&peer=acme-sbc-1&account=acme'",
    (out, shown) => sameAnswers(out, shown),
  ],
  [
    "curl -s -H 'Authorization: Bearer change-me-to-a-long-secret'",
    (out) => expect(jsonLines(out)[0]).to.include({ call_id: 'c1', outcome: 'admitted' }),
  ],
  ['--peer pbx-17 --json', (out) => expect(JSON.parse(out)).to.be.an('object')],
  [
    '-H "authorization: Bearer $CALLGATE_TOKEN" \'127.0.0.1:8790/v1/holds?bucket=peer:pbx-17\'',
    (out, shown) => sameAnswers(out, shown),
  ],
  // the files a user gets, as shown
  ['head -2 /tmp/callgate-redis.cfg', (out, shown) => expect(out).to.equal(shown)],
  ['ls /tmp/kamailio-redis', (out, shown) => expect(out).to.equal(shown)],
  [
    '--compare fixtures/campaign.config.json',
    (out, shown) => {
      // a replay is deterministic: the what-if section shown is the one printed, line for line
      const printed = new Set(out.split('\n').map((l) => l.trimEnd()));
      for (const line of shown!.split('\n').filter((l) => l.trim() !== ''))
        expect(printed.has(line.trimEnd()), `shown but not printed: ${line}`).to.equal(true);
    },
  ],
];

describe('every shell example of README.md and docs/ runs with the real CLI', function () {
  this.timeout(RUN_TIMEOUT_MS + 30_000);
  const blocks = docBlocks('sh');
  let redis: RedisServer;
  let tmp: string;

  before(async () => {
    redis = await startRedisServer();
    tmp = mkdtempSync(join(tmpdir(), 'callgate-doc-commands-'));
  });
  after(async () => {
    await redis?.stop();
    if (tmp) rmSync(tmp, { recursive: true, force: true });
  });

  it('the blocks not run are few and marked', () => {
    const skipped = docBlocks('sh', { withNoRun: true }).length - blocks.length;
    // installs, systemd, sipp/Kamailio sessions, benches (each several minutes, and performance
    // is never asserted in a test), a Cluster's slot move (test/slot-move.test.ts runs its
    // script): a new one needs a reason as good
    expect(skipped).to.be.at.most(19);
    expect(blocks.length).to.be.greaterThan(10);
  });

  it('every block with an output check is one of the blocks run', () => {
    for (const [line] of CHECKS)
      expect(
        blocks.some((b) => b.code.includes(line)),
        line,
      ).to.equal(true);
  });

  for (const block of blocks) {
    it(`${block.file}:${block.line} runs`, async () => {
      const r = await bash(script(block, { redisUrl: redis.url, tmp, port: await freePort() }));
      expect(r.code, `${r.stdout}\n${r.stderr}`).to.equal(0);
      // `--decisions -`: the decisions on standard output, so the report goes to standard error
      if (block.code.includes('--decisions -')) expect(r.stderr).to.match(/^callgate replay on the memory store/);
      else expect(withoutResetLog(block, r.stderr), `standard error\n--- stdout:\n${r.stdout}`).to.equal('');
      // a file written, a sidecar started (and awaited above) print nothing
      const quiet = (l: string) => l.trim() === '' || /^sed .*>/.test(l.trim()) || /\bcallgate serve\b/.test(l);
      if (!block.code.split('\n').every(quiet)) expect(r.stdout.trim(), 'prints what it shows').to.not.equal('');
      // the output shown, with the same changes as the block (its /tmp/ paths)
      const shown = block.shown?.replaceAll('/tmp/', `${tmp}/`);
      for (const [line, check] of CHECKS) if (block.code.includes(line)) check(r.stdout, shown);
    });
  }
});
