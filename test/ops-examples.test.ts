/**
 * The operations examples work with the real tools: systemd-analyze verifies the unit file
 * without a word, promtool accepts the alert rules, and Debian's Prometheus scrapes a running
 * sidecar and answers a query over callgate_decisions_total. A test is skipped, saying why, only
 * when its tool is not installed (CI installs them: .ci/run).
 */
import { expect } from 'chai';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import { CallGate } from '../src/gate.js';
import { gateMetrics } from '../src/observe/metrics.js';
import { buildApp } from '../src/server/app.js';

const ROOT = new URL('..', import.meta.url).pathname;

function tool(name: string): string | undefined {
  const r = spawnSync('sh', ['-c', `command -v ${name}`], { encoding: 'utf8' });
  return r.status === 0 ? r.stdout.trim() : undefined;
}

function skipWithout(ctx: Mocha.Context, name: string, pkg: string): string {
  const path = tool(name);
  if (path === undefined) {
    console.warn(`    (skipped: ${name} is not installed; Debian's ${pkg} package has it)`);
    ctx.skip();
  }
  return path!;
}

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

describe('operations examples with the real tools', function () {
  this.timeout(90_000);

  it('systemd-analyze verify accepts examples/systemd/callgate.service, with no warning', function () {
    const bin = skipWithout(this, 'systemd-analyze', 'systemd');
    const r = spawnSync(bin, ['verify', join(ROOT, 'examples/systemd/callgate.service')], {
      encoding: 'utf8',
      timeout: 30_000,
    });
    // an unknown key or a bad value is only a warning (exit 0): any output fails the test
    expect(`${r.stdout}${r.stderr}`.trim(), 'systemd-analyze output').to.equal('');
    expect(r.status).to.equal(0);
  });

  it('promtool check rules accepts examples/prometheus/callgate-alerts.yml', function () {
    const bin = skipWithout(this, 'promtool', 'prometheus');
    const r = spawnSync(bin, ['check', 'rules', join(ROOT, 'examples/prometheus/callgate-alerts.yml')], {
      encoding: 'utf8',
      timeout: 30_000,
    });
    expect(r.status, r.stdout + r.stderr).to.equal(0);
    expect(r.stdout).to.match(/SUCCESS: \d+ rules found/);
  });

  describe('Prometheus scraping a running sidecar', () => {
    let dir: string | undefined;
    let gate: CallGate | undefined;
    let app: FastifyInstance | undefined;
    let prometheus: ChildProcess | undefined;
    let log = '';

    afterEach(async () => {
      if (prometheus && prometheus.exitCode === null) {
        const exited = new Promise((resolve) => prometheus!.once('exit', resolve));
        prometheus.kill('SIGTERM');
        const timer = setTimeout(() => prometheus?.kill('SIGKILL'), 10_000);
        await exited;
        clearTimeout(timer);
      }
      await app?.close();
      await gate?.close();
      if (dir) rmSync(dir, { recursive: true, force: true });
    });

    it('a query over callgate_decisions_total answers with the decisions taken', async function () {
      const bin = skipWithout(this, 'prometheus', 'prometheus');
      dir = mkdtempSync(join(tmpdir(), 'callgate-prometheus-'));
      gate = await CallGate.create({ config: { inbound: { peers: { p1: [{ limit: 2, window: 'PT10S' }] } } } });
      const { registry } = gateMetrics(gate);
      // a sidecar with a token: /metrics needs it too, which examples/prometheus/scrape.yml sends
      const token = 'a-scrape-token-of-some-length';
      app = buildApp({ gate, ready: async () => {}, reload: async () => [], metrics: registry, token });
      const sidecar = await app.listen({ host: '127.0.0.1', port: 0 });
      const authorization = `Bearer ${token}`;
      for (let i = 0; i < 5; i++)
        await app.inject({ method: 'GET', url: `/v1/admit?call_id=c${i}&peer=p1`, headers: { authorization } });

      // the example scrape job as shipped, its token file and target made this test's
      const tokenFile = join(dir, 'callgate.token');
      writeFileSync(tokenFile, token);
      const scrape = readFileSync(join(ROOT, 'examples/prometheus/scrape.yml'), 'utf8')
        .replace('/etc/prometheus/callgate.token', tokenFile)
        .replace('127.0.0.1:8790', new URL(sidecar).host);
      expect(scrape, 'the example names the token file and the target replaced').to.include(tokenFile);
      const config = join(dir, 'prometheus.yml');
      writeFileSync(
        config,
        [
          'global: { scrape_interval: 1s, evaluation_interval: 1s }',
          `rule_files: [${JSON.stringify(join(ROOT, 'examples/prometheus/callgate-alerts.yml'))}]`,
          scrape,
        ].join('\n'),
      );
      const port = await freePort();
      prometheus = spawn(
        bin,
        [
          `--config.file=${config}`,
          `--storage.tsdb.path=${join(dir, 'data')}`,
          `--web.listen-address=127.0.0.1:${port}`,
          '--log.level=warn',
        ],
        { stdio: ['ignore', 'pipe', 'pipe'] },
      );
      prometheus.stdout!.on('data', (b: Buffer) => (log += b));
      prometheus.stderr!.on('data', (b: Buffer) => (log += b));

      // bounded: Prometheus starts, scrapes every second; a loaded machine gets 60 s
      const query = encodeURIComponent('sum by (outcome) (callgate_decisions_total{job="callgate"})');
      const deadline = Date.now() + 60_000;
      let answer:
        | { status: string; data: { result: { metric: { outcome: string }; value: [number, string] }[] } }
        | undefined;
      while (Date.now() < deadline) {
        expect(prometheus.exitCode, `prometheus exited:\n${log}`).to.equal(null);
        try {
          const r = await fetch(`http://127.0.0.1:${port}/api/v1/query?query=${query}`);
          if (r.ok) {
            answer = (await r.json()) as typeof answer;
            if (answer!.data.result.length >= 2) break;
          }
        } catch {
          // not listening yet
        }
        await new Promise((resolve) => setTimeout(resolve, 500));
      }
      expect(answer?.status, `no answer from Prometheus:\n${log}`).to.equal('success');
      const byOutcome = Object.fromEntries(answer!.data.result.map((r) => [r.metric.outcome, Number(r.value[1])]));
      expect(byOutcome).to.deep.equal({ admitted: 2, rejected: 3 });
    });
  });
});
