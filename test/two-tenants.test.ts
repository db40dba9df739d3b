import t from 'tap'
import type { FastifyInstance } from 'fastify'
import { buildTestApp, newUser, randomId, shipped } from './helpers/app.ts'

// One tenant's poisoned events never hurt another tenant's stream: while user A sends events built to
// break the stores (lone surrogates, overflowing and unsafe numbers, deep nesting, NUL, out-of-range
// timestamps, bodies at the limit), user B's valid stream is accepted in full and stored exactly once,
// and ClickHouse refuses nothing (a refused row would otherwise fail the shared insert).

const RUN_MS = 2500
// B spreads its events over 8 agents and stops at this many, so each agent's events fit the one page
// (1000) GET /v1/me/events lists and every one of them can be read back.
const B_AGENTS = 8
const B_MAX_EVENTS = 7000
const BODY_LIMIT = 1_048_576

function post (app: FastifyInstance, secret: string, url: string, body: string) {
  return app.inject({ method: 'POST', url, headers: { authorization: `Bearer ${secret}`, 'content-type': 'application/json' }, payload: body })
}

function deep (levels: number): string {
  return '{"d":'.repeat(levels) + '1' + '}'.repeat(levels)
}

/** A poisoned event as JSON text, and the status the service answers for it alone (README, Input rules). */
interface Poison { name: string; text: string; status: number }

const LONE = '\\ud800'
const poisons = (agentId: string, i: number): Poison[] => [
  {
    name: 'lone surrogates in every string field',
    text: `{"agentId":"${agentId}${LONE}","type":"tool","reasoning":"r${LONE}","toolExecuted":"t\\udc00","toolsConsidered":["a${LONE}"],` +
      `"errorMessage":"\\udfff","model":"m${LONE}","transaction":"x${LONE}","input":{"prompt":"${LONE}","context":{"k${LONE}":"v"}},` +
      `"amount":{"token":"T${LONE}","value":1},"metadata":{"sessionId":"s${LONE}","traceId":"t${LONE}","note":"${LONE}"}}`,
    status: 400,
  },
  { name: 'lone surrogate in a metadata key', text: `{"agentId":"${agentId}","metadata":{"k${LONE}":1}}`, status: 400 },
  { name: '1e309 amount', text: `{"agentId":"${agentId}","type":"tx","amount":{"token":"USDC","value":1e309}}`, status: 400 },
  { name: '-1e309 amount', text: `{"agentId":"${agentId}","type":"tx","amount":{"token":"USDC","value":-1e309}}`, status: 400 },
  { name: '1e-400 amount', text: `{"agentId":"${agentId}","type":"tx","amount":{"token":"USDC","value":1e-400}}`, status: 400 },
  { name: 'metadata 3000 levels deep', text: `{"agentId":"${agentId}","metadata":${deep(3000)}}`, status: 400 },
  { name: 'input.context 3000 levels deep', text: `{"agentId":"${agentId}","input":{"context":${deep(3000)}}}`, status: 400 },
  { name: '2^53+1 durationMs', text: `{"agentId":"${agentId}","durationMs":9007199254740993}`, status: 400 },
  { name: '2^53+1 token count', text: `{"agentId":"${agentId}","metadata":{"tokensBreakdown":{"output":9007199254740993}}}`, status: 400 },
  { name: '2^53+1 in free metadata', text: `{"agentId":"${agentId}","metadata":{"n":-9007199254740993}}`, status: 400 },
  { name: 'year-2106 timestamp', text: `{"agentId":"${agentId}","timestamp":"2106-01-01T00:00:00Z"}`, status: 400 },
  { name: 'year-2106 unix ms', text: `{"agentId":"${agentId}","timestamp":4291747200000}`, status: 400 },
  { name: '1969 timestamp', text: `{"agentId":"${agentId}","timestamp":"1970-01-01T00:00:00+05:00"}`, status: 400 },
  // NUL is allowed in events: ClickHouse stores it as sent (README, Input rules).
  { name: 'NUL bytes', text: `{"agentId":"${agentId}","reasoning":"a\\u0000b-${i}","metadata":{"k\\u0000":"\\u0000"}}`, status: 202 },
]

/** Huge poisons (every few requests): at the body limit, with a lone surrogate, just under the limit, and over it. */
function hugePoison (agentId: string, i: number): Poison {
  const room = BODY_LIMIT - 100
  switch (i % 3) {
    case 0: return { name: 'huge string with a lone surrogate at the end', text: `{"agentId":"${agentId}","reasoning":"${'x'.repeat(room)}${LONE}"}`, status: 400 }
    case 1: return { name: 'huge valid string just under the limit', text: `{"agentId":"${agentId}","reasoning":"${'x'.repeat(room)}"}`, status: 202 }
    default: return { name: 'huge string over the limit', text: `{"agentId":"${agentId}","reasoning":"${'x'.repeat(BODY_LIMIT)}"}`, status: 413 }
  }
}

async function storedIds (app: FastifyInstance, userId: string): Promise<string[]> {
  const rs = await app.clickhouse.query({
    query: 'SELECT event_id FROM events WHERE user_id = {u:String}',
    query_params: { u: userId },
    format: 'JSONEachRow',
  })
  return (await rs.json<{ event_id: string }>()).map((r) => r.event_id)
}

t.test('one tenant\'s poisoned events never hurt another tenant\'s stream', async (t) => {
  const app = await buildTestApp(t)
  const a = await newUser(app, { tier: 'enterprise', burst: 1_000_000 })
  const b = await newUser(app, { tier: 'enterprise', burst: 1_000_000 })
  const keyA = await a.createKey('poison')
  const keyB = await b.createKey('valid')
  const agentA = randomId('poisoner-')
  const agentsB = Array.from({ length: B_AGENTS }, () => randomId('steady-'))

  const acceptedA = new Set<string>()
  const acceptedB = new Set<string>()
  const agentOfB = new Map<string, string>()
  const unexpected: string[] = []
  const counts = { aSingle: 0, aBatch: 0, aBatchEvents: 0, bSingle: 0, bBatch: 0 }
  const until = Date.now() + RUN_MS
  const note = (what: string, status: number, expected: number, body: string) => {
    if (status !== expected) unexpected.push(`${what}: ${status} (expected ${expected}) ${body.slice(0, 300)}`)
  }

  const tenantA = async () => {
    const singles = async () => {
      for (let i = 0; Date.now() < until; i++) {
        const list = poisons(agentA, i)
        const p = i % 10 === 9 ? hugePoison(agentA, Math.floor(i / 10)) : list[i % list.length]!
        const res = await post(app, keyA.secret, '/v1/events', p.text)
        counts.aSingle++
        note(`A single ${p.name}`, res.statusCode, p.status, res.body)
        if (res.statusCode >= 400) {
          let error: unknown
          try { error = res.json().error } catch { error = undefined }
          if (typeof error !== 'string') unexpected.push(`A single ${p.name}: error body without a code: ${res.body.slice(0, 200)}`)
        }
        if (res.statusCode === 202) acceptedA.add(res.json().eventId)
      }
    }
    const batches = async () => {
      for (let i = 0; Date.now() < until; i++) {
        // Poison and valid events alternate, so every batch mixes both.
        const list = poisons(agentA, i)
        const items: Poison[] = []
        for (let j = 0; j < 12; j++) {
          items.push(j % 2 === 0
            ? { name: 'valid', text: JSON.stringify({ agentId: agentA, reasoning: `valid ${i}.${j}`, durationMs: j, metadata: { sessionId: `sa-${i}` } }), status: 202 }
            : list[(i * 6 + j) % list.length]!)
        }
        if (i % 8 === 7) items.push(hugePoison(agentA, 0)) // about 1 MiB, under the batch limit
        const res = await post(app, keyA.secret, '/v1/events/batch', `{"events":[${items.map((p) => p.text).join(',')}]}`)
        counts.aBatch++
        counts.aBatchEvents += items.length
        note(`A batch ${i}`, res.statusCode, 207, res.body)
        if (res.statusCode !== 207) continue
        const results = res.json().results as { status: number; eventId?: string }[]
        if (results.length !== items.length) unexpected.push(`A batch ${i}: ${results.length} results for ${items.length} events`)
        results.forEach((r, j) => {
          note(`A batch ${i} event ${j} (${items[j]?.name})`, r.status, items[j]?.status ?? -1, JSON.stringify(r))
          if (r.status === 202) acceptedA.add(r.eventId!)
        })
      }
    }
    await Promise.all([singles(), batches()])
  }

  const tenantB = async () => {
    const singles = async () => {
      for (let i = 0; Date.now() < until && acceptedB.size < B_MAX_EVENTS; i++) {
        const res = await post(app, keyB.secret, '/v1/events', JSON.stringify({
          agentId: agentsB[i % B_AGENTS], type: 'tool', reasoning: `b single ${i}`, toolExecuted: 'search', outcome: i % 5 ? 'success' : 'failed',
          durationMs: i, model: 'gpt-4o', metadata: { sessionId: `sb-${i % 7}`, traceId: `tb-${i % 11}`, tokensBreakdown: { inputBase: 10, output: 5 } },
        }))
        counts.bSingle++
        note(`B single ${i}`, res.statusCode, 202, res.body)
        if (res.statusCode === 202) {
          acceptedB.add(res.json().eventId)
          agentOfB.set(res.json().eventId, res.json().agentId)
        }
      }
    }
    const batches = async () => {
      for (let i = 0; Date.now() < until && acceptedB.size < B_MAX_EVENTS; i++) {
        const events = Array.from({ length: 2 * B_AGENTS }, (_, j) => ({
          agentId: agentsB[j % B_AGENTS], type: j % 4 === 0 ? 'tx' : 'decision', reasoning: `b batch ${i}.${j}`,
          ...(j % 4 === 0 ? { amount: { token: 'USDC', value: 1.25 } } : {}), timestamp: new Date().toISOString(),
        }))
        const res = await post(app, keyB.secret, '/v1/events/batch', JSON.stringify({ events }))
        counts.bBatch++
        note(`B batch ${i}`, res.statusCode, 207, res.body)
        if (res.statusCode !== 207) continue
        const results = res.json().results as { status: number; eventId: string; agentId: string }[]
        if (results.length !== events.length || results.some((r) => r.status !== 202)) unexpected.push(`B batch ${i}: ${res.body.slice(0, 300)}`)
        for (const r of results) {
          if (r.status !== 202) continue
          acceptedB.add(r.eventId)
          agentOfB.set(r.eventId, r.agentId)
        }
      }
    }
    await Promise.all([singles(), batches()])
  }

  await Promise.all([tenantA(), tenantB()])
  t.comment(`in ${RUN_MS} ms: A ${counts.aSingle} single + ${counts.aBatch} batches (${counts.aBatchEvents} events), ${acceptedA.size} accepted; ` +
    `B ${counts.bSingle} single + ${counts.bBatch} batches, ${acceptedB.size} accepted`)
  if (unexpected.length > 0) t.comment(`${unexpected.length} unexpected answers; the first ones:\n${unexpected.slice(0, 10).join('\n')}`)
  t.equal(unexpected.length, 0, 'B: every single a 202, every batch a 207 of 202s; A: each poison answered as documented, valid ones 202')
  t.ok(counts.bSingle > 10 && counts.bBatch > 5, 'B sent both kinds alongside A')
  t.ok(counts.aSingle > 10 && counts.aBatch > 5, 'A sent both kinds alongside B')

  await shipped(app, 30_000)
  const storedB = await storedIds(app, b.id)
  t.equal(storedB.length, acceptedB.size, 'every event B was acknowledged is stored once')
  t.same(new Set(storedB), acceptedB, 'exactly the events acknowledged to B')
  const storedA = await storedIds(app, a.id)
  t.equal(storedA.length, acceptedA.size, 'A\'s accepted events (the valid ones of mixed batches, NUL text, the huge valid string) are stored once')
  t.same(new Set(storedA), acceptedA)

  // And readable through the API, in the rollup too: counted once.
  const spend = (await app.inject({ url: '/v1/me/spend-summary?days=2', headers: b.auth })).json()
  t.equal(spend.total.eventCount, acceptedB.size, 'B\'s spend rollup counts every event once')
  for (const agentId of new Set(agentOfB.values())) {
    const expected = [...agentOfB.values()].filter((x) => x === agentId).length
    const events = (await app.inject({ url: `/v1/me/events?since=all&limit=1000&agentId=${agentId}`, headers: b.auth })).json().events as { eventId: string }[]
    t.ok(expected <= 1000, `agent ${agentId}: ${expected} events fit one page`)
    t.equal(events.length, expected, `agent ${agentId}: every one of its events is listed`)
    t.ok(events.every((e) => agentOfB.get(e.eventId) === agentId), 'only B\'s acknowledged events of that agent')
    t.equal(new Set(events.map((e) => e.eventId)).size, events.length, 'none twice')
  }

  const health = (await app.inject({ url: '/health' })).json()
  t.equal(health.ingest.quarantinedRows, 0, 'ClickHouse refused none of the rows')
  t.equal(health.ingest.insertsFailing, null, 'no insert is failing')
  t.equal(health.ingest.backlogRows, 0)
})
