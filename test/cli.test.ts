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
  const { stdout } = await cli('token', [name])
  const res = await app.inject({ method: 'GET', url: '/v1/me', headers: { authorization: `Bearer ${stdout.trim()}` } })
  t.equal(res.statusCode, 200)
  t.equal(res.json().privyId, name)
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
