#!/usr/bin/env node
// The callgate command. In a development checkout (src/ present, tsx installed) it runs the
// TypeScript sources through tsx, so a stale build (npm run build) is never what runs or is
// tested there; in the installed package (no src/) it runs the compiled CLI in dist/.
import { existsSync } from 'node:fs';

// `serve`: a SIGHUP (systemctl reload) while the sidecar loads and starts is a reload to make
// once it is up, never the end of the process, Node's default (systemd would not restart it:
// death by SIGHUP counts as a clean exit). The sidecar takes it over (src/cli/serve.ts).
if (process.argv[2] === 'serve') {
  const early = { heard: false, listener: () => (early.heard = true) };
  globalThis[Symbol.for('callgate.earlyHup')] = early;
  process.on('SIGHUP', early.listener);
}

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
