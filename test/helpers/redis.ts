/**
 * Real-Redis test harness. Tests never mock Redis: they get a real one from here.
 *
 *   getRedis()          a Redis for a suite: REDIS_URL, else testcontainers (if a container
 *                       runtime answers), else a redis-server child process.
 *   startRedisServer()  always a child process (kill / restart for fault injection).
 *   startCluster(n)     a Redis Cluster of n masters (three by default), child processes;
 *                       masterOfSlot() tells which master serves a slot.
 *
 * Every child is SIGKILLed on process exit; every wait is bounded; loopback only.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { Cluster, Redis } from 'ioredis';
import { orAfter } from './wait.js';

export interface RedisHandle {
  url: string;
  host: string;
  port: number;
  stop(): Promise<void>;
}

export interface RedisServer {
  url: string;
  host: string;
  port: number;
  /** Sends `signal` (default SIGKILL) and waits for the process to exit. */
  kill(signal?: NodeJS.Signals): Promise<void>;
  /** Freezes the server (SIGSTOP) until resume() (SIGCONT): a stall, its sockets open. */
  pause(): void;
  resume(): void;
  /** Starts the server again on the same port; resolves once it answers PING. */
  restart(): Promise<void>;
  /** Stops the server and removes its data directory. */
  stop(): Promise<void>;
}

export interface RedisClusterHandle {
  nodes: { host: string; port: number }[];
  /** Each node's process id, in the order of `nodes` (a wrapper's: valgrind's is redis-server's own). */
  pids: number[];
  stop(): Promise<void>;
}

/**
 * A command that runs redis-server under another program (the program and its arguments; the
 * server's own come after `redis-server`), and how long a server so run may take to answer.
 */
export interface RedisWrapper {
  prefix: readonly string[];
  startTimeoutMs: number;
}

const HOST = '127.0.0.1';
const START_TIMEOUT_MS = 5_000;
const EXIT_TIMEOUT_MS = 3_000;
const CLUSTER_OK_TIMEOUT_MS = 15_000;
const CONTAINER_TIMEOUT_MS = 60_000;
const PORT_RETRIES = 5;

const INSTALL_HINT =
  'No Redis available for the tests. Install redis-server (e.g. `apt-get install redis-server`) ' +
  'or set REDIS_URL=redis://host:port to use an existing Redis.';

// ---------------------------------------------------------------------------
// Leftover cleanup: kill every child and remove every temp dir, synchronously, on exit.

const liveChildren = new Set<ChildProcess>();
const liveDirs = new Set<string>();

process.on('exit', () => {
  for (const child of liveChildren) {
    try {
      child.kill('SIGKILL');
    } catch {
      /* already gone */
    }
  }
  for (const dir of liveDirs) {
    try {
      rmSync(dir, { recursive: true, force: true });
    } catch {
      /* best effort */
    }
  }
});

// ---------------------------------------------------------------------------
// Small utilities

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

let redisServerOnPath: boolean | undefined;

/** True if `redis-server` can be run (is on PATH). */
export function redisServerAvailable(): boolean {
  if (redisServerOnPath === undefined) {
    const r = spawnSync('redis-server', ['--version'], { stdio: 'ignore', timeout: 3_000 });
    redisServerOnPath = !r.error && r.status === 0;
  }
  return redisServerOnPath;
}

/** A port the OS says is free on loopback right now (bind port 0, read, close). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.unref();
    srv.once('error', reject);
    srv.listen(0, HOST, () => {
      const addr = srv.address();
      const port = typeof addr === 'object' && addr ? addr.port : 0;
      srv.close(() => (port ? resolve(port) : reject(new Error('could not get a free port'))));
    });
  });
}

type Reply = string | number | null | Reply[];

/**
 * Sends one command over a fresh socket using raw RESP and returns the reply.
 * Error replies reject. Bounded by `timeoutMs`.
 */
export function rawCommand(port: number, args: string[], timeoutMs = 1_000, host = HOST): Promise<Reply> {
  return new Promise((resolve, reject) => {
    let buf = Buffer.alloc(0);
    let done = false;
    const sock = net.createConnection({ host, port });
    const finish = (err: Error | null, value?: Reply) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      sock.destroy();
      if (err) reject(err);
      else resolve(value as Reply);
    };
    const timer = setTimeout(() => finish(new Error(`timeout after ${timeoutMs} ms: ${args.join(' ')}`)), timeoutMs);
    sock.once('error', (e) => finish(e));
    sock.once('close', () => finish(new Error('connection closed')));
    sock.on('data', (chunk) => {
      buf = Buffer.concat([buf, chunk]);
      try {
        const parsed = parseReply(buf, 0);
        if (parsed) finish(null, parsed.value);
      } catch (e) {
        finish(e as Error);
      }
    });
    sock.write(`*${args.length}\r\n${args.map((a) => `$${Buffer.byteLength(a)}\r\n${a}\r\n`).join('')}`);
  });
}

function parseReply(buf: Buffer, at: number): { value: Reply; end: number } | null {
  const eol = buf.indexOf('\r\n', at);
  if (eol < 0) return null;
  const type = String.fromCharCode(buf[at] as number);
  const line = buf.toString('utf8', at + 1, eol);
  switch (type) {
    case '+':
      return { value: line, end: eol + 2 };
    case '-':
      throw new Error(line);
    case ':':
      return { value: Number(line), end: eol + 2 };
    case '$': {
      const len = Number(line);
      if (len < 0) return { value: null, end: eol + 2 };
      if (buf.length < eol + 2 + len + 2) return null;
      return { value: buf.toString('utf8', eol + 2, eol + 2 + len), end: eol + 2 + len + 2 };
    }
    case '*': {
      const n = Number(line);
      if (n < 0) return { value: null, end: eol + 2 };
      const items: Reply[] = [];
      let pos = eol + 2;
      for (let i = 0; i < n; i++) {
        const item = parseReply(buf, pos);
        if (!item) return null;
        items.push(item.value);
        pos = item.end;
      }
      return { value: items, end: pos };
    }
    default:
      throw new Error(`unexpected RESP type ${JSON.stringify(type)}`);
  }
}

async function pingOnce(port: number, host = HOST): Promise<boolean> {
  try {
    return (await rawCommand(port, ['PING'], 500, host)) === 'PONG';
  } catch {
    return false;
  }
}

// ---------------------------------------------------------------------------
// redis-server child processes

interface Proc {
  child: ChildProcess;
  exited: Promise<void>;
  output(): string;
}

/**
 * A throwaway redis-server's arguments: `port` on loopback, nothing on disk but in `dir`, in the
 * foreground, quiet; then `extra`. Shared by every helper and bench that starts one.
 */
export function serverArgs(port: number, dir: string, extra: readonly string[] = []): string[] {
  return [
    '--port',
    String(port),
    '--bind',
    HOST,
    '--save',
    '',
    '--appendonly',
    'no',
    '--dir',
    dir,
    '--daemonize',
    'no',
    '--loglevel',
    'warning',
    ...extra,
  ];
}

function spawnRedis(port: number, dir: string, extra: string[], wrap?: RedisWrapper): Proc {
  const args = serverArgs(port, dir, extra);
  const child = wrap
    ? spawn(wrap.prefix[0]!, [...wrap.prefix.slice(1), 'redis-server', ...args], { stdio: ['ignore', 'pipe', 'pipe'] })
    : spawn('redis-server', args, { stdio: ['ignore', 'pipe', 'pipe'] });
  liveChildren.add(child);
  let out = '';
  const keep = (d: Buffer) => {
    out = (out + d.toString()).slice(-8_192);
  };
  child.stdout?.on('data', keep);
  child.stderr?.on('data', keep);
  // Leftover children must not keep the event loop alive (the exit hook kills them).
  child.unref();
  (child.stdout as unknown as { unref?: () => void } | null)?.unref?.();
  (child.stderr as unknown as { unref?: () => void } | null)?.unref?.();
  const exited = new Promise<void>((resolve) => {
    const done = () => {
      liveChildren.delete(child);
      resolve();
    };
    if (child.exitCode !== null || child.signalCode !== null) done();
    child.once('exit', done);
    child.once('error', (e) => {
      keep(Buffer.from(String(e)));
      done();
    });
  });
  return { child, exited, output: () => out };
}

class AddrInUse extends Error {}

/** Spawns redis-server and waits until it answers PING (or exits, or times out). */
async function launch(port: number, dir: string, extra: string[], wrap?: RedisWrapper): Promise<Proc> {
  const proc = spawnRedis(port, dir, extra, wrap);
  const timeoutMs = wrap?.startTimeoutMs ?? START_TIMEOUT_MS;
  let exited = false;
  void proc.exited.then(() => (exited = true));
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (exited) {
      const out = proc.output();
      if (/address already in use/i.test(out)) throw new AddrInUse(`port ${port} in use`);
      throw new Error(`redis-server on port ${port} exited during startup:\n${out.trim()}`);
    }
    if (await pingOnce(port)) return proc;
    await sleep(25);
  }
  await terminate(proc, 'SIGKILL');
  throw new Error(`redis-server on port ${port} did not answer PING within ${timeoutMs} ms:\n${proc.output().trim()}`);
}

/** Launches on `port`, or on a fresh free port (retried on EADDRINUSE) if none is given. */
async function launchOnFreePort(
  dir: string,
  extra: (port: number) => Promise<string[]> | string[],
  port?: number,
  wrap?: RedisWrapper,
) {
  let lastErr: unknown;
  for (let attempt = 0; attempt < PORT_RETRIES; attempt++) {
    const p = port ?? (await freePort());
    try {
      return { port: p, proc: await launch(p, dir, await extra(p), wrap) };
    } catch (e) {
      lastErr = e;
      if (!(e instanceof AddrInUse)) throw e;
      await sleep(port === undefined ? 0 : 200);
    }
  }
  throw lastErr;
}

async function terminate(proc: Proc | undefined, signal: NodeJS.Signals = 'SIGTERM'): Promise<void> {
  if (!proc) return;
  const { child, exited } = proc;
  if (child.exitCode !== null || child.signalCode !== null) return;
  try {
    child.kill(signal);
  } catch {
    /* already gone */
  }
  const timedOut = await orAfter(
    exited.then(() => false),
    EXIT_TIMEOUT_MS,
    true,
  );
  if (timedOut) {
    try {
      child.kill('SIGKILL');
    } catch {
      /* already gone */
    }
    await orAfter(exited, EXIT_TIMEOUT_MS, undefined);
  }
}

function makeTmpDir(prefix: string): string {
  const dir = mkdtempSync(path.join(os.tmpdir(), prefix));
  liveDirs.add(dir);
  return dir;
}

function removeDir(dir: string) {
  rmSync(dir, { recursive: true, force: true });
  liveDirs.delete(dir);
}

function requireRedisServer() {
  if (!redisServerAvailable()) throw new Error(INSTALL_HINT);
}

/** Starts a redis-server child process (always; use it for fault injection). */
export async function startRedisServer(opts: { port?: number; args?: string[] } = {}): Promise<RedisServer> {
  requireRedisServer();
  const dir = makeTmpDir('callgate-redis-');
  const extra = opts.args ?? [];
  let current: Proc | undefined;
  let port: number;
  try {
    const started = await launchOnFreePort(dir, () => extra, opts.port);
    current = started.proc;
    port = started.port;
  } catch (e) {
    removeDir(dir);
    throw e;
  }
  let stopped = false;
  return {
    url: `redis://${HOST}:${port}`,
    host: HOST,
    port,
    async kill(signal: NodeJS.Signals = 'SIGKILL') {
      await terminate(current, signal);
    },
    pause() {
      current?.child.kill('SIGSTOP');
    },
    resume() {
      current?.child.kill('SIGCONT');
    },
    async restart() {
      if (stopped) throw new Error('restart() after stop()');
      await terminate(current, 'SIGKILL');
      current = (await launchOnFreePort(dir, () => extra, port)).proc;
    },
    async stop() {
      stopped = true;
      await terminate(current, 'SIGTERM');
      removeDir(dir);
    },
  };
}

// ---------------------------------------------------------------------------
// getRedis

function parseUrl(url: string): { host: string; port: number } {
  const u = new URL(url);
  return { host: u.hostname || HOST, port: u.port ? Number(u.port) : 6379 };
}

function containerRuntimeLikely(): boolean {
  return !!process.env.DOCKER_HOST || existsSync('/var/run/docker.sock');
}

async function tryContainer(): Promise<RedisHandle | undefined> {
  if (!containerRuntimeLikely()) return undefined;
  try {
    const { GenericContainer } = await import('testcontainers');
    const start = new GenericContainer('redis:7').withExposedPorts(6379).start();
    const container = await orAfter(start, CONTAINER_TIMEOUT_MS, undefined);
    if (!container) {
      void start.then((c) => c.stop()).catch(() => {});
      return undefined;
    }
    const host = container.getHost();
    const port = container.getMappedPort(6379);
    return {
      url: `redis://${host}:${port}`,
      host,
      port,
      async stop() {
        await container.stop();
      },
    };
  } catch {
    return undefined; // no runtime answers: fall through silently
  }
}

/** A Redis for a suite: REDIS_URL, else a container, else a redis-server child process. */
export async function getRedis(): Promise<RedisHandle> {
  const envUrl = process.env.REDIS_URL;
  if (envUrl) {
    const { host, port } = parseUrl(envUrl);
    return { url: envUrl, host, port, stop: async () => {} };
  }
  const viaContainer = await tryContainer();
  if (viaContainer) return viaContainer;
  if (!redisServerAvailable()) throw new Error(INSTALL_HINT);
  const server = await startRedisServer();
  return { url: server.url, host: server.host, port: server.port, stop: () => server.stop() };
}

/**
 * A Redis of its own (getRedis) and a client on it for the mocha suite this is called in: its
 * before hook starts them, its after hook stops them; read `redis` and `handle` in the tests.
 */
export function redisForSuite(): { readonly redis: Redis; readonly handle: RedisHandle } {
  const s = {} as { redis: Redis; handle: RedisHandle };
  before(async () => {
    s.handle = await getRedis();
    s.redis = new Redis(s.handle.url);
  });
  after(async () => {
    s.redis?.disconnect();
    await s.handle?.stop();
  });
  return s;
}

// ---------------------------------------------------------------------------
// Cluster

/** The slots of `masters` masters, split evenly (three: 0-5460, 5461-10922, 10923-16383). */
function slotRanges(masters: number): [number, number][] {
  return Array.from({ length: masters }, (_, i) => [
    Math.round((16384 * i) / masters),
    Math.round((16384 * (i + 1)) / masters) - 1,
  ]);
}

/**
 * Each master's slots as contiguous ranges: equal ranges in order, but for the slots `moved`
 * places on another master (as an operator moves a hot tag's slot).
 */
function slotPlan(masters: number, moved: ReadonlyMap<number, number>): [number, number][][] {
  const owner = (slot: number) =>
    moved.get(slot) ?? slotRanges(masters).findIndex(([from, to]) => slot >= from && slot <= to);
  const plan: [number, number][][] = Array.from({ length: masters }, () => []);
  for (let slot = 0; slot < 16384; slot++) {
    const ranges = plan[owner(slot)]!;
    const last = ranges[ranges.length - 1];
    if (last && last[1] === slot - 1) last[1] = slot;
    else ranges.push([slot, slot]);
  }
  return plan;
}

async function clusterStateOk(port: number): Promise<boolean> {
  try {
    const info = await rawCommand(port, ['CLUSTER', 'INFO'], 500);
    return typeof info === 'string' && /cluster_state:ok/.test(info);
  } catch {
    return false;
  }
}

/**
 * Starts a Redis Cluster of `masters` masters (three by default) on free loopback ports, holding
 * equal slot ranges in order but for the slots `moved` places on another master (slot → master
 * index, before any key is written); resolves once cluster_state:ok everywhere. `wrap` runs
 * each server under another program (a bench's valgrind).
 */
export async function startCluster(
  masters = 3,
  moved: ReadonlyMap<number, number> = new Map(),
  wrap?: RedisWrapper,
): Promise<RedisClusterHandle> {
  requireRedisServer();
  const dir = makeTmpDir('callgate-cluster-');
  const procs: Proc[] = [];
  const ports: number[] = [];
  const busPorts: number[] = [];
  const pids: number[] = [];
  // a wrapped server (valgrind) answers tens of times slower
  const commandMs = wrap ? 10_000 : 1_000;
  const stopAll = async () => {
    await Promise.all(procs.map((p) => terminate(p, 'SIGTERM')));
    removeDir(dir);
  };
  try {
    // Launched in parallel: each node waits ~2 s after startup before it reports ok.
    const launched = await Promise.allSettled(
      Array.from({ length: masters }, async () => {
        let bus = 0;
        const { port, proc } = await launchOnFreePort(
          dir,
          async (p) => {
            bus = await freePort();
            return [
              '--cluster-enabled',
              'yes',
              '--cluster-config-file',
              path.join(dir, `nodes-${p}.conf`),
              '--cluster-node-timeout',
              '2000',
              '--cluster-port',
              String(bus),
              // a lone master learns its address from no MEET: it would announce none
              ...(masters === 1 ? ['--cluster-announce-ip', HOST] : []),
            ];
          },
          undefined,
          wrap,
        );
        procs.push(proc);
        return { port, bus, pid: proc.child.pid ?? -1 };
      }),
    );
    for (const r of launched) {
      if (r.status === 'rejected') throw r.reason;
      ports.push(r.value.port);
      busPorts.push(r.value.bus);
      pids.push(r.value.pid);
    }
    if (new Set([...ports, ...busPorts]).size !== 2 * masters)
      throw new Error('port collision while starting the cluster');
    // Join: distinct config epochs, one slot range each (but for `moved`), then MEET from node 0.
    const plan = slotPlan(masters, moved);
    await Promise.all(
      ports.map(async (p, i) => {
        await rawCommand(p, ['CLUSTER', 'SET-CONFIG-EPOCH', String(i + 1)], commandMs);
        const ranges = plan[i]!.flatMap(([from, to]) => [String(from), String(to)]);
        await rawCommand(p, ['CLUSTER', 'ADDSLOTSRANGE', ...ranges], commandMs);
      }),
    );
    for (let i = 1; i < ports.length; i++) {
      await rawCommand(ports[0]!, ['CLUSTER', 'MEET', HOST, String(ports[i]), String(busPorts[i])], commandMs);
    }

    const okTimeoutMs = CLUSTER_OK_TIMEOUT_MS + (wrap?.startTimeoutMs ?? 0);
    const deadline = Date.now() + okTimeoutMs;
    for (;;) {
      const oks = await Promise.all(ports.map(clusterStateOk));
      if (oks.every(Boolean)) break;
      if (Date.now() > deadline) {
        throw new Error(
          `Redis Cluster on ports ${ports.join(', ')} did not reach cluster_state:ok within ${okTimeoutMs} ms ` +
            `(ok per node: ${oks.join(', ')})`,
        );
      }
      await sleep(50);
    }
  } catch (e) {
    await stopAll();
    throw e;
  }
  let stopped: Promise<void> | undefined;
  return {
    nodes: ports.map((port) => ({ host: HOST, port })),
    pids,
    stop: () => (stopped ??= stopAll()),
  };
}

/** The master (its port) serving `slot`, from CLUSTER SLOTS. */
export async function masterOfSlot(client: Cluster, slot: number): Promise<number> {
  const ranges = await client.cluster('SLOTS');
  const range = ranges.find(([from, to]) => slot >= from && slot <= to);
  if (range === undefined || range[2] === undefined) throw new Error(`slot ${slot} is not served`);
  return range[2][1];
}

/**
 * The master (its port) serving `key`'s slot on a Cluster, asked of the node at `port` with
 * CLUSTER KEYSLOT and SLOTS (no client: bench and tests that hold only a handle's ports).
 */
export async function masterOfKey(port: number, key: string): Promise<number> {
  const slot = Number(await rawCommand(port, ['CLUSTER', 'KEYSLOT', key]));
  const ranges = (await rawCommand(port, ['CLUSTER', 'SLOTS'])) as [number, number, [string, number]][];
  const range = ranges.find(([from, to]) => slot >= from && slot <= to);
  if (range === undefined) throw new Error(`slot ${slot} of ${key} is not served`);
  return Number(range[2][1]);
}

/** An ioredis Cluster client for a handle from startCluster() (ready check on). */
export function newClusterClient(handle: RedisClusterHandle): Cluster {
  return new Cluster(handle.nodes, {
    enableReadyCheck: true,
    slotsRefreshTimeout: 2_000,
    clusterRetryStrategy: (times) => (times > 10 ? null : Math.min(100 * times, 1_000)),
    redisOptions: { connectTimeout: 2_000, maxRetriesPerRequest: 3 },
  });
}

/** A plain ioredis client for a handle from getRedis()/startRedisServer(). */
export function newRedisClient(handle: { url: string }, opts: { lazyConnect?: boolean } = {}): Redis {
  return new Redis(handle.url, { maxRetriesPerRequest: 1, connectTimeout: 2_000, ...opts });
}

/**
 * In a `describe`: a local Redis Cluster of the suite's own (`masters` masters), started before
 * its tests and stopped after them; `client()` makes a Cluster client to it, disconnected after
 * the suite. Read `rig.handle` inside the tests.
 */
export function clusterRig(masters = 3): { readonly handle: RedisClusterHandle; client(): Cluster } {
  const clients: Cluster[] = [];
  const rig = {
    handle: undefined as unknown as RedisClusterHandle,
    client(): Cluster {
      const c = newClusterClient(rig.handle);
      clients.push(c);
      return c;
    },
  };
  before(async () => {
    rig.handle = await startCluster(masters);
  });
  after(async () => {
    for (const c of clients) c.disconnect();
    await rig.handle?.stop();
  });
  return rig;
}

/**
 * In a `describe`: a redis-server of the suite's own, started before its tests and stopped after
 * them, with a plain client to it. Read `rig.server` and `rig.raw` inside the tests;
 * `rig.client()` makes another client (for a store or a coordinator), disconnected after them.
 */
export function redisRig(): { readonly server: RedisServer; readonly raw: Redis; client(): Redis } {
  const clients: Redis[] = [];
  const rig = {
    client(): Redis {
      const c = newRedisClient(rig.server);
      clients.push(c);
      return c;
    },
  } as { server: RedisServer; raw: Redis; client(): Redis };
  before(async () => {
    rig.server = await startRedisServer();
    rig.raw = newRedisClient(rig.server);
  });
  after(async () => {
    for (const c of clients.splice(0)) c.disconnect();
    rig.raw?.disconnect();
    await rig.server?.stop();
  });
  return rig;
}
