import t from 'tap'
import { execFile } from 'node:child_process'
import { promisify } from 'node:util'
import { fileURLToPath } from 'node:url'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { buildTestApp, newUser, randomId, TEST_DATA_DIR, TEST_DATABASE_URL } from '../helpers/app.ts'
import { describePostgres } from '../../src/storage/postgres.ts'
import { TS_LOADER_ARGS } from '../helpers/ts-loader.ts'

const run = promisify(execFile)
const root = fileURLToPath(new URL('../..', import.meta.url))
const env = { ...process.env, DATA_DIR: TEST_DATA_DIR, DATABASE_URL: TEST_DATABASE_URL }
const cli = (script: string, args: string[], extra: Record<string, string> = {}) =>
  run(process.execPath, [...TS_LOADER_ARGS, `src/cli/${script}.ts`, ...args], { cwd: root, env: { ...env, ...extra } })

const app = await buildTestApp(t)

t.test('npm run token prints a token the service accepts for that user', async (t) => {
  const name = randomId('cli-')
  const { stdout, stderr } = await cli('token', [name], { PORT: '3999' })
  const res = await app.inject({ method: 'GET', url: '/v1/me', headers: { authorization: `Bearer ${stdout.trim()}` } })
  t.equal(res.statusCode, 200)
  t.equal(res.json().privyId, name)
  t.equal(stderr.trim(), `open the dashboard: http://127.0.0.1:3999/#token=${stdout.trim()}`, 'and the web UI URL that signs in with it')
})

t.test('the token command refuses when an identity provider is configured', async (t) => {
  await t.rejects(cli('token', ['x'], { AUTH_JWKS_URL: 'http://127.0.0.1:9/jwks', AUTH_ISSUER: 'i', AUTH_AUDIENCE: 'a' }), { code: 2 })
  await t.rejects(cli('token', []), { code: 2 }, 'a user name is required')
})

t.test('npm run user:tier sets tier and burst override, and says in which database', async (t) => {
  const name = (await newUser(app)).subject
  const { stdout } = await cli('user-tier', [name, 'enterprise', '--burst', '12345'])
  t.equal(stdout.trim(), `${name}: tier enterprise, burst 12345/min (${describePostgres(TEST_DATABASE_URL)})`)
  t.notMatch(describePostgres('postgres://bob:s3cret@db.example:6543/telemetry'), /bob|s3cret/, 'never the user or password')
  t.equal(describePostgres('postgres://bob:s3cret@db.example:6543/telemetry'), 'postgres://db.example:6543/telemetry')
  const { rows } = await app.db.query('SELECT tier, burst_per_minute FROM users WHERE privy_id = $1', [name])
  t.same(rows[0], { tier: 'enterprise', burst_per_minute: 12345 })
  await t.rejects(cli('user-tier', [name, 'platinum']), { code: 2 })
  // A prefix no running instance uses (the service's is another): the change is made, and the
  // command says the instances were not told.
  const lonely = `nobody-${randomId()}:`
  const unheard = await cli('user-tier', [name, 'pro'], { REDIS_PREFIX: lonely })
  t.equal(unheard.stdout.trim(), `${name}: tier pro (${describePostgres(TEST_DATABASE_URL)})`)
  t.match(unheard.stderr, new RegExp(`no running instance listens on Redis .* under REDIS_PREFIX "${lonely}"`), 'the command says no instance heard it')
  await t.rejects(cli('user-tier', [name, 'pro', '--burst', '-1']), { code: 2 })
})

t.test('npm run user:tier creates no user and no database: an unknown user or database is an error naming it', async (t) => {
  const name = randomId('nobody-')
  const unknown = await cli('user-tier', [name, 'pro']).then(() => null, (err) => err)
  t.match(unknown, { code: 1 }, 'an unknown user fails')
  t.match(unknown?.stderr, new RegExp(`no user "${name}" in ${describePostgres(TEST_DATABASE_URL)}`))
  t.equal(unknown?.stdout, '', 'no success printed')
  t.equal((await app.db.query('SELECT 1 FROM users WHERE privy_id = $1', [name])).rowCount, 0, 'and it was not created')

  const database = `agent_telemetry_missing_${randomId().replace(/-/g, '_')}_test`
  const url = new URL(TEST_DATABASE_URL)
  url.pathname = `/${database}`
  for (const [script, args] of [['user-tier', [name, 'pro']], ['registry-import', [join(TEST_DATA_DIR, 'absent.json')]]] as const) {
    if (script === 'registry-import') (await import('node:fs')).writeFileSync(args[0], '[]')
    const missing = await cli(script, [...args], { DATABASE_URL: url.toString() }).then(() => null, (err) => err)
    t.match(missing, { code: 1 }, `${script}: a DATABASE_URL naming no database fails`)
    t.match(missing?.stderr, new RegExp(`no database ${describePostgres(url.toString())}`))
    t.notMatch(missing?.stderr, /\n\s+at /, 'no stack trace')
  }
  t.equal((await app.db.query('SELECT 1 FROM pg_database WHERE datname = $1', [database])).rowCount, 0, 'no database was created')
})

t.test('user:tier and registry:import: a wrong DATABASE_URL is one line naming the store, no stack', async (t) => {
  const file = join(TEST_DATA_DIR, `${randomId('empty-')}.json`)
  ;(await import('node:fs')).writeFileSync(file, '[]')
  const cases = [
    { url: 'postgres://localhost:5999/x', code: 1, says: /cannot reach postgres:\/\/localhost:5999\/x: connection refused/ },
    { url: 'postgres://nosuchrole:pw@localhost:5432/x', code: 1, says: /postgres:\/\/localhost:5432\/x refused the login: role "nosuchrole" does not exist/ },
    { url: 'not a url', code: 2, says: /invalid settings: DATABASE_URL must match/ },
    { url: 'postgres://[bad', code: 2, says: /invalid settings: DATABASE_URL is not a valid URL/ },
  ]
  // The two tools share the check (openExistingPostgres) and each catch a ConfigError: every case
  // with user:tier, the login and settings ones with registry:import too. In parallel, to keep the
  // file within its time.
  const runs = [
    ...cases.map((c) => ({ ...c, script: 'user-tier', tool: 'user:tier', args: ['someone', 'pro'] })),
    ...cases.filter((c) => c.code === 2 || /nosuchrole/.test(c.url)).map((c) => ({ ...c, script: 'registry-import', tool: 'registry:import', args: [file] })),
  ]
  const results = await Promise.all(runs.map((r) => cli(r.script, r.args, { DATABASE_URL: r.url }).then(() => null, (err) => err)))
  for (const [i, { url, code, says, script, tool }] of runs.entries()) {
    const failed = results[i]
    t.match(failed, { code }, `${script} with ${url}: exit code ${code}`)
    const lines = String(failed?.stderr ?? '').trim().split('\n')
    t.equal(lines.length, 1, `${script} with ${url}: one line`)
    t.match(lines[0], new RegExp(`^${tool}: `), 'prefixed with the tool')
    t.match(lines[0], says)
    t.notMatch(failed?.stderr, /\bpw\b|\n\s+at /, 'no password, no stack trace')
  }
})

t.test('npm run token says when it created a new signing key, and where', async (t) => {
  const dataDir = mkdtempSync(join(tmpdir(), 'cli-token-'))
  t.teardown(() => rmSync(dataDir, { recursive: true, force: true }))
  const first = await cli('token', ['someone'], { DATA_DIR: dataDir })
  t.match(first.stderr, `created a new signing key ${join(dataDir, 'auth', 'local-signing-key.json')}`)
  const second = await cli('token', ['someone'], { DATA_DIR: dataDir })
  t.notMatch(second.stderr, /created/, 'not when the key exists')
})

t.test('npm run registry:import upserts public agents by registryId and reports bad entries', async (t) => {
  const { writeFileSync } = await import('node:fs')
  const { join } = await import('node:path')
  const token = randomId('imp')
  const file = join(TEST_DATA_DIR, `${token}.json`)
  const entries = [
    { registryId: `${token}-1`, snsName: `${token}-1.sol`, reputationScore: 7.5, enriched: { name: 'One', description: 'first', profiled: true }, metadata: { agentUri: 'https://a.example/1', feedback_count: 3 } },
    { registryId: `${token}-2`, displayName: 'Two', isPublic: false },
    { snsName: 'missing-registry-id.sol' },
  ]
  writeFileSync(file, JSON.stringify({ agents: entries }))
  await t.rejects(cli('registry-import', [file]), { code: 1 }, 'exit 1 when an entry failed')
  const { rows } = await app.db.query('SELECT * FROM agents WHERE registry_id LIKE $1 ORDER BY registry_id', [`${token}-%`])
  t.equal(rows.length, 2)
  t.match(rows[0], { sns_name: `${token}-1.sol`, display_name: 'One', reputation_score: 7.5, is_public: true, owner_id: null, source: 'registry' })
  t.match(rows[1], { display_name: 'Two', is_public: false })
  const listed = await app.inject({ url: `/v1/agents?search=${token}` })
  t.equal(listed.json().total, 1, 'only the public one is listed')

  writeFileSync(file, JSON.stringify([{ ...entries[0], reputationScore: 9 }]))
  const { stdout } = await cli('registry-import', [file])
  t.match(JSON.parse(stdout), { database: describePostgres(TEST_DATABASE_URL), inserted: 0, updated: 1, failed: [] })
  const again = await app.db.query('SELECT reputation_score FROM agents WHERE registry_id = $1', [`${token}-1`])
  t.equal(again.rows[0].reputation_score, 9, 'a second import updates in place')
  await t.rejects(cli('registry-import', [join(TEST_DATA_DIR, 'nope.json')]), { code: 2 })
})

t.test('every tool answers --help with what it does and its usage, and an unknown option with its usage, exit 2, no stack', async (t) => {
  const tools: Array<[string, RegExp]> = [
    ['seed', /usage: npm run seed/], ['quarantine', /usage: npm run ingest:quarantine/], ['settings-docs', /usage: npm run docs:settings/],
    ['token', /usage: npm run token/], ['user-tier', /usage: npm run user:tier/], ['registry-import', /usage: npm run registry:import/],
    ['migrate', /usage: .*src\/cli\/migrate\.ts/], ['worker-health', /usage: .*src\/cli\/worker-health\.ts/],
  ]
  for (const [tool, usage] of tools) {
    // With a database that does not exist: --help must answer before reaching any store.
    const help = await cli(tool, ['--help'], { DATABASE_URL: 'postgres://127.0.0.1:1/none', REDIS_URL: 'redis://127.0.0.1:1' })
    t.match(help.stdout, usage, `${tool} --help`)
    t.ok(help.stdout.split('\n')[0]!.length > 20, `${tool} --help says what it does`)
    const unknown = await cli(tool, ['--no-such-option'], { DATABASE_URL: 'postgres://127.0.0.1:1/none' }).then(() => null, (err: { code: number; stderr: string }) => err)
    t.equal(unknown?.code, 2, `${tool} --no-such-option exits 2`)
    t.match(unknown?.stderr, /Unknown option '--no-such-option'/)
    t.match(unknown?.stderr, usage)
    t.notMatch(unknown?.stderr, /\n\s+at /, 'no stack trace')
  }
  const tier = await cli('user-tier', ['alice', 'gold']).then(() => null, (err: { code: number; stderr: string }) => err)
  t.equal(tier?.code, 2)
  t.match(tier?.stderr, /the tier must be free, pro or enterprise \(got "gold"\)/, 'says what is wrong, not only the usage')
})
