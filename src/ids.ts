/**
 * Ids from traffic (call ids, peers, accounts, carriers): the one bound every entry point applies
 * (CallGate, the sidecar, traces), so that an id the library takes is one the sidecar takes too.
 */
import { InvalidArgumentError } from './errors/index.js';
import { show } from './input-fields.js';

/** Longest id accepted (UTF-16 code units, as JavaScript counts): bounds memory and key sizes. */
export const MAX_ID_LENGTH = 256;

/** In u-mode a surrogate pair is one code point: only a lone surrogate is of category Cs. */
const LONE_SURROGATE = /\p{Cs}/u;

/**
 * Why `id` is not an acceptable id, or undefined: a string of 1 to MAX_ID_LENGTH code units
 * (0 allowed with `empty`), well-formed Unicode (a lone surrogate has no bytes on any wire).
 */
export function idProblem(id: unknown, opts: { empty?: boolean } = {}): string | undefined {
  if (typeof id !== 'string') return `must be a string, got ${show(id)}`;
  if (id === '' && !opts.empty) return 'must not be empty';
  if (id.length > MAX_ID_LENGTH)
    return `must be at most ${MAX_ID_LENGTH} characters (UTF-16 code units), got ${id.length}`;
  if (LONE_SURROGATE.test(id)) return 'must be well-formed Unicode (it holds a lone surrogate)';
  return undefined;
}

/** Throw InvalidArgumentError naming `what` when `id` is not an acceptable id. */
export function checkIdArgument(what: string, id: unknown, opts: { empty?: boolean } = {}): void {
  const problem = idProblem(id, opts);
  if (problem !== undefined) throw new InvalidArgumentError(`${what} ${problem}`);
}

/**
 * What a terminal acts on, reorders text by, or shows as nothing: controls (C0, DEL, C1:
 * escape sequences, a carriage return), line and paragraph separators, format characters (bidi
 * marks, embeddings, overrides and isolates, zero-width spaces and joiners, BOM), surrogates.
 */
const UNPRINTABLE = /[\p{Cc}\p{Cf}\p{Cs}\u2028\u2029]/u;
const UNPRINTABLE_ALL = new RegExp(UNPRINTABLE.source, 'gu');
const ESCAPED_ALL = new RegExp(`${UNPRINTABLE.source.slice(0, -1)}\\\\]`, 'gu');

/** Whether `text` holds a character printable() escapes (a backslash aside). */
export const hasUnprintable = (text: string): boolean => UNPRINTABLE.test(text);

const escapeOne = (c: string): string => (c === '\\' ? '\\\\' : `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);

/**
 * `text` (an id from traffic, a caller's number) safe on an operator's terminal: each control,
 * separator, format character and lone surrogate as `\uXXXX`, and a backslash as `\\`, so
 * that two ids never look alike (bash's `$'…'` reads what is shown back into the id). A caller
 * chose those bytes: printed raw in a text report, an escape sequence cleared the screen and set
 * the window title.
 */
export function printable(text: string): string {
  return text.replace(ESCAPED_ALL, escapeOne);
}

/** `value` as JSON (quoted, its backslashes escaped there), with what JSON leaves raw escaped as printable() does. */
export function printableJson(value: string): string {
  return JSON.stringify(value).replace(UNPRINTABLE_ALL, escapeOne);
}
