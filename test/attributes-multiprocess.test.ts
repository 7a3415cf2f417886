/**
 * The abuse configuration (scripts/gen-abuse-trace.ts) live: four routing processes on one
 * Redis, each a child process with its own connection and CallGate on Redis TIME, offering the
 * robocaller's and the scanner's calls as fast as they can beside normal calls, for ~2.5 s. The
 * limits hold across all four, the scanner is banned within a second for every process, and
 * normal calls pass.
 */
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';
import { getRedis, type RedisHandle } from './helpers/redis.js';
import { maxInWindow } from './helpers/window.js';
import { startWorker, type Worker } from './helpers/worker.js';
import { uniquePrefix } from './admission/stores.js';
import type { AbuseWorkerArgs, AbuseWorkerReport } from './attributes/worker.js';

const WORKER = fileURLToPath(new URL('./attributes/worker.ts', import.meta.url));
const ROOT = fileURLToPath(new URL('..', import.meta.url));

describe('four routing processes under attack on one Redis (attribute levels, live Redis TIME)', function () {
  this.timeout(60_000);
  let handle: RedisHandle;
  const children: Worker<AbuseWorkerReport>[] = [];
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
      children.push(
        startWorker<AbuseWorkerReport>(
          WORKER,
          { id: `w${i}`, url: handle.url, prefix, durationMs: 2_500 } satisfies AbuseWorkerArgs,
          {
            cwd: ROOT,
            timeoutMs: 45_000,
            name: `worker w${i}`,
          },
        ),
      );
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
