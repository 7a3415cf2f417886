#!/usr/bin/env node
// The callgate command. In a development checkout (src/ present, tsx installed) it runs the
// TypeScript sources through tsx, so a stale build (npm run build) is never what runs or is
// tested there; in the installed package (no src/) it runs the compiled CLI in dist/.
import { existsSync } from 'node:fs';

const source = new URL('../src/cli/main.ts', import.meta.url);
const built = new URL('../dist/src/cli/main.js', import.meta.url);

async function tsx() {
  try {
    return await import('tsx/esm/api');
  } catch {
    return undefined; // a checkout installed without devDependencies: use the build
  }
}

let cli;
const api = existsSync(source) ? await tsx() : undefined;
if (api) {
  api.register();
  cli = await import(source.href);
} else {
  cli = await import(built.href);
}
process.exitCode = await cli.main(process.argv.slice(2));
