/**
 * Write schema/limits.schema.json, the JSON Schema of the limit configuration, from the zod
 * schema of src/config/document-schema.ts (`npm run schema`). test/config-schema.test.ts fails
 * while the committed file differs from what this writes.
 */
import { writeFileSync } from 'node:fs';
import { configJsonSchema } from '../src/config/document-schema.js';

export const SCHEMA_FILE = new URL('../schema/limits.schema.json', import.meta.url);

export function schemaText(): string {
  return `${JSON.stringify(configJsonSchema(), null, 2)}\n`;
}

if (import.meta.url === `file://${process.argv[1]}`) {
  writeFileSync(SCHEMA_FILE, schemaText());
  console.log(`wrote ${SCHEMA_FILE.pathname}`);
}
