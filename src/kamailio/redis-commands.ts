/**
 * Kamailio on callgate's Redis, without Node in the path: the admit and release script calls
 * of every configured peer (and peer + account) as `ndb_redis` command templates, packed by the
 * very code a RedisStore packs with (bucket-args.ts, admit-args.ts), so Kamailio's decisions are
 * the library's and share its keys. `callgate kamailio` writes them as a Kamailio include
 * (examples/kamailio/kamailio-redis.cfg, docs/kamailio.md).
 *
 * A template is a hiredis format: arguments split on spaces, `%s` takes one value from the
 * call, `%%` is a literal `%`. ndb_redis passes at most three values, which a template takes in
 * this order: the call's id (hex of the Call-ID: key-safe, so its own encoding), Redis TIME
 * ('' = now, the only argument that must be empty) and the call's id again. The call's deadline
 * is spliced in by Kamailio at DEADLINE_MARK.
 */
import { createHash } from 'node:crypto';
import { planFor } from '../admission/plan.js';
import type { CallGateConfig } from '../config/types.js';
import { InvalidArgumentError } from '../errors/index.js';
import { type AdmitEnv, admitArgv, type PendingAdmit } from '../store/redis/admit-args.js';
import { bucketArgsOf } from '../store/redis/bucket-args.js';
import type { KnownLogs } from '../store/redis/known-logs.js';
import { RedisKeys } from '../store/redis/redis-keys.js';
import { scripts } from '../store/redis/scripts.js';

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
   * Policy `local` (Kamailio's pipelimit, per second): per level with rate limits, its label and
   * the calls per second of its tightest limit (L per W as a rate), times the local share,
   * rounded down (at least 1).
   */
  readonly local: readonly (readonly [label: string, perSecond: number])[];
  /** The hiredis format of the EVALSHA, with DEADLINE_MARK where the call's deadline goes. */
  readonly command: string;
}

export interface KamailioCommands {
  readonly admit: { readonly sha: string; readonly lua: string };
  readonly release: { readonly sha: string; readonly lua: string; readonly command: string };
  readonly templates: readonly AdmitTemplate[];
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

const sha1 = (text: string): string => createHash('sha1').update(text).digest('hex');

/**
 * The admit templates of `config`: every configured peer alone and with every configured
 * account. A defaultPeer has none (its keys name the peer: list the peers). Keys as a RedisStore
 * with `prefix` on a single Redis (no hash tags) names them.
 */
export function kamailioCommands(config: CallGateConfig, prefix = 'callgate:', localShare = 1): KamailioCommands {
  if (!(localShare > 0 && localShare <= 1))
    throw new InvalidArgumentError(`localShare must be > 0 and <= 1, got ${String(localShare)}`);
  if (/[{}\s%|]/.test(prefix))
    throw new InvalidArgumentError(
      `prefix must not contain '{', '}', '%', '|' or spaces, got ${JSON.stringify(prefix)}`,
    );
  const keys = new RedisKeys(prefix, false);
  const all = scripts();
  const admitLua = all.admit.lua;
  const admitSha = sha1(admitLua);
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
  };
  const templates: AdmitTemplate[] = [];
  const accounts = ['', ...config.inbound.accounts.keys()];
  for (const peer of config.inbound.peers.keys()) {
    for (const account of accounts) {
      const plan = planFor(config, peer, account === '' ? undefined : account);
      if (plan === 'unknown-peer') continue;
      const buckets = plan.buckets.map((b) => bucketArgsOf(plan.tag, keys.base(plan.tag, b.name), b));
      const holds = plan.buckets.some((b) => (b.channels ?? 0) > 0);
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
      const argv = admitArgv([item], '0', env);
      if (typeof argv === 'number') throw new InvalidArgumentError(`the buckets of peer ${peer} share a Redis key`);
      const command = ['EVALSHA', admitSha, ...argv.map(formatArg)].join(' ');
      const local: [string, number][] = [];
      plan.buckets.forEach((b, i) => {
        if (b.limits.length === 0) return;
        const rate = Math.min(...b.limits.map((l) => (l.limit * 1e6) / l.windowUs));
        local.push([plan.labels[i]!, Math.max(1, Math.floor(rate * localShare))]);
      });
      templates.push({ peer, account, labels: plan.labels, holds, command, local });
    }
  }
  const releaseLua = all.release.lua;
  const releaseSha = sha1(releaseLua);
  const record = formatArg(keys.inboundRecord('', ID));
  return {
    admit: { sha: admitSha, lua: admitLua },
    release: { sha: releaseSha, lua: releaseLua, command: `EVALSHA ${releaseSha} 1 ${record} %s %s` },
    templates,
  };
}

/** A Kamailio string literal: `"`, `\` and line ends escaped. */
export function cfgString(s: string): string {
  return `"${s.replaceAll('\\', '\\\\').replaceAll('"', '\\"').replaceAll('\n', '\\n').replaceAll('\r', '\\r').replaceAll('\t', '\\t')}"`;
}

/**
 * The Kamailio include: route[CALLGATE_TABLES] fills htable `callgate` (call it from
 * event_route[htable:mod-init]); route[CALLGATE_LOAD] loads both scripts into Redis (after a
 * NOSCRIPT: a restarted Redis has none). Keys of the table: `admit:<account>:<peer>`,
 * `labels:<account>:<peer>` (the levels, comma-separated), `local:<account>:<peer>` (policy
 * local: `label=calls per second`, comma-separated), `release`.
 */
export function kamailioInclude(cmds: KamailioCommands, source: string): string {
  const lines = [
    `# callgate ${source}: generated by \`callgate kamailio\`; do not edit, generate again`,
    '# after a change of the limits or of callgate (the scripts are named by their SHA-1).',
    '',
    'route[CALLGATE_TABLES] {',
  ];
  for (const t of cmds.templates) {
    const key = `${t.account}:${t.peer}`;
    // keys through a variable: a peer's name may hold what a $sht() name cannot
    lines.push(`\t$var(cg_key) = ${cfgString(`admit:${key}`)};`);
    lines.push(`\t$sht(callgate=>$var(cg_key)) = ${cfgString(t.command)};`);
    lines.push(`\t$var(cg_key) = ${cfgString(`labels:${key}`)};`);
    lines.push(`\t$sht(callgate=>$var(cg_key)) = ${cfgString(t.labels.join(','))};`);
    lines.push(`\t$var(cg_key) = ${cfgString(`local:${key}`)};`);
    lines.push(`\t$sht(callgate=>$var(cg_key)) = ${cfgString(t.local.map(([l, r]) => `${l}=${r}`).join(','))};`);
  }
  lines.push(`\t$sht(callgate=>release) = ${cfgString(cmds.release.command)};`);
  lines.push('}', '');
  lines.push('# the scripts, as Redis names them: SCRIPT LOAD answers these SHA-1s');
  lines.push(`#!define CALLGATE_ADMIT_SHA "${cmds.admit.sha}"`);
  lines.push(`#!define CALLGATE_RELEASE_SHA "${cmds.release.sha}"`);
  lines.push('route[CALLGATE_LOAD] {');
  lines.push(`\t$var(cg_lua) = ${cfgString(cmds.admit.lua)};`);
  lines.push('\tredis_cmd("callgate", "SCRIPT LOAD %s", "$var(cg_lua)", "cgload");');
  lines.push(`\t$var(cg_lua) = ${cfgString(cmds.release.lua)};`);
  lines.push('\tredis_cmd("callgate", "SCRIPT LOAD %s", "$var(cg_lua)", "cgload");');
  lines.push('\t$var(cg_lua) = "";');
  lines.push('\tredis_free("cgload");');
  lines.push('}', '');
  return lines.join('\n');
}
