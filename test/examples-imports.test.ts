/**
 * The reference integrations can be copied out of the repository: everything under examples/
 * imports callgate by its name (its public surface, nothing deeper), Node's builtins, files of
 * its own example, and the packages listed here, each a declared dependency of the repository.
 */
import { expect } from 'chai';
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';

const ROOT = new URL('..', import.meta.url).pathname;
const EXAMPLES = join(ROOT, 'examples');

/** What each example needs from npm besides callgate (what to install when copying it out). */
const PACKAGES: Record<string, string[]> = {
  'sip-edge': ['commander', 'hdr-histogram-js', 'ioredis', 'sip', 'zod'],
  kamailio: [],
  limits: [],
  prometheus: [],
  redis: [],
  systemd: [],
};

/** Every module specifier of a source file: static imports and re-exports, bare imports, import(). */
function specifiers(text: string): string[] {
  const code = text.replace(/\/\*[\s\S]*?\*\//g, '').replace(/^\s*\/\/.*$/gm, '');
  return [
    ...code.matchAll(/\b(?:import|export)\b[^'"`;]*?\bfrom\s*['"]([^'"]+)['"]/g),
    ...code.matchAll(/\bimport\s*['"]([^'"]+)['"]/g),
    ...code.matchAll(/\bimport\s*\(\s*['"]([^'"]+)['"]/g),
  ].map((m) => m[1]!);
}

const packageOf = (spec: string) =>
  spec
    .split('/')
    .slice(0, spec.startsWith('@') ? 2 : 1)
    .join('/');

describe('examples/ import only callgate, builtins, their own files and declared packages', () => {
  const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as Record<string, Record<string, string>>;
  const declared = new Set(
    ['dependencies', 'devDependencies', 'peerDependencies'].flatMap((k) => Object.keys(pkg[k] ?? {})),
  );
  const examples = readdirSync(EXAMPLES, { withFileTypes: true })
    .filter((d) => d.isDirectory())
    .map((d) => d.name);

  it('knows every example', () => {
    expect(examples.sort()).to.deep.equal(Object.keys(PACKAGES).sort());
  });

  for (const example of examples) {
    it(example, () => {
      const dir = join(EXAMPLES, example);
      const sources = readdirSync(dir, { recursive: true })
        .map(String)
        .filter((f) => /\.(?:[cm]?[jt]s)$/.test(f));
      const used = new Set<string>();
      for (const file of sources) {
        for (const spec of specifiers(readFileSync(join(dir, file), 'utf8'))) {
          const where = `${example}/${file}: ${spec}`;
          if (spec === 'callgate' || spec.startsWith('node:')) continue;
          if (spec.startsWith('.')) {
            const target = relative(dir, resolve(dirname(join(dir, file)), spec));
            expect(target.startsWith('..'), `${where} leaves the example`).to.equal(false);
            continue;
          }
          expect(spec, `${where}: callgate by its name only, nothing deeper`).not.to.match(/^callgate\//);
          expect(declared.has(packageOf(spec)), `${where} is not a dependency of package.json`).to.equal(true);
          used.add(packageOf(spec));
        }
      }
      expect([...used].sort(), 'the packages the example needs (update PACKAGES)').to.deep.equal(PACKAGES[example]);
    });
  }

  it('catches what it looks for', () => {
    const text = `import { a } from '../../src/gate.js';\nimport type {\n  B,\n} from "callgate";\nexport * from './x.js';\nimport 'side';\nconst m = await import('dyn');`;
    expect(specifiers(text)).to.deep.equal(['../../src/gate.js', 'callgate', './x.js', 'side', 'dyn']);
  });
});
