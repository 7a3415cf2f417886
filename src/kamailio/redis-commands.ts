/**
 * Kamailio on callgate's Redis, without Node in the path: the admit and release script calls
 * of every configured peer (and peer + account) as `ndb_redis` command templates, packed by the
 * very code a RedisStore packs with (bucket-args.ts, admit-args.ts), so Kamailio's decisions are
 * the library's and share its keys. `callgate kamailio` writes them as a Kamailio include
 * (examples/kamailio/kamailio-redis.cfg, docs/kamailio.md).
 *
 * A template is a hiredis format: arguments split on spaces, `%s` takes one value from the
 * call, `%%` is a literal `%`. ndb_redis passes at most three values. A call that a RedisStore
 * would send alone to admit-lone.lua or admit-lone-held.lua (sliding-log limits, with or
 * without channels: the common case) gets a template of that script, which costs Redis about
 * half of admit.lua's for one call; it takes the call's id (hex of the Call-ID: key-safe, so its
 * own encoding) as each of its values, and says Redis TIME as the literal '-'. Any other call's
 * template names admit.lua and takes the call's id, Redis TIME ('' = now: hiredis cannot write
 * an empty literal) and the id again (AdmitTemplate.values). The call's deadline is spliced in
 * by Kamailio at DEADLINE_MARK.
 */
import { planFor } from '../admission/plan.js';
import type { CallGateConfig } from '../config/types.js';
import { InvalidArgumentError } from '../errors/index.js';
import {
  isLaneTag,
  type LanePins,
  lanePlan,
  laneTagOf,
  leasedLevel,
  OVERFLOW_TAG,
  spillParts,
} from '../lease/lanes.js';
import { GLOBAL_BUCKET, GLOBAL_TAG } from '../store/keys.js';
import { type AdmitEnv, admitArgv, loneArgv, type PendingAdmit } from '../store/redis/admit-args.js';
import { bucketArgsOf } from '../store/redis/bucket-args.js';
import type { KnownLogs } from '../store/redis/known-logs.js';
import { RedisKeys } from '../store/redis/redis-keys.js';
import { type Script, scripts } from '../store/redis/scripts.js';
import type { Bucket } from '../store/types.js';

/**
 * Where the call's deadline goes: Kamailio splits the template there and puts its own time plus
 * its Redis timeout in (µs), so that an admit Redis runs after Kamailio stopped waiting for it
 * (a stalled Redis catching up) is skipped, as the library's are (a fourth value ndb_redis
 * cannot pass).
 */
export const DEADLINE_MARK = '|';

/** Stand-ins (private-use characters) for the values a template takes (see the file comment). */
const ID = '\uE000';
const NOW = '\uE001';

export interface AdmitTemplate {
  /** The peer and the account ('' = none) it decides for. */
  readonly peer: string;
  readonly account: string;
  /** `limited_by` of each bucket, in check order: the reply's limitedBy - 1 indexes it. */
  readonly labels: readonly string[];
  /** Whether a bucket of it has a channel limit (the call then holds until released). */
  readonly holds: boolean;
  /**
   * The holds sets its calls hold a channel in (a bucket with a channel limit each), as
   * lua/reassert.lua names them: what Kamailio writes back after Redis lost them. Empty without
   * a channel limit, and with hash tags (KamailioCommands.reassert).
   */
  readonly holdKeys: readonly string[];
  /**
   * Policy `local` (Kamailio's pipelimit, per second): per level with rate limits, its label and
   * the calls per second of its tightest limit (L per W as a rate), times the local share,
   * rounded down (at least 1).
   */
  readonly local: readonly (readonly [label: string, perSecond: number])[];
  /** The hiredis format of the EVALSHA, with DEADLINE_MARK where the call's deadline goes. */
  readonly command: string;
  /**
   * With a leased level's overflow lane (docs/leasing.md): the steps of a call its lane refused
   * for lack of calls share alone (flags 16), as a RedisStore takes them. `overflow` decides its
   * global level on the overflow lane (the call's id as each value); once admitted there, `again`
   * decides the rest on its lane (none when the call has the global level alone), whose
   * refusals name `labels` (its buckets: the global level's only when it has a channel limit).
   */
  readonly spill?: {
    readonly overflow: string;
    readonly again?: { readonly command: string; readonly values: 'iii' | 'ini'; readonly labels: readonly string[] };
  };
  /**
   * Its calls' record keys up to the call's id (`<prefix>call:in:`, with hash tags
   * `<prefix>{<tag>}:call:in:`): the release takes the record key whole, and Kamailio carries
   * this part in the call's Record-Route, so that a BYE from either side, under any generation
   * of the include, finds the record.
   */
  readonly record: string;
  /**
   * The three values Kamailio passes to it: `iii` the call's id three times (a lone script's
   * template), `ini` the id, Redis TIME ('') and the id (admit.lua's).
   */
  readonly values: 'iii' | 'ini';
}

interface ScriptText {
  readonly sha: string;
  readonly lua: string;
}

export interface KamailioCommands {
  /** admit.lua, the script of the templates that are not lone. */
  readonly admit: ScriptText;
  /** Every admit script a template may name (admit.lua, admit-lone.lua, admit-lone-held.lua). */
  readonly admitScripts: readonly ScriptText[];
  /** release.lua, and its call: it takes the call's record key, Redis TIME ('') and the call's id. */
  readonly release: { readonly sha: string; readonly lua: string; readonly command: string };
  /** The key prefix: every record key a release may name starts with it (Kamailio checks). */
  readonly prefix: string;
  readonly templates: readonly AdmitTemplate[];
  /**
   * reassert.lua, and what Kamailio writes its calls' holds back with after Redis lost them (a
   * restart without persistence, a failover to a replica that missed them): the generation
   * marker a RedisStore keeps (one for all on a single Redis), the record and tombstone key
   * prefixes (up to the call's id), and maxCallDuration. Only without hash tags: on a Cluster
   * each tag has a marker of its own (not written back there yet; docs/kamailio.md).
   */
  readonly reassert?: {
    readonly sha: string;
    readonly lua: string;
    readonly marker: string;
    readonly record: string;
    readonly tombstone: string;
    readonly holdUs: number;
  };
}

/**
 * How the Node processes on the same Redis name their keys (RedisStoreOptions): with hash tags
 * (a Cluster, or `hashTags: true`), and with the global level leased over lanes
 * (`lease: { lanes, pin }`, docs/leasing.md; hash tags then always).
 */
export interface KamailioKeyLayout {
  readonly hashTags?: boolean;
  /** `overflow`: the level has an overflow lane, which refused calls spill to (AdmitTemplate.spill). */
  readonly lease?: { readonly lanes: number; readonly pin?: LanePins; readonly overflow?: boolean };
}

/** One argument of a hiredis format: a literal (no space, not empty, `%` doubled) or a value. */
function formatArg(arg: string): string {
  const parts = arg.split(/([\uE000\uE001])/);
  let out = '';
  for (const p of parts) {
    if (p === ID || p === NOW) out += '%s';
    else if (p !== DEADLINE_MARK && /[\s|]/.test(p))
      throw new InvalidArgumentError(`a Redis argument for Kamailio holds a space or '|': ${JSON.stringify(p)}`);
    else out += p.replaceAll('%', '%%');
  }
  if (out === '')
    throw new InvalidArgumentError('a Redis argument for Kamailio is empty: hiredis formats cannot say it');
  return out;
}

/**
 * The admit templates of `config`: every configured peer alone and with every configured
 * account. A defaultPeer has none (its keys name the peer: list the peers). Keys as a RedisStore
 * with `prefix` and `layout` names them: on a leased global level, a call's keys and its share
 * of the level are on its lane's tag, as a RedisStore puts them (src/lease/lanes.ts).
 */
export function kamailioCommands(
  config: CallGateConfig,
  prefix = 'callgate:',
  localShare = 1,
  layout: KamailioKeyLayout = {},
): KamailioCommands {
  if (!(localShare > 0 && localShare <= 1))
    throw new InvalidArgumentError(`localShare must be > 0 and <= 1, got ${String(localShare)}`);
  if (/[{}\s%|]/.test(prefix))
    throw new InvalidArgumentError(
      `prefix must not contain '{', '}', '%', '|' or spaces, got ${JSON.stringify(prefix)}`,
    );
  const lanes = layout.lease === undefined ? undefined : lanePlan(layout.lease.lanes, layout.lease.pin);
  // a clear error when the global level cannot be leased
  if (lanes !== undefined) leasedLevel(config);
  const keys = new RedisKeys(prefix, lanes !== undefined || layout.hashTags === true);
  const all = scripts();
  const text = ({ sha, lua }: Script): ScriptText => ({ sha, lua });
  const admit = text(all.admit);
  const lone = text(all['admit-lone']);
  const held = text(all['admit-lone-held']);
  const env: AdmitEnv = {
    // the now is Redis TIME (an empty value), never a virtual clock: no ttl floor
    virtualTtlMs: 0,
    // admit.lua ignores the known trim bounds of a lone call (it always trims and sets expiries);
    // '0' is no bound any trim has, and not empty
    known: { boundOf: () => '0' } as unknown as KnownLogs,
    // the event id of call i is this prefix and i: unique per Call-ID ('~' is in no store's instance id)
    member: () => `~k${ID}`,
    deadline: () => DEADLINE_MARK,
    recordPrefix: (tag) => keys.inboundRecord(tag, ''),
    // the record is not among the keys, as on a single Redis: the id in a key would take a
    // fourth value; on a Cluster its key is on the call's slot all the same
    declareRecords: false,
  };
  /** The script call of `list` on `tag` (its global level leased when on a lane), with a hold or not. */
  const scriptCall = (
    tag: string,
    list: readonly Bucket[],
    what: string,
  ): { command: string; values: 'iii' | 'ini' } => {
    const leasedLane = lanes !== undefined && isLaneTag(tag);
    const buckets = list.map((b) =>
      bucketArgsOf(tag, keys.base(tag, b.name), b, leasedLane && b.name === GLOBAL_BUCKET),
    );
    const holds = list.some((b) => (b.channels ?? 0) > 0);
    const item: PendingAdmit = {
      buckets,
      now: NOW,
      id: holds ? ID : undefined,
      forUs: holds ? config.maxCallDurationUs : 0,
      signal: undefined,
      resolve: () => {},
      reject: () => {},
    };
    // '0': no Redis TIME at the end of the reply (ARGV[4] is '1' or not)
    const alone = loneTemplate(item, env);
    if (alone !== undefined)
      return {
        command: ['EVALSHA', alone.held ? held.sha : lone.sha, ...alone.argv.map(formatArg)].join(' '),
        values: 'iii',
      };
    const argv = admitArgv([item], '0', env);
    if (typeof argv === 'number') throw new InvalidArgumentError(`the buckets of ${what} share a Redis key`);
    return { command: ['EVALSHA', admit.sha, ...argv.map(formatArg)].join(' '), values: 'ini' };
  };
  const templates: AdmitTemplate[] = [];
  const accounts = ['', ...config.inbound.accounts.keys()];
  for (const peer of config.inbound.peers.keys()) {
    for (const account of accounts) {
      const plan = planFor(config, peer, account === '' ? undefined : account);
      if (plan === 'unknown-peer') continue;
      // as RedisStore.onLane: a call of the global level leased goes to its lane's tag
      const leased = lanes !== undefined && plan.tag === GLOBAL_TAG;
      const tag = leased ? laneTagOf(plan.buckets, lanes) : plan.tag;
      const holds = plan.buckets.some((b) => (b.channels ?? 0) > 0);
      const holdKeys = keys.hashTags
        ? []
        : plan.buckets.filter((b) => (b.channels ?? 0) > 0).map((b) => keys.holds(tag, b.name));
      const { command, values } = scriptCall(tag, plan.buckets, `peer ${peer}`);
      let spill: AdmitTemplate['spill'];
      if (leased && layout.lease?.overflow === true) {
        // RedisStore.overflow's steps: the global level's limit on the overflow lane, then the rest on the lane
        const parts = spillParts(plan.buckets, GLOBAL_BUCKET);
        const step = scriptCall(OVERFLOW_TAG, parts.overflow, `peer ${peer}`);
        // route[SPILL] passes the call's id as each value: a lone script's template
        if (step.values !== 'iii') throw new Error(`the overflow lane's step of peer ${peer} is not a lone script's`);
        const overflow = step.command;
        const own = parts.lane[0]?.name === GLOBAL_BUCKET ? plan.labels : plan.labels.slice(1);
        spill =
          parts.lane.length === 0
            ? { overflow }
            : { overflow, again: { ...scriptCall(tag, parts.lane, `peer ${peer}`), labels: own } };
      }
      const local: [string, number][] = [];
      plan.buckets.forEach((b, i) => {
        if (b.limits.length === 0) return;
        const rate = Math.min(...b.limits.map((l) => (l.limit * 1e6) / l.windowUs));
        local.push([plan.labels[i]!, Math.max(1, Math.floor(rate * localShare))]);
      });
      templates.push({
        peer,
        account,
        labels: plan.labels,
        holds,
        holdKeys,
        command,
        local,
        values,
        record: keys.inboundRecord(tag, ''),
        ...(spill && { spill }),
      });
    }
  }
  const { sha, lua } = all.release;
  const record = keys.inboundRecord('', '');
  return {
    admit,
    admitScripts: [admit, lone, held],
    release: { sha, lua, command: `EVALSHA ${sha} 1 %s %s %s` },
    prefix,
    templates,
    ...(!keys.hashTags && {
      reassert: {
        sha: all.reassert.sha,
        lua: all.reassert.lua,
        marker: keys.marker(''),
        record,
        tombstone: keys.tombstone(record),
        holdUs: config.maxCallDurationUs,
      },
    }),
  };
}

/**
 * A lone script's arguments for a template (or undefined when the call is admit.lua's), in the
 * lone layouts a RedisStore sends, with what hiredis cannot write made non-empty: now is '-'
 * (Redis TIME), the refresh flag '1' beside a leased lane's 'S' (Kamailio knows nothing of the
 * logs' expiries, so every write sets them, as admit.lua does for a lone call), and the trim
 * bound of a bucket without a log, which the script does not read, '0' (no other argument of
 * these layouts is empty).
 */
function loneTemplate(item: PendingAdmit, env: AdmitEnv): { argv: string[]; held: boolean } | undefined {
  // the store's choice of lone script (admit-args.ts, loneArgv)
  const lone = loneArgv({ ...item, now: '-' }, '0', env);
  // admit-lone-held.lua without an id (no channel limit, yet not a plain-log call: a level
  // without limits) would take its id from ARGV[7] = '', which a template cannot write
  if (lone === undefined || (lone.kind === 'h' && item.id === undefined)) return undefined;
  const { argv } = lone;
  // argv: the number of keys, the keys, then ARGV[1..]: ARGV[3] holds the flags, '1' (refresh)
  // added to what is there ('S': a leased level's lane)
  const flags = Number(argv[0]) + 3;
  argv[flags] = `1${argv[flags]!.replace('1', '')}`;
  return { argv: argv.map((a) => (a === '' ? '0' : a)), held: lone.kind === 'h' };
}

/**
 * A POSIX extended regular expression that the record key prefixes under `prefix` match, and no
 * other text: `<prefix>call:in:` or `<prefix>{<tag>}:call:in:`, the tag without braces or spaces
 * (a Route header's `cgr` parameter is checked against it before its release runs).
 */
export function recordsPattern(prefix: string): string {
  return `^${prefix.replace(/[.*+?^$()|[\]\\]/g, '\\$&')}(\\{[^{}[:space:]]+\\}:)?call:in:$`;
}

/** A Kamailio string literal: `"`, `\` and line ends escaped. */
export function cfgString(s: string): string {
  return `"${s.replaceAll('\\', '\\\\').replaceAll('"', '\\"').replaceAll('\n', '\\n').replaceAll('\r', '\\r').replaceAll('\t', '\\t')}"`;
}

/**
 * route[CALLGATE_LOAD]: the scripts loaded on the `callgate` server (route[CALLGATE_LOAD_ON]) and,
 * with REDIS_CLUSTER defined (ndb_redis in its cluster mode, following MOVED), on every master
 * CLUSTER NODES lists: each runs the scripts of its own slots, and a NOSCRIPT may come from any.
 * A master ndb_redis has not been MOVED to yet is not known by its `ip:port` name: its load
 * fails, and it gets the scripts at its own first NOSCRIPT, once a call was MOVED there.
 */
const LOAD_ROUTE = [
  'route[CALLGATE_LOAD] {',
  '\t$var(cg_srv) = "callgate";',
  '\troute(CALLGATE_LOAD_ON);',
  '#!ifdef REDIS_CLUSTER',
  '\tredis_cmd("callgate", "CLUSTER NODES", "cgnodes");',
  '\tif ($redis(cgnodes=>type) == 1) {',
  '\t\t$var(cg_nodes) = $redis(cgnodes=>value);',
  '\t\t$var(cg_ln) = $(var(cg_nodes){line.count});',
  '\t\t$var(cg_li) = 0;',
  '\t\twhile ($var(cg_li) < $var(cg_ln)) {',
  '\t\t\t# "<id> <ip:port@bus> <flags> ...": the masters not failing',
  '\t\t\t$var(cg_line) = $(var(cg_nodes){line.at,$var(cg_li)});',
  '\t\t\t$var(cg_flags) = $(var(cg_line){s.select,2, });',
  '\t\t\tif ($var(cg_flags) =~ "master" && !($var(cg_flags) =~ "fail")) {',
  '\t\t\t\t$var(cg_srv) = $(var(cg_line){s.select,1, }{s.select,0,@});',
  '\t\t\t\troute(CALLGATE_LOAD_ON);',
  '\t\t\t}',
  '\t\t\t$var(cg_li) = $var(cg_li) + 1;',
  '\t\t}',
  '\t}',
  '\tredis_free("cgnodes");',
  '#!endif',
  '}',
  '',
];

/**
 * The Kamailio include: route[CALLGATE_TABLES] fills htable `callgate` (call it from
 * event_route[htable:mod-init]); route[CALLGATE_LOAD] loads the scripts into Redis (after a
 * NOSCRIPT: a restarted Redis has none; on a Cluster, every master: LOAD_ROUTE), and
 * route[CALLGATE_LOAD_BACK] those of the write-back alone (reassert and release; empty with hash
 * tags), which route[CALLGATE_RESTARTED] runs before the admission scripts are back. Keys of the table: `admit:<account>:<peer>`,
 * `values:<account>:<peer>` (`iii` or `ini`: AdmitTemplate.values), `labels:<account>:<peer>`
 * (the levels, comma-separated), `local:<account>:<peer>` (policy local: `label=calls per
 * second`, comma-separated), `rec:<account>:<peer>` (its calls' record keys up to the id:
 * AdmitTemplate.record), `release` (its values: the record key, now, the id), `records` (a
 * regular expression every record key prefix matches: what a Route header may name); with an
 * overflow lane, `spill:`, `again:`, `againvalues:` and `againlabels:<account>:<peer>`
 * (AdmitTemplate.spill); without hash tags, for the write-back after Redis lost its state
 * (KamailioCommands.reassert), `hold:<account>:<peer>` ("<n> <holds set> ...", in a format's
 * text), `reassert` (EVALSHA and its SHA-1), `marker`, `recf` and `tombf` (in a format's text),
 * `rec` (a value) and `hold_s` / `hold_u` (maxCallDuration: whole seconds, and µs past them).
 */
export function kamailioInclude(cmds: KamailioCommands, source: string): string {
  // "<account>:<peer>" is ambiguous when an id holds ':' (account "a:b" + peer "c" and account
  // "a" + peer "b:c"): the later template silently replaced the earlier in the htable
  const owners = new Map<string, string>();
  for (const t of cmds.templates) {
    const key = `${t.account}:${t.peer}`;
    const was = owners.get(key);
    const who = `peer ${JSON.stringify(t.peer)}${t.account === '' ? '' : ` with account ${JSON.stringify(t.account)}`}`;
    if (was !== undefined)
      throw new InvalidArgumentError(
        `Kamailio's table key ${JSON.stringify(key)} names both ${was} and ${who}: rename one (':' in an id)`,
      );
    owners.set(key, who);
  }
  const lines = [
    // the file's name as JSON writes it: a line break in it would end the comment, and what
    // followed would be read as Kamailio's configuration
    `# callgate ${JSON.stringify(source)}: generated by \`callgate kamailio\`; do not edit, generate again`,
    '# after a change of the limits or of callgate (the scripts are named by their SHA-1).',
    '',
    'route[CALLGATE_TABLES] {',
  ];
  for (const t of cmds.templates) {
    const key = `${t.account}:${t.peer}`;
    // keys through a variable: a peer's name may hold what a $sht() name cannot
    lines.push(`\t$var(cg_key) = ${cfgString(`admit:${key}`)};`);
    lines.push(`\t$sht(callgate=>$var(cg_key)) = ${cfgString(t.command)};`);
    lines.push(`\t$var(cg_key) = ${cfgString(`values:${key}`)};`);
    lines.push(`\t$sht(callgate=>$var(cg_key)) = ${cfgString(t.values)};`);
    lines.push(`\t$var(cg_key) = ${cfgString(`labels:${key}`)};`);
    lines.push(`\t$sht(callgate=>$var(cg_key)) = ${cfgString(t.labels.join(','))};`);
    lines.push(`\t$var(cg_key) = ${cfgString(`local:${key}`)};`);
    lines.push(`\t$sht(callgate=>$var(cg_key)) = ${cfgString(t.local.map(([l, r]) => `${l}=${r}`).join(','))};`);
    lines.push(`\t$var(cg_key) = ${cfgString(`rec:${key}`)};`);
    lines.push(`\t$sht(callgate=>$var(cg_key)) = ${cfgString(t.record)};`);
    const entries: [string, string][] = [];
    if (t.spill !== undefined) entries.push([`spill:${key}`, t.spill.overflow]);
    if (t.spill?.again !== undefined)
      entries.push(
        [`again:${key}`, t.spill.again.command],
        [`againvalues:${key}`, t.spill.again.values],
        [`againlabels:${key}`, t.spill.again.labels.join(',')],
      );
    // "<n> <holds set> ...", each in a hiredis format's text (its '%' doubled)
    if (cmds.reassert !== undefined && t.holdKeys.length > 0)
      entries.push([`hold:${key}`, [String(t.holdKeys.length), ...t.holdKeys.map(formatArg)].join(' ')]);
    for (const [name, value] of entries) {
      lines.push(`\t$var(cg_key) = ${cfgString(name)};`);
      lines.push(`\t$sht(callgate=>$var(cg_key)) = ${cfgString(value)};`);
    }
  }
  lines.push(`\t$sht(callgate=>release) = ${cfgString(cmds.release.command)};`);
  lines.push(`\t$sht(callgate=>records) = ${cfgString(recordsPattern(cmds.prefix))};`);
  const back = cmds.reassert;
  if (back !== undefined) {
    // route[CALLGATE_HOLDS_CHECK]'s script call, and the keys it names, in a hiredis format's text
    lines.push(`\t$sht(callgate=>reassert) = ${cfgString(`EVALSHA ${back.sha}`)};`);
    lines.push(`\t$sht(callgate=>marker) = ${cfgString(formatArg(back.marker))};`);
    lines.push(`\t$sht(callgate=>recf) = ${cfgString(formatArg(back.record))};`);
    lines.push(`\t$sht(callgate=>tombf) = ${cfgString(formatArg(back.tombstone))};`);
    // the record prefix as a value (a release's), not in a format
    lines.push(`\t$sht(callgate=>rec) = ${cfgString(back.record)};`);
    // maxCallDuration in seconds and µs (Kamailio's integers are 32 bits)
    lines.push(`\t$sht(callgate=>hold_s) = ${Math.floor(back.holdUs / 1e6)};`);
    lines.push(`\t$sht(callgate=>hold_u) = ${back.holdUs % 1e6};`);
  }
  lines.push('}', '');
  lines.push('# the scripts, as Redis names them: SCRIPT LOAD answers these SHA-1s');
  lines.push(`#!define CALLGATE_ADMIT_SHA "${cmds.admit.sha}"`);
  lines.push(`#!define CALLGATE_RELEASE_SHA "${cmds.release.sha}"`);
  lines.push(...LOAD_ROUTE);
  lines.push('route[CALLGATE_LOAD_ON] {');
  for (const script of [...cmds.admitScripts, cmds.release, ...(back ? [back] : [])]) {
    lines.push(`\t$var(cg_lua) = ${cfgString(script.lua)};`);
    lines.push('\tredis_cmd("$var(cg_srv)", "SCRIPT LOAD %s", "$var(cg_lua)", "cgload");');
    // each reply freed before the next command takes its name
    lines.push('\tredis_free("cgload");');
  }
  lines.push('\t$var(cg_lua) = "";');
  lines.push('}', '');
  // what a write-back needs, loaded before the admission scripts (route[CALLGATE_RESTARTED])
  lines.push('route[CALLGATE_LOAD_BACK] {');
  if (back !== undefined) {
    lines.push('\t$var(cg_srv) = "callgate";');
    for (const script of [back, cmds.release]) {
      lines.push(`\t$var(cg_lua) = ${cfgString(script.lua)};`);
      lines.push('\tredis_cmd("$var(cg_srv)", "SCRIPT LOAD %s", "$var(cg_lua)", "cgload");');
      lines.push('\tredis_free("cgload");');
    }
    lines.push('\t$var(cg_lua) = "";');
  } else lines.push('\treturn;'); // no write-back with hash tags (a route may not be empty)
  lines.push('}', '');
  return lines.join('\n');
}
