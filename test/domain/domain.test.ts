import t from 'tap'
import { canonicalJson, contentHash } from '../../src/domain/canonical-json.ts'
import { costOf, priceFamily, nanoToUsd } from '../../src/domain/pricing.ts'
import { errorFingerprint, normaliseErrorMessage } from '../../src/domain/fingerprint.ts'
import { isCuid, newCuid, newEventId } from '../../src/domain/ids.ts'
import { parseIsoDateTime } from '../../src/schemas.ts'
import { loadConfig } from '../../src/config.ts'
import { clampInt, sinceBound } from '../../src/domain/query-params.ts'

t.test('canonical JSON sorts keys at every depth and drops whitespace', async (t) => {
  t.equal(canonicalJson({ b: 1, a: { d: [3, { z: 1, y: 2 }], c: 'x' } }), '{"a":{"c":"x","d":[3,{"y":2,"z":1}]},"b":1}')
  t.equal(contentHash({ a: 1, b: 2 }), contentHash({ b: 2, a: 1 }), 'key order does not change the hash')
  t.not(contentHash({ a: 1 }), contentHash({ a: 2 }))
  t.match(contentHash({}), /^[0-9a-f]{64}$/)
  t.equal(contentHash({}), '44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a', 'SHA-256 of "{}"')
})

t.test('pricing: longest family wins, provider prefixes and dated names match, costs are exact', async (t) => {
  t.equal(priceFamily('gpt-4o-mini-2024-07-18'), 'gpt-4o-mini')
  t.equal(priceFamily('gpt-4o'), 'gpt-4o')
  t.equal(priceFamily('anthropic/claude-sonnet-4-5'), 'claude-sonnet-4-5')
  t.equal(priceFamily('claude-sonnet-4-5@20250929'), 'claude-sonnet-4-5')
  t.equal(priceFamily('o3-mini'), 'o3-mini')
  t.equal(priceFamily('gpt-4oxyz'), undefined, 'a family name must end at a separator')
  t.equal(priceFamily('llama-3'), undefined)
  const tokens = { inputBase: 1_000_000, cacheCreation: 0, cacheRead: 0, output: 1_000_000 }
  t.same(costOf('gpt-4o', tokens), { usd: '12.500000000', nanoUsd: 12_500_000_000, status: 'priced' })
  t.equal(costOf('gemini-2.5-flash', { inputBase: 1, cacheCreation: 0, cacheRead: 1, output: 0 }).usd, '0.000000330')
  t.same(costOf('mystery', tokens), { usd: '0.000000000', nanoUsd: 0, status: 'unknown_model' })
  t.same(costOf(undefined, tokens).status, 'no_model')
  t.equal(nanoToUsd(1), '0.000000001')
  t.equal(nanoToUsd(123_456_789_012), '123.456789012')
})

t.test('fingerprints: volatile parts are normalised; non-errors have none', async (t) => {
  t.equal(normaliseErrorMessage('Timeout after 3000ms calling "api.x" id 9f1c2d3e-1111-2222-3333-444455556666'), 'timeout after <n>ms calling <str> id <uuid>')
  t.equal(normaliseErrorMessage('ENOENT /home/a/b.txt'), 'enoent <path>')
  const base = { type: 'error', outcome: undefined, agentId: 'a', tool: 't' }
  t.equal(errorFingerprint({ ...base, errorMessage: 'rate limit 429 at 12:01' }), errorFingerprint({ ...base, errorMessage: 'Rate limit 429 at 13:55' }))
  t.not(errorFingerprint({ ...base, errorMessage: 'x' }), errorFingerprint({ ...base, agentId: 'b', errorMessage: 'x' }))
  t.equal(errorFingerprint({ ...base, type: 'tool', outcome: 'success', errorMessage: 'x' }), '')
  t.match(errorFingerprint({ ...base, type: 'tool', outcome: 'failed', errorMessage: undefined }), /^[0-9a-f]{16}$/)
})

t.test('ids: cuids match the spec pattern; event ids sort by time', async (t) => {
  for (let i = 0; i < 200; i++) t.ok(isCuid(newCuid()))
  t.notOk(isCuid('C' + 'a'.repeat(24)))
  const a = newEventId(1_000_000)
  const b = newEventId(2_000_000)
  t.match(a, /^evt_[0-9A-HJKMNP-TV-Z]{26}$/)
  t.ok(a < b)
  const same = Array.from({ length: 100 }, () => newEventId(5_000_000))
  t.same([...same].sort(), same, 'monotonic within one millisecond')
})

t.test('timestamps: ISO 8601 with or without zone, real dates only, years 1970-2299', async (t) => {
  t.equal(parseIsoDateTime('2026-01-01T00:00:00Z'), Date.UTC(2026, 0, 1))
  t.equal(parseIsoDateTime('2026-01-01T01:00:00+01:00'), Date.UTC(2026, 0, 1))
  t.equal(parseIsoDateTime('2026-01-01T00:00:00'), Date.UTC(2026, 0, 1), 'no zone means UTC')
  t.equal(parseIsoDateTime('2026-01-01T00:00:00.123456Z'), Date.UTC(2026, 0, 1) + 123)
  for (const bad of ['2026-02-30T00:00:00Z', '2026-13-01T00:00:00Z', '1969-12-31T23:59:59Z', '2300-01-01T00:00:00Z', '2026-01-01', 'soon']) {
    t.ok(Number.isNaN(parseIsoDateTime(bad)), bad)
  }
})

t.test('config: defaults per ARCHITECTURE, every bad setting named, provider settings go together', async (t) => {
  const c = loadConfig({})
  t.equal(c.port, 3000)
  t.equal(c.host, '127.0.0.1')
  t.equal(c.databaseUrl, 'postgres://localhost:5432/agent_telemetry')
  t.equal(c.redisUrl, 'redis://127.0.0.1:6379')
  t.equal(c.clickhouseUrl, undefined)
  t.same(c.roles, { api: true, worker: true })
  t.same(c.auth, { local: true })
  t.equal(c.corsOrigins.length, 2)
  t.throws(() => loadConfig({ PORT: 'abc', ROLES: 'web' }), { name: 'ConfigError' })
  try {
    loadConfig({ PORT: 'abc', ROLES: 'web' })
  } catch (err) {
    t.match((err as Error).message, /PORT/)
    t.match((err as Error).message, /ROLES/)
  }
  t.throws(() => loadConfig({ AUTH_JWKS_URL: 'https://idp.example/jwks' }), { name: 'ConfigError' }, 'a provider needs issuer and audience')
  const idp = loadConfig({ AUTH_JWKS_URL: 'https://idp.example/jwks', AUTH_ISSUER: 'i', AUTH_AUDIENCE: 'a' })
  t.same(idp.auth, { jwksUrl: 'https://idp.example/jwks', issuer: 'i', audience: 'a' })
  t.same(loadConfig({ ROLES: 'worker' }).roles, { api: false, worker: true })
})

t.test('regression: since=__proto__ (or any Object.prototype name) falls back like any unknown value, not NaN', async (t) => {
  const now = Date.UTC(2026, 0, 10)
  for (const since of ['__proto__', 'constructor', 'toString', 'hasOwnProperty', 'valueOf']) {
    t.equal(sinceBound(since, now), 0, `${since}: the default, all`)
    t.equal(sinceBound(since, now, '7d'), now - 7 * 86_400_000, `${since}: the route's default`)
  }
  t.equal(sinceBound('24h', now), now - 86_400_000)
  t.equal(sinceBound(['24h'], now), 0, 'a repeated parameter is not a window')
  t.equal(clampInt('1e309', 1, 1000, 50), 50)
  t.equal(clampInt('-0', 1, 1000, 50), 1)
  t.equal(clampInt('9007199254740993', 1, 1000, 50), 1000)
})
