/**
 * The bytes of a request body are read as sent, as UTF-8 text (fields.ts), or not at all.
 *
 * fastify picks a body parser by the media type alone (`application/json; charset=latin1` gets
 * the `application/json` parser, the charset unread) and decodes no content coding: a body
 * declared latin1 was read as UTF-8 all the same (a latin1 `Ã©` became the id `é`, another call,
 * another peer), and a gzip body was a puzzling `invalid UTF-8` error. A body declared in another
 * charset, or sent with a content coding other than `identity`, is refused whole: a 415 naming
 * what came and what the sidecar reads. The project decodes no content coding anywhere.
 */
import type { IncomingHttpHeaders } from 'node:http';

/** A body the sidecar does not read as sent: every problem, each naming what came. */
export class UnsupportedBody extends Error {
  constructor(
    readonly problems: readonly string[],
    /** A content coding among them: the answer says `Accept-Encoding: identity` (RFC 9110 15.5.16). */
    readonly coding: boolean,
  ) {
    super(problems.join('; '));
  }
}

/** The labels of UTF-8 (any case): the IANA name, and `utf8`, which many clients write. */
const UTF8 = new Set(['utf-8', 'utf8']);

/**
 * Charsets that write ASCII as ASCII: a body of ASCII bytes alone reads the same in them as in
 * UTF-8, so one declared so is read (Java's form clients say ISO-8859-1 by default, for ids
 * that are ASCII); a byte above 0x7F (or, in a form, an escape of one) is refused.
 */
const ASCII_COMPATIBLE = new Set([
  'us-ascii',
  'ascii',
  'iso-8859-1',
  'iso8859-1',
  'latin1',
  'iso-8859-15',
  'windows-1252',
  'cp1252',
]);

/** A hex digit 8-9, A-F or a-f: the first digit of an escape of a byte above 0x7F. */
const highDigit = (b: number | undefined): boolean =>
  b !== undefined && ((b >= 0x38 && b <= 0x39) || (b >= 0x41 && b <= 0x46) || (b >= 0x61 && b <= 0x66));

/** No byte above 0x7F, and in a form no percent-escape of one (`%80` to `%FF`). */
function asciiOnly(body: Buffer, form: boolean): boolean {
  for (let i = 0; i < body.length; i++) {
    const b = body[i]!;
    if (b > 0x7f || (form && b === 0x25 && highDigit(body[i + 1]))) return false;
  }
  return true;
}

/**
 * Each parameter of a media type (RFC 9110 5.6.6): `;` then `name=value`, the value a token or
 * a quoted string (so a `;` inside quotes does not start a parameter).
 */
const PARAMETER = /;\s*([!#$%&'*+.^`|~\w-]+)\s*=\s*("(?:[^"\\]|\\.)*"?|[^;]*)/g;

/** The values of every `charset` parameter of a content-type header, unquoted, in order. */
export function charsetsOf(contentType: string): string[] {
  const charsets: string[] = [];
  for (const [, name, raw] of contentType.matchAll(PARAMETER)) {
    if (name!.toLowerCase() !== 'charset') continue;
    const value = raw!.startsWith('"') ? raw!.replace(/^"|"$/g, '').replace(/\\(.)/g, '$1') : raw!.trim();
    charsets.push(value);
  }
  return charsets;
}

/** The content codings of a request (`content-encoding`, a list), lower-cased, `identity` left out. */
export function codingsOf(headers: IncomingHttpHeaders): string[] {
  const header = headers['content-encoding'];
  if (header === undefined) return [];
  return header
    .split(',')
    .map((c) => c.trim().toLowerCase())
    .filter((c) => c !== '' && c !== 'identity');
}

/**
 * Throws UnsupportedBody when the request's body is not `mediaType` as UTF-8 bytes sent as they
 * are: a charset other than UTF-8 (but an ASCII-compatible one for a body of ASCII alone), a
 * content coding other than identity (both named if both).
 */
export function checkBodyCoding(headers: IncomingHttpHeaders, mediaType: string, body: Buffer): void {
  const contentType = headers['content-type'] ?? '';
  const reads = `the sidecar reads ${mediaType} in UTF-8 (charset=utf-8 or none; an ASCII body in latin1 or us-ascii too) with no content-encoding`;
  const problems: string[] = [];
  const form = mediaType === 'application/x-www-form-urlencoded';
  const readable = (charset: string) => {
    const c = charset.toLowerCase();
    return UTF8.has(c) || (ASCII_COMPATIBLE.has(c) && asciiOnly(body, form));
  };
  if (!charsetsOf(contentType).every(readable))
    problems.push(`body: got content-type ${JSON.stringify(contentType)}; ${reads}`);
  const coding = codingsOf(headers).length > 0;
  if (coding) problems.push(`body: got content-encoding ${JSON.stringify(headers['content-encoding'])}; ${reads}`);
  if (problems.length > 0) throw new UnsupportedBody(problems, coding);
}
