/**
 * A RedisStore's connection: the client's scripts, the wait for a ready client (bounded by the
 * call's deadline), script calls written corked in chunks, and the client's events turned into
 * the store's outage reports.
 */
import type { Cluster, Redis } from 'ioredis';
import { StoreUnavailableError } from '../../errors/index.js';
import type { SafeEmitter } from '../../events.js';
import type { StopSignal, StoreEvents } from '../types.js';
import { isNoScript, ScriptCall } from './script-call.js';
import { type Script, scripts } from './scripts.js';
import { guardSocketErrors } from './socket-errors.js';

export interface ConnectionOptions {
  /** Commands written to the socket at once, at most (see RedisStoreOptions.writeChunk). */
  readonly writeChunk: number;
  /** How long a call without a signal waits for a (re)connecting Redis, ms. */
  readonly readyTimeoutMs: number;
  /** Where the loss of the connection is reported, once per outage. */
  readonly events: SafeEmitter<StoreEvents>;
  /**
   * Called on every loss of the connection (on a Cluster, of one node's, named `host:port`):
   * what the process knew of the server's data may not hold for the server it reconnects to.
   */
  readonly lost: (node?: string) => void;
  /**
   * Called when a Cluster master serves no slot any more (`host:port`): its replica took over,
   * often without any connection lost (a master frozen past the node timeout). What it answered
   * since its replica last copied it, and what it runs when it wakes, is not on the new master.
   */
  readonly deposed?: (node: string) => void;
  /** Called when the connection is ready again (after a loss too). */
  readonly ready?: () => void;
}

type ScriptCommand = (...a: (string | number)[]) => Promise<unknown>;

export class RedisConnection {
  /** A Cluster client: its commands are written as usual, never corked. */
  readonly cluster: boolean;
  /** The connection was lost since it was last ready (reported). */
  private lost = false;
  /** A connection error since it was last ready: Redis is known to be out of reach. */
  private down = false;
  private closing = false;
  /**
   * Set while the server behind the connection is older than Redis 7.0, whose `PEXPIRE … GT` the
   * scripts use: such a server would refuse a decision with channels midway, after some of its
   * writes. Every call fails with it instead (the policy decides), and the store says why once.
   */
  private tooOld: StoreUnavailableError | undefined;
  /** INFO server of the server behind the connection, read once while connected (serverInfo). */
  private info: Promise<string> | undefined;
  private readyWait?: Promise<void>;
  /** Commands written into the current cork (see corked()), and the socket corked. */
  private inChunk = 0;
  private chunkStream: Redis['stream'] | undefined;
  /**
   * How to fail each command written and not yet answered. With autoResendUnfulfilledCommands
   * off (RECOMMENDED_REDIS_OPTIONS), ioredis 6 never settles a command that was in flight when
   * the connection broke if it reconnects at once: a batch lane or the holds keeper waiting on it
   * would wait for ever. The store fails them itself at the 'close'.
   */
  private readonly inFlight = new Set<(err: Error) => void>();
  /**
   * Whether the client re-sends nothing after a break (then the store fails what was in flight).
   * A client that re-sends (ioredis' default) settles those commands itself, and must be left to:
   * failing one early would let the policy decide before the call's deadline while its re-sent
   * command could still be counted on Redis before that deadline.
   */
  private readonly dropOnClose: boolean;
  /**
   * Each script by command name, where script calls are written by script-call.ts: on a single
   * Redis whose client neither adds a key prefix nor auto-pipelines (see the constructor); else
   * empty, and every call goes through ioredis' script command.
   */
  private readonly prepared = new Map<string, Script>();

  /**
   * The store listens to the client's 'error' event, so ioredis does not print "Unhandled error
   * event" on the console while Redis is away; and to 'close', since a server that comes back at
   * once may be reconnected to without any error.
   */
  private readonly onError = (err: Error) => {
    this.down = true;
    this.info = undefined;
    this.opts.lost();
    this.report(err.message, err);
  };
  private readonly onClose = () => {
    this.info = undefined;
    this.opts.lost();
    if (!this.closing) this.report('connection closed');
    this.dropInFlight();
  };
  private readonly onReady = () => {
    this.lost = this.down = false;
    this.info = undefined;
    this.checkVersion();
    this.opts.ready?.();
  };
  /** 'node error' (err, 'host:port') or '-node' (the node's client). */
  /** Per slot, its master at the last look (Cluster): one no longer among them was deposed. */
  private masters: (string | undefined)[] = [];
  private readonly onRefresh = () => {
    const before = this.masters;
    this.masters = (this.redis as Cluster).slots.map((s) => s?.[0]);
    const now = new Set(this.masters);
    const deposed = new Set<string>();
    for (const node of before) if (node !== undefined && !now.has(node)) deposed.add(node);
    for (const node of deposed) this.opts.deposed?.(node);
  };
  private readonly onNodeLost = (a: unknown, key?: unknown) => {
    const options = (a as Partial<Redis> | undefined)?.options;
    this.opts.lost(typeof key === 'string' ? key : options ? `${options.host}:${options.port}` : undefined);
  };

  constructor(
    readonly redis: Redis | Cluster,
    private readonly opts: ConnectionOptions,
  ) {
    this.cluster = isCluster(redis);
    const options = this.cluster ? (redis as Cluster).options.redisOptions : (redis as Redis).options;
    this.dropOnClose = options?.autoResendUnfulfilledCommands === false;
    guardSocketErrors(redis, this.cluster);
    // ioredis' path for every call where its client changes what is written or when: a key
    // prefix of its own, or auto-pipelining (which holds ioredis' commands to the next tick:
    // a script's first call, through ioredis, would run after prepared calls issued later)
    const prefixed = options?.keyPrefix !== undefined && options.keyPrefix !== '';
    const prepared = !this.cluster && !prefixed && options?.enableAutoPipelining !== true;
    for (const script of Object.values(scripts())) {
      if (!(script.command in redis)) redis.defineCommand(script.command, { lua: script.lua });
      if (prepared) this.prepared.set(script.command, script);
    }
    redis.on('error', this.onError);
    redis.on('close', this.onClose);
    redis.on('ready', this.onReady);
    // on a Cluster, one node's connection lost (its failover) is a 'node error' or '-node'
    redis.on('node error', this.onNodeLost);
    redis.on('-node', this.onNodeLost);
    if (this.cluster) {
      this.masters = (redis as Cluster).slots.map((s) => s?.[0]);
      redis.on('refresh', this.onRefresh);
    }
    if (redis.status === 'ready') this.checkVersion();
  }

  /**
   * INFO server (in the store's minimal ACL) of the server behind the connection: read once per
   * connection, for the version check and the holds keeper's instance id (a server found
   * behind the connection after a failover); a failed read is made again at the next call.
   */
  serverInfo(): Promise<string> {
    if (this.info !== undefined) return this.info;
    const info = this.track(this.redis.info('server'));
    this.info = info;
    info.catch(() => {
      if (this.info === info) this.info = undefined;
    });
    return info;
  }

  /** Refuse a server older than Redis 7.0 (tooOld), read at each connection. */
  private checkVersion(): void {
    this.serverInfo().then(
      (info) => {
        const version = /^redis_version:(\S+)/m.exec(info)?.[1];
        const major = Number(version?.split('.')[0]);
        if (version === undefined || !(major < 7)) {
          this.tooOld = undefined;
          return;
        }
        this.tooOld = new StoreUnavailableError(
          `callgate needs Redis 7.0 or later (its scripts use PEXPIRE ... GT); this server is Redis ${version}`,
        );
        this.opts.events.safeEmit('error', this.tooOld);
      },
      () => undefined, // a failed read leaves the connection's other checks to find trouble
    );
  }

  /**
   * The loss of the connection, once per outage (the first error or close after it was last
   * ready, that a listener heard: a connection refused while the store was being made, before
   * its gate listened, is reported again at the next attempt).
   */
  private report(reason: string, err?: Error): void {
    if (this.lost || this.opts.events.listenerCount('error') === 0) return;
    this.lost = true;
    this.opts.events.safeEmit('error', new StoreUnavailableError(`Redis connection lost: ${reason}`, err));
  }

  get ready(): boolean {
    return this.redis.status === 'ready';
  }

  /** Known to be out of reach (an error since it was last ready): a call is decided by the policy at once. */
  get knownDown(): boolean {
    return this.down && this.redis.status !== 'ready';
  }

  /**
   * Undefined when Redis is ready now; else a promise that settles when it is (or rejects when
   * the signal aborts first, or the client is closed for good).
   */
  notReady(signal: StopSignal | undefined): Promise<void> | undefined {
    const status = this.redis.status;
    if (status === 'ready') return undefined;
    if (status === 'end') return Promise.reject(new StoreUnavailableError('Redis connection closed'));
    // known to be down (an error since it was last ready): the policy decides at once, rather
    // than every call waiting its whole timeout; the first 'ready' ends this
    if (this.down) return Promise.reject(new StoreUnavailableError('Redis is unreachable (reconnecting)'));
    if (status === 'wait') this.redis.connect().catch(() => undefined); // lazyConnect
    return this.whenReady(signal);
  }

  /**
   * Resolves once the connection is ready; rejects when the signal aborts first, when the client
   * gives up ('end'), or after `readyTimeoutMs` for a call that brought no AbortSignal (a plain
   * flag is read once ready: its call then does not go out).
   */
  private whenReady(given: StopSignal | undefined): Promise<void> {
    const signal = given instanceof AbortSignal ? given : undefined;
    if (signal?.aborted) return Promise.reject(new StoreUnavailableError('Redis not ready in time'));
    return new Promise((resolve, reject) => {
      // a timer of our own, cleared when settled (AbortSignal.timeout would outlive the call)
      let timer: NodeJS.Timeout | undefined;
      const settle = (err?: Error) => {
        clearTimeout(timer);
        signal?.removeEventListener('abort', onAbort);
        if (err) reject(err);
        else resolve();
      };
      const onAbort = () => settle(new StoreUnavailableError('Redis not ready in time'));
      if (signal) signal.addEventListener('abort', onAbort, { once: true });
      else (timer = setTimeout(onAbort, this.opts.readyTimeoutMs)).unref();
      this.connected().then(() => settle(), settle);
    });
  }

  /** One wait for 'ready' shared by every call made while Redis is away (one listener, not one per call). */
  private connected(): Promise<void> {
    return (this.readyWait ??= new Promise<void>((resolve, reject) => {
      const done = (err?: Error) => {
        this.redis.off('ready', onReady);
        this.redis.off('end', onEnd);
        this.readyWait = undefined;
        if (err) reject(err);
        else resolve();
      };
      const onReady = () => done();
      const onEnd = () => done(new StoreUnavailableError('Redis connection closed'));
      this.redis.once('ready', onReady);
      this.redis.once('end', onEnd);
    }));
  }

  /** Run a script command with `argv` = [numkeys, ...KEYS, ...ARGV], once Redis is ready. */
  async send(command: string, argv: (string | number)[], signal?: StopSignal): Promise<unknown> {
    try {
      const wait = this.notReady(signal);
      if (wait) await wait;
      if (signal?.aborted) throw new StoreUnavailableError('decision timed out before its command was sent');
    } catch (err) {
      throw unavailable(err);
    }
    return this.write(command, argv, false);
  }

  /**
   * Write a script call now (Redis ready). A batch (admit, reserve) leaves at once, uncorked:
   * Redis starts on it while this process still handles the replies that made the next one.
   */
  async write(command: string, argv: (string | number)[], batch: boolean): Promise<unknown> {
    try {
      if (this.tooOld !== undefined) throw this.tooOld;
      const corked = !batch && this.opts.writeChunk > 1 && !this.cluster;
      try {
        return await this.track(corked ? this.corked(command, argv) : this.call(command, argv));
      } catch (err) {
        // a Redis that lost its scripts on a connection that stayed open (SCRIPT FLUSH) ran
        // nothing: ioredis' own command, which never sent this script on this socket, sends
        // its source (EVAL)
        if (!isNoScript(err) || !this.prepared.has(command)) throw err;
        return await this.track(this.viaClient(command, argv));
      }
    } catch (err) {
      throw unavailable(err);
    }
  }

  /**
   * Write one script call: as prepared bytes where it can (see prepared; a script's first call on
   * each socket sends its source, so a fresh connection's first decision stays one command, on a
   * Redis that holds the script or one that restarted empty), else through ioredis' script command.
   */
  private call(command: string, argv: (string | number)[]): Promise<unknown> {
    const script = this.prepared.get(command);
    if (script === undefined) return this.viaClient(command, argv);
    return (this.redis as Redis).sendCommand(new ScriptCall(script, argv)) as Promise<unknown>;
  }

  private viaClient(command: string, argv: (string | number)[]): Promise<unknown> {
    return (this.redis as unknown as Record<string, ScriptCommand>)[command]!.apply(this.redis, argv);
  }

  /** `reply`, or a StoreUnavailableError when the connection closes before it comes (see inFlight, dropOnClose). */
  track<T>(reply: Promise<T>): Promise<T> {
    if (!this.dropOnClose) return reply;
    return new Promise<T>((resolve, reject) => {
      const fail = (err: Error) => reject(err);
      this.inFlight.add(fail);
      reply.then(
        (value) => {
          this.inFlight.delete(fail);
          resolve(value);
        },
        (err: unknown) => {
          this.inFlight.delete(fail);
          reject(err);
        },
      );
    });
  }

  private dropInFlight(): void {
    if (this.inFlight.size === 0) return;
    const err = new StoreUnavailableError('Redis connection closed with the command in flight: its outcome is unknown');
    for (const fail of this.inFlight) fail(err);
    this.inFlight.clear();
  }

  /**
   * Send a command with the socket corked, so that the commands of one tick leave in writes of
   * up to `writeChunk` commands instead of one system call each. The cork is released when the
   * chunk is full or at the end of the tick, whichever comes first: Redis gets work as soon as a
   * chunk is ready and keeps working while the next one is written (a cork per tick, like
   * ioredis' enableAutoPipelining, would make Node and Redis take turns).
   */
  private corked(command: string, argv: (string | number)[]): Promise<unknown> {
    const stream = (this.redis as Redis).stream;
    if (!stream) return this.call(command, argv);
    if (this.inChunk++ === 0) {
      stream.cork();
      this.chunkStream = stream;
      process.nextTick(() => this.flushChunk());
    }
    try {
      return this.call(command, argv);
    } finally {
      if (this.inChunk >= this.opts.writeChunk) this.flushChunk();
    }
  }

  private flushChunk(): void {
    if (this.inChunk === 0) return;
    this.inChunk = 0;
    this.chunkStream!.uncork();
    this.chunkStream = undefined;
  }

  /**
   * Stop listening to the client; `quit`: close it too (the store created it), within a second
   * even when Redis does not answer (quitClient: a stalled Redis held close() until it answered
   * again, forever under a cut link; the commands still on the socket were given up by their
   * deadlines already).
   */
  async close(quit: boolean): Promise<void> {
    this.closing = true;
    if (quit) await quitClient(this.redis);
    this.redis.off('error', this.onError);
    this.redis.off('close', this.onClose);
    this.redis.off('ready', this.onReady);
    this.redis.off('node error', this.onNodeLost);
    this.redis.off('-node', this.onNodeLost);
    this.redis.off('refresh', this.onRefresh);
  }
}

/** How long quitClient waits for Redis to answer its QUIT before it closes the socket (ms). */
const QUIT_WAIT_MS = 1000;

/**
 * Close a client: QUIT, and past `QUIT_WAIT_MS` without its answer (a stalled Redis, a cut link:
 * QUIT comes after every command sent before it) the socket closed all the same.
 */
export async function quitClient(redis: Redis | Cluster): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<'late'>((resolve) => (timer = setTimeout(() => resolve('late'), QUIT_WAIT_MS)));
  const answer = await Promise.race([redis.quit().catch(() => 'failed' as const), late]);
  clearTimeout(timer);
  if (answer !== 'OK') redis.disconnect();
}

/**
 * A Cluster client, as ioredis marks it (Cluster sets isCluster true, Redis false). Not
 * instanceof: the application's ioredis may be another copy than the one callgate resolves.
 */
export function isCluster(redis: Redis | Cluster): redis is Cluster {
  return (redis as { isCluster?: unknown }).isCluster === true;
}

/**
 * A script that met a key of a slot being moved to another master (docs/redis.md, "Moving a
 * busy account or carrier"): one a Cluster could not check before it ran, named inside a call
 * record or a holds set. release.lua, refresh.lua and reset.lua read every such key before
 * their first write, so they stopped before writing and can be sent again.
 */
const SLOT_MOVING = /^ERR Script attempted to access a non local key/;

/**
 * A Redis reply error (redis-errors' ReplyError, named after its class) is a bug to surface as
 * is, but for a slot being moved (SLOT_MOVING); anything else means Redis is out of reach. By
 * name, for the same reason as isCluster().
 */
export function unavailable(err: unknown): Error {
  if (err instanceof StoreUnavailableError) return err;
  const e = err as Error | undefined;
  if (e?.name === 'ReplyError' && SLOT_MOVING.test(e.message))
    return new StoreUnavailableError(`Redis unavailable: a slot being moved to another master (${e.message})`, err);
  if (e?.name === 'ReplyError') return err as Error;
  return new StoreUnavailableError(`Redis unavailable: ${connectionReason(err)}`, err);
}

/**
 * Why a command could not reach Redis, in an operator's words: ioredis says that it queues no
 * command while disconnected ("Stream isn't writeable and enableOfflineQueue options is
 * false"), which reads like a setting to change (found by the operator walkthrough).
 */
export function connectionReason(err: unknown): string {
  const message = (err as Error | undefined)?.message ?? String(err);
  return /Stream isn't writeable|enableOfflineQueue/.test(message) ? 'not connected (reconnecting)' : message;
}
