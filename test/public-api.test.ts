/**
 * The public surface: what `import ... from 'callgate'` gives. test/public-api.json lists the
 * names; scripts/pack-smoke.sh checks the same list against the installed tarball.
 */
import { expect } from 'chai';
import { readFileSync } from 'node:fs';
import * as api from '../src/index.js';

const ROOT = new URL('..', import.meta.url);
const expected = JSON.parse(readFileSync(new URL('test/public-api.json', ROOT), 'utf8')) as {
  runtime: string[];
  types: string[];
};
const pkg = JSON.parse(readFileSync(new URL('package.json', ROOT), 'utf8')) as {
  exports: Record<string, unknown>;
  main: string;
  types: string;
  dependencies: Record<string, string>;
  peerDependencies?: Record<string, string>;
  devDependencies: Record<string, string>;
};

describe('public API (src/index.ts, package.json exports)', () => {
  it('exports exactly the listed names: the engine, stores, clocks, errors, SIP helper, config loaders', () => {
    expect(Object.keys(api).sort()).to.deep.equal([...expected.runtime].sort());
  });

  it('keeps internals out: Admission, Dispatcher, the schema, key helpers, the batcher', () => {
    for (const internal of [
      'Admission',
      'Dispatcher',
      'configSchema',
      'keys',
      'Batcher',
      'parseConfig',
      'diffConfig',
      'systemClockUs',
    ]) {
      expect(api, internal).not.to.have.property(internal);
    }
  });

  it('package.json exports the root (built src/index.ts, with its types) and package.json, nothing deeper', () => {
    expect(pkg.exports).to.deep.equal({
      '.': { types: './dist/src/index.d.ts', default: './dist/src/index.js' },
      './package.json': './package.json',
    });
    // tools that ignore "exports" read main/types: the same files
    expect(`./${pkg.main}`).to.equal('./dist/src/index.js');
    expect(`./${pkg.types}`).to.equal('./dist/src/index.d.ts');
  });

  it("ioredis is a peer dependency (the application's copy serves the store), a devDependency for the tests", () => {
    expect(pkg.dependencies).not.to.have.property('ioredis');
    expect(pkg.peerDependencies?.ioredis).to.equal(pkg.devDependencies.ioredis);
  });

  it('the exported classes work as documented (a CallGate on a MemoryStore admits, then refuses)', async () => {
    const gate = await api.CallGate.create({
      config: { inbound: { peers: { p: [{ limit: 1, window: 'PT1S' }] } } },
      store: new api.MemoryStore(),
      clock: new api.VirtualClock(1_000_000),
    });
    const first = await gate.admit({ callId: 'a', peer: 'p' });
    const second = await gate.admit({ callId: 'b', peer: 'p' });
    expect([first.admitted, second.admitted, second.limitedBy]).to.deep.equal([true, false, 'peer:p']);
    expect(api.toSipResponse(second)?.status).to.equal(503);
    await gate.close();
  });
});
