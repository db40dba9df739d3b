import t from 'tap'
import { execFile } from 'node:child_process'
import { promisify } from 'node:util'
import { fileURLToPath } from 'node:url'
import { buildTestApp, randomId, TEST_DATA_DIR, TEST_DATABASE_URL } from './helpers/app.ts'

const run = promisify(execFile)
const root = fileURLToPath(new URL('..', import.meta.url))
const env = { ...process.env, DATA_DIR: TEST_DATA_DIR, DATABASE_URL: TEST_DATABASE_URL }
const cli = (script: string, args: string[], extra: Record<string, string> = {}) =>
  run(process.execPath, ['--import', 'tsx', `src/cli/${script}.ts`, ...args], { cwd: root, env: { ...env, ...extra } })

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

t.test('npm run user:tier sets tier and burst override', async (t) => {
  const name = randomId('tier-')
  const { stdout } = await cli('user-tier', [name, 'enterprise', '--burst', '12345'])
  t.match(JSON.parse(stdout), { privyId: name, tier: 'enterprise', burstPerMinute: 12345 })
  const { rows } = await app.db.query('SELECT tier, burst_per_minute FROM users WHERE privy_id = $1', [name])
  t.same(rows[0], { tier: 'enterprise', burst_per_minute: 12345 })
  await t.rejects(cli('user-tier', [name, 'platinum']), { code: 2 })
  await t.rejects(cli('user-tier', [name, 'pro', '--burst', '-1']), { code: 2 })
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
  t.match(JSON.parse(stdout), { inserted: 0, updated: 1, failed: [] })
  const again = await app.db.query('SELECT reputation_score FROM agents WHERE registry_id = $1', [`${token}-1`])
  t.equal(again.rows[0].reputation_score, 9, 'a second import updates in place')
  await t.rejects(cli('registry-import', [join(TEST_DATA_DIR, 'nope.json')]), { code: 2 })
})
