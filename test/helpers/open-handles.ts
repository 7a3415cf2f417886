/**
 * Mocha root hook (loaded by `require` in .mocharc.json and .mocharc.unit.jsonc): the suite must
 * end by itself. Mocha runs without `exit: true`, so a client, server, child process, socket or
 * timer a test leaves open would keep the process alive after the summary, silently. Instead,
 * GRACE_MS after the last test, this names what is still open and exits with code 1.
 *
 * Timers do not say where they were made; to see the stack that made each one still pending:
 *   OPEN_HANDLES_STACKS=1 npx mocha test/FILE.test.ts
 * (it tracks every async resource: slower, so only on demand).
 */
import { createHook } from 'node:async_hooks';
import type { ChildProcess } from 'node:child_process';
import type { Server, Socket } from 'node:net';

const GRACE_MS = 10_000;

/** Async resources that keep the event loop alive, by async_hooks type. */
const LOOP_HOLDERS = new Set(['Timeout', 'TCPWRAP', 'TCPSERVERWRAP', 'TLSWRAP', 'PIPEWRAP', 'UDPWRAP', 'PROCESSWRAP']);
const created = new Map<number, { type: string; stack: string; resource: { hasRef?: () => boolean } }>();
if (process.env.OPEN_HANDLES_STACKS) {
  createHook({
    init(id, type, _trigger, resource) {
      if (!LOOP_HOLDERS.has(type)) return;
      const stack = (new Error().stack ?? '')
        .split('\n')
        .slice(2)
        .filter((l) => !/node:internal|node_modules/.test(l));
      created.set(id, { type, stack: stack.slice(0, 6).join('\n'), resource: resource as { hasRef?: () => boolean } });
    },
    destroy(id) {
      created.delete(id);
    },
  }).enable();
}

/** What a handle is, in a few words: its kind, and its addresses or command. */
function describeHandle(handle: unknown): string {
  const name = (handle as object | null)?.constructor?.name ?? typeof handle;
  const h = handle as Partial<Socket & Server & ChildProcess>;
  if (Array.isArray(h.spawnargs)) return `${name} pid ${h.pid}: ${h.spawnargs.join(' ')}`;
  if (typeof h.remotePort === 'number')
    return `${name} ${h.localAddress}:${h.localPort} -> ${h.remoteAddress}:${h.remotePort}`;
  if (typeof h.address === 'function') {
    const a = h.address() as ReturnType<Server['address']>;
    if (a) return `${name} on ${typeof a === 'string' ? a : `${a.address}:${a.port}`}`;
  }
  return name;
}

function report(): string {
  const internals = process as unknown as { _getActiveHandles?: () => unknown[] };
  const handles = (internals._getActiveHandles?.() ?? []).filter((h) => h !== process.stdout && h !== process.stderr);
  const stacks = [...created.values()]
    .filter((c) => c.resource.hasRef?.() !== false)
    .map((c) => `  - ${c.type} made at\n${c.stack.replace(/^/gm, '      ')}\n`);
  return (
    `\nThe tests ended ${GRACE_MS / 1000} s ago, but the process is still kept alive by:\n` +
    `  ${process.getActiveResourcesInfo().join(', ')}\n` +
    handles.map((h) => `  - ${describeHandle(h)}\n`).join('') +
    stacks.join('') +
    'Close each in the test (or the after hook) that opened it. ' +
    (process.env.OPEN_HANDLES_STACKS ? '' : 'OPEN_HANDLES_STACKS=1 shows where timers were made.')
  );
}

export const mochaHooks = {
  afterAll(): void {
    // a parallel run's worker runs one file after another and is ended by mocha: nothing to watch
    if (process.env.MOCHA_WORKER_ID !== undefined) return;
    const watchdog = setTimeout(() => {
      console.error(report());
      // mocha sets the exit code to its failure count on exit: a leak fails the run as well
      process.on('exit', () => {
        process.exitCode = 1;
      });
      process.exit(1);
    }, GRACE_MS);
    watchdog.unref();
  },
};
