/**
 * Call-trace reader: the contract's "Call trace" CSV, streamed row by row.
 *
 * - Header row, columns by name in any order; unknown columns are ignored. `time`, `call_id`
 *   and `direction` are required columns; `peer` is required on `in` rows, the `route` column
 *   with `out` rows (an empty route cell is a call naming no carrier, rejected as
 *   all-routes-congested); `account` is optional (an empty cell means no account); `duration`
 *   is optional (an empty cell means the call's end was never reported).
 * - Blank lines (empty or whitespace only) and lines whose first character is `#` are skipped.
 *   A `#` anywhere else is data: peer ids may contain it.
 * - A UTF-8 BOM, CRLF or LF line endings (mixed too) and a last line without a newline are fine.
 * - Cells are kept exactly as the CSV gives them (quoted cells may hold commas, quotes, braces,
 *   colons, spaces, even line breaks). Only `time` and `direction` are trimmed, and the carrier
 *   ids of a route (split on `|`, trimmed, empty parts dropped). An id cell that is empty or
 *   whitespace only counts as missing.
 * - Line numbers are physical lines of the file (1-based), of the line where the row starts.
 *
 * Memory stays flat: csv-parse parses with backpressure and nothing is kept per row (an unsorted
 * trace is sorted in bounded runs: time-order.ts).
 */
import { idProblem } from '../ids.js';
import { isUtf8 } from 'node:buffer';
import { createReadStream, statSync, type Stats } from 'node:fs';
import { nonUtf8Lines } from '../utf8-lines.js';
import { Readable, Transform, addAbortSignal, pipeline, type TransformCallback } from 'node:stream';
import { parse, type CsvError, type Options as CsvOptions, type Parser } from 'csv-parse';
import { DateTime, FixedOffsetZone } from 'luxon';
import { parseDuration, TOO_LONG } from '../config/duration.js';
import { TraceError, type TraceProblem } from '../errors/trace-error.js';

// ---------------------------------------------------------------------------------------------
// Time

const ISO_RE =
  /^(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?(?:([Zz])|([+-])(\d{2})(?::?(\d{2}))?)$/;
const EPOCH_RE = /^(\d+)(?:\.(\d{1,9}))?$/;

/** A fraction of a second (1 to 9 digits) as integer microseconds; digits beyond 6 are truncated. */
function fractionUs(digits: string | undefined): number {
  if (digits === undefined) return 0;
  return Number(`${digits}00000`.slice(0, 6));
}

/** Midnight of a date at a fixed offset, in ms since the epoch, validated by luxon; cached. */
const dayCache = new Map<string, number | undefined>();

function dayStartMs(
  year: string,
  month: string,
  day: string,
  sign: string,
  offH: string | undefined,
  offM: string | undefined,
): number | undefined {
  const key = `${year}-${month}-${day}${sign}${offH ?? ''}:${offM ?? ''}`;
  if (dayCache.has(key)) return dayCache.get(key);
  let result: number | undefined;
  const hh = sign === '' ? 0 : Number(offH);
  const mm = sign === '' || offM === undefined ? 0 : Number(offM);
  if (hh <= 23 && mm <= 59) {
    const offsetMinutes = (sign === '-' ? -1 : 1) * (hh * 60 + mm);
    const dt = DateTime.fromObject(
      { year: Number(year), month: Number(month), day: Number(day), hour: 0, minute: 0, second: 0, millisecond: 0 },
      { zone: FixedOffsetZone.instance(offsetMinutes) },
    );
    if (dt.isValid) result = dt.toMillis();
  }
  if (dayCache.size >= 4096) dayCache.clear();
  dayCache.set(key, result);
  return result;
}

/**
 * A trace timestamp as integer microseconds since the epoch, exactly (no float rounding), or
 * undefined when the text is not a valid timestamp.
 *
 * - ISO-8601 with a zone: `2018-08-28T12:20:25.374375Z`, `…+02:00`, `…+0200`, `…+02`;
 *   fraction of 0 to 9 digits (digits beyond the 6th are truncated); `T`, `t` or a space
 *   between date and time. The calendar date, the time of day and the offset are validated
 *   (no 24:00, no leap second 60, offset up to ±23:59).
 * - Epoch seconds: `1535458825`, `1535458825.374375` (0 to 9 fraction digits, truncated to µs).
 *
 * Rejected: no zone, negative times (before 1970), anything beyond Number.MAX_SAFE_INTEGER µs
 * (after the year 2255; catches epoch milliseconds given as seconds), signs, exponents, garbage.
 * Surrounding whitespace is not accepted here; the trace reader trims the cell first.
 */
export function parseTime(text: string): number | undefined {
  let us: number;
  const e = EPOCH_RE.exec(text);
  if (e) {
    const secs = Number(e[1]);
    us = secs * 1_000_000 + fractionUs(e[2]);
  } else {
    const m = ISO_RE.exec(text);
    if (!m) return undefined;
    const hour = Number(m[4]);
    const minute = Number(m[5]);
    const second = Number(m[6]);
    if (hour > 23 || minute > 59 || second > 59) return undefined; // no 24:00, no leap second
    const dayMs = dayStartMs(m[1]!, m[2]!, m[3]!, m[8] === undefined ? m[9]! : '', m[10], m[11]);
    if (dayMs === undefined) return undefined;
    // A fixed offset has no DST: the time of day adds up exactly.
    us = (dayMs + ((hour * 60 + minute) * 60 + second) * 1000) * 1000 + fractionUs(m[7]);
  }
  if (!Number.isSafeInteger(us) || us < 0) return undefined;
  return us;
}

/**
 * Why a time that parseTime refused is not one, where a common mistake explains it (with a space
 * before it), else ''.
 */
function timeHint(text: string): string {
  if (/^\d{11,}(\.\d*)?$/.test(text))
    return ' (epoch milliseconds or finer? a time in epoch form is seconds, with a fraction: 1535458825.374375)';
  if (/^\d+,\d+$/.test(text)) return ' (a decimal comma: write seconds with a point)';
  if (/^\d+\.\d{10,}$/.test(text)) return ' (at most 9 digits after the point)';
  // well formed, refused for its range alone
  if (EPOCH_RE.test(text)) return LATEST_HINT;
  const iso = /^(\d{4})-\d{2}-\d{2}[Tt ](\d{2}):(\d{2})(:(\d{2})([.,]\d+)?)?(.*)$/.exec(text);
  if (iso === null) return '';
  if (iso[7] === '') return ' (no zone: add Z or an offset such as +02:00)';
  if (Number(iso[1]) < 1970) return ' (before 1970)';
  if (Number(iso[2]) > 23 || Number(iso[3]) > 59 || Number(iso[5] ?? 0) > 59)
    return ' (no 24:00 and no leap second: a time of day is 00:00:00 to 23:59:59.999999)';
  const offset = /^[+-](\d{2})(?::?(\d{2}))?$/.exec(iso[7]!);
  if (offset !== null && (Number(offset[1]) > 23 || Number(offset[2] ?? 0) > 59))
    return ' (an offset is at most ±23:59)';
  // a valid calendar date past the bound (2255-02-30 is no date: no hint)
  const m = ISO_RE.exec(text);
  if (
    m !== null &&
    Number(m[1]) >= 2255 &&
    dayStartMs(m[1]!, m[2]!, m[3]!, m[8] === undefined ? m[9]! : '', m[10], m[11]) !== undefined
  )
    return LATEST_HINT;
  return '';
}

/** The latest time parseTime takes: Number.MAX_SAFE_INTEGER µs, in words. */
const LATEST_HINT = ' (after 2255-06-05T23:47:34.740991Z, the latest time counted to the µs)';

const SECONDS_RE = /^(\d+)(?:\.(\d{1,9}))?$/;

/**
 * A call's duration as integer microseconds, or undefined when the text is not one: seconds with
 * an optional fraction (`93.5`; digits beyond the 6th truncated, as for times) or an ISO-8601
 * duration (`PT1M33.5S`, exact; see config/duration.ts). No sign, no unit suffix (`1m` would read
 * as minutes or metres), nothing beyond Number.MAX_SAFE_INTEGER µs.
 */
export function parseCallDuration(text: string): number | undefined {
  const m = SECONDS_RE.exec(text);
  if (m) {
    const us = Number(m[1]) * 1_000_000 + fractionUs(m[2]);
    return Number.isSafeInteger(us) ? us : undefined;
  }
  if (!text.startsWith('P')) return undefined;
  const r = parseDuration(text);
  return r.ok ? r.us : undefined;
}

/** The longest duration a trace takes (Number.MAX_SAFE_INTEGER µs), in words. */
const LONGEST_DURATION = 'at most 9007199254.740991 s (P104249DT23H47M34.740991S, about 285 years)';

/** Why a duration cell that parseCallDuration refused is not one. */
export function callDurationProblem(text: string): string {
  const iso = text.startsWith('P') ? parseDuration(text) : undefined;
  const reason = iso?.ok === false ? iso.reason : undefined;
  // a well-formed duration only too long: say the bound, not the forms it already has
  if (SECONDS_RE.test(text) || reason === TOO_LONG)
    return `duration ${show(text)} is longer than a trace takes: ${LONGEST_DURATION}`;
  return `bad duration ${show(text)}${reason ? `: ${reason}` : ''} (seconds such as 93.5, or ISO-8601 such as PT1M33.5S)`;
}

/** Microseconds since the epoch as ISO-8601 UTC with six fraction digits (exact; for reports). */
export function formatTime(us: number): string {
  if (!Number.isSafeInteger(us) || us < 0) throw new RangeError(`not a trace time: ${us}`);
  const secs = Math.floor(us / 1_000_000);
  const frac = us - secs * 1_000_000;
  const iso = DateTime.fromMillis(secs * 1000, { zone: 'utc' }).toFormat("yyyy-MM-dd'T'HH:mm:ss");
  return `${iso}.${String(frac).padStart(6, '0')}Z`;
}

// ---------------------------------------------------------------------------------------------
// Rows and problems

export type Direction = 'in' | 'out';

export interface TraceCall {
  /** Physical line (1-based) where the row starts. */
  line: number;
  /** Integer microseconds since the epoch. */
  time: number;
  callId: string;
  direction: Direction;
  /** Required on `in` rows; kept when given on `out` rows. */
  peer?: string;
  /** Absent when the cell is missing or empty. */
  account?: string;
  /** Required on `out` rows (at least one carrier id); kept when given on `in` rows. */
  route?: string[];
  /** How long the call lasted once it began, µs; absent when its end was never reported. */
  durationUs?: number;
  /** Attribute levels (docs/attributes.md): absent when the cell is missing or empty. */
  caller?: string;
  callee?: string;
  source?: string;
}

export interface ReadTraceOptions {
  /**
   * Called for every problem; the faulty row is skipped and reading goes on (after a CSV syntax
   * error, a missing header column or an unreadable file nothing more can be read). Without it,
   * the first problem throws a TraceError.
   */
  onProblem?: (problem: TraceProblem) => void;
  /** Stops reading: the reader then throws the signal's reason (at the latest at the next row). */
  signal?: AbortSignal;
  /** Told the header's column names (trimmed, in file order) once it is read, before any row. */
  onHeader?: (columns: readonly string[]) => void;
}

export const REQUIRED_COLUMNS = ['time', 'call_id', 'direction'] as const;
export const KNOWN_COLUMNS = [
  'time',
  'call_id',
  'direction',
  'peer',
  'account',
  'route',
  'duration',
  'caller',
  'callee',
  'source',
] as const;
type Known = (typeof KNOWN_COLUMNS)[number];

const MAX_SHOWN = 80;
function show(value: string): string {
  return JSON.stringify(value.length > MAX_SHOWN ? `${value.slice(0, MAX_SHOWN)}…` : value);
}

function countNewlines(s: string): number {
  let n = 0;
  for (let i = s.indexOf('\n'); i !== -1; i = s.indexOf('\n', i + 1)) n++;
  return n;
}

const BOM = Buffer.from([0xef, 0xbb, 0xbf]);

/**
 * Passes the bytes on as they are and notes the lines (1-based) that are not UTF-8. The CSV
 * reader decodes lossily: `c\xff` and `c\xfe` would both read `c\ufffd`, two call ids made one.
 * A chunk is checked up to its last '\n' (never inside a UTF-8 sequence), the rest with the next
 * one (src/utf8-lines.ts).
 */
class Utf8Lines extends Transform {
  readonly badLines = new Set<number>();
  /** Lines before `rest`. */
  private line = 1;
  /** The bytes of the line under way (no '\n' yet), in chunks. */
  private rest: Buffer[] = [];
  private restBytes = 0;

  /** Whether the file's first bytes were looked at (a UTF-16 byte-order mark). */
  private started = false;

  override _transform(chunk: Buffer | string, _enc: BufferEncoding, cb: TransformCallback): void {
    const buf = typeof chunk === 'string' ? Buffer.from(chunk, 'utf8') : chunk;
    if (!this.started && buf.length >= 2) {
      this.started = true;
      // csv-parse would decode UTF-16 LE behind its mark, but not its comment lines, nor BE
      if ((buf[0] === 0xff && buf[1] === 0xfe) || (buf[0] === 0xfe && buf[1] === 0xff)) {
        cb(new Error('it is UTF-16 (a UTF-16 byte-order mark starts it): save it as UTF-8'));
        return;
      }
    }
    const nl = buf.lastIndexOf(10);
    if (nl === -1) {
      this.rest.push(buf);
      this.restBytes += buf.length;
      // a line with no end in sight (CR line endings: one line; the reader refuses its record
      // past MAX_ROW_CHARS): checked as it grows, not gathered whole
      if (this.restBytes > 4 * MAX_ROW_CHARS) this.checkLongLine();
    } else {
      this.rest.push(buf.subarray(0, nl + 1));
      this.check(this.rest.length === 1 ? this.rest[0]! : Buffer.concat(this.rest));
      this.rest = nl + 1 < buf.length ? [buf.subarray(nl + 1)] : [];
      this.restBytes = buf.length - nl - 1;
    }
    cb(null, buf);
  }

  override _flush(cb: TransformCallback): void {
    if (this.rest.length > 0) this.check(Buffer.concat(this.rest));
    cb();
  }

  /** The line under way, but for its last UTF-8 sequence (it may go on in the next chunk). */
  private checkLongLine(): void {
    const all = Buffer.concat(this.rest);
    let cut = all.length;
    while (cut > 0 && cut > all.length - 4 && (all[cut - 1]! & 0xc0) === 0x80) cut--;
    if (cut > 0 && all[cut - 1]! >= 0xc0) cut--; // the lead byte of that sequence
    if (!isUtf8(all.subarray(0, cut))) this.badLines.add(this.line);
    this.rest = [all.subarray(cut)];
    this.restBytes = all.length - cut;
  }

  /** Whole lines (the last one may lack its '\n' at the end of the input). */
  private check(part: Buffer): void {
    const { bad, breaks } = nonUtf8Lines(part);
    for (const i of bad) this.badLines.add(this.line + i);
    this.line += breaks;
  }
}

/**
 * Blanks out comment lines before csv-parse sees them: a line whose first byte is `#` (outside
 * a quoted cell; after a BOM on the first line) loses everything up to its `\n`, which stays.
 * csv-parse then gives one record per physical line (an empty one for blank and comment lines),
 * so the reader can number lines by counting records and the line breaks inside quoted cells.
 * (csv-parse's own `comment` option would drop those lines silently, and its line counter
 * counts a CRLF inside a quoted cell twice; per-record `info` costs more than the parsing.)
 *
 * Quoted cells are followed by quote parity, which matches csv-parse on well-formed CSV; on
 * malformed CSV csv-parse fails and nothing after the failure is used.
 */
class CommentBlanker extends Transform {
  /**
   * A comment line held a carriage return not followed by LF: lines ending in CR alone (an old
   * Mac export), where a first `#` line runs to the end of the file and hides every row.
   */
  loneCrInComment = false;
  private inQuote = false;
  private atLineStart = true;
  private inComment = false;
  private first = true;
  private pending: Buffer | undefined;

  override _flush(cb: TransformCallback): void {
    cb(null, this.pending);
  }

  override _transform(chunk: Buffer | string, _enc: BufferEncoding, cb: TransformCallback): void {
    let buf = typeof chunk === 'string' ? Buffer.from(chunk, 'utf8') : chunk;
    let pos = 0;
    if (this.first) {
      // A BOM (EF BB BF) may arrive split over chunks: hold its first bytes until it is whole.
      if (this.pending !== undefined) buf = Buffer.concat([this.pending, buf]);
      this.pending = undefined;
      if (buf.length < 3 && BOM.subarray(0, buf.length).equals(buf)) {
        this.pending = buf;
        cb();
        return;
      }
      this.first = false;
      if (buf.subarray(0, 3).equals(BOM)) pos = 3;
    }
    const len = buf.length;
    let keepFrom = 0; // start of the bytes not yet copied to `parts`
    let parts: Buffer[] | undefined;
    // Position of the next '"' at or after `from`, cached: searching again for every line
    // would scan the rest of the chunk each time when the chunk holds no quote.
    let q = -2;
    const nextQuote = (from: number): number => {
      if (q === -2 || (q !== -1 && q < from)) q = buf.indexOf(34, from);
      return q;
    };
    while (pos < len) {
      if (this.inComment) {
        const nl = buf.indexOf(10, pos);
        const stop = nl === -1 ? len : nl;
        const cr = buf.indexOf(13, pos);
        // (a CR ending the chunk may have its LF in the next one)
        if (cr !== -1 && cr + 1 < stop) this.loneCrInComment = true;
        (parts ??= []).push(buf.subarray(keepFrom, pos));
        keepFrom = stop;
        pos = stop;
        if (nl !== -1) this.inComment = false; // the '\n' itself is kept, handled below
        continue;
      }
      if (this.inQuote) {
        const q = nextQuote(pos);
        if (q === -1) {
          pos = len;
          break;
        }
        this.inQuote = false;
        this.atLineStart = false;
        pos = q + 1;
        continue;
      }
      if (this.atLineStart && buf[pos] === 35 /* # */) {
        this.inComment = true;
        continue;
      }
      const nl = buf.indexOf(10, pos);
      const q = nextQuote(pos);
      if (q !== -1 && (nl === -1 || q < nl)) {
        this.inQuote = true;
        this.atLineStart = false;
        pos = q + 1;
      } else if (nl !== -1) {
        this.atLineStart = true;
        pos = nl + 1;
      } else {
        this.atLineStart = false;
        pos = len;
      }
    }
    if (parts === undefined) {
      cb(null, buf);
      return;
    }
    if (!this.inComment) parts.push(buf.subarray(keepFrom));
    cb(null, Buffer.concat(parts));
  }
}

interface Row {
  cells: string[];
  line: number;
}

/**
 * csv-parse's error in the trace's words: the column by its header name (csv-parse counts fields
 * from 0, and names none without its `columns` option), or its place from 1 before the header.
 */
function describeCsvError(err: Error, names?: readonly string[]): string {
  const { code, column } = err as CsvError & { column?: unknown };
  const where =
    typeof column !== 'number'
      ? ''
      : names?.[column]
        ? ` in column ${JSON.stringify(names[column])}`
        : ` in cell ${column + 1} of the row`;
  switch (code) {
    case 'CSV_QUOTE_NOT_CLOSED':
      return 'malformed CSV: a quoted cell is never closed';
    case 'CSV_INVALID_CLOSING_QUOTE':
      return `malformed CSV${where}: characters after the closing quote of a cell`;
    case 'INVALID_OPENING_QUOTE':
      return `malformed CSV${where}: a quote inside a cell that does not begin with one (quote the whole cell and double the quotes in it, as in "Acme ""East""", with no space before the opening quote)`;
    case 'CSV_MAX_RECORD_SIZE':
      return 'malformed CSV: row too long (an unclosed quote?)';
    default:
      return `malformed CSV: ${err.message.replace(/ (at|on) line \d+/g, '')}`;
  }
}

/** Longest row accepted (characters): guards against an unclosed quote swallowing the file. */
const MAX_ROW_CHARS = 1 << 20;

/**
 * The core: rows of one input, decoded, problems passed to `report` (which may throw).
 * Fatal problems (CSV syntax, header, unreadable input) end the generator after reporting.
 */
async function* decodeStream(
  input: Readable,
  file: string,
  report: (p: TraceProblem) => void,
  signal?: AbortSignal,
  onHeader?: (columns: readonly string[]) => void,
): AsyncGenerator<TraceCall> {
  let thrownByReport: unknown;
  const rep = (p: TraceProblem): void => {
    try {
      report(p);
    } catch (err) {
      thrownByReport = err;
      throw err;
    }
  };
  // The first CSV syntax error, and how many records csv-parse had emitted before it.
  let fatal: { err: Error; after: number } | undefined;
  let parser: Parser;
  const options: CsvOptions = {
    bom: true,
    skip_empty_lines: false, // one record per line keeps the line count (blank lines skipped below)
    relax_column_count: true, // counted here, to keep going past a short row
    record_delimiter: ['\r\n', '\n'],
    max_record_size: MAX_ROW_CHARS,
    skip_records_with_error: true, // so that the records before the error still come out
    on_skip: (err: CsvError | undefined) => {
      if (fatal === undefined && err !== undefined) fatal = { err, after: parser.info.records };
      return undefined;
    },
  };
  parser = parse(options);
  if (signal) addAbortSignal(signal, input); // an abort also ends a read that waits (a FIFO)
  const utf8 = new Utf8Lines();
  // pipeline forwards an error of any stage (ENOENT, EISDIR…) to the parser, failing the loop.
  const blanker = new CommentBlanker();
  pipeline(input, utf8, blanker, parser, () => undefined);

  let cols: Partial<Record<Known, number>> | undefined;
  let names: string[] | undefined;
  let width = 0;
  let line = 1; // line where the next record starts
  let consumed = 0;
  try {
    for await (const cells of parser as AsyncIterable<string[]>) {
      signal?.throwIfAborted();
      if (fatal !== undefined && consumed >= fatal.after) break; // records after the error: garbage
      consumed++;
      const row: Row = { cells, line };
      for (const c of cells) line += countNewlines(c);
      line++;
      // a blank, whitespace or comment line, or a row of empty cells (`,,,`: a spreadsheet's
      // export of rows it once held)
      if (cells.every((c) => c.trim() === '')) continue;
      if (cols === undefined) {
        const header = readHeader(row, file);
        if ('problems' in header) {
          for (const p of header.problems) rep(p);
          return;
        }
        cols = header.cols;
        names = cells.map((c) => c.trim());
        width = cells.length;
        onHeader?.(names);
        continue;
      }
      const call = decodeRow(row, cols, width, file, rep, utf8.badLines);
      if (call !== undefined) yield call;
    }
  } catch (err) {
    if (thrownByReport !== undefined && err === thrownByReport) throw err; // from report / onProblem
    if (signal?.aborted) throw signal.reason;
    const e = err as NodeJS.ErrnoException;
    rep({ file, line: 0, message: `cannot read the trace: ${e.message}` });
    return;
  } finally {
    parser.destroy();
    input.destroy();
  }
  if (fatal !== undefined) rep({ file, line, message: describeCsvError(fatal.err, names) });
  else if (cols === undefined && blanker.loneCrInComment)
    rep({
      file,
      line: 1,
      message:
        'no header row: a comment line holds a carriage return, so the file reads as one comment line: lines must end in LF or CRLF, not CR alone (convert the file)',
    });
  else if (cols === undefined)
    rep({ file, line: 1, message: 'no header row (the trace is empty, or only blank and comment lines)' });
}

function readHeader(row: Row, file: string): { cols: Partial<Record<Known, number>> } | { problems: TraceProblem[] } {
  const cols: Partial<Record<Known, number>> = {};
  const problems: TraceProblem[] = [];
  // a carriage return in the header row: lines that end in CR alone (an old Mac export), which
  // would read as one header row and no call at all
  if (row.cells.some((c) => c.includes('\r')))
    return {
      problems: [
        {
          file,
          line: row.line,
          message:
            'the header row holds a carriage return: lines must end in LF or CRLF, not CR alone (convert the file)',
        },
      ],
    };
  row.cells.forEach((cell, i) => {
    const name = cell.trim();
    if (!(KNOWN_COLUMNS as readonly string[]).includes(name)) return;
    if (cols[name as Known] !== undefined) {
      problems.push({ file, line: row.line, column: name, message: 'duplicate column in the header' });
      return;
    }
    cols[name as Known] = i;
  });
  for (const name of REQUIRED_COLUMNS) {
    if (cols[name] === undefined) {
      // a header written in another case (`Time`, `CALL_ID`): say what was there
      const near = row.cells.find((c) => c.trim().toLowerCase() === name);
      const hint = near === undefined ? '' : ` (found ${JSON.stringify(near.trim())}: column names are lower case)`;
      problems.push({ file, line: row.line, column: name, message: `missing from the header${hint}` });
    }
  }
  return problems.length > 0 ? { problems } : { cols };
}

function decodeRow(
  row: Row,
  cols: Partial<Record<Known, number>>,
  width: number,
  file: string,
  report: (p: TraceProblem) => void,
  badLines: ReadonlySet<number>,
): TraceCall | undefined {
  const { cells, line } = row;
  if (cells.length !== width) {
    // a line ending in CR alone inside a CRLF file (pasted from an old Mac export) joins two rows
    const cr = cells.some((c) => c.includes('\r'))
      ? ': the row holds a carriage return not followed by LF, so two lines read as one: lines must end in LF or CRLF, not CR alone'
      : '';
    report({ file, line, message: `expected ${width} cells as in the header, found ${cells.length}${cr}` });
    return undefined;
  }
  const cell = (name: Known): string | undefined => {
    const i = cols[name];
    return i === undefined ? undefined : cells[i];
  };
  let ok = true;
  const bad = (column: string, message: string): void => {
    ok = false;
    report({ file, line, column, message });
  };

  // bytes that are not UTF-8, in a column read here (a note column may hold any bytes)
  if (badLines.size > 0) {
    let last = line;
    for (const c of cells) last += countNewlines(c);
    let notUtf8 = false;
    for (let l = line; l <= last && !notUtf8; l++) notUtf8 = badLines.has(l);
    if (notUtf8)
      for (const name of KNOWN_COLUMNS)
        if (cell(name)?.includes('\ufffd'))
          bad(name, 'not UTF-8 (a trace is UTF-8 text: ids are kept exactly as written)');
  }

  const timeText = cell('time')!.trim();
  const time = parseTime(timeText);
  if (timeText === '') bad('time', 'missing time');
  else if (time === undefined) bad('time', `bad time ${show(timeText)}${timeHint(timeText)}`);

  const callId = cell('call_id')!;
  if (callId.trim() === '') bad('call_id', 'missing call id');

  const dirText = cell('direction')!.trim();
  let direction: Direction | undefined;
  if (dirText === 'in' || dirText === 'out') direction = dirText;
  else if (dirText === '') bad('direction', 'missing direction');
  else bad('direction', `unknown direction ${show(dirText)} (expected "in" or "out")`);

  const peerText = cell('peer');
  const peer = peerText !== undefined && peerText.trim() !== '' ? peerText : undefined;
  const accountText = cell('account');
  const account = accountText !== undefined && accountText.trim() !== '' ? accountText : undefined;
  const routeText = cell('route');
  let route: string[] | undefined;
  if (routeText !== undefined) {
    const parts = routeText
      .split('|')
      .map((s) => s.trim())
      .filter((s) => s !== '');
    // an empty cell (or separators only) on an "out" row is a call that names no carrier: it is
    // decided, rejected as all-routes-congested, as one whose carriers are none configured (and as
    // the library decides route: []), never a problem that stops the whole replay
    if (parts.length > 0 || direction === 'out') route = parts;
  }

  const durationText = cell('duration')?.trim() ?? '';
  const durationUs = durationText === '' ? undefined : parseCallDuration(durationText);
  if (durationText !== '' && durationUs === undefined) {
    bad('duration', callDurationProblem(durationText));
  }

  // attribute levels' values (docs/attributes.md): absent when the cell is missing or empty
  const attributes: [name: 'caller' | 'callee' | 'source', value: string][] = [];
  for (const name of ['caller', 'callee', 'source'] as const) {
    const v = cell(name)?.trim();
    if (v !== undefined && v !== '') attributes.push([name, v]);
  }

  // the bound of every entry point (ids.ts): a trace replays only what the engine would take
  for (const [column, id] of [
    ['call_id', callId],
    ['peer', peer],
    ['account', account],
    ...(route ?? []).map((c) => ['route', c]),
    ...attributes,
  ] as const) {
    const problem = id === undefined || id === '' ? undefined : idProblem(id);
    if (problem !== undefined)
      bad(column, `${column === 'route' ? `carrier ${show(id!.slice(0, 40))}` : 'id'} ${problem}`);
  }
  if (direction === 'in' && peer === undefined) bad('peer', 'missing peer (required on "in" rows)');
  if (direction === 'out' && route === undefined) bad('route', 'no route column (required with "out" rows)');
  if (!ok) return undefined;

  const call: TraceCall = { line, time: time!, callId, direction: direction! };
  if (peer !== undefined) call.peer = peer;
  if (account !== undefined) call.account = account;
  if (route !== undefined) call.route = route;
  if (durationUs !== undefined) call.durationUs = durationUs;
  for (const [name, v] of attributes) call[name] = v;
  return call;
}

// ---------------------------------------------------------------------------------------------
// Public readers

function reporter(opts: ReadTraceOptions | undefined): (p: TraceProblem) => void {
  const on = opts?.onProblem;
  if (on) return on;
  return (p) => {
    throw new TraceError([p]);
  };
}

/**
 * Streams the rows of a trace in file order (not sorted: see validateTrace, and time-order.ts for the sort).
 * Without `onProblem`, the first problem throws a TraceError.
 */
/**
 * A trace read twice (a replay checks it, then replays it; merge-traces looks for its columns,
 * then merges it) must be a regular file: a FIFO or a device gives its data once, and waits for
 * a writer before that. `why` says who reads it twice. A missing file is left to the reader,
 * which names the reason.
 */
export function refuseUnreadableTwice(path: string, why: string): void {
  let stats: Stats;
  try {
    stats = statSync(path);
  } catch {
    return;
  }
  if (stats.isFile()) return;
  const what = stats.isDirectory()
    ? 'it is a directory'
    : `it is ${stats.isFIFO() ? 'a FIFO' : 'not a regular file'}, and ${why}`;
  throw new TraceError([{ file: path, line: 0, message: `cannot read the trace: ${what}` }]);
}

export function readTrace(path: string, opts?: ReadTraceOptions): AsyncGenerator<TraceCall> {
  return decodeStream(createReadStream(path), path, reporter(opts), opts?.signal, opts?.onHeader);
}

/**
 * Like readTrace, from any byte or string stream (`file` names it in problems), e.g.
 * `readTraceFrom(Readable.from([csvText]), 'inline')`.
 */
export function readTraceFrom(
  input: Readable | Iterable<string | Buffer> | AsyncIterable<string | Buffer>,
  file: string,
  opts?: ReadTraceOptions,
): AsyncGenerator<TraceCall> {
  const stream = input instanceof Readable ? input : Readable.from(input, { objectMode: false });
  return decodeStream(stream, file, reporter(opts), opts?.signal, opts?.onHeader);
}

export interface TraceValidation {
  /** The problems found, in file order (at most `maxProblems`). */
  problems: TraceProblem[];
  /** Every problem found, including those beyond `maxProblems`. */
  problemCount: number;
  /** Rows without problems. */
  calls: number;
  /** True when the times of the good rows never decrease in file order. */
  sorted: boolean;
  /** Time range of the good rows (µs), absent when there are none. */
  first?: number;
  last?: number;
}

/** One streaming pass over the trace: problems, number of good rows, and whether they are sorted. */
export async function validateTrace(
  path: string,
  opts?: { maxProblems?: number; signal?: AbortSignal; onCall?: (call: TraceCall) => void },
): Promise<TraceValidation> {
  return validateCalls(readTrace, path, opts?.maxProblems, opts?.signal, opts?.onCall);
}

/** validateTrace over a stream (see readTraceFrom). */
export async function validateTraceFrom(
  input: Readable | Iterable<string | Buffer> | AsyncIterable<string | Buffer>,
  file: string,
  opts?: { maxProblems?: number; signal?: AbortSignal },
): Promise<TraceValidation> {
  return validateCalls((_f, o) => readTraceFrom(input, file, o), file, opts?.maxProblems, opts?.signal);
}

async function validateCalls(
  read: (path: string, opts: ReadTraceOptions) => AsyncGenerator<TraceCall>,
  path: string,
  maxProblems = 1000,
  signal?: AbortSignal,
  onCall?: (call: TraceCall) => void,
): Promise<TraceValidation> {
  const problems: TraceProblem[] = [];
  let problemCount = 0;
  let calls = 0;
  let sorted = true;
  let first: number | undefined;
  let last: number | undefined;
  const onProblem = (p: TraceProblem): void => {
    problemCount++;
    if (problems.length < maxProblems) problems.push(p);
  };
  for await (const call of read(path, { onProblem, signal })) {
    calls++;
    onCall?.(call);
    if (last !== undefined && call.time < last) sorted = false;
    if (first === undefined || call.time < first) first = call.time;
    if (last === undefined || call.time > last) last = call.time;
  }
  const result: TraceValidation = { problems, problemCount, calls, sorted };
  if (first !== undefined) {
    result.first = first;
    result.last = last!;
  }
  return result;
}
