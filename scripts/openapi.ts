/**
 * Write docs/openapi.json: the OpenAPI document `callgate serve` answers at GET /v1/openapi.json
 * (without a token; with one, every route but the probes names the bearer scheme), for readers
 * who have no sidecar running (`npm run openapi`). test/openapi.test.ts fails while it differs.
 */
import { writeFileSync } from 'node:fs';
import { Registry } from 'prom-client';
import { CallGate } from '../src/gate.js';
import { buildApp } from '../src/server/app.js';

export const OPENAPI_FILE = new URL('../docs/openapi.json', import.meta.url);

/** The document as a sidecar with metrics and state (as `callgate serve` has them) serves it. */
export async function servedOpenApi(): Promise<string> {
  const gate = await CallGate.create({ config: {} });
  const app = buildApp({
    gate,
    ready: async () => {},
    reload: async () => [],
    state: async () => ({}),
    metrics: new Registry(),
  });
  try {
    const r = await app.inject({ method: 'GET', url: '/v1/openapi.json' });
    return `${JSON.stringify(r.json(), null, 2)}\n`;
  } finally {
    await app.close();
    await gate.close();
  }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  writeFileSync(OPENAPI_FILE, await servedOpenApi());
  console.log(`wrote ${OPENAPI_FILE.pathname}`);
}
