/**
 * No secret in any output: every command on Redis, with a password in REDIS_URL and in
 * --redis-url, through its bad paths (help, a URL that does not parse, a wrong scheme, an
 * unreachable port, a user without a password, a refused password on a redis-server with
 * requirepass, REDIS_PASSWORD): the password never shows in stdout or stderr, and a URL that
 * is not one is one line and exit 2 in every command.
 */
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { expect } from 'chai';
import { rawCommand, startRedisServer, type RedisServer } from './helpers/redis.js';
import { runNode, type Run } from './helpers/run.js';

const ROOT = new URL('..', import.meta.url).pathname;
const BIN = join(ROOT, 'bin/callgate.js');
const CFG = join(ROOT, 'fixtures/boundary.config.json');
const TRACE = join(ROOT, 'fixtures/boundary.trace.csv');
const SECRET = 'Hunter2-s3cret';
const ENV_SECRET = 'Env-pw-s3cret';

/** Each command on Redis, up to the point where it needs Redis. */
const COMMANDS: Record<string, string[]> = {
  replay: ['replay', '--config', CFG, '--trace', TRACE, '--store', 'redis'],
  serve: ['serve', '--config', CFG, '--store', 'redis', '--listen', '127.0.0.1:0', '--no-watch'],
  inspect: ['inspect', '--config', CFG],
  holds: ['holds', '--config', CFG, '--bucket', 'peer:gw-1'],
  release: ['release', '--call-id', 'c1'],
  reset: ['reset', '--config', CFG, '--bucket', 'peer:gw-1', '--yes'],
};

interface Path {
  name: string;
  url: (authPort: number) => string;
  /** Exit code of a one-shot command (serve keeps running through an outage: killed). */
  code: 1 | 2;
  env?: NodeJS.ProcessEnv;
  /** More options for every command. */
  extra?: string[];
}

const PATHS: Path[] = [
  { name: 'a port out of range', url: () => `redis://user:${SECRET}@127.0.0.1:99999`, code: 2 },
  { name: 'an unclosed IPv6 host', url: () => `redis://user:${SECRET}@[::1`, code: 2 },
  { name: 'an unescaped / in the password', url: () => `redis://user:${SECRET}/x@127.0.0.1:1`, code: 2 },
  { name: 'no scheme', url: () => `user:${SECRET}@127.0.0.1:1`, code: 2 },
  { name: 'http://', url: () => `http://user:${SECRET}@127.0.0.1:1`, code: 2 },
  { name: 'unreachable', url: () => `redis://user:${SECRET}@127.0.0.1:1`, code: 1 },
  { name: 'an unknown host', url: () => `redis://user:${SECRET}@nonexistent.invalid:6379`, code: 1 },
  {
    name: 'an unreachable Cluster node',
    url: () => `redis://user:${SECRET}@127.0.0.1:1`,
    code: 1,
    extra: ['--redis-cluster'],
  },
  { name: 'a user without a password', url: () => `redis://${SECRET}@127.0.0.1:1`, code: 1 },
  { name: 'a refused password', url: (p) => `redis://default:${SECRET}@127.0.0.1:${p}`, code: 1 },
  {
    name: 'a refused REDIS_PASSWORD',
    url: (p) => `redis://127.0.0.1:${p}`,
    code: 1,
    env: { REDIS_PASSWORD: ENV_SECRET },
  },
];

/** Run `jobs` at most `n` at a time (two shared cores). */
async function pool<T>(n: number, jobs: (() => Promise<T>)[]): Promise<T[]> {
  const out: T[] = [];
  let next = 0;
  await Promise.all(
    Array.from({ length: n }, async () => {
      while (next < jobs.length) {
        const i = next++;
        out[i] = await jobs[i]!();
      }
    }),
  );
  return out;
}

/** A sidecar until it logged `until` (then SIGTERM: its stop logs too) or 20 s. */
function runServeUntil(args: string[], env: NodeJS.ProcessEnv, until: RegExp): Promise<Run> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, args, { cwd: ROOT, env: { ...process.env, ...env } });
    let stdout = '';
    let stderr = '';
    let signalled = false;
    const stop = () => {
      if (signalled) return;
      signalled = true;
      child.kill('SIGTERM');
    };
    child.stdout.on('data', (b: Buffer) => {
      stdout += b;
      if (until.test(stdout)) stop();
    });
    child.stderr.on('data', (b: Buffer) => (stderr += b));
    const timer = setTimeout(() => child.kill('SIGKILL'), 20_000);
    child.on('error', reject);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

const OUTAGE = /unreachable|WRONGPASS|NOAUTH/;

function noSecret(r: Run, what: string): void {
  for (const s of [SECRET, ENV_SECRET, encodeURIComponent(SECRET)]) {
    expect(r.stdout, `${what}: stdout`).not.to.include(s);
    expect(r.stderr, `${what}: stderr`).not.to.include(s);
  }
}

describe('no secret in any output', function () {
  this.timeout(240_000);
  let server: RedisServer | undefined;
  before(async () => {
    server = await startRedisServer();
    // set after the start: the helper waits for an unauthenticated PING
    expect(await rawCommand(server.port, ['CONFIG', 'SET', 'requirepass', 'the-right-one'])).to.equal('OK');
  });
  after(async () => server?.stop());

  it('--help of every command, with a password in REDIS_URL and in --redis-url', async () => {
    const url = `redis://user:${SECRET}@127.0.0.1:1`;
    const names = Object.keys(COMMANDS);
    const runs = await pool(
      3,
      names.flatMap((name) => [
        () => runNode([BIN, name, '--help'], { cwd: ROOT, env: { REDIS_URL: url } }),
        () => runNode([BIN, name, '--redis-url', url, '--help'], { cwd: ROOT }),
      ]),
    );
    runs.forEach((r, i) => {
      const what = `${names[Math.floor(i / 2)]} --help (${i % 2 === 0 ? 'REDIS_URL' : '--redis-url'})`;
      expect(r.code, r.stderr).to.equal(0);
      expect(r.stdout, what).to.include('--redis-url');
      noSecret(r, what);
    });
  });

  it('every command through every bad path, in REDIS_URL and in --redis-url', async () => {
    const jobs: { what: string; path: Path; command: string; job: () => Promise<Run> }[] = [];
    let n = 0;
    for (const path of PATHS) {
      const url = path.url(server!.port);
      for (const [command, args] of Object.entries(COMMANDS)) {
        // each pair through one of the two ways in turn (every command and path sees both);
        // a wrong scheme and a refused password through both
        const both = path.name === 'http://' || path.name === 'a refused password';
        const ways = both ? ['REDIS_URL', '--redis-url'] : [n++ % 2 === 0 ? 'REDIS_URL' : '--redis-url'];
        for (const via of ways) {
          const more = path.extra ?? [];
          const argv = via === 'REDIS_URL' ? [BIN, ...args, ...more] : [BIN, ...args, ...more, '--redis-url', url];
          const env = { ...path.env, ...(via === 'REDIS_URL' && { REDIS_URL: url }) };
          // serve keeps trying through an outage: what it logged until then, and its stop
          const long = command === 'serve' && path.code === 1;
          jobs.push({
            what: `${command}, ${path.name}, via ${via}`,
            path,
            command,
            job: () => (long ? runServeUntil(argv, env, OUTAGE) : runNode(argv, { cwd: ROOT, env })),
          });
        }
      }
    }
    const runs = await pool(
      8,
      jobs.map((j) => j.job),
    );
    jobs.forEach(({ what, path, command }, i) => {
      const r = runs[i]!;
      noSecret(r, what);
      if (command === 'serve' && path.code === 1) {
        expect(r.stdout, `${what}: logged the outage`).to.match(OUTAGE);
        return;
      }
      expect(r.code, `${what}: ${r.stderr}`).to.equal(path.code);
      expect(r.stderr.trimEnd().split('\n'), `${what}: one line`).to.have.length(1);
    });
  });
});
