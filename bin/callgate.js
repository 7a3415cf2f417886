#!/usr/bin/env node
// The callgate command: the compiled CLI when built (npm run build), else the TypeScript
// sources through tsx (a development checkout).
import { existsSync } from 'node:fs';

const built = new URL('../dist/src/cli.js', import.meta.url);
let cli;
if (existsSync(built)) {
  cli = await import(built.href);
} else {
  const { register } = await import('tsx/esm/api');
  register();
  cli = await import(new URL('../src/cli.ts', import.meta.url).href);
}
process.exitCode = await cli.main(process.argv.slice(2));
