/**
 * `callgate serve`: the engine as a sidecar process. One CallGate on the memory store or on
 * Redis, the HTTP API of app.ts, the configuration reloaded on SIGHUP, on file change and on
 * POST /v1/reload, and a graceful stop on SIGTERM / SIGINT: the listener closes, requests in
 * flight finish and get their answers, then the store closes. Stopping releases nothing: calls
 * in progress keep their channels (their hang-ups may reach another sidecar on the same Redis,
 * and holds lapse after maxCallDuration otherwise).
 */
import { type Command, Option } from 'commander';
import { intOption, shownOption } from './int-option.js';
import type { Cluster, Redis } from 'ioredis';
import { Registry, collectDefaultMetrics } from 'prom-client';
import type { StorePolicy } from '../admission/admission.js';
import { loadConfigFile } from '../config/load.js';
import { ConfigError, InvalidArgumentError } from '../errors/index.js';
import { CallGate } from '../gate.js';
import { LeaseCoordinator } from '../lease/coordinator.js';
import {
  checkLeasable,
  checkLeaseLanes,
  leasedCarrierIds,
  leasedStoreOptions,
  leaseLanesOption,
  type LeaseArgs,
} from './lease-lanes.js';
import { openRegions, parseLeaseRegions } from './lease-regions.js';
import { inspectGate } from '../observe/inspect.js';
import { leaseMetrics } from '../observe/lease-metrics.js';
import { gateMetrics, inspectLive } from '../observe/metrics.js';
import { buildApp } from '../server/app.js';
import { checkExposure, DEFAULT_LISTEN, parseListen } from '../server/listen.js';
import { MemoryStore } from '../store/memory-store.js';
import { prefixProblem } from '../store/redis/redis-keys.js';
import { RedisStore } from '../store/redis/redis-store.js';
import { MAX_BATCH_LIMIT, MAX_IN_FLIGHT_LIMIT } from '../store/redis/redis-store-options.js';
import { DEFAULT_TIMEOUT_MS } from '../store/timeout.js';
import type { Store } from '../store/types.js';
import {
  checkRedisUrl,
  closeRedis,
  openRedis,
  redactSecrets,
  redactUrl,
  redisAnswers,
  redisOptions,
  type RedisConnectionArgs,
} from './redis.js';

export interface ServeArgs extends RedisConnectionArgs, LeaseArgs {
  config: string;
  store: 'memory' | 'redis';
  prefix: string;
  listen: string;
  token?: string;
  policy: StorePolicy;
  timeoutMs: number;
  bodyLimit: number;
  retryJitter: number;
  logLevel: string;
  watch: boolean;
  metricsPerBucket: boolean;
  /** SIP status for a refusal by a channel limit (default 503). */
  channelsStatus?: number;
  /** The store's batching (RedisStoreOptions.maxBatch, maxInFlight, loneUpTo); unset: its defaults. */
  maxBatch?: number;
  maxInFlight?: number;
  loneUpTo?: number;
  /** Replicas a shrink must reach before what it freed is granted (LeaseLanes.waitReplicas). */
  leaseWaitReplicas?: number;
  /** Carriers leased across regions (RedisStoreOptions.leasedCarriers), comma-separated ids. */
  leasedCarriers?: string;
  /** Every region's Redis, for the coordinator candidates (lease-regions.ts), comma-separated. */
  leaseRegions?: string;
  /** The coordinators' tick and reply timeout (LeaseCoordinatorOptions.tickMs, replyTimeoutMs). */
  leaseTickMs?: number;
  leaseReplyTimeoutMs?: number;
}

export interface Sidecar {
  /** Where it listens, e.g. http://127.0.0.1:8790. */
  readonly url: string;
  /** Resolves once it has stopped (after SIGTERM / SIGINT or stop()). */
  readonly stopped: Promise<void>;
  stop(): Promise<void>;
}

function bad(message: string): never {
  throw new InvalidArgumentError(message);
}

function positiveInt(name: string, value: number, max: number): void {
  if (!(Number.isSafeInteger(value) && value > 0 && value <= max))
    bad(`${name}: expected an integer from 1 to ${max}, got ${shownOption(value)}`);
}

/**
 * Check everything a user typed before anything starts: every problem, one line each (each
 * check stops at its own first problem; a check that threw stopped the rest unseen).
 */
function checkArgs(args: ServeArgs): void {
  const problems: string[] = [];
  const check = (run: () => void): void => {
    try {
      run();
    } catch (err) {
      if (!(err instanceof InvalidArgumentError)) throw err;
      problems.push(err.message);
    }
  };
  check(() => positiveInt('--timeout-ms', args.timeoutMs, 60_000));
  check(() => positiveInt('--body-limit', args.bodyLimit, 1024 * 1024));
  check(() => {
    if (!(Number.isSafeInteger(args.retryJitter) && args.retryJitter >= 0 && args.retryJitter <= 3600))
      bad(`--retry-jitter: expected whole seconds from 0 to 3600, got ${shownOption(args.retryJitter)}`);
  });
  if (args.store === 'redis') check(() => checkRedisUrl(args.redisUrl));
  check(() => {
    const status = args.channelsStatus;
    if (status !== undefined && !(Number.isSafeInteger(status) && status >= 400 && status <= 699))
      bad(`--channels-status: expected a SIP final response status from 400 to 699, got ${shownOption(status)}`);
  });
  for (const [flag, v, max] of [
    ['--max-batch', args.maxBatch, MAX_BATCH_LIMIT],
    ['--max-in-flight', args.maxInFlight, MAX_IN_FLIGHT_LIMIT],
    ['--lone-up-to', args.loneUpTo, MAX_BATCH_LIMIT],
  ] as const) {
    if (v === undefined) continue;
    check(() => {
      if (args.store !== 'redis') bad(`${flag} needs --store redis: it sets how decisions go to Redis`);
      positiveInt(flag, v, max);
    });
  }
  check(() => {
    if (args.leaseLanes !== undefined && args.store !== 'redis')
      bad('--lease-lanes needs --store redis: lanes are hash tags of a Redis (Cluster)');
    checkLeaseLanes(args);
  });
  check(() => {
    const n = args.leaseWaitReplicas;
    if (n !== undefined && !(Number.isSafeInteger(n) && n >= 0 && n <= 16))
      bad(`--lease-wait-replicas: expected an integer from 0 to 16, got ${shownOption(n)}`);
  });
  check(() => {
    if (args.leasedCarriers !== undefined && args.store !== 'redis')
      bad('--leased-carriers needs --store redis: a carrier is leased across Redis deployments');
  });
  check(() => {
    if (args.leaseRegions !== undefined && args.leaseLanes === undefined && args.leasedCarriers === undefined)
      bad('--lease-regions needs --lease-lanes or --leased-carriers');
  });
  // a coordinator runs with lanes, or with regions for the leased carriers: the rest have none
  const coordinating = args.leaseLanes !== undefined || args.leaseRegions !== undefined;
  for (const [flag, v] of [
    ['--lease-tick-ms', args.leaseTickMs],
    ['--lease-reply-timeout-ms', args.leaseReplyTimeoutMs],
    ['--lease-wait-replicas', args.leaseWaitReplicas],
  ] as const)
    if (v !== undefined && !coordinating) problems.push(`${flag} needs --lease-lanes or --lease-regions`);
  if (args.leaseTickMs !== undefined) check(() => positiveInt('--lease-tick-ms', args.leaseTickMs!, 10_000));
  if (args.leaseReplyTimeoutMs !== undefined)
    check(() => positiveInt('--lease-reply-timeout-ms', args.leaseReplyTimeoutMs!, 10_000));
  if (args.leaseRegions !== undefined) check(() => parseLeaseRegions(args.leaseRegions!));
  const prefix = prefixProblem('--prefix', args.prefix);
  if (prefix !== undefined) problems.push(prefix);
  if (problems.length > 0) throw new InvalidArgumentError(problems.join('\n'));
}

/**
 * The coordinators' timing from --lease-tick-ms and --lease-reply-timeout-ms. A leadership must
 * outlast what lies between two renewals (a tick's wait, and its reading, shrink, ROLE and WAIT,
 * each up to a reply timeout), or it would lapse and every tick start a new term: 2 ticks and 4
 * reply timeouts, at least 1 s. A lease must outlast a leader that dies: its leadership, the
 * tick its successor waits before it looks, and that successor's reading and orders.
 */
function leaseTiming(args: ServeArgs): {
  tickMs?: number;
  replyTimeoutMs?: number;
  leaderTtlMs?: number;
  leaseMs?: number;
} {
  if (args.leaseTickMs === undefined && args.leaseReplyTimeoutMs === undefined) return {};
  const tickMs = args.leaseTickMs ?? 50;
  const replyTimeoutMs = args.leaseReplyTimeoutMs ?? 250;
  const leaderTtlMs = Math.max(1000, 2 * tickMs + 4 * replyTimeoutMs);
  return { tickMs, replyTimeoutMs, leaderTtlMs, leaseMs: leaderTtlMs + tickMs + 4 * replyTimeoutMs };
}

/** A SIGHUP heard before the sidecar listened for it (bin/callgate.js, or startSidecar's own start). */
interface EarlyHup {
  heard: boolean;
  readonly listener: () => void;
}
const EARLY_HUP = Symbol.for('callgate.earlyHup');

/** The listener noting SIGHUPs until the sidecar's own is on: the command's, else one of its own. */
function earlyHup(): EarlyHup {
  const g = globalThis as { [EARLY_HUP]?: EarlyHup };
  let early = g[EARLY_HUP];
  if (early === undefined) {
    const own: EarlyHup = { heard: false, listener: () => (own.heard = true) };
    early = own;
    process.on('SIGHUP', early.listener);
  }
  g[EARLY_HUP] = undefined;
  return early;
}

export async function startSidecar(args: ServeArgs): Promise<Sidecar> {
  // a SIGHUP while it starts (Node's default: the process ends) is a reload once it is up
  const early = earlyHup();
  try {
    return await startSidecarHearing(args, early);
  } finally {
    process.off('SIGHUP', early.listener);
  }
}

async function startSidecarHearing(args: ServeArgs, early: EarlyHup): Promise<Sidecar> {
  checkArgs(args);
  const address = parseListen(args.listen);
  const token = args.token === '' ? undefined : args.token;
  checkExposure(address, token);
  const config = await loadConfigFile(args.config);
  checkLeasable(args, config); // a clear error before anything starts
  const leasedCarriers = leasedCarrierIds(args.leasedCarriers, config);

  // every log line goes out with the credentials of Redis URLs hidden (a client's error may quote one)
  const app = { logger: { level: args.logLevel, hooks: { streamWrite: redactSecrets } } };
  let redis: Redis | Cluster | undefined;
  let store: Store;
  const lanes = args.leaseLanes;
  if (args.store === 'redis') {
    redis = await openRedis(args, { service: true });
    // lanes are hash tags: on a single Redis too (regions each on one)
    store = new RedisStore({
      redis,
      prefix: args.prefix,
      ...(args.maxBatch !== undefined && { maxBatch: args.maxBatch }),
      ...(args.maxInFlight !== undefined && { maxInFlight: args.maxInFlight }),
      ...(args.loneUpTo !== undefined && { loneUpTo: args.loneUpTo }),
      ...leasedStoreOptions(args),
      ...(leasedCarriers && { leasedCarriers }),
    });
  } else {
    store = new MemoryStore();
  }
  const gate = new CallGate({ config, store, policy: args.policy, timeoutMs: args.timeoutMs });
  // coordinator candidates, each on clients of its own (WAIT blocks the connection it is sent
  // on), reaching every region (--lease-regions) or this sidecar's Redis
  const regions = args.leaseRegions === undefined ? undefined : parseLeaseRegions(args.leaseRegions);
  const leaseClients: (Redis | Cluster)[] = [];
  const reach = async () => {
    const clients = regions ? await openRegions(args, regions) : [await openRedis(args, { service: true })];
    leaseClients.push(...clients);
    return clients;
  };
  const timing = leaseTiming(args);
  const coordinators: LeaseCoordinator[] = [];
  if (lanes !== undefined) {
    const clients = await reach();
    coordinators.push(
      LeaseCoordinator.forGate(gate, {
        ...timing,
        deployments: clients.map((redis) => ({
          redis,
          lanes,
          prefix: args.prefix,
          waitReplicas: args.leaseWaitReplicas ?? 0,
          overflow: args.leaseOverflow === true,
        })),
      }),
    );
  }
  // a carrier's coordinator needs every region: without --lease-regions, one runs elsewhere
  for (const id of regions ? (leasedCarriers ?? []) : []) {
    const clients = await reach();
    coordinators.push(
      LeaseCoordinator.forCarrier(gate, id, {
        ...timing,
        // each region's stores as this one's: hash tags with lanes, else on a Cluster
        deployments: clients.map((redis) => ({
          redis,
          prefix: args.prefix,
          waitReplicas: args.leaseWaitReplicas ?? 0,
          ...(lanes !== undefined && { hashTags: true }),
        })),
      }),
    );
  }

  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  // the bans of attribute levels too, when a level of the configuration in force bans
  const state = (peers: string[] = [], values: string[] = []) =>
    inspectGate(gate, {
      peers,
      values,
      bans: (gate.config.inbound.attributes ?? []).some((l) => l.ban !== undefined),
    });
  gateMetrics(gate, {
    registry,
    perBucket: args.metricsPerBucket,
    live: inspectLive(gate),
  });
  if (coordinators.length > 0) leaseMetrics(coordinators, registry);

  const server = buildApp({
    gate,
    token,
    bodyLimit: args.bodyLimit,
    sip: {
      jitterSeconds: args.retryJitter,
      ...(args.channelsStatus !== undefined && { channels: { status: args.channelsStatus } }),
    },
    logger: app.logger,
    ready: async () => {
      if (redis) await redisAnswers(redis);
    },
    reload: () => gate.reload(args.config),
    metrics: registry,
    state,
  });
  const log = server.log;

  if (redis) {
    // one line per outage, not one per reconnect attempt
    let down = false;
    redis.on('error', (err: Error) => {
      if (!down)
        log.warn(
          { err: err.message },
          `Redis at ${redactUrl(args.redisUrl)} unreachable; decisions follow policy ${args.policy} until it is back`,
        );
      down = true;
    });
    redis.on('ready', () => {
      if (down) log.info(`Redis at ${redactUrl(args.redisUrl)} reachable again`);
      down = false;
    });
    // reported by the 'error' listener; the client keeps retrying. Start ready when Redis is.
    const connected = redis.connect().then(
      () => true,
      () => false,
    );
    await Promise.race([connected, new Promise((r) => setTimeout(r, 3000).unref())]);
  }
  // the store's client reports its outage, once; a far region's is not this sidecar's to report
  for (const c of leaseClients) c.on('error', () => {});
  // at most 3 s, as the store's: a region out of reach is the coordinators' business, not a
  // reason to start late (its client keeps retrying)
  await Promise.race([
    Promise.all(leaseClients.map((c) => c.connect().catch(() => undefined))),
    new Promise((r) => setTimeout(r, 3000).unref()),
  ]);
  for (const c of coordinators) c.start();

  gate.on('reloaded', (changes) =>
    log.info({ changes: changes.map((c) => `${c.kind} ${c.path}`) }, `configuration reloaded from ${args.config}`),
  );
  gate.on('warning', (w) => log.warn({ carriers: w.carriers }, w.message));
  gate.on('error', (err) => {
    // a reload of the watched file that failed: said as SIGHUP's is, so one search finds both
    if (err instanceof ConfigError || err.message.startsWith('not reloaded:'))
      log.error({ err: err.message }, 'reload on file change failed; the configuration in force is unchanged');
    // the outage itself: this sidecar's client logs it, once (Redis at … unreachable)
    else if (err.message.startsWith('Redis connection lost')) log.debug({ err: err.message }, 'Redis connection lost');
    else log.error({ err: err.message }, 'engine error');
  });
  // Redis lost this sidecar's holds (a restart or failover): say so, and how many came back
  gate.on('storeLoss', (e) => log.warn({ tag: e.tag, cause: e.cause }, 'Redis lost holds of calls in progress'));
  gate.on('holdsReasserted', (e) => {
    if (e.reasserted > 0) log.info({ tag: e.tag, reasserted: e.reasserted }, 'holds of calls in progress written back');
  });
  // a Redis that stalls keeps its connection: no 'error' says so (the library's storeStall does)
  gate.on('storeStall', (e) => {
    if (e.stalled)
      log.warn(
        `Redis at ${redactUrl(args.redisUrl)} did not answer a decision within ${e.timeoutMs} ms; decisions follow policy ${args.policy} while it does not`,
      );
    else log.info(`Redis at ${redactUrl(args.redisUrl)} answers decisions again`);
  });
  if (args.watch) gate.watch(args.config);

  const onHup = () => {
    if (stopping !== undefined) return; // stopping: nothing to reload (and no end by SIGHUP)
    gate
      .reload(args.config)
      .catch((err: Error) =>
        log.error({ err: err.message }, `reload on SIGHUP failed; the configuration in force is unchanged`),
      );
  };
  let stopping: Promise<void> | undefined;
  let resolveStopped!: () => void;
  const stopped = new Promise<void>((r) => (resolveStopped = r));
  const stop = (): Promise<void> =>
    (stopping ??= (async () => {
      process.off('SIGTERM', onTerm);
      process.off('SIGINT', onTerm);
      log.info('stopping: finishing requests in flight');
      await server.close(); // answers what is in flight, refuses the rest with 503
      await gate.close({ mode: 'drain' }); // the sidecar holds no call: reserve leaves the hold to the caller
      // each gives up its leadership: another sidecar's candidate takes it
      await Promise.all(coordinators.map((c) => c.stop()));
      await Promise.all(leaseClients.map((c) => closeRedis(c)));
      if (redis) await closeRedis(redis);
      log.info('stopped');
      // onHup stays (a no-op now): without a listener a SIGHUP until the exit would end the
      // process by signal, which systemd takes for a clean stop
      resolveStopped();
    })());
  const onTerm = () => void stop();
  process.on('SIGHUP', onHup);
  process.off('SIGHUP', early.listener);
  if (early.heard) onHup();
  process.on('SIGTERM', onTerm);
  process.on('SIGINT', onTerm);

  try {
    const url = await server.listen({ host: address.host, port: address.port });
    log.info({ store: store.kind, auth: token !== undefined }, `callgate sidecar listening at ${url}`);
    return { url, stopped, stop };
  } catch (err) {
    await stop();
    const e = err as NodeJS.ErrnoException;
    throw new InvalidArgumentError(
      `cannot listen on ${args.listen}: ${e.code ?? ''} ${e.message}`.replace(/\s+/g, ' '),
      {
        cause: err,
      },
    );
  }
}

/** Run until stopped (the CLI's `serve`). */
export async function runServe(args: ServeArgs): Promise<void> {
  const sidecar = await startSidecar(args);
  await sidecar.stopped;
}

export function serveCommand(program: Command): void {
  const cmd = program
    .command('serve')
    .summary('run the engine as an HTTP sidecar')
    .description('run the engine as an HTTP sidecar (JSON API, /metrics, /healthz, /readyz); see README "Sidecar"')
    .requiredOption('--config <file>', 'limit configuration (JSON or YAML), reloaded on SIGHUP and on change')
    .addOption(new Option('--store <kind>', 'where counts live').choices(['memory', 'redis']).default('memory'));
  redisOptions(cmd, 'Redis for --store redis')
    .option('--prefix <prefix>', 'Redis key prefix (sidecars sharing limits share it)', 'callgate:')
    .option('--listen <addr>', 'PORT, HOST:PORT or [IPv6]:PORT; not loopback: needs a token', DEFAULT_LISTEN)
    .addOption(
      new Option('--token <token>', 'require "Authorization: Bearer <token>" (16+ characters)').env('CALLGATE_TOKEN'),
    )
    .addOption(
      new Option('--policy <policy>', 'when Redis is out of reach')
        .choices(['fail-closed', 'fail-open', 'local'])
        .default('fail-closed'),
    )
    .option('--timeout-ms <ms>', "bound on one decision's store call", intOption, DEFAULT_TIMEOUT_MS)
    .option('--body-limit <bytes>', 'largest request body', intOption, 16384)
    .option('--retry-jitter <s>', 'add up to this many seconds to Retry-After', intOption, 0)
    .option(
      '--channels-status <code>',
      'SIP status for a refusal by a channel limit (default 503; 486 and 480 are common)',
      intOption,
    )
    .option('--max-batch <n>', `decisions in one script call, at most (1 to ${MAX_BATCH_LIMIT}; default 64)`, intOption)
    .option('--max-in-flight <n>', `batches in flight at once (1 to ${MAX_IN_FLIGHT_LIMIT}; default 2)`, intOption)
    .option(
      '--lone-up-to <n>',
      'batches of up to n sliding-log admissions go as one run of lone decisions (default 4)',
      intOption,
    )
    .option('--log-level <level>', 'fatal, error, warn, info, debug or silent', 'info')
    .option('--no-watch', 'do not reload when the configuration file changes')
    .option('--metrics-per-bucket', 'label refusals with the configured account and peer ids, not only the level kind');
  leaseLanesOption(cmd, 'lease the global level over N lanes, with a coordinator candidate (docs/leasing.md)')
    .option(
      '--lease-wait-replicas <n>',
      'replicas a lane shrink must reach before its capacity moves (with replicas: 1)',
      intOption,
    )
    .option(
      '--leased-carriers <ids>',
      'carriers leased across regions, comma-separated: paced within the share a coordinator grants (docs/leasing.md)',
    )
    .option(
      '--lease-regions <urls>',
      "every region's Redis, comma-separated, the same order in every region (cluster:URL for a Cluster): the coordinator candidates reach them all, one per leased carrier too",
    )
    .option('--lease-tick-ms <ms>', "the coordinators' tick (default 50)", intOption)
    .option('--lease-reply-timeout-ms <ms>', 'how long a coordinator waits for a lane (default 250)', intOption)
    .action(async (opts: ServeArgs) => {
      // an empty --token says nothing: with CALLGATE_TOKEN set it would turn the token off
      // without a word (an empty variable is how a deployment leaves the token unset)
      if (opts.token === '' && cmd.getOptionValueSource('token') === 'cli')
        throw new InvalidArgumentError(
          '--token is empty: give a token of 16 characters or more, or leave the option out (no token)',
        );
      await runServe(opts);
    });
}
