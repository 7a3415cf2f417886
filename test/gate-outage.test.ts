/**
 * Noise-free outages: a RedisStore listens to its client's errors and reports each outage once on
 * the gate's 'error' event, never on the console; a closed gate leaves no timer, immediate or
 * socket behind, and its process exits on its own. Runs in a child process (test/outage/worker.ts)
 * so that its console and its resources are its own.
 */
import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { expect } from 'chai';
import { startRedisServer, type RedisServer } from './helpers/redis.js';
import { orAfter } from './helpers/wait.js';

describe('CallGate on Redis: outages reported once, nothing left after close', function () {
  this.timeout(40_000);
  let server: RedisServer;
  before(async () => {
    server = await startRedisServer();
  });
  after(async () => {
    await server?.stop();
  });

  it('two outages: one error each on the gate, nothing on the console; recovers by itself; close leaves nothing; the process exits', async () => {
    const child = spawn(process.execPath, ['--import', 'tsx', 'test/outage/worker.ts', server.url], {
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    let stderr = '';
    child.stderr.on('data', (b: Buffer) => (stderr += b.toString()));
    const exited = new Promise<{ code: number | null; ms: number }>((resolve) =>
      child.once('exit', (code) => resolve({ code, ms: Date.now() })),
    );
    const reports: Record<string, unknown>[] = [];
    const waiters: (() => void)[] = [];
    createInterface({ input: child.stdout }).on('line', (l) => {
      reports.push(JSON.parse(l) as Record<string, unknown>);
      waiters.splice(0).forEach((w) => {
        w();
      });
    });
    const next = async (phase: string) => {
      const until = Date.now() + 15_000;
      while (reports.length === 0) {
        if (Date.now() > until || child.exitCode !== null)
          throw new Error(`no "${phase}" from the worker; stderr: ${stderr}`);
        await new Promise<void>((r) => {
          waiters.push(r);
          setTimeout(r, 100);
        });
      }
      const r = reports.shift()!;
      expect(r.phase, JSON.stringify(r)).to.equal(phase);
      return r;
    };
    try {
      await next('start');
      expect(await next('up')).to.deep.include({ first: 'admitted', errors: 0 });
      for (const outage of [1, 2]) {
        await server.kill('SIGKILL');
        child.stdin.write('down\n');
        const down = await next(`down${outage}`);
        // fail-closed while Redis is away, and one error for the whole outage (ioredis retried many times meanwhile)
        expect(down.decisions).to.deep.equal(Array(10).fill('store-unavailable'));
        expect(down.dispatch).to.equal('failed/store-unavailable');
        expect(down.errors).to.equal(outage);
        await server.restart();
        child.stdin.write('up\n');
        expect(await next(`recovered${outage}`)).to.deep.include({ recovered: true, errors: outage });
      }
      const closed = await next('closed');
      expect(closed.heldBefore).to.equal(2); // one of three sent at once (cps 2), two held
      expect(closed.outcomes).to.deep.equal(['dispatched', 'cancelled', 'cancelled']);
      expect(closed.errors).to.have.length(2);
      for (const e of closed.errors as string[]) expect(e).to.match(/^StoreUnavailableError: Redis connection lost: /);
      expect(closed.leftovers, 'timers, immediates or sockets still alive after close').to.deep.equal([]);
      const closedAt = Date.now();
      const { code, ms } = await orAfter(exited, 5_000, { code: null, ms: -1 });
      expect(code, 'the process exits on its own after close').to.equal(0);
      expect(ms - closedAt).to.be.lessThan(1_000);
      expect(stderr, 'nothing on the console').to.equal('');
    } finally {
      if (child.exitCode === null) child.kill('SIGKILL');
    }
  });
});
