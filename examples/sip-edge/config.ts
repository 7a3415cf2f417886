/**
 * The SIP edge's configuration (JSON): where it listens, callgate's limits, the peers it knows
 * (by source address, or by the From / P-Asserted-Identity user as fallbacks), the carriers'
 * addresses and the routes over them. Everything is validated before the edge starts; every
 * problem is reported (one line each, `file: path: message`), not only the first.
 */
import { readFile } from 'node:fs/promises';
import { isIP } from 'node:net';
import { dirname, resolve } from 'node:path';
import { type CallGateConfig, ConfigError, loadConfig, type StorePolicy } from 'callgate';
import { z } from 'zod';

/** How an INVITE's peer is found, in the configured order (see README, SIP edge). */
export type IdentifyBy = 'source' | 'pai' | 'from';

export interface HostPort {
  readonly host: string;
  readonly port: number;
}

export interface PeerEntry {
  /** `ip:port`, or `ip` for any port. */
  readonly sources: readonly string[];
  readonly account?: string;
  /** Carrier ids in order of preference (default: the top-level route). */
  readonly route?: readonly string[];
}

export interface EdgeConfig {
  readonly listen: HostPort;
  /** The host put in Via and Record-Route (default: the listen address). */
  readonly advertise: string;
  readonly limits: CallGateConfig;
  readonly peers: ReadonlyMap<string, PeerEntry>;
  /** `ip:port` or `ip` → peer id. */
  readonly bySource: ReadonlyMap<string, string>;
  readonly identify: readonly IdentifyBy[];
  readonly route: readonly string[];
  readonly carriers: ReadonlyMap<string, HostPort>;
  /** Up to this many whole seconds added at random to a Retry-After. */
  readonly retryAfterJitter: number;
  readonly policy: StorePolicy;
  /** Bound on one store call per decision, ms. */
  readonly timeoutMs: number;
}

const ipPort = z.string().refine((s) => parseHostPort(s) !== undefined, {
  message: 'expected "ip:port" (an IPv4 address and a port 1-65535)',
});
const ipMaybePort = z
  .string()
  .refine((s) => isIP(s) === 4 || parseHostPort(s) !== undefined, { message: 'expected "ip" or "ip:port" (IPv4)' });
const id = z.string().min(1);

const schema = z.strictObject({
  listen: ipPort.default('127.0.0.1:5080'),
  advertise: z.string().min(1).optional(),
  limits: z.union([z.string().min(1), z.record(z.string(), z.unknown())]),
  peers: z
    .record(
      id,
      z.strictObject({
        sources: z.array(ipMaybePort).default([]),
        account: id.optional(),
        route: z.array(id).optional(),
      }),
    )
    .default({}),
  identify: z
    .array(z.enum(['source', 'pai', 'from']))
    .min(1)
    .refine((a) => new Set(a).size === a.length, { message: 'each method at most once' })
    .default(['source', 'pai', 'from']),
  route: z.array(id).default([]),
  carriers: z.record(id, z.strictObject({ address: ipPort })).default({}),
  retryAfterJitter: z.number().int().min(0).max(3600).default(2),
  policy: z.enum(['fail-closed', 'fail-open', 'local']).default('fail-closed'),
  timeoutMs: z.number().int().positive().max(60_000).default(200),
});

export type EdgeConfigInput = z.input<typeof schema>;

/** One line per problem zod found (one per unknown field), `[source: ]path: message`, as callgate's own. */
function problemsOf(error: z.ZodError, source: string | undefined): string[] {
  const prefix = source === undefined ? '' : `${source}: `;
  const line = (path: PropertyKey[], message: string) =>
    `${prefix}${z.core.toDotPath(path) || 'top level'}: ${message}`;
  const lines = error.issues.flatMap((issue) =>
    issue.code === 'unrecognized_keys'
      ? issue.keys.map((key) => line([...issue.path, key], 'unknown field'))
      : [line(issue.path, issue.message)],
  );
  return [...new Set(lines)];
}

export function parseHostPort(s: string): HostPort | undefined {
  const m = /^(\d{1,3}(?:\.\d{1,3}){3}):(\d{1,5})$/.exec(s);
  if (!m || isIP(m[1]!) !== 4) return undefined;
  const port = Number(m[2]);
  return port >= 1 && port <= 65535 ? { host: m[1]!, port } : undefined;
}

/**
 * Validate an edge configuration. `limits` is callgate's own configuration, inline or a path
 * (relative to `baseDir`). Throws ConfigError listing every problem at once: the edge's own
 * fields, the limits, and how they fit together (each cross-check runs on whatever parts are
 * valid, so fixing one problem never reveals the next only on the following start).
 */
export async function parseEdgeConfig(
  input: unknown,
  opts: { source?: string; baseDir?: string } = {},
): Promise<EdgeConfig> {
  const problems: string[] = [];
  const parsed = schema.safeParse(input);
  if (!parsed.success) problems.push(...problemsOf(parsed.error, opts.source));
  const raw = (typeof input === 'object' && input !== null ? input : {}) as Record<string, unknown>;
  /** One field as the schema reads it, or undefined when it is invalid (reported above). */
  const part = <K extends keyof typeof schema.shape>(key: K): z.output<(typeof schema.shape)[K]> | undefined => {
    const r = schema.shape[key].safeParse(raw[key]);
    return r.success ? (r.data as z.output<(typeof schema.shape)[K]>) : undefined;
  };
  const prefix = opts.source ? `${opts.source}: ` : '';
  let limits: CallGateConfig | undefined;
  const limitsIn = part('limits');
  if (limitsIn !== undefined) {
    try {
      limits = await loadConfig(typeof limitsIn === 'string' ? resolve(opts.baseDir ?? '.', limitsIn) : limitsIn);
    } catch (err) {
      if (!(err instanceof ConfigError)) throw err;
      problems.push(...err.problems.map((p) => `${prefix}limits: ${p}`));
    }
  }
  const carriers = new Map<string, HostPort>();
  for (const [cid, carrier] of Object.entries(part('carriers') ?? {})) {
    carriers.set(cid, parseHostPort(carrier.address)!);
    if (limits && !limits.outbound.carriers.has(cid))
      problems.push(`${prefix}carriers.${cid}: no pacing for it in limits.outbound.carriers`);
  }
  const carriersKnown = part('carriers') !== undefined;
  const checkRoute = (route: readonly string[], where: string) =>
    route.forEach((cid, i) => {
      if (carriersKnown && !carriers.has(cid))
        problems.push(`${prefix}${where}[${i}]: carrier ${JSON.stringify(cid)} has no address in carriers`);
    });
  checkRoute(part('route') ?? [], 'route');
  const peers = new Map<string, PeerEntry>();
  const bySource = new Map<string, string>();
  for (const [pid, peer] of Object.entries(part('peers') ?? {})) {
    peers.set(pid, peer);
    if (peer.route) checkRoute(peer.route, `peers.${pid}.route`);
    if (limits && !limits.inbound.peers.has(pid) && !limits.inbound.defaultPeer) {
      problems.push(
        `${prefix}peers.${pid}: no limits for it in limits.inbound.peers and no defaultPeer (every call would be refused 403)`,
      );
    }
    for (const src of peer.sources) {
      const other = bySource.get(src);
      if (other !== undefined)
        problems.push(`${prefix}peers.${pid}.sources: ${src} is already the source of peer ${JSON.stringify(other)}`);
      else bySource.set(src, pid);
    }
  }
  if (problems.length > 0 || !parsed.success || limits === undefined) throw new ConfigError(problems);
  const c = parsed.data;
  const listen = parseHostPort(c.listen)!;
  return {
    listen,
    advertise: c.advertise ?? listen.host,
    limits,
    peers,
    bySource,
    identify: c.identify,
    route: c.route,
    carriers,
    retryAfterJitter: c.retryAfterJitter,
    policy: c.policy,
    timeoutMs: c.timeoutMs,
  };
}

export async function loadEdgeConfig(path: string): Promise<EdgeConfig> {
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (err) {
    throw new ConfigError([`${path}: cannot read: ${(err as Error).message}`]);
  }
  let obj: unknown;
  try {
    obj = JSON.parse(text);
  } catch (err) {
    throw new ConfigError([`${path}: invalid JSON: ${(err as Error).message}`]);
  }
  return parseEdgeConfig(obj, { source: path, baseDir: dirname(path) });
}
