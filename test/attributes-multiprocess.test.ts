/**
 * The abuse configuration (scripts/gen-abuse-trace.ts) live: four routing processes on one
 * Redis, each a child process with its own connection and CallGate on Redis TIME, offering the
 * robocaller's and the scanner's calls as fast as they can beside normal calls, for ~2.5 s. The
 * limits hold across all four, the scanner is banned within a second for every process, and
 * normal calls pass.
 */
import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';
import { getRedis, type RedisHandle } from './helpers/redis.js';
import { uniquePrefix } from './admission/stores.js';
import type { AbuseWorkerArgs, AbuseWorkerReport } from './attributes/worker.js';

const WORKER = fileURLToPath(new URL('./attributes/worker.ts', import.meta.url));
const ROOT = fileURLToPath(new URL('..', import.meta.url));

interface Child {
  ready: Promise<void>;
  report: Promise<AbuseWorkerReport>;
  go(): void;
  kill(): void;
}

function startWorker(args: AbuseWorkerArgs, timeoutMs: number): Child {
  const child = spawn(process.execPath, ['--import', 'tsx', WORKER, JSON.stringify(args)], {
    cwd: ROOT,
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  let stderr = '';
  child.stderr.on('data', (d: Buffer) => (stderr = (stderr + d.toString()).slice(-4_000)));
  let onReady!: () => void;
  let onReport!: (r: AbuseWorkerReport) => void;
  let failReady!: (e: Error) => void;
  let failReport!: (e: Error) => void;
  const ready = new Promise<void>((res, rej) => {
    onReady = res;
    failReady = rej;
  });
  const report = new Promise<AbuseWorkerReport>((res, rej) => {
    onReport = res;
    failReport = rej;
  });
  ready.catch(() => {});
  report.catch(() => {});
  const fail = (e: Error) => {
    failReady(e);
    failReport(e);
  };
  createInterface({ input: child.stdout }).on('line', (line) => {
    const msg = JSON.parse(line) as { ready?: boolean } & AbuseWorkerReport;
    if (msg.ready) onReady();
    else onReport(msg);
  });
  const timer = setTimeout(() => {
    child.kill('SIGKILL');
    fail(new Error(`worker ${args.id} timed out; stderr: ${stderr}`));
  }, timeoutMs);
  timer.unref();
  child.on('exit', (code) => {
    clearTimeout(timer);
    if (code !== 0) fail(new Error(`worker ${args.id} exited with ${code}; stderr: ${stderr}`));
  });
  return { ready, report, go: () => child.stdin.write('go\n'), kill: () => child.kill('SIGKILL') };
}

/** The largest number of times in any window (t − W, t] (times sorted). */
function maxInWindow(sorted: readonly number[], W: number): number {
  let max = 0;
  let lo = 0;
  for (let hi = 0; hi < sorted.length; hi++) {
    while (sorted[lo]! <= sorted[hi]! - W) lo++;
    max = Math.max(max, hi - lo + 1);
  }
  return max;
}

describe('four routing processes under attack on one Redis (attribute levels, live Redis TIME)', function () {
  this.timeout(60_000);
  let handle: RedisHandle;
  const children: Child[] = [];
  before(async () => {
    handle = await getRedis();
  });
  after(async () => {
    for (const c of children) c.kill();
    await handle?.stop();
  });

  it('the robocaller and the scanner are held to their limits across processes; the scanner is banned everywhere', async () => {
    const prefix = uniquePrefix('attr-mp');
    for (let i = 0; i < 4; i++)
      children.push(startWorker({ id: `w${i}`, url: handle.url, prefix, durationMs: 2_500 }, 45_000));
    await Promise.all(children.map((c) => c.ready));
    for (const c of children) c.go();
    const reports = await Promise.all(children.map((c) => c.report));
    for (const r of reports) expect(r.errors, r.id).to.deep.equal([]);
    const all = (k: 'robocaller' | 'scanner' | 'normal', f: 'admitted' | 'banned') =>
      reports.flatMap((r) => r[k][f]).sort((a, b) => a - b);
    const offered = (k: 'robocaller' | 'scanner' | 'normal') => reports.reduce((a, r) => a + r[k].offered, 0);
    const robo = all('robocaller', 'admitted');
    const scan = all('scanner', 'admitted');
    const scanBans = all('scanner', 'banned');
    console.log(
      `      robocaller ${offered('robocaller')} offered, ${robo.length} admitted; scanner ${offered('scanner')} offered, ${scan.length} admitted, ${scanBans.length} banned; normal ${offered('normal')} offered, ${all('normal', 'admitted').length} admitted`,
    );
    // the caller level: 2 per second and 10 per minute for the one number, whatever the trunk and process
    expect(maxInWindow(robo, 1_000_000)).to.be.at.most(2);
    expect(robo.length).to.be.at.most(10);
    expect(offered('robocaller')).to.be.above(100);
    // the source level: 50 per second; banned within a second of the first call, after that nothing in
    expect(maxInWindow(scan, 1_000_000)).to.be.at.most(50);
    expect(scanBans.length).to.be.above(0);
    expect(scanBans[0]! - scan[0]!).to.be.below(1_000_000);
    expect(scan.filter((t) => t > scanBans[0]!)).to.deep.equal([]);
    // every process saw the ban
    for (const r of reports) expect(r.scanner.banned.length, r.id).to.be.above(0);
    // normal calls, each with a caller and source of its own, all pass
    expect(all('normal', 'admitted')).to.have.length(offered('normal'));
    expect(offered('normal')).to.be.above(40);
  });
});
