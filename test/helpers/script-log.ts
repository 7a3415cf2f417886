/**
 * Which of callgate's scripts a Redis ran, in order, read from its slowlog with every command
 * logged: INFO commandstats counts script calls but cannot tell the scripts apart.
 */
import { type ScriptName, scripts } from '../../src/store/redis/scripts.js';

/** Sends one command and returns its reply (an ioredis client's `call`, or rawCommand on a port). */
export type Send = (args: string[]) => Promise<unknown>;

/** The id of the newest slowlog entry read so far, per Redis (its Send). */
const seen = new WeakMap<Send, number>();

/** Log every command from now on, the log emptied. */
export async function logScripts(send: Send): Promise<void> {
  await send(['CONFIG', 'SET', 'slowlog-log-slower-than', '0', 'slowlog-max-len', '10000']);
  await send(['SLOWLOG', 'RESET']);
  seen.delete(send);
}

/** Back to Redis' default (10 ms), the log emptied. */
export async function stopLoggingScripts(send: Send): Promise<void> {
  await send(['CONFIG', 'SET', 'slowlog-log-slower-than', '10000']);
  await send(['SLOWLOG', 'RESET']);
  seen.delete(send);
}

/**
 * The scripts run since logScripts (or the last call), oldest first, by name. Entries are told
 * apart by their ids, so that none logged while reading is lost. EVALSHA names a script by its
 * SHA-1, EVAL by its source (the log keeps its first 128 bytes).
 */
export async function scriptsRun(send: Send): Promise<ScriptName[]> {
  const all = Object.entries(scripts()) as [ScriptName, { sha: string; lua: string }][];
  const log = (await send(['SLOWLOG', 'GET', '-1'])) as [unknown, unknown, unknown, Buffer[] | string[]][];
  const after = seen.get(send) ?? -1;
  const names: ScriptName[] = [];
  for (const [id, , , args] of [...log].reverse()) {
    if (Number(id) <= after) continue;
    seen.set(send, Number(id));
    const [cmd, head] = args.map(String);
    if (cmd === undefined || head === undefined) continue;
    const c = cmd.toLowerCase();
    const found =
      c === 'evalsha'
        ? all.find(([, s]) => s.sha === head)
        : c === 'eval'
          ? all.find(([, s]) => s.lua.startsWith(head.slice(0, 100)))
          : undefined;
    if (found) names.push(found[0]);
  }
  return names;
}
