import t from 'tap'
import type { AddressInfo } from 'node:net'
import { CHROMIUM, hasChromium, launchChromium } from '../helpers/browser.ts'

// Scores in the web UI, in a real browser against the real service: a trace's scores sent through
// the API are shown on its page, a person's thumbs down with a comment is stored with them as author
// and shown at once, the Scores page shows the summary's figures, and a config made in the UI refuses
// a score out of its range with the reason.
if (!hasChromium()) {
  t.plan(0, `the scores UI test needs Chromium at ${CHROMIUM} (Debian: apt-get install -y chromium); skipped`)
} else {
  await run()
}

interface StoredScore { scoreId: string; name: string; value: number | null; label: string | null; boolean: boolean | null; comment: string | null; source: string; authorId: string | null; spanId: string | null }
interface Figures { count: number; numeric: { mean: number; p50: number; p90: number } | null; labels: Record<string, number> | null }
interface Summary { names: (Figures & { name: string; dataType: string; change: { count: number; mean: number | null }; byAgent: unknown[] })[] }

// As ui/js/scores.js writes figures (its own functions: the page must show the API's figures).
// @ts-expect-error the dashboard is plain JavaScript without types
import { fig as uiFig, signed as uiSigned } from '../../ui/js/scores.js'
const fig = uiFig as (n: number | null | undefined) => string
const signed = uiSigned as (n: number | null | undefined) => string

async function run () {
  const { buildTestApp, newUser, randomId, sendBatch, shipped } = await import('../helpers/app.ts')
  const app = await buildTestApp(t)
  await app.listen({ port: 0, host: '127.0.0.1' })
  const base = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`
  const user = await newUser(app, { tier: 'enterprise', burst: 100_000 })
  const key = await user.createKey('seed')
  const traceId = randomId('scored-')
  const agent = randomId('answerer-')
  const now = Date.now()
  const sent = await sendBatch(app, key.secret, [
    { agentId: agent, type: 'decision', timestamp: now - 4000, durationMs: 1500, model: 'gpt-4o', metadata: { traceId, spanId: 'root' } },
    { agentId: agent, type: 'tool', toolExecuted: 'web_search', timestamp: now - 3000, durationMs: 700, metadata: { traceId, spanId: 'search', parentSpanId: 'root' } },
  ])
  if (sent.statusCode !== 207) throw new Error(`batch: ${sent.statusCode} ${sent.body}`)
  const score = async (body: Record<string, unknown>) => {
    const res = await app.inject({ method: 'POST', url: '/v1/scores', headers: { authorization: `Bearer ${key.secret}` }, payload: body })
    if (res.statusCode !== 202) throw new Error(`POST /v1/scores: ${res.statusCode} ${res.body}`)
  }
  await score({ traceId, name: 'helpfulness', value: 0.8, source: 'llm', comment: 'answers the question asked' })
  await score({ traceId, spanId: 'search', name: 'helpfulness', value: 0.35, source: 'llm' })
  await score({ traceId, name: 'correctness', label: 'partial', source: 'code' })
  await score({ traceId: randomId('other-'), agentId: agent, name: 'correctness', label: 'correct', source: 'code' })
  await shipped(app)
  const traceScores = async () => {
    const res = await app.inject({ method: 'GET', url: `/v1/me/traces/${traceId}/scores`, headers: user.auth })
    return (res.json() as { scores: StoredScore[] }).scores
  }

  const browser = await launchChromium()
  t.teardown(browser.close)
  const page = await browser.context.newPage()
  const pageErrors: string[] = []
  page.on('pageerror', (err) => pageErrors.push(err.message))
  page.setDefaultTimeout(30_000)
  await page.goto(`${base}/#token=${user.token}`)
  await page.getByRole('heading', { level: 1, name: 'Overview' }).waitFor()
  const visit = (hash: string) => page.evaluate((h) => { location.hash = h }, hash)
  const section = page.locator('section.trace-scores')
  const rows = section.locator('table.scores tbody tr')

  t.test('the trace page shows its scores, whole trace and per span', async (t) => {
    await visit(`#/traces/${traceId}`)
    await page.getByRole('heading', { level: 1, name: `Trace ${traceId}` }).waitFor()
    await section.getByRole('heading', { name: /Scores · 3 scores/ }).waitFor()
    t.equal(await rows.count(), 3)
    const text = await rows.allInnerTexts()
    t.ok(text.some((r) => /whole trace\s+helpfulness\s+0\.8\s+llm/.test(r) && r.includes('answers the question asked')), 'the whole trace\'s numeric score, its source and comment')
    t.ok(text.some((r) => /span web_search\s+helpfulness\s+0\.35/.test(r)), 'the span\'s score, named by its span')
    t.ok(text.some((r) => /correctness\s+partial\s+code/.test(r)), 'a categorical score shows its label')
  })

  t.test('a thumbs down with a comment is stored with the user as author and shown at once', async (t) => {
    const before = await page.evaluate(() => performance.getEntriesByType('navigation').length + ':' + String(performance.timeOrigin))
    await section.getByLabel('Comment (optional)').first().fill('missed the second invoice')
    await section.getByRole('button', { name: 'Thumbs down' }).click()
    await section.getByRole('status').filter({ hasText: 'thumbs down recorded' }).waitFor()
    const stored = (await traceScores()).filter((s) => s.name === 'user_feedback')
    t.equal(stored.length, 1, 'one feedback score stored')
    t.match(stored[0], { boolean: false, value: 0, comment: 'missed the second invoice', source: 'human', authorId: user.id, spanId: null })
    // Shown with the acknowledgement itself, not at the page's next refresh of the trace.
    const row = rows.filter({ hasText: 'missed the second invoice' })
    t.equal(await row.count(), 1, 'the new score is in the table as soon as it is acknowledged')
    t.match(await row.innerText(), /user_feedback\s+▼ down\s+human\s+you/)
    t.equal(await rows.count(), 4)
    t.equal(await page.evaluate(() => performance.getEntriesByType('navigation').length + ':' + String(performance.timeOrigin)), before, 'without a reload')
  })

  t.test('the Scores page shows the summary API\'s figures', async (t) => {
    await visit('#/scores')
    await page.getByRole('heading', { level: 1, name: 'Scores' }).waitFor()
    const cards = page.locator('section.score-name')
    await cards.first().waitFor()
    const to = new Date()
    const summary = (await app.inject({ method: 'GET', url: `/v1/me/scores/summary?from=${new Date(to.getTime() - 7 * 86_400_000).toISOString()}&to=${to.toISOString()}`, headers: user.auth })).json() as Summary
    t.same(summary.names.map((n) => n.name).sort(), ['correctness', 'helpfulness', 'user_feedback'])
    t.equal(await cards.count(), summary.names.length, 'a card per name')
    for (const n of summary.names) {
      const card = page.locator(`section.score-name[data-score-name="${n.name}"]`)
      const figure = (f: string) => card.locator(`[data-figure="${f}"]`).innerText()
      t.equal(await figure('count'), fig(n.count), `${n.name}: count`)
      t.equal(await figure('change-count'), signed(n.change.count), `${n.name}: change of the count`)
      if (n.numeric && n.dataType !== 'categorical') {
        t.equal(await figure('mean'), fig(n.numeric.mean), `${n.name}: mean`)
        if (n.dataType === 'boolean') {
          t.equal(await card.locator('[data-figure="p50"]').count(), 0, `${n.name}: no percentiles of yes/no, which the share of yes says`)
        } else {
          t.equal(await figure('p50'), fig(n.numeric.p50), `${n.name}: p50`)
          t.equal(await figure('p90'), fig(n.numeric.p90), `${n.name}: p90`)
        }
        t.equal(await figure('change-mean'), signed(n.change.mean), `${n.name}: change of the mean`)
      }
      const counts = (await card.locator('table.by-agent tbody tr td:nth-child(2)').allTextContents()).map((x) => Number(x.replace(/,/g, '')))
      t.same(counts, [...counts].sort((a, b) => b - a), `${n.name}: agents with the most scores first`)
      for (const [label, c] of Object.entries(n.labels ?? {})) {
        t.equal(await card.locator(`.labels li[data-label="${label}"] .label-count`).innerText(), fig(c), `${n.name}: ${label}`)
        // Written as the trace and session pages write a boolean score: yes and no, up and down for feedback.
        const yes = label === 'true'
        const written = n.dataType !== 'boolean' || !['true', 'false'].includes(label) ? label : n.name === 'user_feedback' ? (yes ? '▲ up' : '▼ down') : (yes ? 'yes' : 'no')
        t.equal(await card.locator(`.labels li[data-label="${label}"] .label-name`).innerText(), written, `${n.name}: ${label} as ${written}`)
      }
      t.equal(await card.locator('table.by-agent tbody tr').count(), n.byAgent.length, `${n.name}: a row per agent`)
      t.equal(await card.locator('svg.trend').count(), 1, `${n.name}: a trend line`)
    }
    const helpfulness = summary.names.find((n) => n.name === 'helpfulness')!
    t.same(helpfulness.numeric, { mean: 0.575, p50: 0.8, p90: 0.8 }, 'the figures are those of the scores sent')
    t.match(await page.locator('section.score-name[data-score-name="helpfulness"] table.by-agent').innerText(), agent, 'the trace\'s agent')
  })

  t.test('a config made in the UI refuses a score out of its range, with the reason', async (t) => {
    const form = page.getByRole('form', { name: 'New score config' })
    await form.getByLabel('Name').fill('helpfulness')
    await form.getByLabel('Min').fill('0')
    await form.getByLabel('Max').fill('1')
    await form.getByLabel('Description').fill('how helpful the answer was')
    await form.getByRole('button', { name: 'Create config' }).click()
    await page.locator('table.configs tr[data-config="helpfulness"]').waitFor()
    t.match(await page.locator('table.configs tr[data-config="helpfulness"]').innerText(), /numeric\s+0 to 1\s+how helpful/)
    const res = await app.inject({ method: 'GET', url: '/v1/me/score-configs/helpfulness', headers: user.auth })
    t.match(res.json(), { dataType: 'numeric', min: 0, max: 1 }, 'stored by the API')
    // UI_SCREENSHOTS=docs: the pictures of docs/ui.md.
    if (process.env.UI_SCREENSHOTS) await page.locator('main').screenshot({ path: `${process.env.UI_SCREENSHOTS}/scores.png` })

    await visit(`#/traces/${traceId}`)
    await section.waitFor()
    const named = section.getByRole('form', { name: 'Add a named score' })
    await named.getByLabel('Name').fill('helpfulness')
    await named.locator('.config-hint').filter({ hasText: 'numeric' }).waitFor()
    await named.getByLabel(/^Value/).fill('1.5')
    await named.getByRole('button', { name: 'Add score' }).click()
    const alert = named.getByRole('alert')
    await alert.waitFor()
    t.match(await alert.innerText(), /^Refused by the score config: value: /, 'the reason names the field')
    t.equal((await traceScores()).filter((s) => s.value === 1.5).length, 0, 'nothing stored')
    if (process.env.UI_SCREENSHOTS) await section.screenshot({ path: `${process.env.UI_SCREENSHOTS}/trace-scores.png` })
    await named.getByLabel(/^Value/).fill('0.9')
    await named.getByRole('button', { name: 'Add score' }).click()
    await named.getByRole('status').filter({ hasText: 'Score helpfulness recorded.' }).waitFor()
    t.equal(await named.getByRole('alert').count(), 0, 'the refusal is gone')
    await rows.filter({ hasText: '0.9' }).waitFor()
    t.match((await traceScores()).find((s) => s.value === 0.9), { name: 'helpfulness', source: 'human', authorId: user.id })
  })

  t.test('a config is edited and deleted in the UI', async (t) => {
    await visit('#/scores')
    const row = page.locator('table.configs tr[data-config="helpfulness"]')
    await row.getByRole('button', { name: 'Edit' }).click()
    const edit = page.getByRole('form', { name: 'Edit the config of helpfulness' })
    await edit.getByLabel('Max').fill('10')
    await edit.getByRole('button', { name: 'Save' }).click()
    await row.filter({ hasText: '0 to 10' }).waitFor()
    t.match((await app.inject({ method: 'GET', url: '/v1/me/score-configs/helpfulness', headers: user.auth })).json(), { max: 10 })
    await row.getByRole('button', { name: 'Delete' }).click()
    await row.getByRole('button', { name: 'Delete' }).click()
    await row.waitFor({ state: 'detached' })
    t.equal((await app.inject({ method: 'GET', url: '/v1/me/score-configs/helpfulness', headers: user.auth })).statusCode, 404)
    t.same(pageErrors, [], 'no script errors')
  })

  t.test('a session page shows the scores of the session and of its traces as the API has them, and adds one of each', async (t) => {
    const sessionId = randomId('session-')
    const [first, second] = [randomId('s-trace-'), randomId('s-trace-')]
    const events = await sendBatch(app, key.secret, [
      { agentId: agent, type: 'decision', timestamp: now - 2000, metadata: { sessionId, traceId: first, spanId: 'plan' } },
      { agentId: agent, type: 'tool', toolExecuted: 'lookup', timestamp: now - 1500, metadata: { sessionId, traceId: first, spanId: 'look', parentSpanId: 'plan' } },
      { agentId: agent, type: 'decision', timestamp: now - 1000, metadata: { sessionId, traceId: second } },
    ])
    if (events.statusCode !== 207) throw new Error(events.body)
    await score({ sessionId, name: 'resolved', boolean: true, source: 'code' })
    await score({ traceId: first, name: 'helpfulness', value: 0.4, source: 'llm', comment: 'too short' })
    await score({ traceId: first, spanId: 'look', name: 'relevance', label: 'high', source: 'llm' })
    await score({ traceId: second, name: 'tone', label: 'polite', source: 'code' })
    await score({ sessionId: randomId('other-session-'), name: 'resolved', boolean: false })
    await shipped(app)
    const scoresOf = async (path: string) => ((await app.inject({ method: 'GET', url: path, headers: user.auth })).json() as { scores: (StoredScore & { traceId: string | null })[] }).scores
    const fromApi = async () => [
      ...await scoresOf(`/v1/me/sessions/${sessionId}/scores`),
      ...await scoresOf(`/v1/me/traces/${first}/scores`),
      ...await scoresOf(`/v1/me/traces/${second}/scores`),
    ]
    const expected = await fromApi()
    t.equal(expected.length, 4, 'the API has the session\'s score and its traces\' three')

    await visit(`#/sessions/${sessionId}`)
    await page.getByRole('heading', { level: 1, name: `Session ${sessionId}` }).waitFor()
    const card = page.locator('section.session-scores')
    const cardRows = card.locator('table.scores tbody tr')
    await card.getByRole('heading', { name: /Scores · 4 scores/ }).waitFor()
    t.equal(await cardRows.count(), expected.length, 'a row per score')
    // What each row must say, from the API's scores (ui/js/scores.js writes a boolean as yes/no).
    const said = (s: StoredScore & { traceId: string | null }) => s.boolean !== null ? (s.boolean ? 'yes' : 'no') : s.label ?? fig(s.value)
    const of = (s: StoredScore & { traceId: string | null }) => !s.traceId ? 'whole session' : s.spanId ? `trace ${s.traceId}, span lookup` : `trace ${s.traceId}`
    for (const s of expected) {
      const text = await card.locator(`tr[data-score-id="${s.scoreId}"]`).innerText()
      t.ok(text.startsWith(of(s)), `${s.name}: of ${of(s)} (${JSON.stringify(text)})`)
      t.match(text, `${s.name}\t${said(s)}\t${s.source}`, `${s.name}: its value and source`)
    }
    t.equal(await card.locator(`a[href="#/traces/${first}"]`).count(), 2, 'the trace scores link to their trace')

    await card.getByRole('button', { name: 'Thumbs up' }).click()
    await card.getByRole('status').filter({ hasText: 'thumbs up recorded' }).waitFor()
    const feedback = (await scoresOf(`/v1/me/sessions/${sessionId}/scores`)).filter((s) => s.name === 'user_feedback')
    t.match(feedback, [{ boolean: true, source: 'human', authorId: user.id, traceId: null }], 'stored as the session\'s, the user as author')
    await cardRows.filter({ hasText: 'user_feedback' }).waitFor()
    t.match(await cardRows.filter({ hasText: 'user_feedback' }).innerText(), /^whole session\s+user_feedback\s+▲ up\s+human\s+you/)

    await card.locator('select[name="target"]').selectOption(`trace:${second}`)
    const named = card.getByRole('form', { name: 'Add a named score' })
    await named.getByLabel('Name').fill('depth')
    await named.getByLabel(/^Value/).fill('3')
    await named.getByRole('button', { name: 'Add score' }).click()
    await named.getByRole('status').filter({ hasText: 'Score depth recorded.' }).waitFor()
    t.match((await scoresOf(`/v1/me/traces/${second}/scores`)).filter((s) => s.name === 'depth'), [{ value: 3, source: 'human', authorId: user.id, spanId: null }], 'stored as the chosen trace\'s')
    await cardRows.filter({ hasText: 'depth' }).waitFor()
    t.match(await cardRows.filter({ hasText: 'depth' }).innerText(), new RegExp(`^trace ${second}\\s+depth\\s+3\\s+human`))
    t.equal(await cardRows.count(), (await fromApi()).length, 'the table holds every score the API has')
    t.same(pageErrors, [], 'no script errors')
  })
}
