/**
 * Bans of attribute levels (docs/attributes.md), for an operator: the bans in force, by level and
 * value (`callgate inspect`, GET /v1/bans), and lifting one (`callgate unban`, DELETE /v1/bans/…).
 */
import { namedAttributeBucket, slotProblem } from '../admission/attributes.js';
import type { AttributeLevelConfig, CallGateConfig } from '../config/types.js';
import { InvalidArgumentError } from '../errors/index.js';
import { checkIdArgument } from '../ids.js';
import { GLOBAL_TAG } from '../store/keys.js';
import { decodeId } from '../store/operations.js';
import { LISTED_BY_DEFAULT } from './operate.js';
import type { Store } from '../store/types.js';

export interface BanState {
  /** The attribute level's name. */
  level: string;
  /**
   * The value banned, as `limited_by` shows it after `<level>:`; for a level with maxValues, a
   * value without an override shares its bucket with others: `#<slot>`.
   */
  value: string;
  /** When the ban ends, µs since the epoch, and the time left, whole ms. */
  until_us: number;
  remaining_ms: number;
}

/** The bans in force on `store` (undefined when the store cannot list them). */
export async function listBans(store: Store, now?: number): Promise<BanState[] | undefined> {
  if (store.bans === undefined) return undefined;
  const r = await store.bans(now === undefined ? {} : { now });
  const out: BanState[] = [];
  for (const b of r.bans) {
    const m = /^attr:([A-Za-z0-9_-]+):(.*)$/.exec(b.bucket);
    if (!m) continue;
    const value = m[2]!.startsWith('#') ? m[2]! : decodeId(m[2]!);
    out.push({ level: m[1]!, value, until_us: b.end, remaining_ms: Math.ceil((b.end - r.now) / 1000) });
  }
  return out;
}

/** The first `max` bans, the soonest to end first, and how many there are in all. */
export function bansPage(bans: readonly BanState[], max = LISTED_BY_DEFAULT): { bans: BanState[]; total: number } {
  const sorted = [...bans].sort(
    (a, b) => a.until_us - b.until_us || a.level.localeCompare(b.level) || a.value.localeCompare(b.value),
  );
  return { bans: sorted.slice(0, max), total: bans.length };
}

function levelNamed(config: CallGateConfig, name: string): AttributeLevelConfig {
  const level = (config.inbound.attributes ?? []).find((l) => l.name === name);
  if (level === undefined) {
    const names = (config.inbound.attributes ?? []).map((l) => l.name);
    throw new InvalidArgumentError(
      `no attribute level named ${JSON.stringify(name)} in the configuration${names.length > 0 ? ` (levels: ${names.join(', ')})` : ''}`,
    );
  }
  if (level.ban === undefined) throw new InvalidArgumentError(`the attribute level "${name}" has no ban`);
  return level;
}

/** The level whose ban of `value` may be lifted: throws InvalidArgumentError when none (no store needed). */
export function unbanTarget(config: CallGateConfig, levelName: string, value: string): AttributeLevelConfig {
  const level = levelNamed(config, levelName);
  if (value === '') throw new InvalidArgumentError('value must be a non-empty string');
  checkIdArgument('value', value); // as a call's value could be: at most 256 characters, well-formed
  const problem = slotProblem(level, value);
  if (problem !== undefined) throw new InvalidArgumentError(problem);
  return level;
}

/**
 * Lift the ban of `value` (as `limited_by` shows it, or `#<slot>` of a shared bucket) on level
 * `levelName`, for every process sharing the store. `lifted`: it was banned.
 */
export async function liftBan(
  config: CallGateConfig,
  store: Store,
  levelName: string,
  value: string,
  now?: number,
): Promise<{ lifted: boolean }> {
  const level = unbanTarget(config, levelName, value);
  if (store.unban === undefined) throw new InvalidArgumentError(`the ${store.kind} store cannot lift bans`);
  const bucket = namedAttributeBucket(level, value).name;
  const r = await store.unban({ tag: GLOBAL_TAG, bucket, ...(now !== undefined && { now }) });
  return { lifted: r.lifted };
}
