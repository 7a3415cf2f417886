/**
 * A throwaway redis-server for the benchmark: a child process on a free loopback port, no
 * persistence, its own temporary directory; killed when the bench exits (even on a crash).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { Redis } from 'ioredis';

const HOST = '127.0.0.1';

export interface BenchRedis {
  readonly url: string;
  readonly port: number;
  readonly pid: number;
  stop(): Promise<void>;
}

function freePort(): Promise<number> {
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

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

async function answers(port: number): Promise<boolean> {
  const c = new Redis({ host: HOST, port, lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
  c.on('error', () => {});
  try {
    await c.connect();
    return (await c.ping()) === 'PONG';
  } catch {
    return false;
  } finally {
    c.disconnect();
  }
}

export async function startBenchRedis(): Promise<BenchRedis> {
  for (let attempt = 0; attempt < 5; attempt++) {
    const port = await freePort();
    const dir = mkdtempSync(path.join(os.tmpdir(), 'callgate-bench-'));
    const child: ChildProcess = spawn(
      'redis-server',
      ['--port', String(port), '--bind', HOST, '--save', '', '--appendonly', 'no', '--dir', dir, '--loglevel', 'warning'],
      { stdio: ['ignore', 'ignore', 'pipe'] },
    );
    let stderr = '';
    child.stderr?.on('data', (d: Buffer) => (stderr = (stderr + d.toString()).slice(-4096)));
    const kill = () => {
      try {
        child.kill('SIGKILL');
      } catch {
        /* gone */
      }
      rmSync(dir, { recursive: true, force: true });
    };
    process.once('exit', kill);
    let spawnError: Error | undefined;
    child.once('error', (e) => (spawnError = e));
    const deadline = Date.now() + 5000;
    while (Date.now() < deadline && child.exitCode === null && !spawnError) {
      if (await answers(port)) {
        return {
          url: `redis://${HOST}:${port}`,
          port,
          pid: child.pid!,
          async stop() {
            process.removeListener('exit', kill);
            const exited = new Promise<void>((r) => child.once('exit', () => r()));
            child.kill('SIGTERM');
            await Promise.race([exited, sleep(3000)]);
            kill();
          },
        };
      }
      await sleep(50);
    }
    kill();
    process.removeListener('exit', kill);
    if (spawnError) throw new Error(`cannot run redis-server (${spawnError.message}); install it, e.g. apt-get install redis-server`);
    if (!/Address already in use/i.test(stderr)) throw new Error(`redis-server did not start: ${stderr.trim()}`);
  }
  throw new Error('redis-server: no free port after 5 attempts');
}
