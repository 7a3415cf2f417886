/**
 * The reference SIP edge (examples/sip-edge) in a real call path, for the end-to-end test and
 * `npm run bench:edge`: two sipp carriers, the edge as its own process (`npm run edge`'s entry
 * point) on loopback, a sipp caller at OFFERED_CPS (three times peer p1's limit) identified by its
 * source address, and a "busy" caller (peer p2, by its From user) whose calls the carriers answer
 * 486. Returns sipp's reports and the edge's summary; every process is gone when it returns.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import type { EdgeSummary } from '../../examples/sip-edge/edge.js';
import type { RedisServer } from './redis.js';
import { freeUdpPort, leftAfter, startSipp, type SipLogEntry, type SippReport } from './sipp.js';

export const SCENARIOS = path.resolve('examples/sip-edge/sipp');
export const S = 1_000_000;
export const PEER_LIMIT = 10;
export const OFFERED_CPS = 30;
export const BUSY_CPS = 2;
export const CPS = { A: 5, B: 8 } as const;
/** The resolution of the clocks compared (timers and sipp's -timer_resol 1): 1 ms. */
export const RESOLUTION_US = 1_000;
export const PAUSE_MS = 300;
/** Calls in progress p1 may have: a little below what its rate and the call length make, so some are refused for channels. */
export const P1_CHANNELS = 6;

export interface Run {
  offered: number;
  callers: SippReport[];
  carriers: Record<'A' | 'B', SippReport>;
  summary: EdgeSummary;
  edgeStderr: string;
  killAt?: number;
  restartAt?: number;
}

/** The edge as its own process; resolves once it listens. */
async function startEdge(
  configFile: string,
  extra: string[],
): Promise<{ child: ChildProcess; stop(): Promise<{ summary: EdgeSummary; stderr: string }> }> {
  const child = spawn(
    process.execPath,
    ['--conditions=callgate-source', '--import', 'tsx', 'examples/sip-edge/main.ts', '--config', configFile, ...extra],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let stderr = '';
  child.stderr.on('data', (b: Buffer) => (stderr += b.toString()));
  const lines: string[] = [];
  let wake: (() => void) | undefined;
  createInterface({ input: child.stdout }).on('line', (l) => {
    lines.push(l);
    wake?.();
  });
  const exited = new Promise<number | null>((r) =>
    child.once('exit', (code) => {
      r(code);
      wake?.();
    }),
  );
  const next = async (ms: number) => {
    const until = Date.now() + ms;
    while (lines.length === 0) {
      if (child.exitCode !== null || Date.now() > until)
        throw new Error(`edge: no output (exit ${child.exitCode}); stderr:\n${stderr}`);
      await new Promise<void>((r) => {
        wake = r;
        setTimeout(r, 100);
      });
    }
    return lines.shift()!;
  };
  try {
    const ready = JSON.parse(await next(30_000)) as { listening?: string };
    if (!ready.listening) throw new Error(`edge: unexpected first line ${JSON.stringify(ready)}`);
  } catch (err) {
    child.kill('SIGKILL');
    throw err;
  }
  return {
    child,
    async stop() {
      child.kill('SIGTERM');
      const summary = JSON.parse(await next(15_000)) as EdgeSummary;
      const code = await exited;
      if (code !== 0) throw new Error(`edge exited with ${code}; stderr:\n${stderr}`);
      return { summary, stderr };
    },
  };
}

export async function runCalls(opts: {
  store: 'memory' | 'redis';
  redis?: RedisServer;
  seconds: number;
  outage?: { killAtMs: number; restartAtMs: number };
}): Promise<Run> {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'callgate-sip-'));
  const started: { stop(): Promise<unknown> }[] = [];
  try {
    const carriers = await Promise.all(
      (['A', 'B'] as const).map((name) =>
        startSipp({
          name: `carrier${name}`,
          scenario: path.join(SCENARIOS, 'carrier.xml'),
          dir,
          timeoutS: 90,
          priority: true,
          trace: 'short',
        }),
      ),
    );
    started.push(...carriers);
    const [listen, callerPort] = [await freeUdpPort(), await freeUdpPort()];
    const config = {
      listen: `127.0.0.1:${listen}`,
      limits: {
        inbound: {
          peers: {
            p1: [{ limit: PEER_LIMIT, window: 'PT1S' }, { channels: P1_CHANNELS }],
            p2: [{ limit: 5, window: 'PT1S' }],
          },
        },
        outbound: {
          carriers: {
            A: { cps: CPS.A, maxWait: 'PT0.3S', channels: 3 },
            B: { cps: CPS.B, maxWait: 'PT0.6S', channels: 6 },
          },
        },
      },
      // p1 by its source address; p2 (the busy caller) by its From user, the documented fallback
      peers: { p1: { sources: [`127.0.0.1:${callerPort}`] }, p2: {} },
      identify: ['source', 'pai', 'from'],
      route: ['A', 'B'],
      carriers: { A: { address: `127.0.0.1:${carriers[0]!.port}` }, B: { address: `127.0.0.1:${carriers[1]!.port}` } },
      retryAfterJitter: 2,
      timeoutMs: 200,
    };
    const configFile = path.join(dir, 'edge.json');
    writeFileSync(configFile, JSON.stringify(config, null, 2));
    const storeArgs =
      opts.store === 'redis'
        ? ['--store', 'redis', '--redis-url', opts.redis!.url, '--prefix', `e2e:${randomBytes(4).toString('hex')}:`]
        : [];
    const edge = await startEdge(configFile, storeArgs);
    started.push({ stop: async () => edge.child.kill('SIGKILL') });
    const offered = OFFERED_CPS * opts.seconds;
    const t0 = Date.now();
    const callers = await Promise.all([
      startSipp({
        name: 'caller',
        scenario: path.join(SCENARIOS, 'caller.xml'),
        dir,
        port: callerPort,
        remote: `127.0.0.1:${listen}`,
        rate: OFFERED_CPS,
        calls: offered,
        pauseMs: PAUSE_MS,
        service: '1000',
        keys: { caller: 'p1' },
        timeoutS: 60,
      }),
      startSipp({
        name: 'busy',
        scenario: path.join(SCENARIOS, 'caller.xml'),
        dir,
        remote: `127.0.0.1:${listen}`,
        rate: BUSY_CPS,
        calls: BUSY_CPS * opts.seconds,
        service: 'busy',
        keys: { caller: 'p2' },
        timeoutS: 60,
      }),
    ]);
    started.push(...callers);
    let killAt: number | undefined;
    let restartAt: number | undefined;
    if (opts.outage) {
      await new Promise((r) => setTimeout(r, opts.outage!.killAtMs - (Date.now() - t0)));
      killAt = Date.now() * 1000;
      await opts.redis!.kill('SIGKILL');
      await new Promise((r) => setTimeout(r, opts.outage!.restartAtMs - (Date.now() - t0)));
      await opts.redis!.restart();
      restartAt = Date.now() * 1000;
    }
    const callerReports = await Promise.all(callers.map((c) => c.done(60_000)));
    const carrierReports = await Promise.all(carriers.map((c) => c.stop()));
    const { summary, stderr } = await edge.stop();
    started.length = 0;
    return {
      offered,
      callers: callerReports,
      carriers: { A: carrierReports[0]!, B: carrierReports[1]! },
      summary,
      edgeStderr: stderr,
      killAt,
      restartAt,
    };
  } finally {
    await Promise.all(started.map((s) => s.stop().catch(() => undefined)));
    if (process.env.SIP_E2E_KEEP) console.log(`      traces kept in ${dir}`);
    else rmSync(dir, { recursive: true, force: true });
  }
}

/**
 * The caller's INVITEs (first transmission), their first 100 Trying and their final response, per
 * call. `leftAfter`: a time before the INVITE left (sipp.ts, leftAfter: a loaded host may run the
 * edge's decision before sipp's logged send time).
 */
export function callsOf(report: SippReport) {
  const calls = new Map<string, { invite?: number; leftAfter?: number; trying?: number; final?: SipLogEntry }>();
  const bounds = leftAfter(report.messages);
  for (const [i, m] of report.messages.entries()) {
    if (!/ INVITE$/.test(m.cseq)) continue;
    const c = calls.get(m.callId) ?? {};
    calls.set(m.callId, c);
    if (m.dir === 'sent' && m.method === 'INVITE' && c.invite === undefined) {
      c.invite = m.t;
      c.leftAfter = bounds[i];
    }
    if (m.dir === 'received' && m.status === 100) c.trying ??= m.t;
    if (m.dir === 'received' && m.status! >= 200) c.final ??= m;
  }
  return calls;
}
