/**
 * The JSON Schema of the configuration (schema/limits.schema.json, shipped in the package):
 * committed as generated from its zod schema, accepting every fixture and example, and refusing
 * what the loader refuses on a set of broken configurations. A few refusals are the loader's
 * alone (JSON Schema cannot say them): they are listed, so the gap stays known.
 */
import { expect } from 'chai';
import { Ajv2020 } from 'ajv/dist/2020.js';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse as parseYaml } from 'yaml';
import { loadConfig, loadConfigFile } from '../src/config/index.js';
import { SCHEMA_FILE, schemaText } from '../scripts/config-schema.js';

const ROOT = new URL('..', import.meta.url).pathname;
const schema = JSON.parse(readFileSync(SCHEMA_FILE, 'utf8')) as object;
const validate = new Ajv2020({ allErrors: true, strict: true }).compile(schema);
const valid = (doc: unknown): boolean => validate(doc) === true;

async function loads(doc: unknown): Promise<boolean> {
  try {
    await loadConfig(doc as never);
    return true;
  } catch {
    return false;
  }
}

/** Every configuration file of the repository: fixtures, examples, the SIP edge's inline limits. */
function configFiles(): string[] {
  const fixtures = readdirSync(join(ROOT, 'fixtures'))
    .filter((f) => f.endsWith('.config.json'))
    .map((f) => join('fixtures', f));
  const examples = readdirSync(join(ROOT, 'examples/limits')).map((f) => join('examples/limits', f));
  return [...fixtures, ...examples, 'examples/kamailio/limits.json'];
}

const read = (file: string): unknown => {
  const text = readFileSync(join(ROOT, file), 'utf8');
  return file.endsWith('.yaml') ? parseYaml(text) : JSON.parse(text);
};

describe('JSON Schema of the configuration (schema/limits.schema.json)', () => {
  it('is the one generated from the zod schema (run `npm run schema` after changing src/config/document-schema.ts)', () => {
    expect(readFileSync(SCHEMA_FILE, 'utf8')).to.equal(schemaText());
  });

  it("docs/configuration.md's complete example is examples/limits/complete.json, character for character", () => {
    const doc = readFileSync(join(ROOT, 'docs/configuration.md'), 'utf8');
    const block = /## A complete example[\s\S]*?```json\n([\s\S]*?)```/.exec(doc)![1];
    expect(block).to.equal(readFileSync(join(ROOT, 'examples/limits/complete.json'), 'utf8'));
  });

  it('is shipped in the package', () => {
    const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { files: string[] };
    expect(pkg.files).to.include('schema');
  });

  for (const file of configFiles()) {
    it(`accepts ${file}, which the loader accepts too`, async () => {
      const doc = read(file);
      expect(valid(doc), JSON.stringify(validate.errors)).to.equal(true);
      await loadConfigFile(join(ROOT, file));
    });
  }

  it("accepts the SIP edge example's inline limits", async () => {
    const edge = read('examples/sip-edge/edge.config.json') as { limits: unknown };
    expect(valid(edge.limits), JSON.stringify(validate.errors)).to.equal(true);
    expect(await loads(edge.limits)).to.equal(true);
  });

  const peer = (entry: unknown) => ({ inbound: { peers: { p: [entry] } } });
  const carrier = (c: unknown) => ({ outbound: { carriers: { A: c } } });
  const broken: [string, unknown][] = [
    ['an unknown top-level field', { inbund: {} }],
    ['an unknown inbound field', { inbound: { peer: {} } }],
    ['a misspelt limit field', peer({ limt: 1, window: 'PT1S' })],
    ['a limit of 0', peer({ limit: 0, window: 'PT1S' })],
    ['a fractional limit', peer({ limit: 1.5, window: 'PT1S' })],
    ['a window as a number', peer({ limit: 1, window: 1 })],
    ['a window with a space', peer({ limit: 1, window: '1 s' })],
    ['a negative window', peer({ limit: 1, window: '-1s' })],
    ['a window in years', peer({ limit: 1, window: 'P1Y' })],
    ['a window in months', peer({ limit: 1, window: 'P1M' })],
    ['an empty ISO duration', peer({ limit: 1, window: 'PT' })],
    ['an unknown algorithm', peer({ limit: 1, window: 'PT1S', algorithm: 'leaky' })],
    ['channels 0', peer({ channels: 0 })],
    ['a bucket that is not a list', { inbound: { global: { limit: 1, window: 'PT1S' } } }],
    ['an empty peer id', { inbound: { peers: { '': [] } } }],
    ['cps 0', carrier({ cps: 0 })],
    ['a cps below a billionth', carrier({ cps: 2e-10 })],
    ['cps as a string', carrier({ cps: '5' })],
    ['a misspelt carrier field', carrier({ cps: 1, maxwait: '1s' })],
    ['maxWait as a number', carrier({ cps: 1, maxWait: 100 })],
  ];
  for (const [what, doc] of broken) {
    it(`refuses ${what}, as the loader does`, async () => {
      expect(await loads(doc), 'the loader').to.equal(false);
      expect(valid(doc), 'the JSON Schema').to.equal(false);
    });
  }

  it('what only the loader refuses (JSON Schema cannot say it): the gap stays known', async () => {
    const loaderOnly: unknown[] = [
      { inbound: { global: [{ channels: 1 }, { channels: 2 }] } }, // two channels entries in a bucket
      { inbound: { global: [{ limit: 1, window: 'PT0.0000015S' }] } }, // not a whole number of µs
      { inbound: { global: [{ limit: 1, window: '0s' }] } }, // a window of zero
      { maxCallDuration: 'PT0S' },
    ];
    for (const doc of loaderOnly) {
      expect(await loads(doc), JSON.stringify(doc)).to.equal(false);
      expect(valid(doc), JSON.stringify(doc)).to.equal(true);
    }
  });
});
