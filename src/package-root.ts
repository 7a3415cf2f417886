/**
 * Where callgate's own files are: the directory of its package.json. This module runs from
 * src/ in a checkout (tsx) and from dist/src/ in the built package, so paths to lua/ or
 * package.json cannot be fixed relative ones; the nearest callgate package.json above it is.
 */
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

interface PackageJson {
  name?: string;
  version?: string;
}

let found: { root: string; pkg: PackageJson } | undefined;

function find(): { root: string; pkg: PackageJson } {
  if (found) return found;
  const start = dirname(fileURLToPath(import.meta.url));
  for (let dir = start; ; dir = dirname(dir)) {
    const file = join(dir, 'package.json');
    if (existsSync(file)) {
      const pkg = JSON.parse(readFileSync(file, 'utf8')) as PackageJson;
      if (pkg.name === 'callgate') return (found = { root: dir, pkg });
    }
    if (dirname(dir) === dir) throw new Error(`callgate's package.json not found above ${start}: a broken install`);
  }
}

/** The package's root directory (holds package.json, lua/, bin/). */
export function packageRoot(): string {
  return find().root;
}

/** The package's version, from its package.json. */
export function packageVersion(): string {
  return find().pkg.version ?? '0.0.0';
}
