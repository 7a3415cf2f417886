/**
 * The Lua scripts of lua/, loaded once, with their `--- @include "name"` lines replaced by
 * lua/includes/name.lua. Command names carry a hash of the source, so two callgate versions
 * sharing one Redis never run each other's script under one name.
 */
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const LUA_DIR = fileURLToPath(new URL('../../lua/', import.meta.url));

export type ScriptName = 'admit' | 'add' | 'get' | 'reserve' | 'wait' | 'release' | 'refresh' | 'holds';

export interface Script {
  /** The ioredis command name (defineCommand), e.g. `callgate_admit_3fa9c1d2`. */
  readonly command: string;
  readonly lua: string;
}

function inline(source: string): string {
  return source.replace(/^--- @include "([a-z-]+)"$/gm, (_, name: string) =>
    readFileSync(`${LUA_DIR}includes/${name}.lua`, 'utf8'),
  );
}

function load(name: ScriptName): Script {
  const lua = inline(readFileSync(`${LUA_DIR}${name}.lua`, 'utf8'));
  const hash = createHash('sha1').update(lua).digest('hex').slice(0, 8);
  return { command: `callgate_${name}_${hash}`, lua };
}

export const SCRIPTS: Readonly<Record<ScriptName, Script>> = {
  admit: load('admit'),
  add: load('add'),
  get: load('get'),
  reserve: load('reserve'),
  wait: load('wait'),
  release: load('release'),
  refresh: load('refresh'),
  holds: load('holds'),
};
