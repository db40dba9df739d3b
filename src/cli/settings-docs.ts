/**
 * Writes the settings table of docs/operations.md from the schema in src/config.ts; with --check,
 * writes nothing and exits 1 when the table differs. --doc names another file (tests).
 *   npm run docs:settings
 *   npm run docs:check
 */
import { readFileSync, writeFileSync } from 'node:fs'
import { relative } from 'node:path'
import { fileURLToPath } from 'node:url'
import { cliArgs } from './args.ts'
import { SETTINGS } from '../config.ts'
import { settingsTable, withSettingsTable } from './settings-table.ts'

const { values } = cliArgs({
  options: {
    check: { type: 'boolean', default: false },
    doc: { type: 'string', default: fileURLToPath(new URL('../../docs/operations.md', import.meta.url)) },
  },
}, {
  usage: 'usage: npm run docs:settings | npm run docs:check (-- --check [--doc file])',
  about: 'Writes the settings table of docs/operations.md from the schema in src/config.ts; with --check, writes nothing and exits 1 when it differs.',
})
const name = relative(process.cwd(), values.doc)
const doc = readFileSync(values.doc, 'utf8')
const generated = withSettingsTable(doc, settingsTable(SETTINGS))
if (generated === doc) process.exit(0)
if (values.check) {
  console.error(`${name}: the settings table differs from the schema in src/config.ts; run npm run docs:settings`)
  process.exit(1)
}
writeFileSync(values.doc, generated)
console.log(`${name}: settings table written`)
