import t from 'tap'
import type { AddressInfo } from 'node:net'
import type { Page } from 'playwright-core'
import { CHROMIUM, hasChromium, launchChromium } from '../helpers/browser.ts'

// What a person sees in the web UI, in a real browser against the real service and stores: the app
// listens on a real port, data arrives through the public API, the browser signs in and uses it.
if (!hasChromium()) {
  t.plan(0, `the web UI test needs Chromium at ${CHROMIUM} (Debian: apt-get install -y chromium); skipped`)
} else {
  await run()
}

async function run () {
  const { buildTestApp, newUser, randomId, shipped } = await import('../helpers/app.ts')
  const app = await buildTestApp(t)
  await app.listen({ port: 0, host: '127.0.0.1' })
  const base = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`
  const user = await newUser(app, { tier: 'enterprise', burst: 100_000 })
  const key = await user.createKey('seed')

  async function send (events: Record<string, unknown>[]) {
    const res = await fetch(`${base}/v1/events/batch`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key.secret}`, 'content-type': 'application/json' },
      body: JSON.stringify({ events }),
    })
    const body = await res.json() as { results: { status: number; agentId: string }[] }
    if (res.status !== 207 || body.results.some((r) => r.status !== 202)) throw new Error(`batch: ${res.status} ${JSON.stringify(body)}`)
    return body.results
  }

  // Seed: a trace of three steps, a recurring error, an unpriced model, and an error-rate spike that
  // raises an alert at the next anomaly evaluation.
  const traceId = randomId('trace-')
  const planner = randomId('planner-')
  const flaky = randomId('flaky-')
  const now = Date.now()
  await send([
    { agentId: planner, type: 'decision', timestamp: now - 5000, durationMs: 1200, model: 'gpt-4o', metadata: { traceId, spanId: 'root', sessionId: `s-${traceId}`, privacyLevel: 'full', git: { branch: 'main', commit: 'abc1234' }, tokensBreakdown: { inputBase: 1000, output: 200 } } },
    { agentId: planner, type: 'tool', toolExecuted: 'web_search', timestamp: now - 3500, durationMs: 800, metadata: { traceId, spanId: 'search', parentSpanId: 'root', sessionId: `s-${traceId}`, privacyLevel: 'standard' } },
    { agentId: planner, type: 'tool', toolExecuted: 'summarise', timestamp: now - 2500, durationMs: 600, model: 'house-model-x', metadata: { traceId, spanId: 'sum', parentSpanId: 'search', sessionId: `s-${traceId}`, privacyLevel: 'minimal', tokensBreakdown: { inputBase: 50, output: 10 } } },
    ...Array.from({ length: 12 }, () => ({ agentId: flaky, outcome: 'failed', toolExecuted: 'http', errorMessage: 'upstream 502 from billing' })),
    { agentId: flaky, outcome: 'success' },
  ])
  await shipped(app)
  await app.activity.flush()
  await app.anomaly.evaluateUser(user.id, Date.now())

  const browser = await launchChromium()
  t.teardown(browser.close)
  const page = await browser.context.newPage()
  const pageErrors: string[] = []
  page.on('pageerror', (err) => pageErrors.push(err.message))
  // Every call the UI makes to the API, to hold against the published contract at the end.
  const apiCalls = new Set<string>()
  page.on('request', (req) => {
    const url = new URL(req.url())
    if (url.pathname.startsWith('/v1/')) apiCalls.add(`${req.method()} ${url.pathname}`)
  })
  page.setDefaultTimeout(30_000)
  const visit = (hash: string) => page.evaluate((h) => { location.hash = h }, hash)
  const heading = (p: Page, name: string) => p.getByRole('heading', { level: 1, name })

  t.test('a bad token is refused with a message and the sign-in form stays', async (t) => {
    const [header, payload] = user.token.split('.')
    const forged = `${header}.${payload}.${'A'.repeat(86)}`
    const p = await browser.context.newPage()
    await p.goto(`${base}/`)
    await p.getByLabel('Dashboard token').fill(forged)
    await p.getByRole('button', { name: 'Sign in' }).click()
    await p.getByRole('alert').filter({ hasText: 'refused that token' }).waitFor()
    t.ok(await p.getByLabel('Dashboard token').isVisible(), 'still on the sign-in form')
    t.equal(await p.getByRole('navigation').count(), 0, 'no pages without a valid token')
    await p.goto(`${base}/#token=not-a-token`)
    await p.getByRole('alert').filter({ hasText: 'not a dashboard token' }).or(p.getByRole('alert').filter({ hasText: 'refused' })).waitFor()
    t.notOk(p.url().includes('not-a-token'), 'the token is dropped from the address bar')
    await p.close()
  })

  t.test('signing in with the URL npm run token prints opens the overview with chart data', async (t) => {
    await page.goto(`${base}/#token=${user.token}`)
    await heading(page, 'Overview').waitFor()
    t.notOk(page.url().includes(user.token), 'the token is not left in the address bar')
    t.equal(await page.evaluate(() => sessionStorage.length), 1, 'the token is kept for the tab')
    // 16 events were sent a few seconds ago: they are in the last hour's chart.
    await page.getByText(/\b16 events in the last hour/).waitFor()
    const perMinute = page.locator('figure.chart').filter({ hasText: 'Events per minute' })
    t.equal(await perMinute.getAttribute('data-points'), '60', 'one point per minute')
    t.equal(await perMinute.locator('canvas').count(), 1, 'the chart is drawn')
    const spend = page.locator('figure.chart').filter({ hasText: 'Spend per day' })
    t.equal(await spend.getAttribute('data-points'), '30', 'one point per day')
    t.match(await page.locator('.kpi').filter({ hasText: 'Error rate, 30 days' }).innerText(), /75\.0 %/, '12 of 16 events failed')
    t.match(await page.locator('.kpi').filter({ hasText: 'Open alerts' }).innerText(), /\b1\b/)
    await page.getByRole('heading', { name: 'Top agents by spend, 30 days' }).waitFor()
    t.ok(await page.getByRole('link', { name: planner }).first().isVisible(), 'the spending agent is listed')
  })

  t.test('an event sent through the API appears on the live page without reloading', async (t) => {
    await visit('#/live')
    await heading(page, 'Live events').waitFor()
    await page.locator('tr', { hasText: 'web_search' }).first().waitFor()
    t.ok(await page.locator('.chip-unpriced').first().isVisible(), 'the unpriced model is marked')
    t.ok(await page.locator('.chip', { hasText: 'FULL' }).first().isVisible(), 'privacy chips are shown')
    const tool = randomId('fresh_tool_')
    const sentAt = Date.now()
    await send([{ agentId: planner, type: 'tool', toolExecuted: tool }])
    await page.locator('tr', { hasText: tool }).waitFor()
    t.comment(`appeared ${Date.now() - sentAt} ms after it was sent`)
    t.equal(await page.locator('tr', { hasText: tool }).count(), 1, 'exactly one new row')
    await page.getByLabel('Type').selectOption('decision')
    await page.locator('tr', { hasText: flaky }).first().waitFor()
    t.equal(await page.locator('tr', { hasText: tool }).count(), 0, 'the type filter keeps decisions and hides tool calls')
  })

  t.test('a trace page shows its timeline', async (t) => {
    await visit('#/traces')
    await page.getByRole('link', { name: traceId }).click()
    await heading(page, `Trace ${traceId}`).waitFor()
    const rows = page.locator('.waterfall .wf-row:not(.wf-head)')
    await rows.first().waitFor()
    t.equal(await rows.count(), 3, 'three events on the timeline')
    t.match(await rows.nth(0).innerText(), /decision/)
    t.match(await rows.nth(1).innerText(), /web_search/)
    t.match(await rows.nth(2).innerText(), /summarise/)
    t.ok(await page.getByRole('table', { name: 'Timeline of events as a span tree' }).isVisible(), 'spans with parents are shown as a tree')
    t.match(await rows.nth(2).locator('.wf-label').getAttribute('style') ?? '', /--indent:\s*2\b/, 'the grandchild is two levels in')
    t.match(await page.locator('.kpi', { has: page.locator('.kpi-label', { hasText: /^Events$/ }) }).innerText(), /\b3\b/)
    t.ok(await page.getByText('abc1234').isVisible(), 'git context is shown')
  })

  t.test('resolving an error cluster, then re-opening it', async (t) => {
    await visit('#/errors')
    await heading(page, 'Errors').waitFor()
    const cluster = page.locator('li.cluster', { hasText: 'upstream 502 from billing' })
    await cluster.waitFor()
    t.match(await cluster.innerText(), /open/)
    t.match(await cluster.innerText(), /× 12/)
    await cluster.getByRole('button', { name: /^Resolve/ }).click()
    await cluster.getByRole('button', { name: /^Re-open/ }).waitFor()
    t.match(await cluster.locator('.badge').innerText(), /resolved/)
    const api = await (await fetch(`${base}/v1/me/errors`, { headers: user.auth })).json() as { clusters: { sampleMessage: string; status: string }[] }
    t.equal(api.clusters.find((c) => c.sampleMessage === 'upstream 502 from billing')?.status, 'resolved', 'the service has it resolved')
    await cluster.getByRole('button', { name: /^Re-open/ }).click()
    await cluster.getByRole('button', { name: /^Resolve/ }).waitFor()
  })

  t.test('acknowledging an alert', async (t) => {
    await visit('#/alerts')
    await heading(page, 'Alerts').waitFor()
    const alert = page.locator('li.alert', { hasText: 'error_rate' })
    await alert.waitFor()
    t.match(await alert.locator('.badge').innerText(), /active/)
    await alert.getByRole('button', { name: 'Acknowledge' }).click()
    await alert.getByRole('button', { name: 'Unacknowledge' }).waitFor()
    t.match(await alert.locator('.badge').innerText(), /acknowledged/)
    await page.getByRole('button', { name: /^Acknowledged \(1\)/ }).waitFor()
  })

  t.test('creating a key shows its secret once; revoking it removes it and the service refuses it', async (t) => {
    await visit('#/keys')
    await heading(page, 'API keys').waitFor()
    const label = randomId('laptop-')
    await page.getByLabel('Label').fill(label)
    await page.getByRole('button', { name: 'Create key' }).click()
    const secretBox = page.getByLabel('Secret')
    await secretBox.waitFor()
    const secret = await secretBox.inputValue()
    t.match(secret, /^vk_[A-Za-z0-9_-]{43}$/)
    t.ok(await page.getByText('shown only this once').isVisible())
    t.ok(await page.getByRole('button', { name: 'Copy' }).isVisible(), 'a copy button')
    const row = page.locator('tr', { hasText: label })
    await row.waitFor()
    t.match(await row.innerText(), new RegExp(secret.slice(0, 12)), 'listed by its prefix')
    await page.getByRole('button', { name: 'I have stored it' }).click()
    t.equal(await page.getByLabel('Secret').count(), 0, 'the secret is not shown again')
    await row.getByRole('button', { name: 'Revoke' }).click()
    await row.getByRole('button', { name: 'Revoke now' }).click()
    await row.waitFor({ state: 'detached' })
    const res = await fetch(`${base}/v1/events`, { method: 'POST', headers: { authorization: `Bearer ${secret}`, 'content-type': 'application/json' }, body: '{"agentId":"x"}' })
    t.equal(res.status, 401, 'the revoked key is refused')
  })

  t.test('the spend page marks the unpriced model', async (t) => {
    await visit('#/spend')
    await heading(page, 'Spend').waitFor()
    const row = page.locator('tr', { hasText: 'house-model-x' })
    await row.waitFor()
    t.match(await row.innerText(), /unpriced/)
    await page.getByRole('button', { name: '7 days' }).click()
    await page.getByText('7 days.', { exact: false }).first().waitFor()
  })

  t.test('no script errors on any page', async (t) => {
    for (const hash of ['#/agents', '#/sessions', '#/spend', '#/overview']) {
      await visit(hash)
      await page.locator('main h1').waitFor()
    }
    await page.locator('.kpi').first().waitFor()
    t.same(pageErrors, [])
  })

  t.test('the UI calls only operations of the published API contract', async (t) => {
    const doc = await (await fetch(`${base}/openapi.json`)).json() as { paths: Record<string, Record<string, unknown>> }
    const operations = Object.entries(doc.paths).flatMap(([path, ops]) => Object.keys(ops).map((method) => ({
      method: method.toUpperCase(),
      pattern: new RegExp(`^${path.replace(/\{[^}]+\}/g, '[^/]+')}$`),
    })))
    t.ok(apiCalls.size >= 10, `${apiCalls.size} distinct calls seen`)
    for (const call of apiCalls) {
      const [method, path] = call.split(' ') as [string, string]
      t.ok(operations.some((o) => o.method === method && o.pattern.test(path)), `${call} is documented`)
      t.ok(path.startsWith('/v1/me') || path.startsWith('/v1/agents'), `${call} is on the public API`)
    }
  })
}
