/**
 * The benches measure callgate as users run it: compiled by tsc into dist/ (`npm run build`;
 * `npm run bench` builds first), imported as the package ('callgate'). Run from its TypeScript
 * source through tsx instead, every closure made per call is wrapped in a call that defines its
 * name (esbuild's keepNames, which tsx always sets): allocation and CPU that compiled code does
 * not have, and rate-limiter-flexible, plain JavaScript, never pays (bench/alloc.ts --from both
 * shows the difference).
 */
import { existsSync, readdirSync, statSync } from 'node:fs';
import { join, resolve } from 'node:path';

/** The newest modification time of the files under `dir`, ms. */
function newest(dir: string): number {
  let t = 0;
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, e.name);
    t = Math.max(t, e.isDirectory() ? newest(path) : statSync(path).mtimeMs);
  }
  return t;
}

/** The compiled entry of the callgate checkout at `root`; throws when it is missing or older than src/. */
export function builtEntry(root = '.'): string {
  const entry = resolve(root, 'dist/src/index.js');
  if (!existsSync(entry) || statSync(entry).mtimeMs < newest(resolve(root, 'src')))
    throw new Error(`${resolve(root)}: dist/ is missing or older than src/: run \`npm run build\` there first`);
  return entry;
}
