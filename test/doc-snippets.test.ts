/**
 * Every TypeScript example of README.md and docs/*.md runs as written. Each ```ts block is
 * written out as a program importing 'callgate' (the package's public types and exports, through
 * a node_modules/callgate link to this checkout), type-checked with the project's strictness,
 * then run with Node from the checkout's root, against a Redis and a Redis Cluster of the test's
 * own (REDIS_URL, REDIS_CLUSTER_NODES: the environment variables the snippets read, as a user
 * sets them). A snippet that does not compile, fails, writes to standard error or never exits
 * (30 s) fails. A block that cannot run here says so: ```ts no-run (none today). A comment
 * `// → TEXT` (up to a `;`, a final `…` left out) says what a line prints: TEXT must begin a
 * printed line, in order.
 */
import { expect } from 'chai';
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { docBlocks } from './helpers/doc-blocks.js';
import { startCluster, startRedisServer, type RedisClusterHandle, type RedisServer } from './helpers/redis.js';
import { runNode, type Run } from './helpers/run.js';

const ROOT = new URL('..', import.meta.url).pathname;
const RUN_TIMEOUT_MS = 30_000;

async function run(args: string[], env: NodeJS.ProcessEnv): Promise<Run & { ms: number }> {
  const start = performance.now();
  const r = await runNode(args, { cwd: ROOT, env, timeoutMs: RUN_TIMEOUT_MS, noteTimeout: true });
  return { ...r, ms: performance.now() - start };
}

describe('every TypeScript example of README.md and docs/ runs', function () {
  this.timeout(120_000);
  const snippets = docBlocks('ts');
  let dir: string;
  let redis: RedisServer;
  let cluster: RedisClusterHandle;
  let env: NodeJS.ProcessEnv;

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'callgate-snippets-'));
    // a user's project: its own package.json, callgate installed (here: this checkout)
    mkdirSync(join(dir, 'node_modules', '@types'), { recursive: true });
    symlinkSync(ROOT, join(dir, 'node_modules', 'callgate'));
    symlinkSync(join(ROOT, 'node_modules', 'ioredis'), join(dir, 'node_modules', 'ioredis'));
    symlinkSync(join(ROOT, 'node_modules', '@types', 'node'), join(dir, 'node_modules', '@types', 'node'));
    writeFileSync(join(dir, 'package.json'), '{ "private": true, "type": "module" }\n');
    writeFileSync(
      join(dir, 'tsconfig.json'),
      JSON.stringify({
        compilerOptions: {
          target: 'ES2022',
          module: 'NodeNext',
          moduleResolution: 'NodeNext',
          customConditions: ['callgate-source'],
          strict: true,
          noUncheckedIndexedAccess: true,
          noEmit: true,
          skipLibCheck: true,
          types: ['node'],
        },
        include: ['*.ts'],
      }),
    );
    for (const s of snippets) writeFileSync(join(dir, `${s.name}.ts`), s.code);
    [redis, cluster] = await Promise.all([startRedisServer(), startCluster()]);
    env = {
      REDIS_URL: redis.url,
      REDIS_CLUSTER_NODES: cluster.nodes.map((n) => `${n.host}:${n.port}`).join(','),
      TMPDIR: dir,
    };
  });

  after(async () => {
    await Promise.all([redis?.stop(), cluster?.stop()]);
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('there are examples to check', () => {
    expect(snippets.length).to.be.greaterThan(10);
  });

  it('every example type-checks against the public types (import from "callgate")', () => {
    const tsc = join(ROOT, 'node_modules', '.bin', 'tsc');
    const r = spawnSync(tsc, ['-p', join(dir, 'tsconfig.json')], { encoding: 'utf8', timeout: 120_000 });
    // name each error by the document and line of its block
    const located = `${r.stdout}${r.stderr}`.replace(
      /\S*?([\w]+_md_(\d+))\.ts\((\d+),(\d+)\)/g,
      (_m, name, _l, row) => {
        const s = snippets.find((x) => x.name === name)!;
        return `${s.file}:${s.line + Number(row)}`;
      },
    );
    expect(r.status, located).to.equal(0);
  });

  const timings: string[] = [];
  for (const s of snippets) {
    it(`${s.file}:${s.line} runs and exits on its own`, async () => {
      const r = await run(['--import', 'tsx', '--conditions=callgate-source', join(dir, `${s.name}.ts`)], env);
      timings.push(`${s.file}:${s.line} ${Math.round(r.ms)} ms`);
      expect(r.stderr.trim(), `standard error of ${s.file}:${s.line}\n${r.stdout}`).to.equal('');
      expect(r.code, r.stdout).to.equal(0);
      expect(r.stdout.trim(), 'prints what it shows').to.not.equal('');
      // `console.log(x); // → TEXT; a note`: TEXT begins a line printed, in the order of the lines
      const printed = r.stdout.split('\n');
      let at = 0;
      for (const [, text] of s.code.matchAll(/\/\/ → ([^;\n]+)/g)) {
        const begins = text!.trim().replace(/\s*…$/, ''); // `…`: what follows varies, or is long
        const i = printed.findIndex((line, k) => k >= at && line.startsWith(begins));
        expect(i, `"${text}" printed after line ${at} of:\n${r.stdout}`).to.be.at.least(0);
        at = i + 1;
      }
    });
  }
});
