import t from 'tap'
import pg from 'pg'
import { exportJWK, generateKeyPair, importJWK, SignJWT, type JWK } from 'jose'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { buildApp } from '../../src/app.ts'
import { createPool, withDefaultUser } from '../../src/storage/postgres.ts'
import { LOCAL_AUDIENCE, LOCAL_ISSUER } from '../../src/auth/local-signing-key.ts'
import { newUser, randomId, sendEvent, testConfig, TEST_DATA_DIR, TEST_DATABASE_URL } from '../helpers/app.ts'

const app = await buildApp(testConfig(), { logger: false })
t.teardown(() => app.close())

// Test-only routes: one that fails with a plain error behind an error response schema, and one that
// queries a pool the test points at a Postgres that refuses it.
app.get('/test/fails', { schema: { response: { '5xx': { $ref: 'error.json#' } } } }, async () => {
  throw new Error('internal detail that must not leak')
})
const pools = new Map<string, pg.Pool>()
t.teardown(() => Promise.all([...pools.values()].map((p) => p.end())))
app.get<{ Params: { name: string } }>('/test/query/:name', async (request) => {
  await pools.get(request.params.name)!.query('SELECT 1')
  return { ok: true }
})
await app.ready()

const admin = new pg.Client({ connectionString: withDefaultUser(TEST_DATABASE_URL) })
await admin.connect()
t.teardown(() => admin.end())

function urlFor (database: string, user?: string): string {
  const url = new URL(TEST_DATABASE_URL)
  url.pathname = `/${database}`
  if (user) url.username = user
  return url.toString()
}

t.test('a lone UTF-16 surrogate anywhere in a waitlist body is a 400, not a 500', async (t) => {
  // Each from its own address, so the waitlist's 5 an hour never gets in the way.
  const join = (fields: string) => app.inject({
    method: 'POST',
    url: '/v1/waitlist',
    remoteAddress: `10.${Math.floor(Math.random() * 250)}.${Math.floor(Math.random() * 250)}.${Math.floor(Math.random() * 250)}`,
    headers: { 'content-type': 'application/json' },
    payload: `{"email":"${randomId('w')}@example.com",${fields}}`,
  })
  for (const metadata of ['{"note":"x\\ud800"}', '{"x\\udc00":1}', '{"deep":[{"a":"\\ud800y"}]}']) {
    const res = await join(`"metadata":${metadata}`)
    t.equal(res.statusCode, 400, metadata)
    t.equal(res.json().error, 'validation_failed', 'refused by the input rules before Postgres sees it')
    t.match(res.json().details[0].message, /lone surrogate/)
  }
  const source = await join('"source":"x\\ud800"')
  t.equal(source.statusCode, 400, 'in source')
  t.same(source.json().details.map((d: { path: unknown }) => d.path), [['source']])
  const paired = await join('"source":"ad \\ud83d\\ude42","metadata":{"note":"\\ud83d\\ude42"}')
  t.equal(paired.statusCode, 200, 'a surrogate pair is fine')
})

t.test('session and trace ids of 101-200 characters have working detail routes', async (t) => {
  const user = await newUser(app, { tier: 'enterprise' })
  const key = await user.createKey()
  const ids = ['s'.repeat(101), 'x/y?z#'.repeat(33) + 'ab', '🙂'.repeat(200), 'é'.repeat(200)]
  for (const id of ids) {
    const ack = await sendEvent(app, key.secret, { agentId: 'long-ids', type: 'tool', metadata: { sessionId: id, traceId: id } })
    t.equal(ack.statusCode, 202, ack.body)
    const session = await app.inject({ url: `/v1/me/sessions/${encodeURIComponent(id)}`, headers: user.auth })
    t.equal(session.statusCode, 200, `session of ${[...id].length} characters`)
    t.equal(session.json().sessionId, id)
    const trace = await app.inject({ url: `/v1/me/traces/${encodeURIComponent(id)}`, headers: user.auth })
    t.equal(trace.statusCode, 200, `trace of ${[...id].length} characters`)
    t.equal(trace.json().traceId, id)
  }
  const tooLongForSchema = await app.inject({ url: `/v1/me/sessions/${'s'.repeat(201)}`, headers: user.auth })
  t.equal(tooLongForSchema.statusCode, 400)
})

t.test('an over-long path parameter is a 414 in our error format, without the URL', async (t) => {
  const user = await newUser(app)
  const id = `secret${'q'.repeat(500)}`
  const res = await app.inject({ url: `/v1/me/sessions/${id}`, headers: user.auth })
  t.equal(res.statusCode, 414)
  t.same(res.json(), { error: 'uri_too_long', message: 'a path parameter is too long' })
  t.notMatch(res.body, 'secret')
  const badEscape = await app.inject({ url: '/v1/me/sessions/%E0%A4%A', headers: user.auth })
  t.equal(badEscape.statusCode, 400)
  t.equal(badEscape.json().error, 'bad_request')
  t.notMatch(badEscape.body, '%E0')
})

t.test('a 500 behind an error response schema keeps its requestId', async (t) => {
  const res = await app.inject({ url: '/test/fails' })
  t.equal(res.statusCode, 500)
  t.same(Object.keys(res.json()).sort(), ['error', 'requestId'])
  t.equal(res.json().error, 'internal_error')
  t.match(res.json().requestId, /\S/)
  t.notMatch(res.body, 'internal detail')
})

t.test('POST /v1/events validation errors keep their message and details through the error schema', async (t) => {
  const user = await newUser(app)
  const key = await user.createKey()
  const res = await sendEvent(app, key.secret, { agentId: 'a', type: 'nope' })
  t.equal(res.statusCode, 400)
  t.same(Object.keys(res.json()).sort(), ['details', 'error', 'message'])
  t.equal(res.json().message, 'the body is not valid')
  t.ok(res.json().details.length > 0)
})

t.test('in local-key mode every token of a foreign algorithm or malformed header is a 401, never a 5xx', async (t) => {
  const claims = () => new SignJWT({}).setSubject(randomId('user-')).setIssuer(LOCAL_ISSUER).setAudience(LOCAL_AUDIENCE).setIssuedAt().setExpirationTime('1h')
  const b64 = (value: unknown) => Buffer.from(typeof value === 'string' ? value : JSON.stringify(value)).toString('base64url')
  const payload = { sub: randomId('user-'), iss: LOCAL_ISSUER, aud: LOCAL_AUDIENCE, exp: Math.floor(Date.now() / 1000) + 3600 }
  const rsa = await generateKeyPair('RS256')
  const otherEc = await generateKeyPair('ES256')
  const es384 = await generateKeyPair('ES384')
  const localJwk = JSON.parse(readFileSync(join(TEST_DATA_DIR, 'auth', 'local-signing-key.json'), 'utf8')) as JWK
  const { d: _d, ...publicJwk } = localJwk
  const publicKeyAsHmacSecret = new TextEncoder().encode(JSON.stringify(publicJwk))
  const tokens: Record<string, string> = {
    RS256: await claims().setProtectedHeader({ alg: 'RS256' }).sign(rsa.privateKey),
    'RS256 with its key embedded in the header': await claims().setProtectedHeader({ alg: 'RS256', jwk: await exportJWK(rsa.publicKey) }).sign(rsa.privateKey),
    ES384: await claims().setProtectedHeader({ alg: 'ES384' }).sign(es384.privateKey),
    'ES256 from another key': await claims().setProtectedHeader({ alg: 'ES256' }).sign(otherEc.privateKey),
    'HS256 keyed with the public key': await claims().setProtectedHeader({ alg: 'HS256' }).sign(publicKeyAsHmacSecret),
    'alg none': `${b64({ alg: 'none', typ: 'JWT' })}.${b64(payload)}.`,
    'alg NONE': `${b64({ alg: 'NONE' })}.${b64(payload)}.${b64('sig')}`,
    'unknown alg': `${b64({ alg: 'XY999' })}.${b64(payload)}.${b64('sig')}`,
    'no alg': `${b64({ typ: 'JWT' })}.${b64(payload)}.${b64('sig')}`,
    'alg not a string': `${b64({ alg: 7 })}.${b64(payload)}.${b64('sig')}`,
    'header not JSON': `${b64('{not json')}.${b64(payload)}.${b64('sig')}`,
    'header a JSON array': `${b64([1, 2])}.${b64(payload)}.${b64('sig')}`,
    'header not base64url': `***.${b64(payload)}.${b64('sig')}`,
    'critical header unknown': `${b64({ alg: 'ES256', crit: ['x'], x: 1 })}.${b64(payload)}.${b64('sig')}`,
    'two parts': `${b64({ alg: 'ES256' })}.${b64(payload)}`,
    'JWE-shaped': `${b64({ alg: 'RSA-OAEP', enc: 'A256GCM' })}.a.b.c.d`,
  }
  t.ok(await importJWK(publicJwk, 'ES256'), 'the local public key is readable')
  for (const [name, token] of Object.entries(tokens)) {
    const res = await app.inject({ url: '/v1/me', headers: { authorization: `Bearer ${token}` } })
    t.equal(res.statusCode, 401, name)
    t.same(res.json(), { error: 'unauthorized', reason: 'invalid_token' }, name)
  }
})

t.test('Postgres refusing connections (55000, 53300, 3D000) answers 503 with Retry-After', async (t) => {
  const closed = `at_closed_${randomId()}_test`
  await admin.query(`CREATE DATABASE ${closed}`)
  await admin.query(`ALTER DATABASE ${closed} ALLOW_CONNECTIONS false`)
  t.teardown(() => admin.query(`DROP DATABASE IF EXISTS ${closed}`))
  const role = `at_limited_${randomId()}`
  await admin.query(`CREATE ROLE ${role} LOGIN CONNECTION LIMIT 0`)
  t.teardown(() => admin.query(`DROP ROLE IF EXISTS ${role}`))

  const cases = {
    '55000 (database not accepting connections)': urlFor(closed),
    '53300 (too many connections)': urlFor(new URL(TEST_DATABASE_URL).pathname.slice(1), role),
    '3D000 (database does not exist)': urlFor(`at_missing_${randomId()}_test`),
  }
  for (const [name, url] of Object.entries(cases)) {
    const pool = createPool(url)
    pool.on('error', () => {})
    pools.set(name, pool)
    const res = await app.inject({ url: `/test/query/${encodeURIComponent(name)}` })
    t.equal(res.statusCode, 503, name)
    t.equal(res.headers['retry-after'], '1', name)
    t.equal(res.json().error, 'unavailable', name)
  }
})

t.test('a schema failure names the part of the request in a sentence that reads', async (t) => {
  const user = await newUser(app)
  const key = await user.createKey()
  const res = await app.inject({ method: 'POST', url: '/v1/events', headers: { authorization: `Bearer ${key.secret}`, 'content-type': 'application/json', 'idempotency-key': 'x'.repeat(300) }, payload: { agentId: randomId('a-') } })
  t.equal(res.statusCode, 400)
  t.equal(res.json().message, 'the headers are not valid')
  t.match(res.json().details, [{ path: ['idempotency-key'] }])
})
