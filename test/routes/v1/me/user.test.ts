import t from 'tap'
import { createServer, type Server } from 'node:http'
import { exportJWK, generateKeyPair, SignJWT } from 'jose'
import { buildTestApp, newUser, randomId } from '../../../helpers/app.ts'

const local = await buildTestApp(t)

t.test('GET /v1/me creates the user on first sight and returns the spec fields', async (t) => {
  const user = await newUser(local)
  const res = await local.inject({ method: 'GET', url: '/v1/me', headers: user.auth })
  t.equal(res.statusCode, 200)
  t.match(res.json(), { id: /^c[a-z0-9]{24}$/, privyId: user.subject, email: null, wallet: null, handle: null })
  const again = await local.inject({ method: 'GET', url: '/v1/me', headers: user.auth })
  t.equal(again.json().id, res.json().id, 'the same subject is the same user')
})

t.test('PATCH /v1/me sets a handle; unique case-insensitively; validated', async (t) => {
  const alice = await newUser(local)
  const bob = await newUser(local)
  const handle = randomId('h_')
  const ok = await local.inject({ method: 'PATCH', url: '/v1/me', headers: alice.auth, payload: { handle } })
  t.equal(ok.statusCode, 200)
  t.equal(ok.json().handle, handle)
  const got = (await local.inject({ method: 'GET', url: '/v1/me', headers: alice.auth })).json()
  t.equal(got.handle, handle)
  t.same(ok.json(), got, 'PATCH answers the same body as GET, usage included')
  t.match(ok.json().usage, { month: /^\d{4}-\d{2}/, events: 0 })
  const clash = await local.inject({ method: 'PATCH', url: '/v1/me', headers: bob.auth, payload: { handle: handle.toUpperCase() } })
  t.equal(clash.statusCode, 409)
  t.same(clash.json(), { error: 'conflict', reason: 'handle_taken', message: 'this handle is taken by another user; choose another' })
  for (const bad of [{ handle: 'a' }, { handle: 'has space' }, { handle: 7 }, {}, { handle: 'ok_name', extra: 1 }]) {
    const res = await local.inject({ method: 'PATCH', url: '/v1/me', headers: bob.auth, payload: bad })
    t.equal(res.statusCode, 400, JSON.stringify(bad))
  }
  const dashed = await local.inject({ method: 'PATCH', url: '/v1/me', headers: bob.auth, payload: { handle: '-alice' } })
  t.same(dashed.json(), {
    error: 'validation_failed',
    message: 'the body is not valid',
    details: [{ path: ['handle'], message: 'must be 3 to 32 letters, digits, _ or -, not starting or ending with -' }],
  }, 'a handle that breaks the rule is told the rule, not a regex')
})

t.test('missing or malformed tokens are 401 on every /v1/me route', async (t) => {
  for (const [method, url] of [['GET', '/v1/me'], ['PATCH', '/v1/me'], ['GET', '/v1/me/keys'], ['POST', '/v1/me/keys'], ['DELETE', '/v1/me/keys/x'], ['DELETE', '/v1/me/agents/x']] as const) {
    const none = await local.inject({ method, url })
    t.equal(none.statusCode, 401, `${method} ${url} without a token`)
    t.equal(none.json().error, 'unauthorized')
    const junk = await local.inject({ method, url, headers: { authorization: 'Bearer not.a.jwt' } })
    t.equal(junk.statusCode, 401)
  }
})

t.test('an identity provider: ES256 and RS256 accepted; expired, wrong issuer or audience, forged and alg none refused', async (t) => {
  const es = await generateKeyPair('ES256')
  const rs = await generateKeyPair('RS256')
  const stranger = await generateKeyPair('ES256')
  const jwks = { keys: [{ ...(await exportJWK(es.publicKey)), kid: 'es', alg: 'ES256' }, { ...(await exportJWK(rs.publicKey)), kid: 'rs', alg: 'RS256' }] }
  const server: Server = createServer((req, res) => {
    res.setHeader('content-type', 'application/json')
    res.end(JSON.stringify(jwks))
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.teardown(() => new Promise<void>((resolve) => server.close(() => resolve())))
  const port = (server.address() as { port: number }).port
  const app = await buildTestApp(t, { AUTH_JWKS_URL: `http://127.0.0.1:${port}/jwks`, AUTH_ISSUER: 'https://idp.test', AUTH_AUDIENCE: 'dashboard' })

  const sign = (key: CryptoKey | Uint8Array | Parameters<SignJWT['sign']>[0], alg: string, kid: string, claims: { iss?: string; aud?: string; exp?: string | number; sub?: string } = {}) =>
    new SignJWT({}).setProtectedHeader({ alg, kid }).setSubject(claims.sub ?? randomId('idp-')).setIssuer(claims.iss ?? 'https://idp.test')
      .setAudience(claims.aud ?? 'dashboard').setIssuedAt().setExpirationTime(claims.exp ?? '1h').sign(key)
  const me = (token: string) => app.inject({ method: 'GET', url: '/v1/me', headers: { authorization: `Bearer ${token}` } })

  t.equal((await me(await sign(es.privateKey, 'ES256', 'es'))).statusCode, 200, 'ES256')
  t.equal((await me(await sign(rs.privateKey, 'RS256', 'rs'))).statusCode, 200, 'RS256')
  const refused = {
    expired: await sign(es.privateKey, 'ES256', 'es', { exp: Math.floor(Date.now() / 1000) - 60 }),
    'wrong issuer': await sign(es.privateKey, 'ES256', 'es', { iss: 'https://evil.test' }),
    'wrong audience': await sign(es.privateKey, 'ES256', 'es', { aud: 'other' }),
    'bad signature': await sign(stranger.privateKey, 'ES256', 'es'),
    'alg none': [Buffer.from(JSON.stringify({ alg: 'none', typ: 'JWT' })).toString('base64url'),
      Buffer.from(JSON.stringify({ sub: 'x', iss: 'https://idp.test', aud: 'dashboard', exp: Math.floor(Date.now() / 1000) + 600 })).toString('base64url'), ''].join('.'),
  }
  for (const [name, token] of Object.entries(refused)) {
    const res = await me(token)
    t.equal(res.statusCode, 401, name)
    t.equal(res.json().error, 'unauthorized', name)
    t.equal(res.json().reason, name === 'expired' ? 'token_expired' : 'invalid_token', `${name}: the reason`)
  }
  const localUser = await newUser(local)
  t.equal((await me(localUser.token)).statusCode, 401, 'a local token is refused once a provider is configured')
  t.equal((await me(await sign(es.privateKey, 'ES256', 'es', { sub: 'x'.repeat(256) }))).statusCode, 401, 'a subject over 255 characters')
  // A subject is a name: a number or an object is not one turned into text (12345 would be the user "12345").
  for (const [name, sub] of Object.entries({ number: 12345, object: { a: 1 }, empty: '', 'with a NUL': 'carol\u0000', 'a lone surrogate': 'carol\ud800' })) {
    const token = await new SignJWT({ sub } as Record<string, unknown>).setProtectedHeader({ alg: 'ES256', kid: 'es' }).setIssuer('https://idp.test')
      .setAudience('dashboard').setIssuedAt().setExpirationTime('1h').sign(es.privateKey)
    const res = await me(token)
    t.equal(res.statusCode, 401, `a subject that is ${name}`)
    t.equal(res.json().reason, 'invalid_token', `${name}: the reason`)
  }
})

t.test('an unreachable identity provider is a 503, not a 401 or a 500', async (t) => {
  const { createServer: netServer } = await import('node:net')
  const probe = netServer()
  await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve))
  const port = (probe.address() as { port: number }).port
  await new Promise((resolve) => probe.close(resolve))
  const app = await buildTestApp(t, { AUTH_JWKS_URL: `http://127.0.0.1:${port}/jwks`, AUTH_ISSUER: 'https://idp.test', AUTH_AUDIENCE: 'dashboard' })
  const { privateKey } = await generateKeyPair('ES256')
  const token = await new SignJWT({}).setProtectedHeader({ alg: 'ES256', kid: 'k' }).setSubject('x').setIssuer('https://idp.test')
    .setAudience('dashboard').setExpirationTime('1h').sign(privateKey)
  const res = await app.inject({ url: '/v1/me', headers: { authorization: `Bearer ${token}` } })
  t.equal(res.statusCode, 503)
  t.equal(res.json().error, 'auth_unavailable')
  t.equal(res.headers['retry-after'], '5')
})
