/**
 * The errors callgate throws on purpose: one class per file in src/errors/, every one a
 * CallGateError with its own code from the CallGateErrorCode union.
 */
import { expect } from 'chai';
import { readdirSync } from 'node:fs';
import * as errors from '../src/errors/index.js';
import type { CallGateErrorCode } from '../src/errors/index.js';

/** Every code, once: the compiler refuses a code missing here or one outside the union. */
const CODES: Record<CallGateErrorCode, true> = {
  ERR_INVALID_ARGUMENT: true,
  ERR_STORE_UNAVAILABLE: true,
  ERR_CONFIG: true,
  ERR_TRACE: true,
  ERR_DISPATCHER_CLOSED: true,
  ERR_OUTPUT: true,
  ERR_INTERRUPTED: true,
};

/** One instance of each subclass (CallGateError itself is abstract). */
const samples: Record<string, () => errors.CallGateError> = {
  ConfigError: () => new errors.ConfigError(['limits.json: inbound: bad']),
  DispatcherClosedError: () => new errors.DispatcherClosedError(),
  InterruptedError: () => new errors.InterruptedError('SIGINT'),
  InvalidArgumentError: () => new errors.InvalidArgumentError('limit must be positive'),
  OutputError: () => new errors.OutputError('decisions to out.jsonl', 'no space left on device (ENOSPC)'),
  StoreUnavailableError: () => new errors.StoreUnavailableError('Redis unavailable', new Error('ECONNREFUSED')),
  TraceError: () => new errors.TraceError([{ file: 't.csv', line: 2, column: 'time', message: 'bad time "x"' }]),
};

describe('errors (src/errors/)', () => {
  const files = readdirSync(new URL('../src/errors/', import.meta.url))
    .filter((f) => f !== 'index.ts')
    .map((f) => f.replace(/\.ts$/, ''))
    .sort();
  /** A file's class: kebab-case file name, PascalCase class (call-gate-error.ts: CallGateError). */
  const classOf = (file: string) => file.replace(/(^|-)([a-z])/g, (_, _dash: string, c: string) => c.toUpperCase());

  it('one class per file, each exported by src/errors/index.ts under its file name in PascalCase', () => {
    const classes = files.map(classOf).sort();
    expect(classes).to.deep.equal(['CallGateError', ...Object.keys(samples)].sort());
    expect(Object.keys(errors).sort()).to.deep.equal(classes);
  });

  it('every class is a CallGateError named after itself; the codes are the union, one per subclass', () => {
    const codes = new Map<string, string>();
    for (const [name, make] of Object.entries(samples)) {
      const err = make();
      expect(err).to.be.instanceOf(Error).and.instanceOf(errors.CallGateError);
      expect(err.name).to.equal(name);
      expect(err.code in CODES, err.code).to.equal(true);
      expect(codes.has(err.code), `${err.code} used twice`).to.equal(false);
      codes.set(err.code, name);
    }
    expect([...codes.keys()].sort()).to.deep.equal(Object.keys(CODES).sort());
  });

  it('a code is thrown only as its subclass: a bare CallGateError is refused', () => {
    // @ts-expect-error: abstract, so the compiler refuses it in src, tests and examples
    const bare = () => new errors.CallGateError('ERR_STORE_UNAVAILABLE', 'Redis down');
    expect(bare).to.throw(TypeError, 'build the subclass of ERR_STORE_UNAVAILABLE, not a bare CallGateError');
  });

  it('keeps the cause and the problems', () => {
    const cause = new Error('ECONNREFUSED');
    expect(new errors.StoreUnavailableError('down', cause).cause).to.equal(cause);
    expect(new errors.ConfigError(['a: x', 'b: y']).problems).to.deep.equal(['a: x', 'b: y']);
    expect(samples.TraceError!().message).to.equal('t.csv:2: column "time": bad time "x"');
  });
});
