import t from 'tap'
import { buildTestApp, newUser, randomId, sendBatch, sendEvent, shipped } from '../../../helpers/app.ts'
import { agentRun, REASONING } from '../../../helpers/agent-run.ts'
import { TRACE_SPANS_MAX } from '../../../../schemas/dashboard.ts'

const app = await buildTestApp(t)

interface Span { eventId: string; parent: number | null; children?: number[]; depth: number; reasoning?: string }

/** Every link of the tree agrees with its reverse: a child's parent lists it, a root has none. */
function linksAgree (spans: Span[], roots: number[]) {
  const problems: string[] = []
  spans.forEach((s, i) => {
    for (const c of s.children ?? []) if (spans[c]?.parent !== i) problems.push(`${c} is a child of ${i} but names ${spans[c]?.parent}`)
    if (s.parent === null) {
      if (s.depth !== 0 || !roots.includes(i)) problems.push(`root ${i}`)
    } else if (!spans[s.parent]!.children?.includes(i) || s.depth !== spans[s.parent]!.depth + 1) problems.push(`${i} under ${s.parent}`)
  })
  return problems
}

t.test('a 10,000-span run reads back whole, each span once, the tree as positions, at most 1 KB a span', async (t) => {
  const user = await newUser(app, { tier: 'enterprise', burst: 100_000 })
  const key = await user.createKey()
  const traceId = randomId('run-')
  // 100 agent turns, each under the one before it, each with 99 tool calls under it.
  const run = agentRun({
    agentId: 'long-run', traceId, count: TRACE_SPANS_MAX, startMs: Date.now() - 3_600_000,
    parentOf: (i) => (i === 0 ? null : i % 100 === 0 ? i - 100 : i - (i % 100)),
  })
  const ids: string[] = []
  for (let i = 0; i < run.length; i += 500) {
    const res = await sendBatch(app, key.secret, run.slice(i, i + 500))
    t.equal(res.statusCode, 207)
    ids.push(...res.json().results.map((r: { eventId: string }) => r.eventId))
  }
  await shipped(app, 60_000)

  const res = await app.inject({ url: `/v1/me/traces/${traceId}`, headers: user.auth })
  t.equal(res.statusCode, 200)
  const body = res.json() as { eventCount: number; truncated: boolean; roots: number[]; spans: Span[] }
  t.equal(body.eventCount, TRACE_SPANS_MAX)
  t.equal(body.truncated, false)
  t.same(body.spans.map((s) => s.eventId), ids, 'every event once, in time order')
  t.same(body.roots, [0])
  t.same(linksAgree(body.spans, body.roots), [], 'parents, children and depths agree')
  t.equal(body.spans[9_999]!.depth, 100, 'the last tool call is under the 100th turn')
  t.equal(body.spans[9_999]!.reasoning, REASONING, 'content comes back whole')
  const perSpan = res.rawPayload.length / TRACE_SPANS_MAX
  t.comment(`${(res.rawPayload.length / 1e6).toFixed(2)} MB, ${perSpan.toFixed(0)} bytes a span`)
  t.ok(perSpan <= 1024, `${perSpan.toFixed(0)} bytes a span, at most 1024`)

  // One span more than a detail holds: the run is cut at its first 10,000 and says so.
  const late = await sendEvent(app, key.secret, { ...run[1]!, timestamp: Date.now(), metadata: { ...run[1]!.metadata, spanId: 'late' } })
  t.equal(late.statusCode, 202)
  const cut = (await app.inject({ url: `/v1/me/traces/${traceId}`, headers: user.auth })).json()
  t.equal(cut.truncated, true)
  t.equal(cut.spans.length, TRACE_SPANS_MAX)
  t.notOk(cut.spans.some((s: Span) => s.eventId === late.json().eventId), 'the latest span is the one left out')
})
