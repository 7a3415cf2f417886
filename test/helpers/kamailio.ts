/**
 * A real Kamailio for the end-to-end tests (test/kamailio-*-e2e.test.ts): started in the
 * foreground on a free loopback UDP port, its output collected and written to `kamailio.log` in
 * its directory when it is stopped.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path, { join } from 'node:path';
import { type RedisServer, startRedisServer } from './redis.js';
import { freeUdpPort, SIPP_INSTALL_HINT, sippAvailable } from './sipp.js';

/** examples/kamailio/kamailio-redis.cfg, the configuration of Kamailio on callgate's Redis. */
export const KAMAILIO_REDIS_CFG = path.resolve('examples/kamailio/kamailio-redis.cfg');
/** Why a test of kamailio-redis.cfg cannot run, and what installs it. */
export const KAMAILIO_REDIS_HINT =
  'kamailio not found: install it (Debian: apt-get install kamailio kamailio-redis-modules); .ci/run does so when it is missing';

/**
 * A test of kamailio-redis.cfg's `before`: sipp and Kamailio with ndb_redis there (else a clear
 * error), a Redis server of its own and a directory for the traces (named `name…`).
 */
export async function kamailioRedisSetup(name: string): Promise<{ redis: RedisServer; dir: string }> {
  if (!sippAvailable()) throw new Error(SIPP_INSTALL_HINT);
  if (!kamailioAvailable('ndb_redis.so')) throw new Error(KAMAILIO_REDIS_HINT);
  return { redis: await startRedisServer(), dir: mkdtempSync(path.join(os.tmpdir(), name)) };
}

/** Its `after`: the server stopped, the traces removed (kept, and said where, with SIP_E2E_KEEP set). */
export async function kamailioRedisTeardown(redis: RedisServer | undefined, dir: string | undefined): Promise<void> {
  await redis?.stop();
  if (process.env.SIP_E2E_KEEP) console.log(`      traces kept in ${dir}`);
  else if (dir) rmSync(dir, { recursive: true, force: true });
}

/** Whether `kamailio` runs, and, when `module` is given, whether that module (e.g. ndb_redis.so) is installed. */
export function kamailioAvailable(module?: string): boolean {
  const r = spawnSync('kamailio', ['-v'], { stdio: 'ignore', timeout: 5_000 });
  if (r.error || r.status !== 0) return false;
  if (!module) return true;
  // Debian puts the modules under /usr/lib/<triplet>/kamailio/modules
  const lib = '/usr/lib';
  const dirs = [join(lib, 'kamailio/modules'), ...readdirSync(lib).map((d) => join(lib, d, 'kamailio/modules'))];
  return dirs.some((d) => existsSync(join(d, module)));
}

export interface Kamailio {
  port: number;
  child: ChildProcess;
  /** Everything it printed so far (stdout and stderr). */
  log(): string;
  running(): boolean;
  /**
   * SIGTERM (SIGKILL after 10 s), then its output to `kamailio.log`; its exit code, or the
   * signal that ended it ("SIGKILL after 10 s" when it had to be killed).
   */
  stop(): Promise<number | string>;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * Kamailio on configuration `cfg`, working directory and runtime files in `dir`, `defines` as
 * -A NAME=value, private memory `pkgMb`; resolves once it listens and has forked its workers.
 */
export async function startKamailio(opts: {
  cfg: string;
  dir: string;
  defines: Record<string, string>;
  pkgMb: number;
}): Promise<Kamailio> {
  const { cfg, dir, defines } = opts;
  const port = await freeUdpPort();
  const args = ['-f', cfg, '-DD', '-E', '-m', '64', '-M', String(opts.pkgMb), '-Y', dir];
  args.push('-P', path.join(dir, 'kamailio.pid'), '-A', `LISTEN=udp:127.0.0.1:${port}`);
  for (const [k, v] of Object.entries(defines)) args.push('-A', `${k}=${v}`);
  // a process group of its own, so a kill reaches its workers too (an orphaned worker would keep
  // the output pipe, and the test process, alive)
  const child = spawn('kamailio', args, { cwd: dir, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
  const killAll = () => {
    try {
      process.kill(-child.pid!, 'SIGKILL');
    } catch {
      // already gone
    }
  };
  let log = '';
  child.stdout.on('data', (b: Buffer) => (log += b.toString()));
  child.stderr.on('data', (b: Buffer) => (log += b.toString()));
  const exited = new Promise<number | string>((r) => child.once('exit', (code, signal) => r(code ?? signal ?? 'none')));
  process.once('exit', killAll);
  const deadline = Date.now() + 15_000;
  // it prints its sockets once configured, then forks its workers
  while (!/Listening on/.test(log)) {
    if (child.exitCode !== null || Date.now() > deadline) {
      killAll();
      throw new Error(`kamailio did not start (exit ${child.exitCode}):\n${log.slice(-3000)}`);
    }
    await sleep(100);
  }
  await sleep(1000);
  if (child.exitCode !== null) {
    killAll();
    throw new Error(`kamailio exited (${child.exitCode}):\n${log.slice(-3000)}`);
  }
  return {
    port,
    child,
    log: () => log,
    running: () => child.exitCode === null,
    async stop() {
      if (child.exitCode !== null || child.signalCode !== null) return exited;
      child.kill('SIGTERM');
      let killed = false;
      const timer = setTimeout(() => {
        killed = true;
        killAll();
      }, 10_000);
      const code = await exited;
      clearTimeout(timer);
      writeFileSync(path.join(dir, 'kamailio.log'), log);
      killAll(); // a worker left behind by a clean exit too
      return killed ? 'SIGKILL after 10 s' : code;
    },
  };
}
