/**
 * The errors callgate throws on purpose: one class per file in src/errors/, every one a
 * CallgateError with its own code from the CallgateErrorCode union.
 */
import { expect } from 'chai';
import { readdirSync } from 'node:fs';
import * as errors from '../src/errors/index.js';
import { ConfigError as ConfigErrorOldPath } from '../src/config/ConfigError.js';
import { DispatcherClosedError as DispatcherClosedErrorOldPath } from '../src/dispatch/DispatcherClosedError.js';
import { TraceError as TraceErrorOldPath } from '../src/replay/trace.js';
import type { CallgateErrorCode } from '../src/errors/index.js';

/** Every code, once: the compiler refuses a code missing here or one outside the union. */
const CODES: Record<CallgateErrorCode, true> = {
  ERR_INVALID_ARGUMENT: true,
  ERR_STORE_UNAVAILABLE: true,
  ERR_CONFIG: true,
  ERR_TRACE: true,
  ERR_DISPATCHER_CLOSED: true,
  ERR_OUTPUT: true,
  ERR_INTERRUPTED: true,
};

/** One instance of each class (the base class with a code of its own). */
const samples: Record<string, () => errors.CallgateError> = {
  CallgateError: () => new errors.CallgateError('ERR_INVALID_ARGUMENT', 'base'),
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

  it('one class per file, each exported by src/errors/index.ts under the file name', () => {
    expect(files).to.deep.equal(Object.keys(samples).sort());
    const exported = Object.keys(errors).sort();
    expect(exported).to.deep.equal(files);
  });

  it('every class is a CallgateError named after itself; the codes are the union, one per subclass', () => {
    const codes = new Map<string, string>();
    for (const [name, make] of Object.entries(samples)) {
      const err = make();
      expect(err).to.be.instanceOf(Error).and.instanceOf(errors.CallgateError);
      expect(err.name).to.equal(name);
      expect(err.code in CODES, err.code).to.equal(true);
      if (name !== 'CallgateError') {
        expect(codes.has(err.code), `${err.code} used twice`).to.equal(false);
        codes.set(err.code, name);
      }
    }
    expect([...codes.keys()].sort()).to.deep.equal(Object.keys(CODES).sort());
  });

  it('the old import paths inside src give the same classes', () => {
    expect(ConfigErrorOldPath).to.equal(errors.ConfigError);
    expect(DispatcherClosedErrorOldPath).to.equal(errors.DispatcherClosedError);
    expect(TraceErrorOldPath).to.equal(errors.TraceError);
  });

  it('keeps the cause and the problems', () => {
    const cause = new Error('ECONNREFUSED');
    expect(new errors.StoreUnavailableError('down', cause).cause).to.equal(cause);
    expect(new errors.ConfigError(['a: x', 'b: y']).problems).to.deep.equal(['a: x', 'b: y']);
    expect(samples.TraceError!().message).to.equal('t.csv:2: column "time": bad time "x"');
  });
});
