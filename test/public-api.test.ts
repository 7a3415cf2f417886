/**
 * The public surface: what `import ... from 'callgate'` gives. test/public-api.json lists the
 * names; scripts/pack-smoke.sh checks the same list against the installed tarball.
 */
import { expect } from 'chai';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
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

  it('exports exactly the listed types (src/index.ts read as text: types leave nothing at run time)', () => {
    const src = (path: string) => readFileSync(new URL(`src/${path}`, ROOT), 'utf8');
    const index = src('index.ts')
      .replace(/\/\*[\s\S]*?\*\//g, '')
      .replace(/\/\/.*$/gm, '');
    const types = new Set<string>();
    for (const [, typeOnly, names] of index.matchAll(/export\s+(type\s+)?\{([^}]*)\}/g))
      for (const name of names!.split(',').map((n) => n.trim()))
        if (name !== '' && (typeOnly !== undefined || name.startsWith('type ')))
          types.add(name.replace(/^type\s+/, ''));
    for (const [, file] of index.matchAll(/export\s+type\s+\*\s+from\s+'\.\/(.+)\.js'/g))
      for (const [, name] of src(`${file}.ts`).matchAll(/^export\s+(?:interface|type)\s+(\w+)/gm)) types.add(name!);
    expect([...types].sort()).to.deep.equal([...expected.types].sort());
  });

  it('admissionLevels: the levels a call is checked against, as limited_by names them; undefined for an unknown peer', async () => {
    const config = await api.loadConfig({
      inbound: {
        global: [{ limit: 100, window: '1s' }],
        accounts: { acme: [{ limit: 10, window: '1s' }] },
        peers: { p1: [{ limit: 5, window: '1s' }] },
      },
    });
    expect(api.admissionLevels(config, 'p1', 'acme')).to.deep.equal(['global', 'account:acme', 'peer:p1']);
    expect(api.admissionLevels(config, 'p1', 'not-configured')).to.deep.equal(['global', 'peer:p1']);
    expect(api.admissionLevels(config, 'p2')).to.equal(undefined);
    const withDefault = await api.loadConfig({ inbound: { defaultPeer: [{ channels: 3 }] } });
    expect(api.admissionLevels(withDefault, 'p2', 'acme')).to.deep.equal(['peer:p2']);
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
      '.': { 'callgate-source': './src/index.ts', types: './dist/src/index.d.ts', default: './dist/src/index.js' },
      './package.json': './package.json',
    });
    // the sources for this repository only (tsconfig customConditions, node --conditions): first,
    // so that it wins where it is set; published users never set it and get dist/
    expect(Object.keys(pkg.exports['.'] as object)[0]).to.equal('callgate-source');
    expect(
      createRequire(import.meta.url).resolve('callgate'),
      'the tests run with --conditions=callgate-source',
    ).to.equal(fileURLToPath(new URL('src/index.ts', ROOT)));
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
