/**
 * Request fields as exact text: one parser for query strings and form bodies, one for JSON
 * bodies, so that an id means the same whichever way it came.
 *
 * - Query strings and form bodies: split on `&` and the first `=`, `+` is a space, then each
 *   `%XX` is one byte, decoded once; the bytes must be UTF-8 (a field with other bytes is refused
 *   by name: lossy decoding would turn two different ids into one). A `%` not followed by two
 *   hex digits stays a `%`.
 * - JSON bodies: the bytes must be UTF-8; strings must be well-formed Unicode (no lone surrogate
 *   from a `\ud800` escape: it has no bytes at all).
 * - `__proto__`, `constructor` and `prototype` are refused as field names in every form, at every
 *   depth; fields are kept in Maps or null-prototype objects, never merged into a plain object.
 */
import { formatPath } from '../config/path.js';
import { jsonShape, MAX_JSON_DEPTH } from '../json-shape.js';

/** A located problem: `where` (body, query, form) + path, and what was expected. */
export class BadRequest extends Error {
  constructor(readonly problems: readonly string[]) {
    super(problems.join('; '));
  }
}

/** Field names refused everywhere: they name Object.prototype's machinery. */
export const FORBIDDEN_FIELDS: ReadonlySet<string> = new Set(['__proto__', 'constructor', 'prototype']);

const utf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });
const lossy = new TextDecoder('utf-8', { ignoreBOM: true });

/** A parsed query string or form body: each field's values in order, and what could not be read. */
export class UrlEncoded {
  readonly fields = new Map<string, string[]>();
  /** Problems, each `<field>: ...` (the caller adds where: query, form). */
  readonly problems: string[] = [];
}

const hex = (c: number): number =>
  c >= 0x30 && c <= 0x39 ? c - 0x30 : c >= 0x41 && c <= 0x46 ? c - 0x37 : c >= 0x61 && c <= 0x66 ? c - 0x57 : -1;

/** Bytes of one component: `+` a space, `%XX` one byte; undefined when they are not UTF-8. */
function decodeComponent(bytes: Uint8Array, from: number, to: number): string | undefined {
  const out = new Uint8Array(to - from);
  let n = 0;
  for (let i = from; i < to; i++) {
    const c = bytes[i]!;
    if (c === 0x2b) out[n++] = 0x20;
    else if (c === 0x25 && i + 2 < to && hex(bytes[i + 1]!) >= 0 && hex(bytes[i + 2]!) >= 0) {
      out[n++] = hex(bytes[i + 1]!) * 16 + hex(bytes[i + 2]!);
      i += 2;
    } else out[n++] = c;
  }
  try {
    return utf8.decode(out.subarray(0, n));
  } catch {
    return undefined;
  }
}

/** 0: ASCII with nothing to decode (the common id), 1: ASCII with `%` or `+`, 2: other bytes. */
function kindOf(text: string): 0 | 1 | 2 {
  let kind: 0 | 1 = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c > 0x7f) return 2;
    if (c === 0x25 || c === 0x2b) kind = 1;
  }
  return kind;
}

/** One component of a latin1 string (one char per byte): its text, or undefined when not UTF-8. */
function decodeText(text: string): string | undefined {
  const kind = kindOf(text);
  if (kind === 0) return text;
  if (kind === 1) {
    try {
      return decodeURIComponent(text.replace(/\+/g, ' '));
    } catch {
      // a % without two hex digits, or bytes that are not UTF-8: the byte path says which
    }
  }
  const bytes = Buffer.from(text, 'latin1');
  return decodeComponent(bytes, 0, bytes.length);
}

/**
 * Parse a query string (as the URL carried it: each char one byte, as Node reads a request line)
 * or a form body (its bytes).
 */
export function parseUrlEncoded(input: string | Uint8Array): UrlEncoded {
  const text = typeof input === 'string' ? input : Buffer.from(input).toString('latin1');
  const parsed = new UrlEncoded();
  for (const part of text.split('&')) {
    if (part === '') continue;
    const eq = part.indexOf('=');
    const rawKey = eq < 0 ? part : part.slice(0, eq);
    const key = decodeText(rawKey);
    const value = eq < 0 ? '' : decodeText(part.slice(eq + 1));
    if (key === undefined)
      parsed.problems.push(`${lossy.decode(Buffer.from(rawKey, 'latin1'))}: invalid UTF-8 in a field name`);
    else if (FORBIDDEN_FIELDS.has(key)) parsed.problems.push(`${key}: field name not allowed`);
    else if (value === undefined)
      parsed.problems.push(`${key}: invalid UTF-8 (percent-encode the UTF-8 bytes of the text)`);
    else {
      const values = parsed.fields.get(key);
      if (values) values.push(value);
      else parsed.fields.set(key, [value]);
    }
  }
  return parsed;
}

/**
 * Parse a JSON body (its bytes): undefined when empty. Throws BadRequest naming the field for
 * bytes that are not UTF-8, a forbidden field name or a string that is not well-formed Unicode;
 * a SyntaxError for what is not JSON.
 */
export function parseJsonBody(bytes: Uint8Array): unknown {
  if (bytes.length === 0) return undefined;
  let text: string;
  try {
    text = utf8.decode(bytes);
  } catch {
    throw new BadRequest(invalidUtf8Fields(bytes));
  }
  // (what it says of invalid JSON is dropped: JSON.parse throws first)
  const shape = jsonShape(text, { keys: true });
  if (shape.deepAt >= 0) throw new BadRequest([`body: nested deeper than ${MAX_JSON_DEPTH} levels`]);
  const problems: string[] = [];
  const value: unknown = JSON.parse(text, function (this: unknown, key: string, v: unknown) {
    if (FORBIDDEN_FIELDS.has(key) && !Array.isArray(this)) problems.push(`body.${key}: field name not allowed`);
    return v;
  });
  if (shape.repeated !== undefined) problems.push(`${formatPath(['body', ...shape.repeated])}: given twice`);
  problems.push(...illFormed(value, 'body'));
  if (problems.length > 0) throw new BadRequest([...new Set(problems)]);
  return value;
}

/** In u-mode a surrogate pair is one code point: only a lone surrogate is of category Cs. */
const LONE_SURROGATE = /\p{Cs}/u;

/** The strings of a parsed JSON value that are not well-formed Unicode (lone surrogates), located. */
function illFormed(v: unknown, at: string): string[] {
  if (typeof v === 'string')
    return LONE_SURROGATE.test(v) ? [`${at}: not well-formed Unicode (a lone surrogate has no UTF-8 bytes)`] : [];
  if (Array.isArray(v)) return v.flatMap((x, i) => illFormed(x, `${at}[${i}]`));
  if (typeof v === 'object' && v !== null) return Object.entries(v).flatMap(([k, x]) => illFormed(x, `${at}.${k}`));
  return [];
}

/** The fields of a JSON body that is not UTF-8, named where the lossy reading lets us find them. */
function invalidUtf8Fields(bytes: Uint8Array): string[] {
  const what = 'invalid UTF-8 (ids are UTF-8 text)';
  try {
    const v = JSON.parse(lossy.decode(bytes)) as unknown;
    if (typeof v === 'object' && v !== null && !Array.isArray(v)) {
      const named = Object.entries(v)
        .filter(([, x]) => JSON.stringify(x).includes('\ufffd'))
        .map(([k]) => `body.${k}: ${what}`);
      if (named.length > 0) return named;
    }
  } catch {
    // not JSON either way: say where in general
  }
  return [`body: ${what}`];
}
