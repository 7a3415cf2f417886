/**
 * The Lua scripts of lua/ (at the package root), loaded once, when the first RedisStore needs
 * them (a memory-store user never reads them), with their `--- @include "name"` lines replaced
 * by lua/includes/name.lua. Command names carry a hash of the source, so two callgate versions
 * sharing one Redis never run each other's script under one name.
 */
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { packageRoot } from '../../package-root.js';

export type ScriptName =
  | 'admit'
  | 'admit-lone'
  | 'admit-lone-held'
  | 'admit-lone-run'
  | 'record'
  | 'count'
  | 'reserve'
  | 'wait'
  | 'release'
  | 'refresh'
  | 'holds'
  | 'inspect'
  | 'hold-list'
  | 'reset'
  | 'reassert'
  | 'lease-observe'
  | 'lease-shrink'
  | 'lease-grant'
  | 'lease-leader';

export interface Script {
  /** The ioredis command name (defineCommand), e.g. `callgate_admit_3fa9c1d2`. */
  readonly command: string;
  readonly lua: string;
  /** SHA1 of the source (hex): what EVALSHA names it by. */
  readonly sha: string;
}

function load(dir: string, name: ScriptName): Script {
  const inline = (source: string) =>
    source.replace(/^--- @include "([a-z-]+)"$/gm, (_, include: string) =>
      readFileSync(join(dir, 'includes', `${include}.lua`), 'utf8'),
    );
  const lua = inline(readFileSync(join(dir, `${name}.lua`), 'utf8'));
  const sha = createHash('sha1').update(lua).digest('hex');
  return { command: `callgate_${name.replaceAll('-', '_')}_${sha.slice(0, 8)}`, lua, sha };
}

let loaded: Readonly<Record<ScriptName, Script>> | undefined;

/** Every script, read from lua/ on the first call. */
export function scripts(): Readonly<Record<ScriptName, Script>> {
  if (loaded) return loaded;
  const dir = join(packageRoot(), 'lua');
  return (loaded = {
    admit: load(dir, 'admit'),
    'admit-lone': load(dir, 'admit-lone'),
    'admit-lone-held': load(dir, 'admit-lone-held'),
    'admit-lone-run': load(dir, 'admit-lone-run'),
    record: load(dir, 'record'),
    count: load(dir, 'count'),
    reserve: load(dir, 'reserve'),
    wait: load(dir, 'wait'),
    release: load(dir, 'release'),
    refresh: load(dir, 'refresh'),
    holds: load(dir, 'holds'),
    inspect: load(dir, 'inspect'),
    'hold-list': load(dir, 'hold-list'),
    reset: load(dir, 'reset'),
    reassert: load(dir, 'reassert'),
    'lease-observe': load(dir, 'lease-observe'),
    'lease-shrink': load(dir, 'lease-shrink'),
    'lease-grant': load(dir, 'lease-grant'),
    'lease-leader': load(dir, 'lease-leader'),
  });
}
