/**
 * Loading the limit configuration: from an object, a JSON file or a YAML file. Every failure is
 * a ConfigError listing all problems found, each naming its path (and the file, if any).
 */
import { isUtf8 } from 'node:buffer';
import { extname } from 'node:path';
import type { z } from 'zod';
import { jsonShape, MAX_JSON_DEPTH } from '../json-shape.js';
import { osReason } from '../os-reason.js';
import { readBytes } from '../read-user-file.js';
import { nonUtf8Lines } from '../utf8-lines.js';
import { ConfigError } from '../errors/config-error.js';
import { jsonDuplicateKeys } from './duplicate-keys.js';
import { formatPath } from './path.js';
import { configSchema } from './schema.js';
import { parseYamlText } from './yaml.js';
import type { CallGateConfig, CallGateConfigInput } from './types.js';

/** One line per zod issue (one per unknown field), `[source: ]path: message`, duplicates dropped. */
export function formatIssues(issues: readonly z.core.$ZodIssue[], source?: string): string[] {
  const prefix = source === undefined ? '' : `${source}: `;
  const lines: string[] = [];
  const add = (path: readonly PropertyKey[], message: string) => {
    const p = formatPath(path);
    lines.push(`${prefix}${p === '' ? 'top level' : p}: ${message}`);
  };
  for (const issue of issues) {
    if (issue.code === 'unrecognized_keys') {
      for (const key of issue.keys) add([...issue.path, key], 'unknown field');
    } else {
      add(issue.path, issue.message);
    }
  }
  return [...new Set(lines)];
}

/**
 * Validates and normalizes a configuration object (as parsed from JSON or YAML, or written in
 * code). `source` (a file name) prefixes every problem. Throws ConfigError with all problems.
 */
export function parseConfig(obj: unknown, source?: string): CallGateConfig {
  const r = configSchema.safeParse(obj);
  if (!r.success) throw new ConfigError(formatIssues(r.error.issues, source), { cause: r.error });
  return r.data;
}

/** 1-based line and column of a character offset. */
function lineColumn(text: string, offset: number): { line: number; column: number } {
  let line = 1;
  let lineStart = 0;
  for (let i = 0; i < offset && i < text.length; i++) {
    if (text[i] === '\n') {
      line++;
      lineStart = i + 1;
    }
  }
  return { line, column: offset - lineStart + 1 };
}

/**
 * Where JSON.parse failed. V8 (Node 20) names the offset in most messages ("... in JSON at
 * position 42") but not in "Unexpected token 'x', ..." nor "Unexpected end of JSON input". Then
 * the offset is the length of the longest prefix of the text that is still the start of valid
 * JSON: found by bisection, a prefix counting as such when JSON.parse accepts it or fails only at
 * its very end. That property is monotone (a prefix of a valid start is a valid start).
 */
function jsonErrorOffset(text: string, message: string): number {
  const m = / at position (\d+)/.exec(message);
  if (m) return Number(m[1]);
  const isValidStart = (k: number): boolean => {
    try {
      JSON.parse(text.slice(0, k));
      return true;
    } catch (e) {
      const msg = (e as Error).message;
      if (msg.startsWith('Unexpected end of JSON input')) return true;
      const p = / at position (\d+)/.exec(msg);
      return p !== null && Number(p[1]) >= k;
    }
  };
  let lo = 0; // valid start
  let hi = text.length; // answer is in [lo, hi]
  while (lo < hi) {
    const mid = Math.ceil((lo + hi) / 2);
    if (isValidStart(mid)) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}

function parseJsonText(text: string, source: string): unknown {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (e) {
    const message = (e as Error).message;
    const { line, column } = lineColumn(text, jsonErrorOffset(text, message));
    const reason = message
      .replace(/ (?:in JSON )?at position \d+.*$/s, '')
      .replace(/^(Unexpected token '.*?'), .*$/s, '$1');
    throw new ConfigError([`${source}: invalid JSON at line ${line}, column ${column}: ${reason}`], { cause: e });
  }
  const deep = jsonShape(text).deepAt;
  if (deep >= 0) {
    const { line, column } = lineColumn(text, deep);
    throw new ConfigError([
      `${source}: invalid JSON at line ${line}, column ${column}: nested deeper than ${MAX_JSON_DEPTH} levels`,
    ]);
  }
  // JSON.parse keeps the last of repeated keys; they are refused, as in YAML
  const duplicates = jsonDuplicateKeys(text, source);
  if (duplicates.length > 0) throw new ConfigError(duplicates);
  return value;
}

/** Whether a path is read as YAML (`.yaml`, `.yml`, any case); anything else is JSON. */
export function isYamlPath(path: string): boolean {
  const ext = extname(path).toLowerCase();
  return ext === '.yaml' || ext === '.yml';
}

/**
 * Reads and validates a configuration file: YAML for `.yaml` / `.yml`, JSON otherwise (UTF-8, a
 * leading BOM is ignored). Problems are prefixed with `path` as given.
 */
export async function loadConfigFile(path: string): Promise<CallGateConfig> {
  let bytes: Buffer;
  try {
    bytes = await readBytes(path);
  } catch (e) {
    throw new ConfigError([`${path}: cannot read file: ${osReason(e)}`], { cause: e });
  }
  // UTF-8 only: a lossy reading would give two ids with different bytes one name
  if (!isUtf8(bytes)) {
    const line = nonUtf8Lines(bytes).bad[0]! + 1;
    throw new ConfigError([`${path}: line ${line}: not UTF-8 (a configuration is UTF-8 text)`]);
  }
  let text = bytes.toString('utf8');
  if (text.charCodeAt(0) === 0xfeff) text = text.slice(1);
  const yaml = isYamlPath(path);
  // YAML reads a file of blanks and comments as null; JSON.parse would say only "Unexpected end"
  // ([ \t]*, not \s*: with the m flag \s* also takes line ends and backtracks over blank runs)
  if (/^\s*$/.test(yaml ? text.replace(/^[ \t]*#.*$/gm, '') : text))
    throw new ConfigError([
      `${path}: the file holds no configuration${text.length === 0 ? ' (it is empty)' : ''}: the smallest one is {} (every part is optional)`,
    ]);
  const raw = yaml ? parseYamlText(text, path) : parseJsonText(text, path);
  return parseConfig(raw, path);
}

/** A file path (see loadConfigFile) or a configuration object (see parseConfig). */
export async function loadConfig(pathOrObject: string | CallGateConfigInput): Promise<CallGateConfig> {
  return typeof pathOrObject === 'string' ? loadConfigFile(pathOrObject) : parseConfig(pathOrObject);
}
