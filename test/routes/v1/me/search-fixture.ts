import type { Test } from 'tap'
import type { FastifyInstance } from 'fastify'
import { buildTestApp, newUser, sendBatch, shipped, type TestUser } from '../../../helpers/app.ts'

// Events to search and a brute-force filter over them in JavaScript: the search tests
// (test/routes/search*.test.ts) compare every answer of the API with it (docs/api.md#search).

export const HOUR = 3_600_000

/** Words in several scripts, and text with LIKE's special characters. */
export const WORDS = [
  'Café crème', 'brûlée', 'naïve façade', 'São Paulo', 'Ångström', 'Cafe\u0301 noir (decomposed)',
  'Ошибка платежа', 'привет мир', 'ДАННЫЕ',
  '订单支付失败了', '数据库连接超时', 'ユーザー認証',
  '🔥 deploy', '✅ done 🚀',
  'payment timeout', 'retry later', '100% done_now', 'path\\to\\file',
]
export const MODELS = ['gpt-4o', 'claude-sonnet-4', 'unknown-model-x', undefined]
export const TOOLS = ['search', 'bash', 'pay', undefined]
export const TYPES = ['reasoning', 'tool', 'tx', 'decision', 'action', 'error']
export const OUTCOMES = ['pending', 'success', 'failed', undefined]
export const ENVS = ['prod', 'staging', 'дев']
export const BRANCHES = ['main', 'feat/支付', 'fix-🔥']

/** A deterministic generator, so a failure can be replayed. */
export function rng (seed: number) {
  let s = seed >>> 0
  return () => {
    s = (s + 0x6d2b79f5) >>> 0
    let x = s
    x = Math.imul(x ^ (x >>> 15), x | 1)
    x ^= x + Math.imul(x ^ (x >>> 7), x | 61)
    return ((x ^ (x >>> 14)) >>> 0) / 4294967296
  }
}

export function generate (n: number, seed: number, now: number) {
  const r = rng(seed)
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(r() * xs.length)]!
  const text = () => Array.from({ length: 1 + Math.floor(r() * 3) }, () => pick(WORDS)).join(' ')
  return Array.from({ length: n }, (_, i) => {
    const metadata: Record<string, unknown> = { env: pick(ENVS), retries: Math.floor(r() * 4) }
    if (r() < 0.6) metadata.traceId = `tr-${Math.floor(r() * 25)}`
    if (r() < 0.6) metadata.sessionId = `se-${Math.floor(r() * 20)}`
    if (r() < 0.5) metadata.git = { branch: pick(BRANCHES) }
    if (r() < 0.3) metadata.flag = r() < 0.5
    if (r() < 0.3) metadata.note = text()
    if (r() < 0.2) metadata.deep = { a: { b: pick(['x', 'y']), c: { d: 'too deep' } } }
    if (r() < 0.3) metadata.privacyLevel = pick(['minimal', 'standard', 'full'])
    if (r() < 0.8) metadata.tokensBreakdown = { inputBase: Math.floor(r() * 5000), cacheCreation: 0, cacheRead: 0, output: Math.floor(r() * 2000) }
    const model = pick(MODELS)
    const tool = pick(TOOLS)
    const outcome = pick(OUTCOMES)
    const type = pick(TYPES)
    return {
      agentId: `search-agent-${i % 3}`,
      type,
      // Spread over the last two days, with ties.
      timestamp: new Date(now - 2 * HOUR - Math.floor(r() * 40) * HOUR - (i % 7) * 1000).toISOString(),
      ...inputOf(i, r() < 0.7 ? { prompt: text(), context: { lang: pick(['fr', 'ru', 'zh']), nested: { hint: pick(WORDS) } } } : undefined),
      ...(r() < 0.6 ? { reasoning: text() } : {}),
      ...(type === 'error' || outcome === 'failed' ? { errorMessage: text() } : {}),
      ...(model ? { model } : {}),
      ...(tool ? { toolExecuted: tool } : {}),
      ...(outcome ? { outcome } : {}),
      ...(r() < 0.6 ? { durationMs: Math.floor(r() * 10_000) } : {}),
      metadata,
    }
  })
}

export type Ev = Record<string, any>

/**
 * An event's input: with every fourth event, a list of messages as an OpenTelemetry span's prompt
 * holds them (an array: searched as its JSON text). Drawn from the event's number, not the generator,
 * so the other values stay those of the seed.
 */
function inputOf (i: number, input: Record<string, unknown> | undefined): { input?: Record<string, unknown> } {
  const messages = i % 4 === 0 ? { messages: [{ role: 'user', parts: [{ type: 'text', content: WORDS[(i * 7) % WORDS.length] }] }] } : undefined
  return input || messages ? { input: { ...input, ...messages } } : {}
}

/**
 * Scalar leaves up to three levels by dotted path (clickhouse/018_search.sql); with `arrays`, an array
 * within those levels is a leaf too, as its JSON text (what q reads of `input`: clickhouse/026).
 */
export function flatten (value: unknown, arrays = false, prefix = '', depth = 1): [string, string][] {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return []
  const out: [string, string][] = []
  for (const [k, v] of Object.entries(value)) {
    const path = prefix ? `${prefix}.${k}` : k
    if (typeof v === 'string') out.push([path, v])
    else if (typeof v === 'number' || typeof v === 'boolean' || (arrays && Array.isArray(v))) out.push([path, JSON.stringify(v)])
    else if (v && typeof v === 'object' && !Array.isArray(v) && depth < 3) out.push(...flatten(v, arrays, path, depth + 1))
  }
  return out
}

export function haystack (e: Ev): string {
  return [...flatten(e.input, true).map((x) => x[1]), e.reasoning ?? '', e.errorMessage ?? '', e.toolExecuted ?? '', e.model ?? '', ...flatten(e.metadata).map((x) => x[1])]
    .join('\n').toLowerCase()
}

export type Filters = Record<string, string | string[]>

/** The brute-force filter: what the API must answer for these parameters. */
export function matches (e: Ev, f: Filters): boolean {
  const all = (k: string) => (f[k] === undefined ? [] : ([] as string[]).concat(f[k]!))
  const inList = (k: string, v: unknown) => all(k).length === 0 || all(k).includes(v as string)
  if (!inList('type', e.type) || !inList('outcome', e.outcome) || !inList('model', e.model) || !inList('tool', e.toolExecuted)) return false
  if (!inList('agentId', e.agentId) || !inList('sessionId', e.sessionId) || !inList('traceId', e.traceId)) return false
  if (!inList('privacyLevel', e.privacyLevel) || !inList('costStatus', e.costStatus) || !inList('fingerprint', e.errorFingerprint)) return false
  if (f.minCostUsd !== undefined && !(e.costUsd >= Number(f.minCostUsd))) return false
  if (f.maxCostUsd !== undefined && !(e.costUsd <= Number(f.maxCostUsd))) return false
  if (f.minDurationMs !== undefined && !(e.durationMs !== null && e.durationMs >= Number(f.minDurationMs))) return false
  if (f.maxDurationMs !== undefined && !(e.durationMs !== null && e.durationMs <= Number(f.maxDurationMs))) return false
  const ms = Date.parse(e.timestamp)
  if (f.from !== undefined && ms < Date.parse(f.from as string)) return false
  if (f.to !== undefined && ms >= Date.parse(f.to as string)) return false
  const flat = flatten(e.metadata)
  for (const [k, v] of Object.entries(f)) {
    if (!k.startsWith('meta.')) continue
    const path = k.slice(5)
    if (!flat.some(([p, x]) => p === path && ([] as string[]).concat(v).includes(x))) return false
  }
  for (const path of all('hasMeta')) {
    if (!flat.some(([p]) => p === path || p.startsWith(`${path}.`))) return false
  }
  if (f.q !== undefined) {
    const hay = haystack(e)
    // A term is looked for composed (NFC) and decomposed (NFD): text keeps the form it was sent in.
    for (const term of terms(f.q as string)) {
      if (![term, term.normalize('NFD')].some((form) => hay.includes(form.toLowerCase()))) return false
    }
  }
  return true
}

/** The terms of q, as docs/api.md states the rules (an independent reading of them). */
export function terms (q: string): string[] {
  const out: string[] = []
  const re = /"([^"]*)"?|([^\s"]+)/g
  for (const m of q.normalize('NFC').matchAll(re)) {
    const t = (m[1] ?? m[2] ?? '').trim().replace(/\s+/g, ' ')
    if (t) out.push(t)
  }
  return out
}

export const newestFirst = (a: Ev, b: Ev) => Date.parse(b.timestamp) - Date.parse(a.timestamp) || (a.eventId < b.eventId ? 1 : a.eventId > b.eventId ? -1 : 0)

export function query (f: Filters): string {
  const p = new URLSearchParams()
  for (const [k, v] of Object.entries(f)) for (const x of ([] as string[]).concat(v)) p.append(k, x)
  return p.toString()
}

/** Walks a list's pages from the first; `afterFirstPage` runs once the first page (the walk's snapshot) is answered. */
export async function walk (app: FastifyInstance, user: TestUser, path: string, key: string, afterFirstPage?: () => void): Promise<Ev[]> {
  const out: Ev[] = []
  let cursor: string | null = null
  let pages = 0
  do {
    const sep = path.includes('?') ? '&' : '?'
    const res: { statusCode: number; body: string; json(): any } = await app.inject({ method: 'GET', url: cursor ? `${path}${sep}cursor=${cursor}` : path, headers: user.auth })
    if (res.statusCode !== 200) throw new Error(`${path}: ${res.statusCode} ${res.body}`)
    out.push(...res.json()[key])
    cursor = res.json().nextCursor
    if (pages === 0) afterFirstPage?.()
    if (++pages > 500) throw new Error('the walk does not end')
  } while (cursor)
  return out
}

export async function setUp (t: Test) {
  const app = await buildTestApp(t)
  const alice = await newUser(app, { burst: 1_000_000 })
  const bob = await newUser(app, { burst: 1_000_000 })
  const now = Date.now()
  const events = generate(360, 42, now)
  const aliceKey = (await alice.createKey()).secret
  const bobKey = (await bob.createKey()).secret
  for (let i = 0; i < events.length; i += 120) {
    const res = await sendBatch(app, aliceKey, events.slice(i, i + 120))
    if (res.statusCode !== 207) throw new Error(res.body)
  }
  // Bob has events matching every filter Alice's searches use: none may show in Alice's answers.
  const res = await sendBatch(app, bobKey, generate(120, 43, now))
  if (res.statusCode !== 207) throw new Error(res.body)
  await shipped(app)
  const stored = await walk(app, alice, '/v1/me/events?since=all&limit=1000', 'events')
  const bobs = await walk(app, bob, '/v1/me/events?since=all&limit=1000', 'events')
  return { app, alice, bob, stored, bobs, now }
}

/** Random combinations of filters and q, drawn from values the events hold (and some they do not). */
export function randomFilters (r: () => number, stored: Ev[]): Filters {
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(r() * xs.length)]!
  const e = pick(stored)
  const f: Filters = {}
  const qTerms = [
    '支付失败', '订单', '超时', 'ошибка', 'ОШИБКА', 'платежа', 'café', 'cafe\u0301', 'CRÈME', 'brûl', 'são paulo', '🔥', '🚀', 'ユーザー',
    '"payment timeout"', '"retry later"', 'pay', '0%', 'e_n', 'path\\to', 'дев', '"привет мир"', 'zzz-nothing',
  ]
  const choices: (() => void)[] = [
    () => { f.type = [pick(TYPES), pick(TYPES)] },
    () => { f.outcome = pick(['pending', 'success', 'failed']) },
    () => { f.model = [e.model ?? 'gpt-4o'] },
    () => { f.tool = [pick(['search', 'bash', 'pay'])] },
    () => { f.agentId = [e.agentId] },
    () => { f.sessionId = [e.sessionId ?? 'se-1', 'se-2'] },
    () => { f.traceId = e.traceId ?? 'tr-3' },
    () => { f.privacyLevel = pick(['minimal', 'standard', 'full']) },
    () => { f.costStatus = [e.costStatus] },
    () => { f.minCostUsd = Number(e.costUsd).toFixed(9) },
    () => { f.maxCostUsd = Number(e.costUsd).toFixed(9) },
    () => { f.minDurationMs = String(Math.floor(r() * 5000)) },
    () => { f.maxDurationMs = String(5000 + Math.floor(r() * 5000)) },
    () => { f.from = new Date(Date.parse(e.timestamp)).toISOString() },
    () => { f.to = new Date(Date.parse(e.timestamp) + 1).toISOString() },
    () => { f['meta.env'] = [pick(ENVS), pick(ENVS)] },
    () => { f['meta.git.branch'] = pick(BRANCHES) },
    () => { f['meta.retries'] = String(Math.floor(r() * 4)) },
    () => { f['meta.flag'] = 'true' },
    () => { f['meta.deep.a.b'] = 'x' },
    () => { f.hasMeta = pick(['git', 'git.branch', 'flag', 'deep.a', 'note', 'nope']) },
    () => { f.q = pick(qTerms) },
    () => { f.q = `${pick(qTerms)} ${pick(qTerms)}` },
  ]
  const n = 1 + Math.floor(r() * 3)
  for (let i = 0; i < n; i++) pick(choices)()
  return f
}
