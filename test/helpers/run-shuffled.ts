/**
 * `npm run test:shuffled`: every test file, in a seeded random order, to show that no file
 * depends on another having run before it. The seed is printed; `SEED=1234 npm run
 * test:shuffled` repeats an order. Further arguments go to mocha (`-- --bail`).
 */
import { spawnSync } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { join } from 'node:path';

const ROOT = new URL('../..', import.meta.url).pathname;
const seed = process.env.SEED ? Number(process.env.SEED) : Math.floor(Math.random() * 2 ** 31);
if (!Number.isSafeInteger(seed)) throw new Error(`SEED must be an integer, got ${process.env.SEED}`);

/** mulberry32: a small seeded generator, enough to shuffle a list. */
function random(s: number): () => number {
  let a = s >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 2 ** 32;
  };
}

const files = (readdirSync(join(ROOT, 'test'), { recursive: true }) as string[])
  .filter((f) => f.endsWith('.test.ts'))
  .map((f) => join('test', f))
  .sort();
const next = random(seed);
for (let i = files.length - 1; i > 0; i--) {
  const j = Math.floor(next() * (i + 1));
  [files[i], files[j]] = [files[j]!, files[i]!];
}
console.log(`test files in a shuffled order, SEED=${seed}:\n  ${files.join('\n  ')}`);
const mocha = join(ROOT, 'node_modules', '.bin', 'mocha');
const r = spawnSync(mocha, [...files, ...process.argv.slice(2)], { cwd: ROOT, stdio: 'inherit' });
console.log(`(the order of SEED=${seed})`);
process.exit(r.status ?? 1);
