/**
 * sipp (Debian's sip-tester) as test callers and carriers: child processes on free loopback UDP
 * ports, with every trace sipp can write, read back once it exited.
 *
 *   const uas = await startSipp({ name: 'carrierA', scenario: 'carrier.xml', dir });
 *   const uac = await startSipp({ name: 'caller', scenario: 'caller.xml', dir, remote: '127.0.0.1:5080', rate: 30, calls: 200 });
 *   const callerReport = await uac.done();   // -m calls made (bounded by -timeout)
 *   const carrierReport = await uas.stop();  // SIGUSR1: no new calls, the ongoing ones finish
 *
 * A report holds sipp's own records: every message sent and received (-trace_msg, or the lighter
 * -trace_shortmsg; µs times),
 * the last row of the statistics (-trace_stat) and of the per-message counts (-trace_counts),
 * and the unexpected-message log (-trace_err). Every child is SIGKILLed on process exit; every
 * wait is bounded; loopback only, never a fixed port (a control port of its own too).
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { createSocket } from 'node:dgram';
import { existsSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import path from 'node:path';
import { orAfter } from './wait.js';

export const SIPP_HOST = '127.0.0.1';
export const SIPP_INSTALL_HINT =
  'sipp not found: install it (Debian: apt-get install sip-tester); .ci/run does so when it is missing';

export interface SippOptions {
  /** Names its trace files in `dir`. */
  readonly name: string;
  /** Scenario file (XML). */
  readonly scenario: string;
  /** Where the traces go (sipp runs there). */
  readonly dir: string;
  /** Listen on this UDP port (first attempt; default: a free one). */
  readonly port?: number;
  /** Calls go to this `ip:port` (a caller); absent: it waits for calls (a carrier). */
  readonly remote?: string;
  /** New calls per second (-r). */
  readonly rate?: number;
  /** Calls to make, then exit (-m). */
  readonly calls?: number;
  /** Length of the scenario's <pause/> (-d), ms. */
  readonly pauseMs?: number;
  /** Request-URI user (-s). */
  readonly service?: string;
  /** Scenario keywords (-key name value). */
  readonly keys?: Readonly<Record<string, string>>;
  /**
   * Run sipp under real-time scheduling (chrt -f 1, where allowed; else as is), so that its
   * userland timestamps stay close to the wire on a busy host, as those of a carrier's policer
   * in a kernel or a switch would be. sipp sleeps between messages: it takes little CPU. Give
   * it to the sipps whose receive times are measured (carriers), not to all: real-time tasks
   * of one priority do not preempt each other. Default false.
   */
  readonly priority?: boolean;
  /**
   * `full`: every message whole (-trace_msg: headers can be checked); `short`: one line per
   * message (-trace_shortmsg: time, direction, Call-ID, CSeq, first line), lighter for sipp.
   * Default full.
   */
  readonly trace?: 'full' | 'short';
  /** sipp exits after this long whatever happens (-timeout), s. Default 60. */
  readonly timeoutS?: number;
  readonly extraArgs?: readonly string[];
}

export interface SipLogEntry {
  /** When sipp logged it, µs since the epoch (its process clock). */
  readonly t: number;
  readonly dir: 'sent' | 'received';
  /** The request method, or undefined for a response. */
  readonly method?: string;
  readonly status?: number;
  readonly callId: string;
  readonly cseq: string;
  /** Header values by lower-case name, in order. */
  readonly headers: Readonly<Record<string, string[]>>;
  readonly firstLine: string;
}

export interface SippReport {
  readonly name: string;
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
  readonly messages: SipLogEntry[];
  /** The last row of -trace_stat (column name → value). */
  readonly stats: Readonly<Record<string, string>>;
  /** The last row of -trace_counts (e.g. `6_503_Recv`), as numbers. */
  readonly counts: Readonly<Record<string, number>>;
  /** Unexpected messages sipp logged (-trace_err); '' when none. */
  readonly errors: string;
  /** What sipp printed (its screens), last 8 kB. */
  readonly output: string;
}

export interface Sipp {
  readonly name: string;
  readonly port: number;
  readonly pid: number;
  /** Resolves when sipp exits on its own (a caller after -m calls). */
  done(timeoutMs?: number): Promise<SippReport>;
  /**
   * SIGUSR1 (no new calls, ongoing ones finish), then the report; past `timeoutMs` a second
   * SIGUSR1 (at once), 5 s later SIGKILL: the report then holds what sipp had logged (its
   * `signal` says so), for the test's own checks to judge.
   */
  stop(timeoutMs?: number): Promise<SippReport>;
}

const live = new Set<ChildProcess>();
process.on('exit', () => {
  for (const child of live) {
    try {
      child.kill('SIGKILL');
    } catch {
      /* gone */
    }
  }
});

let onPath: boolean | undefined;
export function sippAvailable(): boolean {
  if (onPath === undefined) {
    const r = spawnSync('sipp', ['-v'], { stdio: 'ignore', timeout: 3_000 });
    onPath = !r.error;
  }
  return onPath;
}

let realtime: boolean | undefined;
/** Whether this process may start one under SCHED_FIFO (chrt; root or CAP_SYS_NICE). */
function realtimeAllowed(): boolean {
  if (realtime === undefined) {
    const r = spawnSync('chrt', ['-f', '1', 'true'], { stdio: 'ignore', timeout: 3_000 });
    realtime = !r.error && r.status === 0;
  }
  return realtime;
}

/** A UDP port the OS says is free on loopback right now. */
export function freeUdpPort(host = SIPP_HOST): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createSocket('udp4');
    s.once('error', reject);
    s.bind(0, host, () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

/** True when something holds the UDP port (bind fails with EADDRINUSE). */
function udpPortTaken(port: number, host = SIPP_HOST): Promise<boolean> {
  return new Promise((resolve) => {
    const s = createSocket('udp4');
    s.once('error', (err: NodeJS.ErrnoException) => {
      s.close();
      resolve(err.code === 'EADDRINUSE');
    });
    s.bind(port, host, () => s.close(() => resolve(false)));
  });
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** Start sipp on a free loopback port; resolves once it listens (retried on another port if it could not bind). */
export async function startSipp(opts: SippOptions): Promise<Sipp> {
  if (!sippAvailable()) throw new Error(SIPP_INSTALL_HINT);
  let last = '';
  for (let attempt = 0; attempt < 3; attempt++) {
    const port = attempt === 0 && opts.port !== undefined ? opts.port : await freeUdpPort();
    let control = await freeUdpPort();
    while (control === port) control = await freeUdpPort();
    const started = await launch(opts, port, control);
    if (started) return started;
    last = `sipp ${opts.name} exited at startup on port ${port}`;
  }
  throw new Error(last);
}

async function launch(opts: SippOptions, port: number, control: number): Promise<Sipp | undefined> {
  const file = (ext: string) => path.join(opts.dir, `${opts.name}.${ext}`);
  const args = [
    '-sf',
    path.resolve(opts.scenario),
    ...(opts.remote ? [opts.remote] : []),
    '-i',
    SIPP_HOST,
    '-p',
    String(port),
    '-cp',
    String(control),
    '-bind_local',
    '-nostdin',
    '-timer_resol',
    '1',
    '-timeout',
    `${opts.timeoutS ?? 60}s`,
    ...(opts.trace === 'short'
      ? ['-trace_shortmsg', '-shortmessage_file', file('short.log')]
      : ['-trace_msg', '-message_file', file('messages.log')]),
    '-trace_err',
    '-error_file',
    file('errors.log'),
    '-trace_stat',
    '-stf',
    file('stats.csv'),
    '-fd',
    '1',
    '-trace_counts',
    ...(opts.rate !== undefined ? ['-r', String(opts.rate)] : []),
    ...(opts.calls !== undefined ? ['-m', String(opts.calls)] : []),
    ...(opts.pauseMs !== undefined ? ['-d', String(opts.pauseMs)] : []),
    ...(opts.service !== undefined ? ['-s', opts.service] : []),
    ...Object.entries(opts.keys ?? {}).flatMap(([k, v]) => ['-key', k, v]),
    ...(opts.extraArgs ?? []),
  ];
  // a failed attempt's logs must not stay behind for the next one (sipp appends to them)
  for (const ext of ['errors.log', 'messages.log', 'short.log', 'stats.csv']) rmSync(file(ext), { force: true });
  const child =
    (opts.priority ?? false) && realtimeAllowed()
      ? spawn('chrt', ['-f', '1', 'sipp', ...args], { cwd: opts.dir, stdio: ['ignore', 'pipe', 'pipe'] })
      : spawn('sipp', args, { cwd: opts.dir, stdio: ['ignore', 'pipe', 'pipe'] });
  live.add(child);
  let output = '';
  const keep = (b: Buffer) => (output = (output + b.toString()).slice(-8_192));
  child.stdout.on('data', keep);
  child.stderr.on('data', keep);
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => {
    child.once('exit', (code, signal) => {
      live.delete(child);
      resolve({ code, signal });
    });
    child.once('error', (err) => {
      keep(Buffer.from(String(err)));
      live.delete(child);
      resolve({ code: null, signal: null });
    });
  });
  let gone = false;
  void exited.then(() => (gone = true));
  const deadline = Date.now() + 10_000;
  while (!(await udpPortTaken(port))) {
    if (gone) return undefined;
    if (Date.now() > deadline) {
      child.kill('SIGKILL');
      throw new Error(`sipp ${opts.name} did not listen on ${port} within 10 s:\n${output}`);
    }
    await sleep(20);
  }
  const report = async (how: { code: number | null; signal: NodeJS.Signals | null }): Promise<SippReport> => ({
    name: opts.name,
    ...how,
    messages: existsSync(file('messages.log'))
      ? parseMessageLog(readFileSync(file('messages.log'), 'latin1'))
      : existsSync(file('short.log'))
        ? parseShortLog(readFileSync(file('short.log'), 'latin1'))
        : [],
    stats: lastRow(file('stats.csv')),
    counts: Object.fromEntries(
      Object.entries(lastRow(countsFile(opts.dir, child.pid!))).map(([k, v]) => [k, Number(v)]),
    ),
    // sipp's own scheduler falling behind on a loaded host ("Overload warning: ... watchdog ...")
    // says nothing of the SIP path under test: every other line stays
    errors: existsSync(file('errors.log'))
      ? readFileSync(file('errors.log'), 'latin1')
          .split('\n')
          .filter((line) => !/Overload warning: .*watchdog/i.test(line))
          .join('\n')
          .trim()
      : '',
    output,
  });
  const waitExit = async (timeoutMs: number) => {
    const how = await orAfter(exited, timeoutMs, undefined);
    if (how) return how;
    child.kill('SIGKILL');
    throw new Error(`sipp ${opts.name} did not exit within ${timeoutMs} ms (killed):\n${output}`);
  };
  return {
    name: opts.name,
    port,
    pid: child.pid!,
    done: async (timeoutMs = 60_000) => report(await waitExit(timeoutMs)),
    stop: async (timeoutMs = 10_000) => {
      if (!gone) child.kill('SIGUSR1');
      // SIGUSR1 ends sipp once its calls in progress end; a second one ends it at once (a
      // loaded host can leave a call waiting on a retransmission timer past the timeout)
      const soft = await orAfter(exited, timeoutMs, undefined);
      if (soft) return report(soft);
      child.kill('SIGUSR1');
      const hard = await orAfter(exited, 5_000, undefined);
      if (hard) return report(hard);
      // still there (seen on a 2-core host with real-time carriers): what it logged is the record
      child.kill('SIGKILL');
      return report(await exited);
    },
  };
}

function countsFile(dir: string, pid: number): string {
  const name = readdirSync(dir).find((f) => f.endsWith(`_${pid}_counts.csv`));
  return name ? path.join(dir, name) : '';
}

/** The last row of a sipp CSV (`;`-separated, header first) as column → value. */
function lastRow(file: string): Record<string, string> {
  if (!file || !existsSync(file)) return {};
  const lines = readFileSync(file, 'latin1')
    .split('\n')
    .filter((l) => l.trim() !== '');
  if (lines.length < 2) return {};
  const head = lines[0]!.split(';');
  const row = lines[lines.length - 1]!.split(';');
  return Object.fromEntries(head.map((h, i) => [h, row[i] ?? '']));
}

const COMPACT: Record<string, string> = {
  i: 'call-id',
  v: 'via',
  f: 'from',
  t: 'to',
  m: 'contact',
  l: 'content-length',
  c: 'content-type',
};

/** `YYYY-MM-DD HH:MM:SS.ffffff` in local time (as sipp writes it) → µs since the epoch. */
function localUs(s: string): number {
  const m = /^(\d{4})-(\d{2})-(\d{2}) (\d{2}):(\d{2}):(\d{2})\.(\d{6})$/.exec(s.trim());
  if (!m) throw new Error(`sipp log: bad time ${JSON.stringify(s)}`);
  const [, y, mo, d, h, mi, sec, us] = m.map(Number) as number[];
  return new Date(y!, mo! - 1, d, h, mi, sec).getTime() * 1000 + us!;
}

/** sipp's message log (-trace_msg): blocks headed by a dashed line with the time. */
export function parseMessageLog(text: string): SipLogEntry[] {
  const out: SipLogEntry[] = [];
  for (const block of text.split(/^-{20,} /m).slice(1)) {
    const lines = block.split(/\r?\n/);
    const t = localUs(lines[0]!);
    const kind = lines[1] ?? '';
    const dir = /message sent/.test(kind) ? 'sent' : /message received/.test(kind) ? 'received' : undefined;
    if (!dir) continue;
    let i = 2;
    while (i < lines.length && lines[i]!.trim() === '') i++;
    const firstLine = lines[i++] ?? '';
    const headers: Record<string, string[]> = {};
    for (; i < lines.length && lines[i]!.trim() !== ''; i++) {
      const m = /^([^:\s]+)\s*:\s*(.*)$/.exec(lines[i]!);
      if (!m) continue;
      const name = COMPACT[m[1]!.toLowerCase()] ?? m[1]!.toLowerCase();
      (headers[name] ??= []).push(m[2]!.trim());
    }
    const res = /^SIP\/2\.0 (\d{3})/.exec(firstLine);
    out.push({
      t,
      dir,
      ...(res ? { status: Number(res[1]) } : { method: firstLine.split(' ')[0] }),
      callId: headers['call-id']?.[0] ?? '',
      cseq: headers.cseq?.[0] ?? '',
      headers,
      firstLine,
    });
  }
  return out;
}

/**
 * sipp's short message log (-trace_shortmsg): one tab-separated line per message: date, time,
 * epoch seconds with µs, S or R, Call-ID, `CSeq:N METHOD`, first line. Headers are not kept.
 */
export function parseShortLog(text: string): SipLogEntry[] {
  const out: SipLogEntry[] = [];
  for (const line of text.split('\n')) {
    const f = line.split('\t');
    if (f.length < 7 || (f[3] !== 'S' && f[3] !== 'R')) continue;
    const [sec, frac = ''] = f[2]!.split('.');
    const t = Number(sec) * 1_000_000 + Number(frac.padEnd(6, '0').slice(0, 6));
    const firstLine = f.slice(6).join('\t').trim();
    const res = /^SIP\/2\.0 (\d{3})/.exec(firstLine);
    out.push({
      t,
      dir: f[3] === 'S' ? 'sent' : 'received',
      ...(res ? { status: Number(res[1]) } : { method: firstLine.split(' ')[0] }),
      callId: f[4]!,
      cseq: f[5]!.replace(/^CSeq:\s*/, ''),
      headers: {},
      firstLine,
    });
  }
  return out;
}

/**
 * For each entry of a sipp log (in log order), a time no later than the moment its message left
 * or arrived: the time of the entry logged before it (0 for the first). sipp reads its clock just
 * after a send (SIPp's socket.cpp: write_primitive, then GET_TIME), so a logged send time is no
 * lower bound of when the message left; sipp is one thread, so the clock read of the entry before
 * preceded the send.
 */
export function leftAfter(messages: readonly SipLogEntry[]): number[] {
  return messages.map((_, i) => (i === 0 ? 0 : messages[i - 1]!.t));
}

// shared with the multi-process tests, which have no SIP
export { maxInWindow } from './window.js';

/**
 * Most admitted calls whose decision intervals [INVITE sent, 100 received] (µs) all fit in one
 * window shorter than 1 s: each was certainly decided inside it.
 */
export function provenInOneSecond(intervals: { a: number; b: number }[]): number {
  const sorted = [...intervals].sort((x, y) => x.a - y.a);
  let best = 0;
  for (let i = 0; i < sorted.length; i++) {
    const from = sorted[i]!.a;
    let n = 0;
    for (let j = i; j < sorted.length && sorted[j]!.a < from + 1_000_000; j++) if (sorted[j]!.b < from + 1_000_000) n++;
    best = Math.max(best, n);
  }
  return best;
}

/** The Warning header of a logged SIP message ('' when none). */
export const warning = (m: SipLogEntry): string => m.headers.warning?.join(' ') ?? '';

/** Smallest gap between consecutive times (Infinity with fewer than two). */
export function minGap(timesUs: readonly number[]): number {
  const t = [...timesUs].sort((a, b) => a - b);
  let best = Infinity;
  for (let i = 1; i < t.length; i++) best = Math.min(best, t[i]! - t[i - 1]!);
  return best;
}
