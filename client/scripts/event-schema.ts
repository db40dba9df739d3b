// Writes src/event-schema.ts, the client's copy of the service's event schema (schemas/event.ts),
// which the client's validator reads. The client ships on its own, so it cannot import from the
// repository; test/client/validate.test.ts fails when the copy and the service's schema differ.
// Run: npm run client:schema
import { writeFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import { event } from '../../schemas/event.ts'

export function eventSchemaModule (): string {
  return [
    '// Generated from schemas/event.ts by client/scripts/event-schema.ts (npm run client:schema): do not edit.',
    '/* eslint-disable */',
    '/** The service\'s JSON Schema of one event, as POST /v1/events and each item of /v1/events/batch validate it. */',
    `export const eventSchema = ${JSON.stringify(event, null, 2)} as const`,
    '',
  ].join('\n')
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  writeFileSync(new URL('../src/event-schema.ts', import.meta.url), eventSchemaModule())
}
