import t from 'tap'
import { buildTestApp, newUser, randomId, shipped, type TestUser } from '../helpers/app.ts'
import { buildScoreRow, newScoreRowId } from '../../src/domain/score-row.ts'
import { scoreDropped, scoreAlertRuleOf } from '../../src/domain/score-alerts.ts'
import { alertEvent } from '../../src/domain/notifications.ts'

const app = await buildTestApp(t)

const post = (secret: string, payload: unknown) =>
  app.inject({ method: 'POST', url: '/v1/scores/batch', headers: { authorization: `Bearer ${secret}`, 'content-type': 'application/json' }, payload: JSON.stringify({ scores: payload }) })
const alertsOf = async (user: TestUser) => {
  const res = await app.inject({ method: 'GET', url: '/v1/me/alerts', headers: user.auth })
  return (res.json().alerts as Record<string, any>[]).filter((a) => a.rule.startsWith('score.dropped:'))
}
const putConfig = (user: TestUser, name: string, body: unknown) =>
  app.inject({ method: 'PUT', url: `/v1/me/score-configs/${name}`, headers: user.auth, payload: body as object })

t.test('score.dropped: raised when an agent\'s mean falls below the threshold, kept once, quiet when it recovers', async (t) => {
  const user = await newUser(app, { tier: 'enterprise' })
  const key = await user.createKey()
  const traceId = randomId('trace-')
  const put = await putConfig(user, 'quality', { dataType: 'numeric', min: 0, max: 1, alert: { below: 0.5, minScores: 3 } })
  t.equal(put.statusCode, 200, put.body)
  t.same(put.json().alert, { windowMinutes: 60, baselineDays: 7, minScores: 3, below: 0.5, dropShare: null }, 'defaults filled in')

  t.equal((await post(key.secret, [0.2, 0.3].map((value) => ({ traceId, agentId: 'judged-bot', name: 'quality', value })))).statusCode, 207)
  await shipped(app)
  await app.anomaly.tick(Date.now())
  t.same(await alertsOf(user), [], 'too few scores to judge')

  t.equal((await post(key.secret, [{ traceId, agentId: 'judged-bot', name: 'quality', value: 0.4 }, { traceId, name: 'quality', value: 0 }])).statusCode, 207)
  await shipped(app)
  await app.anomaly.tick(Date.now())
  await app.anomaly.tick(Date.now())
  const raised = await alertsOf(user)
  t.equal(raised.length, 1, 'one alert, however many ticks; scores of no agent are left out')
  t.match(raised[0], { rule: 'score.dropped:quality', severity: 'warning', agent: { displayName: 'judged-bot' }, message: /mean quality 0\.3 over the last 60 min \(3 scores\): below 0\.5/, figures: { mean: 0.3, scores: 3, below: 0.5 } })
  t.same(alertEvent('opened', raised[0] as never, { id: raised[0]!.agentId, displayName: 'judged-bot' } as never, 'https://x', new Date()).type, 'score.dropped', 'delivered to channels as score.dropped')

  t.equal((await post(key.secret, Array.from({ length: 9 }, () => ({ traceId, agentId: 'judged-bot', name: 'quality', value: 1 })))).statusCode, 207)
  await shipped(app)
  await app.anomaly.tick(Date.now())
  const after = await alertsOf(user)
  t.equal(after.length, 1)
  const row = await app.db.query('SELECT firing FROM alerts WHERE id = $1', [after[0]!.id])
  t.equal(row.rows[0].firing, false, 'quiet once the mean recovered')
})

t.test('score.dropped: a drop against the agent\'s baseline; other users and names are not judged', async (t) => {
  const user = await newUser(app, { tier: 'enterprise' })
  const put = await putConfig(user, 'faithfulness', { dataType: 'numeric', alert: { dropShare: 0.2, minScores: 4, windowMinutes: 30 } })
  t.equal(put.statusCode, 200)
  const agent = (await app.agents.resolve(user.id, 'rag-bot'))
  if (agent.kind !== 'ok') throw new Error('no agent')
  const now = Date.now()
  const row = (value: number, agoMs: number, name = 'faithfulness') => buildScoreRow({ traceId: 't', name, value }, { rowId: newScoreRowId(now - agoMs), userId: user.id, agentId: agent.agent.id, receivedAt: now - agoMs })
  // Baseline: 0.9 over the days before; the last half hour: 0.6, down a third.
  await app.scores.insert([...[1, 2, 3, 4, 5].map((d) => row(0.9, d * 86_400_000)), ...[1, 2, 3, 4].map((m) => row(0.6, m * 60_000)), ...[1, 2, 3, 4].map((m) => row(0, m * 60_000, 'unwatched'))])
  await app.anomaly.tick(now)
  const raised = await alertsOf(user)
  t.equal(raised.length, 1)
  t.match(raised[0], { rule: 'score.dropped:faithfulness', severity: 'warning', message: /down 33 % from 0\.9 over the previous 7 days/, figures: { drop: 0.3333, baselineMean: 0.9 } })

  const categorical = await putConfig(user, 'verdict', { dataType: 'categorical', labels: ['a'], alert: { below: 1 } })
  t.equal(categorical.statusCode, 400)
  t.equal(categorical.json().details[0].path[0], 'alert')
  const empty = await putConfig(user, 'stars', { dataType: 'numeric', alert: {} })
  t.equal(empty.statusCode, 400)
})

t.test('scoreDropped: thresholds, minimum scores and severity', async (t) => {
  const rule = scoreAlertRuleOf({ below: 0.5, dropShare: 0.2, minScores: 5 })
  const w = { agentId: 'a', name: 'q', windowMean: 0.45, windowCount: 5, baselineMean: 0.9, baselineCount: 5 }
  t.match(scoreDropped(w, rule), { severity: 'critical', message: /below 0\.5, down 50 %/ })
  t.equal(scoreDropped({ ...w, windowCount: 4 }, rule), null)
  t.match(scoreDropped({ ...w, baselineCount: 4 }, rule), { severity: 'warning', message: /below 0\.5$/ })
  const noBaseline = scoreDropped({ ...w, baselineMean: 0, baselineCount: 0 }, rule)
  t.match(noBaseline, { severity: 'warning', message: /below 0\.5$/ })
  t.equal(noBaseline!.figures.baselineMean, null, 'no baseline scores: no baseline mean')
  t.equal(noBaseline!.figures.baselineScores, 0)
  t.equal(scoreDropped({ ...w, windowMean: 0.8 }, rule), null)
  t.match(scoreDropped({ ...w, windowMean: 0.7 }, rule), { severity: 'warning', figures: { drop: 0.2222 } })
})
