/**
 * A script call written as Redis' wire format (RESP) in one buffer: EVALSHA sha numkeys ...,
 * the bytes ioredis' own script command writes for the same arguments. ioredis builds that
 * string by joining five pieces per argument (a decision's thirty arguments made about 2.3 KB
 * of short-lived strings per call, the largest share of a decision's allocations, measured with
 * V8's sampling heap profiler); here each argument is written into a scratch buffer and the
 * command copied out once. Used on a single Redis only: a Cluster client routes a command by
 * the keys in its arguments, which this command does not list (connection.ts).
 */
import { Command } from 'ioredis';
import type { Script } from './scripts.js';

/** Grows to the largest command written; one per process (writes are synchronous). */
let scratch = Buffer.allocUnsafeSlow(16 * 1024);

/** What ioredis sends for an argument (its toArg): strings as they are, numbers in decimal (integers past 2^53 in full), nothing as ''. */
function argText(a: string | number | null | undefined): string {
  if (typeof a === 'string') return a;
  if (a === null || a === undefined) return '';
  return Number.isInteger(a) && !Number.isSafeInteger(a) ? BigInt(a).toString() : String(a);
}

/** Write a non-negative integer's decimal digits at `at`; returns the position after them. */
function digits(buf: Buffer, at: number, n: number): number {
  if (n < 10) {
    buf[at] = 48 + n;
    return at + 1;
  }
  let len = 1;
  for (let m = n; m >= 10; m = Math.floor(m / 10)) len++;
  for (let k = at + len - 1; k >= at; k--) {
    buf[k] = 48 + (n % 10);
    n = Math.floor(n / 10);
  }
  return at + len;
}

/** `*count\r\n` or `$length\r\n` at `at`. */
function lengthLine(buf: Buffer, at: number, mark: number, n: number): number {
  buf[at] = mark;
  at = digits(buf, at + 1, n);
  buf[at] = 13;
  buf[at + 1] = 10;
  return at + 2;
}

/**
 * The bytes of `name head ...argv` (argv = [numkeys, ...KEYS, ...ARGV]): `EVALSHA sha ...`, or
 * `EVAL source ...` (a script's first call on a socket).
 */
export function scriptBytes(name: 'evalsha' | 'eval', head: string, argv: readonly (string | number)[]): Buffer {
  // an upper bound: 3 bytes per UTF-16 unit at most, and the digits of each length
  let size = 32 + 3 * head.length;
  for (const a of argv) size += 16 + 3 * (typeof a === 'string' ? a.length : argText(a).length);
  if (size > scratch.length) scratch = Buffer.allocUnsafeSlow(2 ** Math.ceil(Math.log2(size)));
  const buf = scratch;
  let at = lengthLine(buf, 0, 42, argv.length + 2);
  at = lengthLine(buf, at, 36, name.length);
  at += buf.write(name, at, 'latin1');
  buf[at] = 13;
  buf[at + 1] = 10;
  at += 2;
  for (let i = -1; i < argv.length; i++) {
    const text = i < 0 ? head : argText(argv[i]!);
    const len = Buffer.byteLength(text);
    at = lengthLine(buf, at, 36, len);
    at += buf.write(text, at);
    buf[at] = 13;
    buf[at + 1] = 10;
    at += 2;
  }
  const out = Buffer.allocUnsafe(at);
  buf.copy(out, 0, 0, at);
  return out;
}

/** The scripts whose source each socket was sent (EVAL), as ioredis' own script command keeps them. */
const loadedOn = new WeakMap<object, Set<string>>();

/**
 * A script call that writes its bytes itself; ioredis queues it and reads its reply as any
 * script command's (as text, as its script commands do). On a socket that has not been sent the
 * script yet (a new connection, or one ioredis re-sends unanswered commands on after a
 * reconnect, unless autoResendUnfulfilledCommands is off) it sends the source (EVAL), as
 * ioredis' own script command does: the Redis there may have restarted empty, and a NOSCRIPT
 * would put the call behind later ones. Else EVALSHA.
 */
export class ScriptCall extends Command {
  constructor(
    private readonly script: Script,
    private readonly argv: readonly (string | number)[],
  ) {
    super('evalsha', [], { replyEncoding: 'utf8' });
  }

  override toWritable(socket: object): Buffer {
    let loaded = loadedOn.get(socket);
    if (loaded === undefined) loadedOn.set(socket, (loaded = new Set()));
    const { sha, lua } = this.script;
    if (loaded.has(sha)) {
      this.name = 'evalsha';
      return scriptBytes('evalsha', sha, this.argv);
    }
    loaded.add(sha);
    this.name = 'eval';
    return scriptBytes('eval', lua, this.argv);
  }
}

/** Redis' answer to an EVALSHA whose script it does not hold (a restart, SCRIPT FLUSH). */
export function isNoScript(err: unknown): boolean {
  return (err as Error | undefined)?.message?.startsWith('NOSCRIPT') === true;
}
