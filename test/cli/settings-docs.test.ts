import t from 'tap'
import { execFile } from 'node:child_process'
import { readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import { SETTINGS } from '../../src/config.ts'
import { settingsTable, withSettingsTable } from '../../src/cli/settings-table.ts'
import { TS_LOADER_ARGS } from '../helpers/ts-loader.ts'

const run = promisify(execFile)
const root = fileURLToPath(new URL('../..', import.meta.url))
const OPERATIONS = join(root, 'docs/operations.md')
const docsCli = (args: string[]) => run(process.execPath, [...TS_LOADER_ARGS, 'src/cli/settings-docs.ts', ...args], { cwd: root })

t.test('one row a setting, with its default, its values and its description', async (t) => {
  const table = settingsTable(SETTINGS)
  t.equal(table.split('\n').filter((line) => line.startsWith('| `')).length, SETTINGS.length)
  t.match(table, '| `PORT` | `3000` | `0` .. `65535` | port of the HTTP API |')
  t.match(table, '| `CLICKHOUSE_URL` | unset | matching `^https?://` |')
  t.match(table, '| `TRUST_PROXY` | `false` | `true`, `false` |')
  t.match(table, '| `ROLES` | `api,worker` | matching `^(api\\|worker)(,(api\\|worker))*$` |', 'a | inside a cell is escaped')
})

t.test('a changed description changes the table, so the check fails', async (t) => {
  const doc = readFileSync(OPERATIONS, 'utf8')
  t.equal(withSettingsTable(doc, settingsTable(SETTINGS)), doc, 'docs/operations.md is up to date')
  const changed = SETTINGS.map((s) => s.name === 'PORT' ? { ...s, schema: { ...s.schema, description: 'where to listen' } } : s)
  const regenerated = withSettingsTable(doc, settingsTable(changed))
  t.not(regenerated, doc)
  t.match(regenerated, '| `PORT` | `3000` | `0` .. `65535` | where to listen |')
  t.throws(() => withSettingsTable('# no markers\n', settingsTable(SETTINGS)), /no <!-- settings:start --> … <!-- settings:end --> markers/)
})

t.test('docs:check fails on a stale table and docs:settings rewrites it', async (t) => {
  const dir = t.testdir()
  const doc = join(dir, 'operations.md')
  const current = readFileSync(OPERATIONS, 'utf8')
  writeFileSync(doc, current.replace('| port of the HTTP API |', '| an old description |'))
  await t.rejects(docsCli(['--check', '--doc', doc]), { code: 1, stderr: /settings table differs .*run npm run docs:settings/ })
  await docsCli(['--doc', doc])
  t.equal(readFileSync(doc, 'utf8'), current)
  await t.resolves(docsCli(['--check', '--doc', doc]))
})
