/**
 * The trace reader (src/replay/trace.ts): exact times, CSV edge cases, problems with their
 * exact lines, sorted detection and stable sorting, streaming over large generated traces.
 */
import { expect } from 'chai';
import { mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { createWriteStream } from 'node:fs';
import { fileURLToPath } from 'node:url';
import {
  formatTime,
  parseCallDuration,
  parseTime,
  readTrace,
  readTraceFrom,
  validateTrace,
  validateTraceFrom,
  type TraceCall,
} from '../src/replay/trace.js';
import { TraceError, formatProblem, type TraceProblem } from '../src/errors/trace-error.js';
import { OutputError } from '../src/errors/index.js';
import { generateTrace } from '../scripts/gen-trace.js';
import { loadTraceForModel } from './reference/model.js';
import { inTimeOrder } from '../src/replay/time-order.js';

const FIXTURES = join(dirname(fileURLToPath(import.meta.url)), '..', 'fixtures');
const BASE = 1535458825374375; // 2018-08-28T12:20:25.374375Z

async function read(
  text: string | string[] | Buffer,
  file = 't.csv',
): Promise<{ calls: TraceCall[]; problems: string[] }> {
  const calls: TraceCall[] = [];
  const problems: string[] = [];
  const chunks = Array.isArray(text) ? text : [text];
  for await (const c of readTraceFrom(chunks, file, { onProblem: (p) => problems.push(formatProblem(p)) }))
    calls.push(c);
  return { calls, problems };
}

async function problemsOf(text: string | Buffer): Promise<string[]> {
  return (await read(text)).problems;
}

const H = 'time,call_id,direction,peer,account,route\n';

/** Every call of a trace file in processing order, as the replay takes an unsorted one. */
async function sortedCalls(path: string, chunkRows?: number): Promise<TraceCall[]> {
  const calls: TraceCall[] = [];
  for await (const c of inTimeOrder(readTrace(path), (x) => x.time, { chunkRows })) calls.push(c);
  return calls;
}

describe('trace reader', () => {
  describe('parseTime', () => {
    it('ISO-8601 with Z and offsets, exactly', () => {
      expect(parseTime('2018-08-28T12:20:25.374375Z')).to.equal(BASE);
      expect(parseTime('2018-08-28T14:20:25.374375+02:00')).to.equal(BASE);
      expect(parseTime('2018-08-28T14:20:25.374375+0200')).to.equal(BASE);
      expect(parseTime('2018-08-28T14:20:25.374375+02')).to.equal(BASE);
      expect(parseTime('2018-08-28T06:50:25.374375-05:30')).to.equal(BASE);
      expect(parseTime('2018-08-29T00:20:25.374375+12:00')).to.equal(BASE); // across midnight
      expect(parseTime('2018-08-28t12:20:25.374375z')).to.equal(BASE);
      expect(parseTime('2018-08-28 12:20:25.374375Z')).to.equal(BASE);
      expect(parseTime('2018-08-28T12:20:25.374375-00:00')).to.equal(BASE);
    });

    it('fractions of 0 to 9 digits; beyond 6 truncated', () => {
      const whole = BASE - 374375;
      const cases: [string, number][] = [
        ['', 0],
        ['.3', 300000],
        ['.37', 370000],
        ['.374', 374000],
        ['.3743', 374300],
        ['.37437', 374370],
        ['.374375', 374375],
        ['.3743759', 374375],
        ['.37437599', 374375],
        ['.374375999', 374375],
        ['.000000999', 0],
        ['.999999999', 999999],
      ];
      for (const [frac, us] of cases) {
        expect(parseTime(`2018-08-28T12:20:25${frac}Z`), frac).to.equal(whole + us);
        expect(parseTime(`${whole / 1e6}${frac}`), `epoch ${frac}`).to.equal(whole + us);
      }
    });

    it('epoch seconds, exactly (no float rounding)', () => {
      expect(parseTime('1535458825.374375')).to.equal(BASE);
      expect(parseTime('1535458825')).to.equal(BASE - 374375);
      expect(parseTime('0')).to.equal(0);
      expect(parseTime('0.000001')).to.equal(1);
      expect(parseTime('9007199254.740991')).to.equal(Number.MAX_SAFE_INTEGER);
      // a value where Math.round(parseFloat(...) * 1e6) is off by one
      expect(Math.round(parseFloat('9000000000.000001') * 1e6)).to.not.equal(9000000000000001);
      expect(parseTime('9000000000.000001')).to.equal(9000000000000001);
    });

    it('every µs round-trips through both forms', () => {
      let x = 12345;
      for (let i = 0; i < 5000; i++) {
        x = (x * 1103515245 + 12345) % 2147483648;
        const us = 1_000_000_000_000_000 + x * 773_000 + (i % 1_000_000);
        const secs = Math.floor(us / 1e6);
        const frac = String(us - secs * 1e6).padStart(6, '0');
        expect(parseTime(`${secs}.${frac}`)).to.equal(us);
        expect(parseTime(formatTime(us))).to.equal(us);
      }
    });

    it('validates the calendar, the clock and the zone', () => {
      expect(parseTime('2020-02-29T00:00:00Z')).to.be.a('number');
      for (const bad of [
        '2019-02-29T00:00:00Z',
        '2018-02-30T00:00:00Z',
        '2018-13-01T00:00:00Z',
        '2018-00-01T00:00:00Z',
        '2018-08-28T24:00:00Z',
        '2018-08-28T12:60:00Z',
        '2018-08-28T12:00:60Z',
        '2018-08-28T12:00:00+24:00',
        '2018-08-28T12:00:00+02:60',
      ]) {
        expect(parseTime(bad), bad).to.equal(undefined);
      }
    });

    it('rejects garbage, missing zones, negative and out-of-range times', () => {
      for (const bad of [
        '',
        'abc',
        ' 1535458825',
        '1535458825 ',
        '2018-08-28T12:20:25.374375', // no zone
        '2018-08-28T12:20:25',
        '2018-08-28',
        '2018-08-28T12:20:25.Z',
        '2018-08-28T12:20:25.1234567890Z', // 10 digits
        '2018-8-28T12:20:25Z',
        '2018-08-28T12:20Z',
        '2018-08-28T12:20:25+2',
        '2018-08-28T12:20:25 Z',
        '-1535458825',
        '+1535458825',
        '1535458825.',
        '.5',
        '1e9',
        '1535458825.1234567890',
        '0x10',
        '1535458825374', // epoch ms given as seconds: beyond the year 2255
        '1969-12-31T23:59:59.999999Z', // before the epoch
        '1970-01-01T01:00:00+02:00',
        '9999-12-31T23:59:59Z',
      ]) {
        expect(parseTime(bad), JSON.stringify(bad)).to.equal(undefined);
      }
      expect(parseTime('1970-01-01T00:00:00Z')).to.equal(0);
    });

    it('formatTime writes UTC with six digits', () => {
      expect(formatTime(BASE)).to.equal('2018-08-28T12:20:25.374375Z');
      expect(formatTime(0)).to.equal('1970-01-01T00:00:00.000000Z');
    });
  });

  describe('rows', () => {
    it('reads columns by name, any order, extra columns ignored', async () => {
      const { calls, problems } = await read(
        'note,route,direction,call_id,time,peer,account\n' +
          'x,,in,c1,1535458825.374375,p1,acme\n' +
          'y," A | B||C ",out,c2,2018-08-28T14:20:25.374376+02:00,,\n',
      );
      expect(problems).to.deep.equal([]);
      expect(calls).to.deep.equal([
        { line: 2, time: BASE, callId: 'c1', direction: 'in', peer: 'p1', account: 'acme' },
        { line: 3, time: BASE + 1, callId: 'c2', direction: 'out', route: ['A', 'B', 'C'] },
      ]);
    });

    it('needs no peer column when there are no in rows, nor route without out rows', async () => {
      expect((await read('time,call_id,direction,route\n1,a,out,A\n')).calls).to.have.length(1);
      expect((await read('time,call_id,direction,peer\n1,a,in,p\n')).calls).to.have.length(1);
    });

    it('keeps quoted ids exactly: commas, quotes, braces, colons, spaces, #, line breaks', async () => {
      const { calls, problems } = await read(
        H +
          '1,"c,1",in,"sip:""east"", gw{2}",acct {blue}: one,\n' +
          '1,c2,in," {tenant:1} trunk ",  ,\n' +
          '1,c3,in,"#not-a-comment",,\n' +
          '1,c4,in,p#4,a#b,\n' +
          '1,"multi\nline",in,"p\r\nq",,\n' +
          '1,c6,out,,,"{x}: 1|carrier, two"\n',
      );
      expect(problems).to.deep.equal([]);
      expect(calls.map((c) => [c.line, c.callId, c.peer, c.account, c.route])).to.deep.equal([
        [2, 'c,1', 'sip:"east", gw{2}', 'acct {blue}: one', undefined],
        [3, 'c2', ' {tenant:1} trunk ', undefined, undefined], // whitespace-only account = none
        [4, 'c3', '#not-a-comment', undefined, undefined],
        [5, 'c4', 'p#4', 'a#b', undefined],
        [6, 'multi\nline', 'p\r\nq', undefined, undefined],
        [9, 'c6', undefined, undefined, ['{x}: 1', 'carrier, two']], // the row above spans lines 6-8
      ]);
    });

    it('trims time and direction cells', async () => {
      const { calls } = await read(`${H}  1535458825.374375 , c1 , out ,,, A \n`);
      expect(calls).to.deep.equal([{ line: 2, time: BASE, callId: ' c1 ', direction: 'out', route: ['A'] }]);
    });

    it('skips blank, whitespace-only and comment lines, counting them', async () => {
      const { calls, problems } = await read(
        '# leading comment, with "a quote\n' +
          '\n' +
          H +
          '# comment\n' +
          '   \n' +
          '1,c1,in,p,,\n' +
          '\t\n' +
          '#,,,,,\n' +
          ' # not a comment: a row of one cell\n' +
          '2,c2,in,p,,\n',
      );
      expect(calls.map((c) => [c.line, c.callId])).to.deep.equal([
        [6, 'c1'],
        [10, 'c2'],
      ]);
      expect(problems).to.deep.equal(['t.csv:9: expected 6 cells as in the header, found 1']);
    });

    it('a BOM, CRLF line endings, mixed endings and a last line without newline', async () => {
      const text = `\uFEFF# c\r\n${H.replace('\n', '\r\n')}1,c1,in,p,,\r\n\r\n2,"c\r\n2",in,p,,\n3,c3,in,p,,`;
      const { calls, problems } = await read(text);
      expect(problems).to.deep.equal([]);
      expect(calls.map((c) => [c.line, c.callId, c.time])).to.deep.equal([
        [3, 'c1', 1e6],
        [5, 'c\r\n2', 2e6],
        [7, 'c3', 3e6],
      ]);
      const bomHeader = await read(`\uFEFF${H}1,c1,in,p,,\n`);
      expect(bomHeader.calls).to.have.length(1);
    });

    it('gives the same rows whatever the chunking (comment and quote state across chunks)', async () => {
      const text = `${readFileSync(join(FIXTURES, 'algorithms.trace.csv'), 'utf8').replace(/\n/g, (m, off: number) =>
        off % 7 === 0 ? '\r\n' : m,
      )}# "tail comment\n`;
      const whole = await read(text);
      expect(whole.problems).to.deep.equal([]);
      const bytes = Buffer.from(`\uFEFF${text}`);
      for (const size of [1, 2, 3, 5, 64, 1000]) {
        const buffers: Buffer[] = [];
        for (let i = 0; i < bytes.length; i += size) buffers.push(bytes.subarray(i, i + size));
        const calls: TraceCall[] = [];
        const problems: TraceProblem[] = [];
        for await (const c of readTraceFrom(Readable.from(buffers), 'x', { onProblem: (p) => problems.push(p) }))
          calls.push(c);
        expect(problems, `chunks of ${size}`).to.deep.equal([]);
        expect(calls, `chunks of ${size}`).to.deep.equal(whole.calls);
      }
    });

    it('bytes that are not UTF-8 in a column it reads: a problem on that line, whatever the chunking', async () => {
      const rows = [
        Buffer.from('time,call_id,direction,peer,note\n'),
        Buffer.from([...Buffer.from('1709640000,c'), 0xff, ...Buffer.from(',in,p1,ok\n')]),
        // a lossy reading made this id the one above
        Buffer.from([...Buffer.from('1709640001,c'), 0xfe, ...Buffer.from(',in,p1,\n')]),
        // a note column may hold any bytes (Latin-1 here); a real U+FFFD is UTF-8
        Buffer.from([...Buffer.from('1709640002,c3,in,p1,caf'), 0xe9, 0x0a]),
        Buffer.from('1709640003,c\uFFFD,in,p\u00fc,\n'),
        // a quoted peer over two lines, the bad byte on its second
        Buffer.from([...Buffer.from('1709640004,c5,in,"p\n'), 0xc3, 0x28, ...Buffer.from('",\n')]),
        Buffer.from('1709640005,c6,in,p1,\n'),
      ];
      const bytes = Buffer.concat(rows);
      for (const size of [1, 2, 3, 7, 1000]) {
        const buffers: Buffer[] = [];
        for (let i = 0; i < bytes.length; i += size) buffers.push(bytes.subarray(i, i + size));
        const calls: TraceCall[] = [];
        const problems: string[] = [];
        for await (const c of readTraceFrom(Readable.from(buffers), 'u.csv', {
          onProblem: (p) => problems.push(formatProblem(p)),
        }))
          calls.push(c);
        const why = 'not UTF-8 (a trace is UTF-8 text: ids are kept exactly as written)';
        expect(problems, `chunks of ${size}`).to.deep.equal([
          `u.csv:2: column "call_id": ${why}`,
          `u.csv:3: column "call_id": ${why}`,
          `u.csv:6: column "peer": ${why}`,
        ]);
        expect(
          calls.map((c) => `${c.callId} ${c.peer}`),
          `chunks of ${size}`,
        ).to.deep.equal(['c3 p1', 'c\uFFFD p\u00fc', 'c6 p1']);
      }
    });

    it('reads every fixture like the reference model’s own loader', async () => {
      for (const name of [
        'boundary',
        'autodialer',
        'event-types',
        'user-windows',
        'campaign',
        'algorithms',
        'trunks',
      ]) {
        const path = join(FIXTURES, `${name}.trace.csv`);
        const check = await validateTrace(path);
        expect(check.problems, name).to.deep.equal([]);
        const ours = (await sortedCalls(path)).map(({ line: _line, ...rest }) => rest);
        const theirs = loadTraceForModel(path);
        expect(ours, name).to.deep.equal(theirs);
        expect(check.calls, name).to.equal(theirs.length);
      }
    });
  });

  describe('durations', () => {
    it('parseCallDuration: seconds with a fraction (truncated to µs), ISO-8601 exactly', () => {
      const cases: [string, number | undefined][] = [
        ['93.5', 93_500_000],
        ['0', 0],
        ['0.000001', 1],
        ['12.3456789', 12_345_678],
        ['7', 7_000_000],
        ['PT1M33.5S', 93_500_000],
        ['PT1M33,5S', 93_500_000],
        ['PT1,5M', 90_000_000],
        ['PT0.000001S', 1],
        ['PT4H', 4 * 3600 * 1_000_000],
        ['P1DT1S', 86_401_000_000],
        ['PT0S', 0],
        ['P1DT', undefined],
        ['-5', undefined],
        ['+5', undefined],
        ['1e3', undefined],
        ['1m', undefined],
        ['5s', undefined],
        ['.5', undefined],
        ['5.', undefined],
        ['P1M', undefined],
        ['PT0.0000001S', undefined],
        ['PT-1S', undefined],
        ['abc', undefined],
        ['99999999999', undefined],
      ];
      for (const [text, us] of cases) expect(parseCallDuration(text), text).to.equal(us);
    });

    it('reads the duration column; empty means never reported; bad ones are located problems', async () => {
      const { calls, problems } = await read(
        'time,call_id,direction,peer,route,duration\n' +
          '1,a,in,p,,93.5\n' + // 2
          '2,b,out,,A,PT1M\n' + // 3
          '3,c,in,p,,\n' + // 4: never reported
          '4,d,in,p,,  \n' + // 5: blank too
          '5,e,in,p,, 2.25 \n' + // 6: trimmed
          '6,f,in,p,,1m\n' + // 7
          '7,g,in,p,,-1\n' + // 8
          '8,h,in,p,,9007199254.740991\n' + // 9: the longest
          '9,i,in,p,,9007199254.740992\n' + // 10: a µs longer
          '10,j,in,p,,P104249DT23H47M34.740992S\n' + // 11: the same, ISO-8601
          '11,k,in,p,,P1M\n', // 12
      );
      expect(calls.map((c) => [c.callId, c.durationUs])).to.deep.equal([
        ['a', 93_500_000],
        ['b', 60_000_000],
        ['c', undefined],
        ['d', undefined],
        ['e', 2_250_000],
        ['h', Number.MAX_SAFE_INTEGER],
      ]);
      expect(calls[2]).to.not.have.property('durationUs');
      const longest = 'at most 9007199254.740991 s (P104249DT23H47M34.740991S, about 285 years)';
      expect(problems).to.deep.equal([
        't.csv:7: column "duration": bad duration "1m" (seconds such as 93.5, or ISO-8601 such as PT1M33.5S)',
        't.csv:8: column "duration": bad duration "-1" (seconds such as 93.5, or ISO-8601 such as PT1M33.5S)',
        `t.csv:10: column "duration": duration "9007199254.740992" is longer than a trace takes: ${longest}`,
        `t.csv:11: column "duration": duration "P104249DT23H47M34.740992S" is longer than a trace takes: ${longest}`,
        't.csv:12: column "duration": bad duration "P1M": years and months have no fixed length (seconds such as 93.5, or ISO-8601 such as PT1M33.5S)',
      ]);
    });
  });

  describe('problems', () => {
    it('each bad row gives its exact line, column and message; good rows still come', async () => {
      const { calls, problems } = await read(
        H +
          '1,ok1,in,p,,\n' + // 2
          'abc,c,in,p,,\n' + // 3
          '1,c,sideways,p,,\n' + // 4
          '1,c,in,,,\n' + // 5
          '1,c,in,   ,,\n' + // 6
          '1,e7,out,p,,\n' + // 7: an empty route is a call naming no carrier, not a problem
          '1,e8,out,p,, | \n' + // 8: the same
          '1,c,in,p\n' + // 9
          '1,c,in,p,,,extra\n' + // 10
          ',c,in,p,,\n' + // 11
          '1,,in,p,,\n' + // 12
          '1,c,,p,,\n' + // 13
          '2018-08-28T12:20:25,c,IN,p,,\n' + // 14: two problems
          '2,ok2,out,,,A\n', // 15
      );
      expect(calls.map((c) => [c.callId, c.route])).to.deep.equal([
        ['ok1', undefined],
        ['e7', []],
        ['e8', []],
        ['ok2', ['A']],
      ]);
      expect(problems).to.deep.equal([
        't.csv:3: column "time": bad time "abc"',
        't.csv:4: column "direction": unknown direction "sideways" (expected "in" or "out")',
        't.csv:5: column "peer": missing peer (required on "in" rows)',
        't.csv:6: column "peer": missing peer (required on "in" rows)',
        't.csv:9: expected 6 cells as in the header, found 4',
        't.csv:10: expected 6 cells as in the header, found 7',
        't.csv:11: column "time": missing time',
        't.csv:12: column "call_id": missing call id',
        't.csv:13: column "direction": missing direction',
        't.csv:14: column "time": bad time "2018-08-28T12:20:25" (no zone: add Z or an offset such as +02:00)',
        't.csv:14: column "direction": unknown direction "IN" (expected "in" or "out")',
      ]);
    });

    it('"out" rows in a trace without a route column: each a problem, the column named', async () => {
      const { calls, problems } = await read('time,call_id,direction,peer\n1,i,in,p\n2,o,out,p\n');
      expect(calls.map((c) => c.callId)).to.deep.equal(['i']);
      expect(problems).to.deep.equal(['t.csv:3: column "route": no route column (required with "out" rows)']);
    });

    it('rows of empty cells (a spreadsheet export) are skipped as blank lines', async () => {
      const { calls, problems } = await read(
        ',,,\ntime,call_id,direction,peer\n1,c1,in,p\n,,,\n , ,\t,\n2,c2,in,p\n,,,',
      );
      expect(problems).to.deep.equal([]);
      expect(calls.map((c) => [c.callId, c.line])).to.deep.equal([
        ['c1', 3],
        ['c2', 6],
      ]);
    });

    it('a bad time says why when a common mistake explains it', async () => {
      const { problems } = await read(
        'time,call_id,direction,peer\n1535458825374,c1,in,p\n1969-12-31T23:59:59Z,c2,in,p\n"1,5",c3,in,p\n2018-13-01T00:00:00Z,c4,in,p\n',
      );
      expect(problems).to.deep.equal([
        't.csv:2: column "time": bad time "1535458825374" (epoch milliseconds or finer? a time in epoch form is seconds, with a fraction: 1535458825.374375)',
        't.csv:3: column "time": bad time "1969-12-31T23:59:59Z" (before 1970)',
        't.csv:4: column "time": bad time "1,5" (a decimal comma: write seconds with a point)',
        't.csv:5: column "time": bad time "2018-13-01T00:00:00Z"',
      ]);
    });

    it('a well-formed time out of range says which bound it passed', async () => {
      const { calls, problems } = await read(
        'time,call_id,direction,peer\n' +
          '9007199254.740991,last,in,p\n' + // the latest time counted to the µs: taken
          '9007199254.740992,c1,in,p\n' +
          '2255-06-05T23:47:34.740992Z,c2,in,p\n' +
          '1709640000.4999999999,c3,in,p\n' +
          '2024-01-01T24:00:00Z,c4,in,p\n' +
          '2024-01-01T23:59:60Z,c5,in,p\n' +
          '2024-01-01T00:00:00+24:00,c6,in,p\n' +
          '2024-01-01T00:00:00-0960,c7,in,p\n',
      );
      expect(calls.map((c) => [c.callId, c.time])).to.deep.equal([['last', Number.MAX_SAFE_INTEGER]]);
      const latest = '(after 2255-06-05T23:47:34.740991Z, the latest time counted to the µs)';
      const clock = '(no 24:00 and no leap second: a time of day is 00:00:00 to 23:59:59.999999)';
      expect(problems).to.deep.equal([
        `t.csv:3: column "time": bad time "9007199254.740992" ${latest}`,
        `t.csv:4: column "time": bad time "2255-06-05T23:47:34.740992Z" ${latest}`,
        't.csv:5: column "time": bad time "1709640000.4999999999" (at most 9 digits after the point)',
        `t.csv:6: column "time": bad time "2024-01-01T24:00:00Z" ${clock}`,
        `t.csv:7: column "time": bad time "2024-01-01T23:59:60Z" ${clock}`,
        't.csv:8: column "time": bad time "2024-01-01T00:00:00+24:00" (an offset is at most ±23:59)',
        't.csv:9: column "time": bad time "2024-01-01T00:00:00-0960" (an offset is at most ±23:59)',
      ]);
      // no such date, past the bound or not: no bound named
      expect(await problemsOf('time,call_id,direction,peer\n2255-02-30T00:00:00Z,c,in,p\n')).to.deep.equal([
        't.csv:2: column "time": bad time "2255-02-30T00:00:00Z"',
      ]);
    });

    it('lines count comments, blank lines and line breaks inside quoted cells', async () => {
      const problems = await problemsOf(`${H}# c\n\n1,"a\nb\r\nc",in,p,,\n\nx,c,in,p,,\n`);
      expect(problems).to.deep.equal(['t.csv:8: column "time": bad time "x"']);
    });

    it('missing and duplicate header columns (fatal)', async () => {
      expect(await problemsOf('# c\ntime,peer,route\n1,p,A\n')).to.deep.equal([
        't.csv:2: column "call_id": missing from the header',
        't.csv:2: column "direction": missing from the header',
      ]);
      expect(await problemsOf('time,call_id,direction,peer,time\n1,c,in,p,2\n')).to.deep.equal([
        't.csv:1: column "time": duplicate column in the header',
      ]);
      expect(await problemsOf('Time,Call_ID,direction,peer\n1,c,in,p\n')).to.deep.equal([
        't.csv:1: column "time": missing from the header (found "Time": column names are lower case)',
        't.csv:1: column "call_id": missing from the header (found "Call_ID": column names are lower case)',
      ]);
    });

    it('lines ending in CR alone are refused at the header (they read as one row, no call)', async () => {
      const cr = 'time,call_id,direction,peer,account,route,duration\r2018-08-28T12:20:25Z,c1,in,peer45,,,\r';
      expect(await problemsOf(cr)).to.deep.equal([
        't.csv:1: the header row holds a carriage return: lines must end in LF or CRLF, not CR alone (convert the file)',
      ]);
      // time last: before, a misleading `column "time": missing from the header`
      expect(await problemsOf('call_id,direction,peer,time\rc1,in,p,1\r')).to.have.length(1);
      // CRLF is fine
      expect((await read('time,call_id,direction,peer\r\n1,c1,in,p\r\n')).calls).to.have.length(1);
      // a first comment line: the whole file read as that comment, "no header row" said nothing of CR
      expect(await problemsOf(`# exported from the SBC\r${cr}`)).to.deep.equal([
        't.csv:1: no header row: a comment line holds a carriage return, so the file reads as one comment line: lines must end in LF or CRLF, not CR alone (convert the file)',
      ]);
      expect((await read('# a comment\r\ntime,call_id,direction,peer\r\n1,c1,in,p\r\n')).calls).to.have.length(1);
      // a lone CR inside a CRLF file joins two rows: the cell count says why
      expect(await problemsOf('time,call_id,direction,peer\r\n1,a,in,p\r\n2,b,in,p\r3,c,in,p\r\n')).to.deep.equal([
        't.csv:3: expected 4 cells as in the header, found 7: the row holds a carriage return not followed by LF, so two lines read as one: lines must end in LF or CRLF, not CR alone',
      ]);
    });

    it('a UTF-16 file is refused, with what to do', async () => {
      const text = '# c\ntime,call_id,direction,peer\n1,c1,in,p\n';
      for (const bytes of [
        Buffer.concat([Buffer.from([0xff, 0xfe]), Buffer.from(text, 'utf16le')]),
        Buffer.concat([Buffer.from([0xfe, 0xff]), Buffer.from(text, 'utf16le').swap16()]),
      ])
        expect(await problemsOf(bytes)).to.deep.equal([
          't.csv: cannot read the trace: it is UTF-16 (a UTF-16 byte-order mark starts it): save it as UTF-8',
        ]);
    });

    it('an empty file, or only comments: no header row', async () => {
      expect(await problemsOf('')).to.deep.equal([
        't.csv:1: no header row (the trace is empty, or only blank and comment lines)',
      ]);
      expect(await problemsOf('# only\n\n')).to.deep.equal([
        't.csv:1: no header row (the trace is empty, or only blank and comment lines)',
      ]);
      expect(await read(H)).to.deep.equal({ calls: [], problems: [] });
    });

    it('malformed CSV: the line where the bad row starts; the rows before it come (fatal)', async () => {
      const unclosed = await read(`${H}1,c1,in,p,,\n# c\n2,"c2,in,p,,\n3,c3,in,p,,\n`);
      expect(unclosed.calls.map((c) => c.callId)).to.deep.equal(['c1']);
      expect(unclosed.problems).to.deep.equal(['t.csv:4: malformed CSV: a quoted cell is never closed']);
      const closing = await read(`${H}1,c1,in,p,,\n1,"c"2,in,p,,\n3,c3,in,p,,\n`);
      expect(closing.calls.map((c) => c.callId)).to.deep.equal(['c1']);
      expect(closing.problems).to.deep.equal([
        't.csv:3: malformed CSV in column "call_id": characters after the closing quote of a cell',
      ]);
      const multi = await read(`${H}1,"a\r\nb",in,p,,\n\n1,"c"x,in,p,,\n`);
      expect(multi.problems).to.deep.equal([
        't.csv:5: malformed CSV in column "call_id": characters after the closing quote of a cell',
      ]);
    });

    it('malformed CSV names the column by its header name', async () => {
      const quote =
        ' (quote the whole cell and double the quotes in it, as in "Acme ""East""", with no space before the opening quote)';
      // a quote inside an unquoted cell, and a space before an opening quote
      expect(await problemsOf(`${H}1,c1,in,Acme "East",,\n`)).to.deep.equal([
        `t.csv:2: malformed CSV in column "peer": a quote inside a cell that does not begin with one${quote}`,
      ]);
      expect(await problemsOf(`${H}1, "c1",in,p,,\n`)).to.deep.equal([
        `t.csv:2: malformed CSV in column "call_id": a quote inside a cell that does not begin with one${quote}`,
      ]);
      expect(await problemsOf(`${H}1,"c1" ,in,p,,\n`)).to.deep.equal([
        't.csv:2: malformed CSV in column "call_id": characters after the closing quote of a cell',
      ]);
      // a column the header leaves unnamed, and the header itself: its place
      expect(await problemsOf('time,call_id,direction,peer,\n1,c1,in,p,"a"b\n')).to.deep.equal([
        't.csv:2: malformed CSV in cell 5 of the row: characters after the closing quote of a cell',
      ]);
      expect(await problemsOf('time,"call_id"x,direction,peer\n')).to.deep.equal([
        't.csv:1: malformed CSV in cell 2 of the row: characters after the closing quote of a cell',
      ]);
    });

    it('an unreadable file is a problem on line 0', async () => {
      const v = await validateTrace('/nonexistent/dir/trace.csv');
      expect(v.calls).to.equal(0);
      expect(v.problems).to.have.length(1);
      expect(v.problems[0]).to.include({ file: '/nonexistent/dir/trace.csv', line: 0 });
      expect(formatProblem(v.problems[0]!)).to.match(/^\/nonexistent\/dir\/trace\.csv: cannot read the trace: ENOENT/);
    });

    it('without onProblem, the first problem throws a TraceError after the good rows before it', async () => {
      const seen: string[] = [];
      let error: unknown;
      try {
        for await (const c of readTraceFrom([`${H}1,c1,in,p,,\nx,c2,in,p,,\n3,c3,in,p,,\n`], 'y.csv'))
          seen.push(c.callId);
      } catch (err) {
        error = err;
      }
      expect(seen).to.deep.equal(['c1']);
      expect(error).to.be.instanceOf(TraceError);
      expect((error as TraceError).code).to.equal('ERR_TRACE');
      expect((error as TraceError).message).to.equal('y.csv:3: column "time": bad time "x"');
      expect((error as TraceError).problems).to.deep.equal([
        { file: 'y.csv', line: 3, column: 'time', message: 'bad time "x"' },
      ]);
    });

    it('an error thrown by onProblem reaches the caller unchanged', async () => {
      const boom = new Error('boom');
      let error: unknown;
      try {
        for await (const _ of readTraceFrom([`${H}x,c,in,p,,\n`], 'z', {
          onProblem: () => {
            throw boom;
          },
        }))
          void _;
      } catch (err) {
        error = err;
      }
      expect(error).to.equal(boom);
    });

    it('validateTrace caps the problems it keeps but counts them all', async () => {
      let text = H;
      for (let i = 0; i < 30; i++) text += 'x,c,in,p,,\n';
      const v = await validateTraceFrom([text], 'cap.csv', { maxProblems: 5 });
      expect(v.problems).to.have.length(5);
      expect(v.problemCount).to.equal(30);
    });
  });

  describe('order', () => {
    let dir: string;
    before(() => {
      dir = mkdtempSync(join(tmpdir(), 'callgate-trace-'));
    });
    after(() => rmSync(dir, { recursive: true, force: true }));

    it('validateTrace tells whether the times never decrease; equal times are sorted', async () => {
      const sorted = join(dir, 'sorted.csv');
      writeFileSync(sorted, `${H}1,a,in,p,,\n1,b,in,p,,\n2018-08-28T12:20:25Z,c,in,p,,\n1535458825,d,in,p,,\n`);
      expect(await validateTrace(sorted)).to.deep.equal({
        problems: [],
        problemCount: 0,
        calls: 4,
        sorted: true,
        first: 1e6,
        last: BASE - 374375,
      });
      const unsorted = join(dir, 'unsorted.csv');
      writeFileSync(unsorted, `${H}2,a,in,p,,\n1.999999,b,in,p,,\n3,c,in,p,,\n`);
      expect((await validateTrace(unsorted)).sorted).to.equal(false);
    });

    it('an unsorted trace is sorted stably, in runs spilled to disk or not: equal times keep file order', async () => {
      const path = join(dir, 'stable.csv');
      writeFileSync(
        path,
        H +
          '3,a,in,p,,\n' +
          '1,b,in,p,,\n' +
          '1970-01-01T02:00:03+02:00,c,in,p,,\n' + // = 3
          '1.000000,d,in,p,,\n' + // = 1
          '2,e,in,p,,\n' +
          '1970-01-01T00:00:01.0000009Z,f,in,p,,\n', // = 1 (truncated)
      );
      for (const chunkRows of [undefined, 1, 2, 4]) {
        const calls = await sortedCalls(path, chunkRows);
        expect(calls.map((c) => c.callId)).to.deep.equal(['b', 'd', 'f', 'e', 'a', 'c']);
        expect(calls.map((c) => c.line)).to.deep.equal([3, 5, 7, 6, 2, 4]);
      }
    });

    it('a sort in runs leaves no temporary file, read to its end or left early', async () => {
      const tmp = join(dir, 'tmp');
      mkdirSync(tmp);
      const saved = process.env.TMPDIR;
      process.env.TMPDIR = tmp; // os.tmpdir() reads it at each call
      try {
        const path = join(dir, 'runs.csv');
        writeFileSync(path, H + Array.from({ length: 50 }, (_, i) => `${50 - i},c${i},in,p,,\n`).join(''));
        let spilled = 0;
        let n = 0;
        for await (const c of inTimeOrder(readTrace(path), (x) => x.time, { chunkRows: 8, onSpill: () => spilled++ })) {
          expect(c.callId).to.equal(`c${49 - n}`);
          if (++n === 10) {
            expect(readdirSync(tmp)).to.have.length(1); // the runs, while they are read
            break;
          }
        }
        expect(spilled).to.equal(6);
        expect(readdirSync(tmp)).to.deep.equal([]);
        expect(await sortedCalls(path, 8)).to.have.length(50);
        expect(readdirSync(tmp)).to.deep.equal([]);
        // a $TMPDIR that cannot hold them: one line naming it, as any output that cannot be written
        process.env.TMPDIR = path;
        const err = await sortedCalls(path, 8).catch((e: unknown) => e);
        expect(err).to.be.instanceOf(OutputError);
        expect((err as Error).message).to.equal(
          `cannot write the sort's temporary runs under ${path}: not a directory (ENOTDIR)`,
        );
      } finally {
        if (saved === undefined) delete process.env.TMPDIR;
        else process.env.TMPDIR = saved;
      }
    });

    it('streams a large generated trace in file order; unsorted ones are sorted in runs', async () => {
      const path = join(dir, 'big.csv');
      await pipeline(Readable.from(generateTrace({ calls: 100_000, seed: 7 })), createWriteStream(path));
      const v = await validateTrace(path);
      expect(v.problems).to.deep.equal([]);
      expect(v.calls).to.equal(100_000);
      expect(v.sorted).to.equal(true);
      let n = 0;
      let prevLine = 0;
      for await (const c of readTrace(path)) {
        n++;
        expect(c.line).to.be.above(prevLine);
        prevLine = c.line;
        if (n === 50_000) break; // leaving early closes the file
      }
      expect(n).to.equal(50_000);

      const upath = join(dir, 'unsorted-big.csv');
      await pipeline(
        Readable.from(generateTrace({ calls: 20_000, seed: 7, unsorted: true })),
        createWriteStream(upath),
      );
      const uv = await validateTrace(upath);
      expect(uv.calls).to.equal(20_000);
      expect(uv.sorted).to.equal(false);
      const calls = await sortedCalls(upath, 3_000);
      expect(calls).to.have.length(20_000);
      for (let i = 1; i < calls.length; i++) {
        expect(calls[i]!.time >= calls[i - 1]!.time).to.equal(true);
        if (calls[i]!.time === calls[i - 1]!.time) expect(calls[i]!.line).to.be.above(calls[i - 1]!.line);
      }
    });
  });
});
