import t from 'tap'
import { createServer, type Server } from 'node:http'
import type { InjectOptions, LightMyRequestResponse } from 'fastify'
import { buildTestApp, newUser, randomId, sendEvent, shipped } from './helpers/app.ts'
import { DEFAULT_THRESHOLDS } from '../src/domain/anomaly-rules.ts'

// A seeded, bounded fuzz of every route: valid-looking requests mutated into wrong types, numbers
// JSON.parse cannot hold, lone surrogates, NUL, deep nesting, prototype keys, broken JSON and query
// strings, odd path ids and bad credentials. Whatever arrives, the answer is never a 5xx, an error is
// JSON with an `error` code, and nothing the service accepted is refused later by ClickHouse.
// Reproduce a failure with FUZZ_SEED=<seed> (the seed is in the test name).

const SEED = process.env.FUZZ_SEED !== undefined ? Number(process.env.FUZZ_SEED) >>> 0 : 0x5eed_2025
const REQUESTS = Number(process.env.FUZZ_REQUESTS ?? 3000)
const CONCURRENCY = 6

/** mulberry32: a small, fast PRNG whose whole state is one 32-bit integer. */
function mulberry32 (seed: number): () => number {
  let a = seed >>> 0
  return () => {
    a = (a + 0x6d2b79f5) >>> 0
    let x = Math.imul(a ^ (a >>> 15), 1 | a)
    x = (x + Math.imul(x ^ (x >>> 7), 61 | x)) ^ x
    return ((x ^ (x >>> 14)) >>> 0) / 4294967296
  }
}

const random = mulberry32(SEED)
const int = (n: number) => Math.floor(random() * n)
const chance = (p: number) => random() < p
const pick = <T>(items: readonly T[]): T => items[int(items.length)]!

/** JSON text written as is (number literals JSON.stringify cannot produce, nesting built as text). */
class Raw { constructor (readonly text: string) {} }
/** An object as a list of pairs, so keys can repeat or be `__proto__`. */
class Pairs { constructor (readonly pairs: [string, unknown][]) {} }

function toJson (v: unknown): string {
  if (v instanceof Raw) return v.text
  if (v instanceof Pairs) return `{${v.pairs.map(([k, x]) => `${JSON.stringify(k)}:${toJson(x)}`).join(',')}}`
  if (Array.isArray(v)) return `[${v.map(toJson).join(',')}]`
  if (v !== null && typeof v === 'object') return toJson(new Pairs(Object.entries(v)))
  // JSON.stringify escapes a lone surrogate as \udXXX, which JSON.parse turns back into one.
  return JSON.stringify(v) ?? 'null'
}

function deep (levels: number): Raw {
  const array = chance(0.5)
  const open = array ? '[' : '{"d":'
  const close = array ? ']' : '}'
  return new Raw(open.repeat(levels) + (chance(0.5) ? '1' : '"leaf"') + close.repeat(levels))
}

const NUMBER_LITERALS = ['1e309', '-1e309', '-0', '-0.0', '9007199254740993', '-9007199254740993', '9007199254740992', '1e-400', '2e-323',
  '1.7976931348623157e308', '18446744073709551616', '123456789012345678901234567890', '1e21', '0.5', '-1', '0', '4291747200000', '1E2', '0e0']
const STRINGS = ['\ud800', 'a\udc00b', '\udfff\ud800', '\u0000', 'a\u0000b', '😀', '\u202eevil', '', ' ', '\uffff', '\ufeff', 'é'.normalize('NFD'),
  '%00', '../../etc/passwd', '<script>', "'; DROP TABLE agents; --", '{{7*7}}', '\\', '"', '\n\r\t', 'null', 'NaN', 'Infinity', '__proto__']
const TIMESTAMPS = ['2106-01-01T00:00:00Z', '2105-12-31T23:59:59Z', '1970-01-01T00:00:00+05:00', '1969-12-31T23:59:59Z', '2026-02-30T00:00:00Z',
  '+275760-09-13T00:00:00Z', '0000-01-01T00:00:00Z', '2025-13-01T00:00:00Z', '2025-01-01T24:00:00Z', '2025-01-01 10:00', '2025-01-01T10:00:00.1234567891Z',
  '2025-06-01T10:00:00+99:99', 'yesterday']

function randomText (max = 40): string {
  const n = int(max)
  let s = ''
  for (let i = 0; i < n; i++) {
    const r = random()
    s += r < 0.7 ? String.fromCharCode(32 + int(95)) : r < 0.85 ? String.fromCharCode(0x80 + int(0x700)) : r < 0.95 ? String.fromCodePoint(0x1f300 + int(0x300)) : String.fromCharCode(int(32))
  }
  return s
}

/** A value that breaks something: a wrong type, an impossible number, bad text, deep nesting. */
function poison (): unknown {
  switch (int(11)) {
    case 0: case 1: return new Raw(pick(NUMBER_LITERALS))
    case 2: case 3: return pick(STRINGS)
    case 4: return pick([true, false, null, 0, 1.5, -42])
    case 5: return 'x'.repeat(pick([101, 121, 201, 255, 1001, 20_000]))
    case 6: return pick([[], {}, [1, 'a', null], [{}], { a: [] }])
    case 7: return deep(40 + int(2961))
    case 8: return pick(TIMESTAMPS)
    case 9: return randomText(60)
    default: return pick([Date.now(), -1, 4291747200000, 8.64e15, 1e15])
  }
}

const isPlain = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === 'object' && !Array.isArray(v) && !(v instanceof Raw) && !(v instanceof Pairs)

/** One mutation somewhere in the tree: descend at random, then replace, add, remove or repeat a key. */
function mutateOnce (v: unknown): unknown {
  if (isPlain(v)) {
    const keys = Object.keys(v)
    if (keys.length > 0 && chance(0.55)) {
      const k = pick(keys)
      return { ...v, [k]: mutateOnce(v[k]) }
    }
    const pairs = Object.entries(v)
    switch (int(7)) {
      case 0: return new Pairs([...pairs, [pick(['extra', 'unknownKey', '', ' ', 'agentid', 'AGENTID']), poison()]])
      case 1: return new Pairs([...pairs, [pick(['__proto__', 'constructor']), pick([{ polluted: true }, { prototype: { polluted: true } }, 1, null])]])
      case 2: return new Pairs([...pairs, [pick(['k\ud800', '\udc00', 'a\u0000b', '😀']), 1]])
      case 3: return keys.length > 0 ? new Pairs(pairs.filter(([k]) => k !== pick(keys))) : poison()
      case 4: return keys.length > 0 ? new Pairs([...pairs, [pick(keys), poison()]]) : poison()
      case 5: return pick([[v], Object.values(v), []])
      default: return poison()
    }
  }
  if (Array.isArray(v) && v.length > 0 && chance(0.6)) {
    const copy = [...v]
    const i = int(copy.length)
    copy[i] = mutateOnce(copy[i])
    return copy
  }
  if (Array.isArray(v) && chance(0.3)) return Object.fromEntries(v.map((x, i) => [String(i), x]))
  return poison()
}

interface Ctx {
  agentIds: string[]
  /** The user's agents that DELETE /v1/me/agents/:id may remove (the others are aimed at by the other routes). */
  spareAgentIds: string[]
  otherAgentId: string
  agentNames: string[]
  sessions: string[]
  traces: string[]
  fingerprints: string[]
  alertIds: string[]
  spareKeyIds: string[]
  otherKeyId: string
}

function event (ctx: Ctx): Record<string, unknown> {
  const e: Record<string, unknown> = { agentId: pick(ctx.agentNames) }
  if (chance(0.7)) e.type = pick(['reasoning', 'tool', 'tx', 'decision', 'action', 'error'])
  if (chance(0.5)) e.reasoning = randomText(80)
  if (chance(0.3)) e.timestamp = chance(0.5) ? new Date(Date.now() - int(86_400_000)).toISOString() : Date.now() - int(86_400_000)
  if (chance(0.3)) e.toolsConsidered = [randomText(10), randomText(10)]
  if (chance(0.4)) e.toolExecuted = pick(['search', 'swap', 'bash'])
  if (chance(0.4)) e.outcome = pick(['pending', 'success', 'failed'])
  if (chance(0.4)) e.durationMs = int(10_000)
  if (chance(0.3)) e.model = pick(['claude-sonnet-4-5', 'gpt-4o', 'gemini-2.5-pro', 'unknown-model'])
  if (chance(0.2)) e.amount = { token: pick(['USDC', 'SOL']), value: random() * 100 }
  if (chance(0.2)) e.errorMessage = `failed at step ${int(100)}`
  if (chance(0.2)) e.input = { prompt: randomText(40), context: { k: randomText(10) } }
  if (chance(0.2)) e.transaction = chance(0.5) ? null : randomId('tx-')
  if (chance(0.6)) {
    const m: Record<string, unknown> = {}
    if (chance(0.5)) m.sessionId = pick(ctx.sessions)
    if (chance(0.5)) m.traceId = pick(ctx.traces)
    if (chance(0.4)) m.tokensBreakdown = { inputBase: int(5000), cacheCreation: int(100), cacheRead: int(100), output: int(1000) }
    if (chance(0.3)) m.privacyLevel = pick(['minimal', 'standard', 'full'])
    if (chance(0.3)) m.tool = pick(['claude-code', 'cursor'])
    if (chance(0.2)) m.git = chance(0.5) ? { branch: 'main', sha: 'abc' } : 'main'
    if (chance(0.2)) m.cwd = '/home/agent'
    if (chance(0.3)) m.note = randomText(30)
    e.metadata = m
  }
  return e
}

function alertSettings (): Record<string, unknown> {
  const body: Record<string, unknown> = {}
  for (const [rule, defaults] of Object.entries(DEFAULT_THRESHOLDS)) {
    if (!chance(0.5)) continue
    const fields: Record<string, unknown> = {}
    for (const [field, value] of Object.entries(defaults as Record<string, unknown>)) {
      if (chance(0.5)) fields[field] = typeof value === 'boolean' ? chance(0.5) : field === 'minRate' ? 0.1 + random() * 0.9 : 1 + int(100)
    }
    body[rule] = fields
  }
  return body
}

/** What a request is made of, kept so a failure can be printed and replayed. */
interface Req { route: string; method: string; url: string; headers: Record<string, string>; payload?: string; remoteAddress?: string }

interface Credentials { key: string; boundKey: string; revokedKey: string; token: string; otherToken: string }

function keyAuth (c: Credentials): Record<string, string> {
  if (chance(0.88)) return { authorization: `Bearer ${chance(0.9) ? c.key : c.boundKey}` }
  return pick<Record<string, string>>([
    {}, { authorization: 'Bearer ' }, { authorization: `Bearer ${c.revokedKey}` }, { authorization: `Bearer ${c.token}` },
    { authorization: `bearer ${c.key}` }, { authorization: `Basic ${Buffer.from('a:b').toString('base64')}` },
    { authorization: `Bearer vk_${'A'.repeat(43)}` }, { authorization: `Bearer ${c.key}x` }, { authorization: `Bearer vk_${'z'.repeat(5000)}` },
    { authorization: `Bearer ${c.key} ${c.key}` },
  ])
}

function userAuth (c: Credentials): Record<string, string> {
  if (chance(0.85)) return { authorization: `Bearer ${c.token}` }
  if (chance(0.3)) return { authorization: `Bearer ${c.otherToken}` }
  const [h, p] = c.token.split('.')
  return pick<Record<string, string>>([
    {}, { authorization: 'Bearer ' }, { authorization: `Bearer ${c.key}` }, { authorization: 'Bearer a.b.c' },
    { authorization: `Bearer ${h}.${p}.` }, { authorization: `Bearer ${Buffer.from('{"alg":"none"}').toString('base64url')}.${p}.` },
    { authorization: `Bearer ${c.token.slice(0, -3)}abc` }, { authorization: `Bearer ${'x'.repeat(9000)}` }, { authorization: c.token },
  ])
}

const CONTENT_TYPES = ['text/plain', 'application/x-www-form-urlencoded', 'multipart/form-data; boundary=x', 'application/jsonx',
  'application/json; charset=utf-16', 'application/json; charset=latin1', 'APPLICATION/JSON', 'application/vnd.api+json', '', 'application/octet-stream']

/**
 * A body for a route: mostly the valid one mutated once or a few times; sometimes replaced outright
 * (empty, invalid JSON, duplicate keys, a JSON scalar, near the body limit) or sent with another
 * content type.
 */
function body (valid: () => unknown, limit: number): { payload: string; contentType?: string } {
  const r = random()
  let text: string
  if (r < 0.15) text = toJson(valid())
  else if (r < 0.7) {
    let v = valid()
    for (let n = 1 + int(3); n > 0; n--) v = mutateOnce(v)
    text = toJson(v)
  } else if (r < 0.8) {
    const good = toJson(valid())
    text = pick(['', ' ', '{', '}', '[', 'nul', '{"a":}', '{"a":1,}', "{'a':1}", '{"a":1}{"b":2}', '\ufeff{}', good.slice(0, Math.max(1, int(good.length))),
      good + 'x', `${good}\u0000`, '{"a":"\\ud800"', '{"a":"\\x41"}', '{"a":01}', '{"a":.5}', '{"a":+1}', '{"a":NaN}', '{"a":Infinity}', '{"a":1e}', '"\\u0000"'])
  } else if (r < 0.87) {
    text = pick(['null', 'true', '0', '"text"', '[]', '[{}]', '{}', '1e309', '[1,2,3]', `[${toJson(valid())}]`])
  } else if (r < 0.92) {
    const good = valid()
    const entries = isPlain(good) ? Object.entries(good) : []
    const pairs = entries.length > 0 ? entries : [['a', 1] as [string, unknown]]
    const [k, v] = pick(pairs)
    text = toJson(new Pairs([...pairs, [k, chance(0.5) ? poison() : v]]))
  } else if (r < 0.94) {
    // Near and over the route's body limit.
    const size = limit + pick([-300, -1, 0, 1, 1000])
    const filler = chance(0.5) ? 'x' : '\ud800'
    text = `{"agentId":"big","reasoning":"${filler === 'x' ? 'x'.repeat(Math.max(0, size - 40)) : '\\ud800'.repeat(Math.max(0, Math.floor((size - 40) / 6)))}"}`
  } else {
    text = toJson(chance(0.5) ? valid() : mutateOnce(valid()))
    return { payload: text, contentType: pick(CONTENT_TYPES) }
  }
  return { payload: text, contentType: chance(0.97) ? 'application/json' : undefined }
}

// Query values: lenient and strict parameters alike must answer 200 or 400, never 500.
const QUERY_VALUES = ['', '-1', '0', '1', '2', '50', '200', '201', '1000', '1001', '365', '366', '1e309', '9007199254740993', '-9007199254740993', 'NaN',
  'Infinity', '-Infinity', '-0', '1.5', '0x10', '1e3', ' 5', 'abc', 'true', 'false', 'all', '24h', '7d', '30d', '1y', 'active', 'acknowledged', 'snoozed',
  'identified', 'unknown', '%00', '%', '%zz', '%E0%A4%A', '%ED%A0%80', '%F0%9F%98%80', '%C0%80', '%FF', '+', '%2B', '%20', '%0A', 'a%26b%3Dc', 'x'.repeat(5000),
  '%27%3B%20DROP%20TABLE%20agents%3B--', '%25', '__proto__', 'constructor', '%5B%5D']

function queryString (params: string[]): string {
  const parts: string[] = []
  const names = [...params, 'unknown', '__proto__', 'constructor', 'limit[]', 'since[0]', '', '%00', 'a%ZZ', '😀']
  for (let n = int(5); n > 0; n--) {
    const name = chance(0.8) && params.length > 0 ? pick(params) : pick(names)
    if (chance(0.1)) parts.push(name)
    else parts.push(`${name}=${pick(QUERY_VALUES)}`)
  }
  if (parts.length === 0) return chance(0.2) ? pick(['?', '?&', '?=', '?&&=&']) : ''
  return `?${parts.join('&')}`
}

/** A path id: mostly a real one, else odd ones (long, unicode, encoded slashes, NUL, broken escapes). */
function pathId (real: string[]): string {
  if (real.length > 0 && chance(0.45)) return encodeURIComponent(pick(real))
  return pick([
    () => randomId('c'), () => `c${'a'.repeat(24)}`, () => '0123456789abcdef', () => 'ABCDEF0123456789', () => 'x'.repeat(64), () => 'x'.repeat(65),
    () => 'x'.repeat(200), () => 'x'.repeat(201), () => 'x'.repeat(400), () => 'x'.repeat(401), () => 'x'.repeat(3000), () => '%F0%9F%98%80'.repeat(100),
    () => '%F0%9F%98%80'.repeat(201), () => encodeURIComponent('ü😀'), () => '%2F', () => 'a%2Fb', () => '%2e%2e', () => '..', () => '%00', () => 'a%00b',
    () => '%', () => '%zz', () => '%ED%A0%80', () => '%C0%AF', () => '%20', () => 'a%20', () => ';', () => '*', () => '-1', () => '1e309', () => '__proto__',
    () => 'constructor', () => encodeURIComponent(randomText(30)), () => encodeURIComponent('\ud83d\ude00'), () => '%5Cu0000', () => 'a%3Fb%23c',
  ])()
}

function buildRequest (ctx: Ctx, c: Credentials, bodyLimit: number): Req {
  const json = (route: string, method: string, url: string, headers: Record<string, string>, valid: () => unknown, limit = bodyLimit): Req => {
    const b = body(valid, limit)
    return { route, method, url, headers: { ...headers, ...(b.contentType !== undefined ? { 'content-type': b.contentType } : {}) }, payload: b.payload }
  }
  const get = (route: string, path: string, params: string[], auth: Record<string, string> = userAuth(c)): Req =>
    ({ route, method: 'GET', url: path + queryString(params), headers: auth })
  const agentIds = [...ctx.agentIds, ctx.otherAgentId]
  const r = int(100)
  // Writes
  if (r < 20) return json('POST /v1/events', 'POST', '/v1/events' + (chance(0.1) ? queryString(['agentId']) : ''), keyAuth(c), () => event(ctx))
  if (r < 30) return json('POST /v1/events/batch', 'POST', '/v1/events/batch', keyAuth(c), () => ({ events: Array.from({ length: 1 + int(6) }, () => (chance(0.2) ? mutateOnce(event(ctx)) : event(ctx))) }), 5 * 1024 * 1024)
  if (r < 33) {
    const req = json('POST /v1/waitlist', 'POST', '/v1/waitlist', {}, () => ({ email: `fuzz-${int(1e9)}@example.com`, ...(chance(0.5) ? { source: 'landing' } : {}), ...(chance(0.3) ? { metadata: { ref: randomText(10) } } : {}) }), 16 * 1024)
    // Five per hour per client address: most requests come from an address of their own.
    return { ...req, remoteAddress: chance(0.9) ? `10.${int(256)}.${int(256)}.${int(256)}` : '127.0.0.1' }
  }
  if (r < 36) return json('PATCH /v1/me', 'PATCH', '/v1/me', userAuth(c), () => ({ handle: `h_${randomId()}` }))
  if (r < 39) return json('POST /v1/me/keys', 'POST', '/v1/me/keys', userAuth(c), () => ({ label: randomText(20) || 'k', ...(chance(0.4) ? { agentId: pick(agentIds) } : {}) }))
  if (r < 41) return { route: 'DELETE /v1/me/keys/:id', method: 'DELETE', url: `/v1/me/keys/${pathId([...ctx.spareKeyIds, ctx.otherKeyId])}`, headers: userAuth(c) }
  if (r < 44) return json('PATCH /v1/me/agents/:id', 'PATCH', `/v1/me/agents/${pathId(agentIds)}`, userAuth(c), () => ({ displayName: chance(0.8) ? randomText(30) || 'n' : pick(ctx.agentNames) }))
  if (r < 45) return { route: 'DELETE /v1/me/agents/:id', method: 'DELETE', url: `/v1/me/agents/${pathId([ctx.otherAgentId])}`, headers: userAuth(c) }
  if (r < 47) {
    return chance(0.5) ? { route: 'POST /v1/me/test-event', method: 'POST', url: '/v1/me/test-event', headers: userAuth(c) } : json('POST /v1/me/test-event', 'POST', '/v1/me/test-event', userAuth(c), () => ({}))
  }
  if (r < 50) {
    const method = pick(['POST', 'DELETE'])
    return { route: `${method} /v1/me/errors/:fingerprint/resolve`, method, url: `/v1/me/errors/${pathId(ctx.fingerprints)}/resolve`, headers: userAuth(c) }
  }
  if (r < 53) {
    const action = pick(['acknowledge', 'snooze', 'unacknowledge'])
    return { route: `POST /v1/me/alerts/:id/${action}`, method: 'POST', url: `/v1/me/alerts/${pathId(ctx.alertIds)}/${action}${action === 'snooze' || chance(0.2) ? queryString(['hours']) : ''}`, headers: userAuth(c) }
  }
  if (r < 56) return json('PUT /v1/me/alert-settings', 'PUT', '/v1/me/alert-settings', userAuth(c), alertSettings)
  // Reads
  if (r < 58) return get('GET /v1/me', '/v1/me', [])
  if (r < 59) return get('GET /v1/me/keys', '/v1/me/keys', [])
  if (r < 61) return get('GET /v1/me/agents', '/v1/me/agents', [])
  if (r < 64) return get('GET /v1/me/agents/:id', `/v1/me/agents/${pathId(agentIds)}`, [])
  if (r < 67) return get('GET /v1/me/events', '/v1/me/events', ['limit', 'since', 'agentId'])
  if (r < 69) return get('GET /v1/me/sessions', '/v1/me/sessions', ['limit'])
  if (r < 72) return get('GET /v1/me/sessions/:id', `/v1/me/sessions/${pathId(ctx.sessions)}`, [])
  if (r < 74) return get('GET /v1/me/traces', '/v1/me/traces', ['limit', 'since'])
  if (r < 77) return get('GET /v1/me/traces/:id', `/v1/me/traces/${pathId(ctx.traces)}`, [])
  if (r < 79) return get('GET /v1/me/errors', '/v1/me/errors', ['since'])
  if (r < 81) return get('GET /v1/me/spend-summary', '/v1/me/spend-summary', ['days'])
  if (r < 83) return get('GET /v1/me/alerts', '/v1/me/alerts', ['status', 'count', 'limit'])
  if (r < 84) return get('GET /v1/me/alert-settings', '/v1/me/alert-settings', [])
  if (r < 88) return get('GET /v1/agents', '/v1/agents', ['limit', 'offset', 'search', 'filter'], {})
  if (r < 91) return get('GET /v1/agents/:id', `/v1/agents/${pathId(agentIds)}`, [], {})
  if (r < 93) return get('GET /v1/stats', '/v1/stats', ['since'], {})
  if (r < 95) return get('GET /v1/explorer', '/v1/explorer', ['limit'], {})
  if (r < 96) return get('GET /v1/x402', '/v1/x402', ['chain'], {})
  if (r < 97) return get('GET /health', '/health', ['verbose'], {})
  // Methods and paths no route has.
  return {
    route: 'no route',
    method: pick(['GET', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS']),
    url: pick(['/v1/events', '/v1/me/keys', '/v1/nope', '/v1/me/agents/', '/v1/me/alerts/x/explode', '//v1//me', '/v1/agents/%', '/%00', '/v1/me/errors/%zz/resolve']),
    headers: chance(0.5) ? userAuth(c) : keyAuth(c),
  }
}

function describe (req: Req, res?: LightMyRequestResponse, err?: unknown): string {
  const payload = req.payload === undefined ? '(none)' : `${JSON.stringify(req.payload.slice(0, 300))}${req.payload.length > 300 ? `… (${req.payload.length} chars)` : ''}`
  const headers = Object.entries(req.headers).map(([k, v]) => `${k}: ${v.length > 60 ? `${v.slice(0, 60)}… (${v.length})` : v}`).join('; ')
  const answer = res ? `${res.statusCode} ${res.body.slice(0, 300)}` : `threw ${String(err)}`
  return `${req.method} ${req.url.length > 300 ? `${req.url.slice(0, 300)}… (${req.url.length} chars)` : req.url}\n  headers: ${headers}\n  body: ${payload}\n  answer: ${answer}`
}

/** Problems with one answer: a 5xx, or an error that is not JSON with an `error` code. */
function problemOf (res: LightMyRequestResponse): string | null {
  if (res.statusCode >= 500) return `status ${res.statusCode}`
  if (res.statusCode >= 400) {
    try {
      const parsed = res.json()
      if (typeof parsed?.error !== 'string') return 'error body without an `error` code'
    } catch {
      return 'error body is not JSON'
    }
  }
  return null
}

// A local x402 upstream, so /v1/x402 has something to serve (without one it is a documented 503).
const upstream: Server = createServer((_req, res) => {
  res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ topSellers: [], recentTransfers: [], facilitator: {} }))
})
await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve))
t.teardown(() => new Promise<void>((resolve) => { upstream.closeAllConnections(); upstream.close(() => resolve()) }))
const upstreamUrl = `http://127.0.0.1:${(upstream.address() as { port: number }).port}`

const app = await buildTestApp(t, {
  // Per-user limits on /v1/me would turn most of the fuzz into 429s.
  ME_READS_PER_MINUTE: '1000000',
  ME_WRITES_PER_MINUTE: '1000000',
  X402_BASE_URL: `${upstreamUrl}/base`,
  X402_CACHE_SECONDS: '60',
})

t.test('regression: since=__proto__ (an Object.prototype name) on the dashboard reads is the default window, not a 500', async (t) => {
  const user = await newUser(app)
  for (const path of ['/v1/me/events', '/v1/me/traces', '/v1/me/errors']) {
    for (const since of ['__proto__', 'constructor', 'toString', 'hasOwnProperty']) {
      const res = await app.inject({ url: `${path}?since=${since}`, headers: user.auth })
      t.equal(res.statusCode, 200, `${path}?since=${since}: ${res.body}`)
    }
  }
})

t.test(`fuzz: ${REQUESTS} seeded requests over every route never answer 5xx (FUZZ_SEED=${SEED})`, async (t) => {
  const user = await newUser(app, { tier: 'enterprise', burst: 1_000_000 })
  const other = await newUser(app)
  const key = await user.createKey('fuzz')

  // Data to aim at: agents, sessions, traces, an error cluster, alerts, spare keys; and another user's ids.
  const agentNames = ['fuzz-a', 'fuzz-b', 'fuzz-c']
  const sessions = [randomId('s-'), randomId('s-')]
  const traces = [randomId('t-'), randomId('t-')]
  const agentIds: string[] = []
  for (const name of agentNames) {
    const res = await sendEvent(app, key.secret, { agentId: name, type: 'error', errorMessage: `boom in ${name}`, metadata: { sessionId: sessions[0], traceId: traces[0] } })
    t.equal(res.statusCode, 202, `seed event for ${name}`)
    agentIds.push(res.json().agentId)
  }
  const spareAgentIds: string[] = []
  for (const name of ['fuzz-spare-1', 'fuzz-spare-2']) spareAgentIds.push((await sendEvent(app, key.secret, { agentId: name })).json().agentId)
  // One agent in the public registry, so that GET /v1/agents/:id can find one.
  await app.db.query('UPDATE agents SET is_public = true WHERE id = $1', [agentIds[0]])
  const bound = await user.createKey('bound', agentIds[0])
  const revoked = await user.createKey('revoked')
  t.equal((await app.inject({ method: 'DELETE', url: `/v1/me/keys/${revoked.id}`, headers: user.auth })).statusCode, 204, 'a revoked key to try')
  const spareKeyIds = [(await user.createKey('spare-1')).id, (await user.createKey('spare-2')).id]
  const otherKey = await other.createKey('other')
  const otherAgentId = (await sendEvent(app, otherKey.secret, { agentId: 'other-agent' })).json().agentId
  await shipped(app)
  const fingerprints = (await app.inject({ url: '/v1/me/errors?since=all', headers: user.auth })).json().clusters.map((c: { fingerprint: string }) => c.fingerprint)
  t.ok(fingerprints.length > 0, 'an error cluster to resolve')
  const alertIds: string[] = []
  // Several per state change to try (acknowledge, snooze, unacknowledge), so that some find their alert in a state that allows it.
  for (const agentId of agentIds) {
    for (const rule of ['error_rate', 'silence', 'spend_spike']) {
      alertIds.push((await app.alerts.raise({ userId: user.id, agentId, rule, severity: 'warning', message: 'fuzz', figures: {} })).id)
    }
  }
  alertIds.push((await app.alerts.raise({ userId: other.id, agentId: otherAgentId, rule: 'silence', severity: 'warning', message: 'other', figures: {} })).id)

  const ctx: Ctx = { agentIds, spareAgentIds, otherAgentId, agentNames, sessions, traces, fingerprints, alertIds, spareKeyIds, otherKeyId: otherKey.id }
  const credentials: Credentials = { key: key.secret, boundKey: bound.secret, revokedKey: revoked.secret, token: user.token, otherToken: other.token }
  const bodyLimit = app.initialConfig.bodyLimit ?? 1_048_576
  // Generated up front, so the sequence depends on the seed alone, not on answers or their order.
  const requests = Array.from({ length: REQUESTS }, () => buildRequest(ctx, credentials, bodyLimit))

  const failures: string[] = []
  const statuses = new Map<string, number>()
  const timeByRoute = new Map<string, number>()
  const started = Date.now()
  let next = 0
  await Promise.all(Array.from({ length: CONCURRENCY }, async () => {
    while (next < requests.length) {
      const i = next++
      const req = requests[i]!
      const options: InjectOptions = { method: req.method as InjectOptions['method'], url: req.url, headers: req.headers }
      if (req.payload !== undefined) options.payload = req.payload
      if (req.remoteAddress !== undefined) options.remoteAddress = req.remoteAddress
      let res: LightMyRequestResponse | undefined
      const sent = Date.now()
      try {
        res = await app.inject(options)
      } catch (err) {
        failures.push(`#${i} ${describe(req, undefined, err)}`)
        continue
      }
      const label = `${req.route} ${res.statusCode}`
      statuses.set(label, (statuses.get(label) ?? 0) + 1)
      timeByRoute.set(req.route, (timeByRoute.get(req.route) ?? 0) + Date.now() - sent)
      const problem = problemOf(res)
      if (problem) failures.push(`#${i} ${problem}: ${describe(req, res)}`)
    }
  }))
  const elapsed = Date.now() - started
  t.comment(`${requests.length} requests in ${elapsed} ms (seed ${SEED})`)
  t.comment(`answers by route and status:\n${[...statuses.entries()].sort().map(([k, n]) => `${k}: ${n}`).join('\n')}`)
  t.comment(`time by route (ms, summed over concurrent requests):\n${[...timeByRoute.entries()].sort((a, b) => b[1] - a[1]).map(([k, ms]) => `${k}: ${ms}`).join('\n')}`)
  if (failures.length > 0) t.comment(`${failures.length} failing requests; the first ones:\n${failures.slice(0, 15).join('\n')}`)
  t.equal(failures.length, 0, 'every answer is below 500, and every error is JSON with an `error` code')
  // Refusing everything would pass the check above: the fuzz must also reach each route's handler.
  const routes = new Map<string, { sent: number; succeeded: number }>()
  for (const [label, n] of statuses) {
    const [route, status] = [label.slice(0, label.lastIndexOf(' ')), Number(label.slice(label.lastIndexOf(' ') + 1))]
    const counts = routes.get(route) ?? { sent: 0, succeeded: 0 }
    counts.sent += n
    if (status >= 200 && status < 300) counts.succeeded += n
    routes.set(route, counts)
  }
  routes.delete('no route')
  const unreached = [...routes].filter(([, { succeeded }]) => succeeded === 0).map(([route]) => route)
  t.same(unreached, [], 'every route answered at least one request with a 2xx')
  const reads = [...routes].filter(([route, { sent, succeeded }]) => route.startsWith('GET ') && succeeded < 0.05 * sent).map(([route]) => route)
  t.same(reads, [], 'every read answered at least a twentieth of its requests with a 2xx')
  const all = [...routes.values()].reduce((sum, r) => ({ sent: sum.sent + r.sent, succeeded: sum.succeeded + r.succeeded }), { sent: 0, succeeded: 0 })
  t.ok(all.succeeded >= 0.2 * all.sent, `${all.succeeded} of ${all.sent} requests to a route answered with a 2xx`)

  await shipped(app, 20_000)
  const health = await app.inject({ url: '/health' })
  t.equal(health.statusCode, 200, 'healthy at the end')
  t.equal(health.json().ingest.quarantinedRows, 0, 'ClickHouse refused none of the accepted events')
  t.equal(health.json().ingest.insertsFailing, null)
  t.equal(health.json().ingest.backlogRows, 0, 'everything accepted was shipped')
  t.equal(({} as Record<string, unknown>).polluted, undefined, 'no prototype was polluted')
})
