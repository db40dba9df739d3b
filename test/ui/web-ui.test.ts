import t from 'tap'
import type { AddressInfo } from 'node:net'
import { randomBytes } from 'node:crypto'
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

  // An OpenTelemetry export (OTLP JSON), as an instrumented agent sends it: spans of one trace.
  async function exportSpans (spans: Record<string, unknown>[]) {
    const body = { resourceSpans: [{ resource: { attributes: [{ key: 'service.name', value: { stringValue: 'research-assistant' } }] }, scopeSpans: [{ scope: { name: 'opentelemetry.instrumentation.openai' }, spans }] }] }
    const res = await fetch(`${base}/v1/traces`, { method: 'POST', headers: { authorization: `Bearer ${key.secret}`, 'content-type': 'application/json' }, body: JSON.stringify(body) })
    if (res.status !== 200) throw new Error(`otlp: ${res.status} ${await res.text()}`)
  }
  const hex = (bytes: number) => randomBytes(bytes).toString('hex')
  const attrs = (o: Record<string, string | number>) => Object.entries(o).map(([k, v]) => ({ key: k, value: typeof v === 'number' ? { intValue: v } : { stringValue: v } }))
  const nanos = (ms: number) => String(BigInt(ms) * 1_000_000n)
  const otelTrace = hex(16)
  const otelRoot = hex(8)
  const otelSpan = (name: string, startAgo: number, durationMs: number, a: Record<string, string | number>, status = 1, spanId = hex(8)) => ({
    traceId: otelTrace, spanId, parentSpanId: spanId === otelRoot ? undefined : otelRoot, name, kind: 1,
    startTimeUnixNano: nanos(Date.now() - startAgo), endTimeUnixNano: nanos(Date.now() - startAgo + durationMs), attributes: attrs(a), status: { code: status },
  })

  // Seed: a trace of three steps, a recurring error, an unpriced model, and an error-rate spike that
  // raises an alert at the next anomaly evaluation.
  const traceId = randomId('trace-')
  const planner = randomId('planner-')
  const flaky = randomId('flaky-')
  const pricedLater = randomId('house-model-y-')
  const longModel = 'anthropic.claude-3-5-sonnet-20241022-v2:0'
  const longAgent = randomId('customer-support-escalation-triage-agent-eu-west-')
  const now = Date.now()
  await send([
    { agentId: planner, type: 'decision', timestamp: now - 5000, durationMs: 1200, model: 'gpt-4o', metadata: { traceId, spanId: 'root', sessionId: `s-${traceId}`, privacyLevel: 'full', git: { branch: 'main', commit: 'abc1234' }, tokensBreakdown: { inputBase: 1000, output: 200 } } },
    { agentId: planner, type: 'tool', toolExecuted: 'web_search', timestamp: now - 3500, durationMs: 800, metadata: { traceId, spanId: 'search', parentSpanId: 'root', sessionId: `s-${traceId}`, privacyLevel: 'standard' } },
    { agentId: planner, type: 'tool', toolExecuted: 'summarise', timestamp: now - 2500, durationMs: 600, model: 'house-model-x', metadata: { traceId, spanId: 'sum', parentSpanId: 'search', sessionId: `s-${traceId}`, privacyLevel: 'minimal', tokensBreakdown: { inputBase: 50, output: 10 } } },
    ...Array.from({ length: 12 }, () => ({ agentId: flaky, outcome: 'failed', toolExecuted: 'http', errorMessage: 'upstream 502 from billing' })),
    { agentId: flaky, outcome: 'success' },
  ])
  // An OpenTelemetry trace: two chats with different models, a tool call and a failed chat.
  await exportSpans([
    otelSpan('invoke_agent research-assistant', 9000, 8000, { 'gen_ai.operation.name': 'invoke_agent' }, 1, otelRoot),
    otelSpan('chat gpt-4o', 8800, 2100, { 'gen_ai.operation.name': 'chat', 'gen_ai.request.model': 'gpt-4o', 'gen_ai.response.model': 'gpt-4o-2024-08-06', 'gen_ai.usage.input_tokens': 1200, 'gen_ai.usage.output_tokens': 300 }),
    otelSpan('execute_tool lookup_invoice', 6600, 900, { 'gen_ai.operation.name': 'execute_tool', 'gen_ai.tool.name': 'lookup_invoice' }),
    otelSpan('chat claude-sonnet-4-5', 5600, 3200, { 'gen_ai.operation.name': 'chat', 'gen_ai.request.model': 'claude-sonnet-4-5', 'gen_ai.usage.input_tokens': 5000, 'gen_ai.usage.output_tokens': 700 }),
    otelSpan('chat gpt-4o-mini', 2300, 1200, { 'gen_ai.operation.name': 'chat', 'gen_ai.request.model': 'gpt-4o-mini' }, 2),
  ])
  // A model used without a price and priced since, and a model with a long name.
  await send([{ agentId: planner, type: 'reasoning', model: pricedLater, metadata: { tokensBreakdown: { inputBase: 500, output: 100 } } }])
  await shipped(app)
  const priced = await app.inject({ method: 'PUT', url: `/v1/me/model-prices/${pricedLater}`, headers: user.auth, payload: { inputPerMTok: 1, outputPerMTok: 2 } })
  if (priced.statusCode !== 200) throw new Error(`PUT price: ${priced.statusCode} ${priced.body}`)
  await send([
    { agentId: planner, type: 'reasoning', model: pricedLater, metadata: { tokensBreakdown: { inputBase: 500, output: 100 } } },
    { agentId: planner, type: 'reasoning', model: longModel, metadata: { provider: 'aws.bedrock', tokensBreakdown: { inputBase: 5000, output: 1000 } } },
    { agentId: longAgent, type: 'reasoning', model: 'acme/fine-tuned-llama-3.1-70b-instruct-support-v7', metadata: { tokensBreakdown: { inputBase: 5000, output: 1000 } } },
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
  // And how many are under way, so that a page is read once what it asked for has been answered.
  let requested = 0
  let inFlight = 0
  const isApi = (req: { url(): string }) => new URL(req.url()).pathname.startsWith('/v1/')
  // The live tail stays open while its page is shown: it is never "answered", so it is not counted.
  const isStream = (req: { url(): string }) => new URL(req.url()).pathname === '/v1/me/events/stream'
  page.on('request', (req) => {
    if (!isApi(req)) return
    apiCalls.add(`${req.method()} ${new URL(req.url()).pathname}`)
    if (isStream(req)) return
    requested++
    inFlight++
  })
  page.on('requestfinished', (req) => { if (isApi(req) && !isStream(req)) inFlight-- })
  page.on('requestfailed', (req) => { if (isApi(req) && !isStream(req)) inFlight-- })
  /** Resolves once the page has made an API call since `since` calls, none is under way, and it has drawn a frame since. */
  const answered = async (since: number) => {
    const waiting = () => requested <= since || inFlight > 0
    while (waiting()) await new Promise((resolve) => setTimeout(resolve, 20))
    await page.evaluate(() => new Promise((resolve) => requestAnimationFrame(() => requestAnimationFrame(resolve))))
  }
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
    // Opened from a link in a new tab: an expired token (npm run token's default lasts an hour) and
    // one that is no token go to the sign-in form with the reason, never "Signing in…" for good.
    const expired = `${header}.${Buffer.from(JSON.stringify({ sub: 'x', exp: Math.floor(Date.now() / 1000) - 60 })).toString('base64url')}.${'A'.repeat(86)}`
    for (const [link, reason] of [[expired, 'That token has expired'], ['garbage', 'not a dashboard token']]) {
      const fresh = await browser.context.newPage()
      await fresh.goto(`${base}/#token=${link}`)
      await fresh.getByRole('alert').filter({ hasText: reason }).waitFor()
      t.ok(await fresh.getByLabel('Dashboard token').isVisible(), `${reason}: the sign-in form`)
      t.equal(await fresh.getByText('Signing in…').count(), 0)
      await fresh.close()
    }
  })

  t.test('signing in with the URL npm run token prints opens the overview with chart data', async (t) => {
    await page.goto(`${base}/#token=${user.token}`)
    await heading(page, 'Overview').waitFor()
    t.notOk(page.url().includes(user.token), 'the token is not left in the address bar')
    t.equal(await page.evaluate(() => sessionStorage.length), 1, 'the token is kept for the tab')
    // 25 events were sent a few seconds ago: they are in the last hour's chart.
    await page.getByText(/\b25 events in the last hour/).waitFor()
    const perMinute = page.locator('figure.chart').filter({ hasText: 'Events per minute' })
    t.equal(await perMinute.getAttribute('data-points'), '60', 'one point per minute')
    t.equal(await perMinute.locator('canvas').count(), 1, 'the chart is drawn')
    const spend = page.locator('figure.chart').filter({ hasText: 'Spend per day' })
    t.equal(await spend.getAttribute('data-points'), '30', 'one point per day')
    t.match(await page.locator('.kpi').filter({ hasText: 'Error rate, 30 days' }).innerText(), /52\.0 %/, '13 of 25 events failed')
    t.equal(await page.getByText('Send your first event').count(), 0, 'no first-event help once events arrived')
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

  t.test('live rows name the span, model and tool, so two model calls are told apart', async (t) => {
    await visit('#/live')
    await page.getByLabel('Type').selectOption('')
    const row = (name: string) => page.locator('table.events tbody tr', { has: page.locator('.span-name', { hasText: new RegExp(`^${name}$`) }) })
    await row('chat claude-sonnet-4-5').waitFor()
    t.match(await row('chat gpt-4o').innerText(), /gpt-4o-2024-08-06[\s\S]*success[\s\S]*2\.10 s/, 'the answering model, the outcome and the duration')
    t.notMatch(await row('chat claude-sonnet-4-5').innerText(), /gpt-4o/, 'the claude call is not mistaken for the gpt-4o one')
    t.match(await row('execute_tool lookup_invoice').innerText(), /success[\s\S]*900 ms/)
    t.match(await row('chat gpt-4o-mini').innerText(), /failed/)
    const planned = page.locator('table.events tbody tr', { hasText: 'summarise' }).first()
    t.match(await planned.innerText(), /summarise · house-model-x[\s\S]*600 ms/, 'an event sent to /v1/events shows its tool and model')
  })

  t.test('an OpenTelemetry trace lists its spans by name, with model, outcome and duration', async (t) => {
    await visit(`#/traces/${otelTrace}`)
    await heading(page, `Trace ${otelTrace}`).waitFor()
    const rows = page.locator('.waterfall .wf-row:not(.wf-head)')
    await rows.nth(4).waitFor()
    // A row's parts are laid out in a line (flex items, which innerText puts on lines of their own).
    const texts = (await rows.allInnerTexts()).map((x) => x.replace(/\s+/g, ' '))
    t.match(texts[0], /^\W*invoke_agent research-assistant\b/, 'the root span by its name')
    t.match(texts[1], /chat gpt-4o gpt-4o-2024-08-06 · reasoning · success · 2\.10 s/, 'the model that answered, the outcome and the duration')
    t.match(texts[2], /execute_tool lookup_invoice\b[\s\S]*900 ms/)
    t.match(texts[3], /chat claude-sonnet-4-5\b[\s\S]*3\.20 s/)
    t.notMatch(texts[3], /gpt/)
    t.match(texts[4], /chat gpt-4o-mini\b[\s\S]*failed/, 'the failed call says so')
    const events = page.locator('.kpi', { has: page.locator('.kpi-label', { hasText: /^Events$/ }) })
    t.match(await events.innerText(), /\b1 error$/m, 'one error, in the singular')
    t.equal(await events.locator('.kpi-hint .bad').innerText(), '1 error', 'the errors in red')
    t.notMatch(await events.getAttribute('class') ?? '', /\bbad\b/, 'not the count of events, which would read as errors')
    t.match(await page.locator('main').innerText(), /research-assistant · Privacy/, 'a space before the separator')
  })

  t.test('a trace page shows its timeline', async (t) => {
    await visit('#/traces')
    await page.getByRole('link', { name: traceId }).waitFor()
    t.same(await page.locator('table.groups thead th').allTextContents().then((h) => h.slice(0, 3)), ['Trace', 'Last activity', 'Started'],
      'the list says the order it is in: the latest activity first')
    await page.getByRole('link', { name: traceId }).click()
    await heading(page, `Trace ${traceId}`).waitFor()
    const rows = page.locator('.waterfall .wf-row:not(.wf-head)')
    await rows.first().waitFor()
    t.equal(await rows.count(), 3, 'three events on the timeline')
    t.match(await rows.nth(0).innerText(), /decision/)
    t.match(await rows.nth(1).innerText(), /web_search/)
    t.match(await rows.nth(2).innerText(), /summarise/)
    t.ok(await page.getByRole('treegrid', { name: 'Timeline of events as a span tree' }).isVisible(), 'spans with parents are shown as a tree')
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
    t.match(await cluster.innerText(), / · tool http · /, 'one tool, in the singular')
    await cluster.getByRole('button', { name: /^Resolve/ }).click()
    await cluster.getByRole('button', { name: /^Re-open/ }).waitFor()
    t.match(await cluster.locator('.badge').innerText(), /resolved/)
    const api = await (await fetch(`${base}/v1/me/errors`, { headers: user.auth })).json() as { clusters: { sampleMessage: string; status: string }[] }
    t.equal(api.clusters.find((c) => c.sampleMessage === 'upstream 502 from billing')?.status, 'resolved', 'the service has it resolved')
    await cluster.getByRole('button', { name: /^Re-open/ }).click()
    await cluster.getByRole('button', { name: /^Resolve/ }).waitFor()
    // The window and status are in the URL; a cluster's events are a click away.
    await page.getByLabel('Status').selectOption('open')
    await page.waitForURL(/#\/errors\?.*status=open/)
    t.equal(await page.getByLabel('Status').inputValue(), 'open', 'kept through the URL')
    const fingerprint = await cluster.getAttribute('data-fingerprint')
    await cluster.getByRole('link', { name: 'Its events' }).click()
    await page.waitForURL(new RegExp(`#/live\\?fingerprint=${fingerprint}`))
    await page.locator('table.events tbody tr').first().waitFor()
    t.equal(await page.locator('table.events tbody tr').count(), 12, 'the cluster\'s 12 events')
    await page.goBack()
    await page.waitForURL(/#\/errors\?.*status=open/)
    // A link to one cluster scrolls it into view.
    await visit(`#/errors/${fingerprint}`)
    await page.locator(`li.cluster.highlight[data-fingerprint="${fingerprint}"]`).waitFor()
    t.ok(await page.locator('li.cluster.highlight').isVisible(), 'the linked cluster is highlighted')
    t.equal(await page.getByText(/^No error cluster/).count(), 0)
    // A link to a cluster that is none of the user's says so above the list, rather than showing the list alone.
    await visit('#/errors/ffffffffffffffff')
    await page.getByText('No error cluster ffffffffffffffff of yours: it may be another user\'s, or mistyped.').waitFor()
  })

  t.test('an alert says when it was raised, and that it still fires when the service says so', async (t) => {
    await visit('#/alerts')
    const alert = page.locator('li.alert', { hasText: 'error_rate' })
    await alert.waitFor()
    const text = await alert.innerText()
    t.match(text, /error_rate · \S+ · raised \d+ (s|min) ago/, 'raised, by lastTriggeredAt')
    t.notMatch(text, /triggered|still firing/, 'without lastSeenFiringAt, nothing about firing')
    // The field as the API is adding it: the condition last seen true after the alert was raised.
    const p = await browser.context.newPage()
    await p.route((url) => url.pathname === '/v1/me/alerts', async (route) => {
      const res = await route.fetch()
      const body = await res.json() as { alerts: Record<string, unknown>[] }
      for (const a of body.alerts) Object.assign(a, { lastTriggeredAt: new Date(Date.now() - 10 * 60_000).toISOString(), lastSeenFiringAt: new Date(Date.now() - 30_000).toISOString(), triggerCount: 3 })
      await route.fulfill({ response: res, json: body })
    })
    await p.goto(`${base}/#token=${user.token}`)
    await heading(p, 'Overview').waitFor()
    await p.evaluate(() => { location.hash = '#/alerts' })
    const seen = p.locator('li.alert', { hasText: 'error_rate' })
    await seen.getByText('still firing').waitFor()
    t.match(await seen.innerText(), /raised 3 times, last 10 min ago · still firing, last seen 3\d s ago/)
    await p.evaluate(() => { location.hash = '#/overview' })
    await p.locator('#alerts ~ ul li', { hasText: 'still firing' }).waitFor()
    await p.close()
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
    // The tab is in the address: shareable, and Back returns to the tab before.
    await page.getByRole('button', { name: /^Acknowledged \(1\)/ }).click()
    await page.waitForFunction(() => location.hash === '#/alerts?status=acknowledged')
    t.equal(await page.getByRole('button', { name: /^Acknowledged/ }).getAttribute('aria-pressed'), 'true')
    await page.goBack()
    await page.waitForFunction(() => location.hash === '#/alerts')
    t.equal(await page.getByRole('button', { name: /^All/ }).getAttribute('aria-pressed'), 'true', 'Back: all alerts again')
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
    // Asked again with the focus on Cancel: Enter and Escape undo nothing.
    await row.getByRole('button', { name: 'Revoke' }).click()
    await page.getByRole('button', { name: 'Cancel' }).waitFor()
    t.equal(await page.evaluate(() => document.activeElement?.textContent), 'Cancel', 'the focus is on Cancel, not on the button that revokes')
    await page.keyboard.press('Escape')
    await row.getByRole('button', { name: 'Revoke', exact: true }).waitFor()
    t.equal(await row.getByRole('button', { name: 'Revoke now' }).count(), 0, 'Escape cancelled')
    await row.getByRole('button', { name: 'Revoke' }).click()
    await page.keyboard.press('Enter')
    t.equal(await row.getByRole('button', { name: 'Revoke now' }).count(), 0, 'Enter on Cancel cancelled')
    await row.getByRole('button', { name: 'Revoke' }).click()
    await row.getByRole('button', { name: 'Revoke now' }).click()
    await row.waitFor({ state: 'detached' })
    const res = await fetch(`${base}/v1/events`, { method: 'POST', headers: { authorization: `Bearer ${secret}`, 'content-type': 'application/json' }, body: '{"agentId":"x"}' })
    t.equal(res.status, 401, 'the revoked key is refused')
  })

  t.test('the spend page marks the unpriced model', async (t) => {
    // The window is in the URL, so it is shared and Back returns to it.
    await visit('#/spend?days=7')
    await heading(page, 'Spend').waitFor()
    await page.getByText(/: 7 days\./).waitFor()
    t.equal(await page.getByRole('button', { name: '7 days' }).getAttribute('aria-pressed'), 'true')
    await page.getByRole('button', { name: '30 days' }).click()
    await page.waitForURL(/#\/spend\?days=30$/)
    await page.getByText(/: 30 days\./).waitFor()
    const row = page.locator('tr', { hasText: 'house-model-x' })
    await row.waitFor()
    t.match(await row.innerText(), /unpriced/)
    const since = page.locator('tr', { hasText: pricedLater })
    t.notMatch(await since.innerText(), /unpriced/, 'a model priced since is not called unpriced')
    t.match(await since.innerText(), /1 event at \$0 before its price/, 'its events from before the price are')
    t.match(await page.locator('.kpi', { hasText: 'Total spend' }).innerText(), /2 models without a price/, 'only the models still without a price are counted')
    t.match(await page.locator('.kpi', { hasText: 'Events' }).innerText(), /\b13 errors\b/)
  })

  t.test('a service that cannot be reached is said so in words, not in the browser\'s "Failed to fetch"', async (t) => {
    const p = await browser.context.newPage()
    await p.route('**/v1/me/**', (route) => route.abort('connectionrefused'))
    await p.goto(`${base}/#token=${user.token}`)
    await heading(p, 'Overview').waitFor()
    await p.getByRole('alert').filter({ hasText: 'The service cannot be reached' }).first().waitFor()
    t.equal(await p.getByText('Failed to fetch').count(), 0)
    await p.close()
  })

  t.test('on a phone the menu opens from its button and Escape closes it, the focus back on the button', async (t) => {
    const phone = await browser.context.newPage()
    await phone.setViewportSize({ width: 390, height: 844 })
    await phone.goto(`${base}/#token=${user.token}`)
    await heading(phone, 'Overview').waitFor()
    const menu = phone.getByRole('button', { name: 'Menu' })
    await menu.click()
    t.equal(await menu.getAttribute('aria-expanded'), 'true')
    await phone.getByRole('navigation', { name: 'Pages' }).getByRole('link', { name: 'Spend' }).waitFor()
    await phone.keyboard.press('Escape')
    t.equal(await menu.getAttribute('aria-expanded'), 'false', 'Escape closed it')
    t.equal(await phone.evaluate(() => document.activeElement?.textContent), 'Menu', 'the focus is back on the button')
    // Nothing wider than the phone: wide tables scroll in their card, selects and names fit.
    const agentId = (await (await fetch(`${base}/v1/me/agents`, { headers: user.auth })).json() as { agents: { id: string }[] }).agents[0]!.id
    for (const [hash, name] of [['#/agents', 'Agents'], ['#/live', 'Live events'], [`#/agents/${agentId}`, null], ['#/traces', 'Traces']] as const) {
      await phone.evaluate((h) => { location.hash = h }, hash)
      if (name) await heading(phone, name).waitFor()
      else await phone.locator('main h1').waitFor()
      await phone.waitForTimeout(300)
      const width = await phone.evaluate(() => document.documentElement.scrollWidth)
      t.ok(width <= 390, `${hash}: the page is ${width} px wide`)
    }
    // A trace's score form, whose select lists the spans by name.
    await phone.evaluate((h) => { location.hash = h }, `#/traces/${otelTrace}`)
    await phone.locator('select[name="target"]').waitFor()
    const traceWidth = await phone.evaluate(() => document.documentElement.scrollWidth)
    t.ok(traceWidth <= 390, `a trace's page with its score form is ${traceWidth} px wide`)
    // An event's details, opened from the live table scrolled to its right end, are in view.
    await phone.evaluate((h) => { location.hash = h }, '#/live')
    await heading(phone, 'Live events').waitFor()
    const wrap = phone.locator('.table-wrap', { has: phone.locator('table.events') })
    await wrap.evaluate((el) => { el.scrollLeft = el.scrollWidth })
    await phone.locator('table.events tbody tr').first().getByRole('button', { name: /^Details of / }).click()
    const detail = phone.locator('tr.detail-row .detail')
    await detail.waitFor()
    const box = (await detail.boundingBox())!
    t.ok(box.x >= 0 && box.x + box.width <= 390, `the details lie on the screen (${box.x.toFixed(0)} + ${box.width.toFixed(0)} px)`)
    // The facets, shown by hand, stay shown when a value is pressed (the page is drawn anew).
    const toggle = phone.getByRole('button', { name: /^Show facets/ })
    await toggle.click()
    await phone.locator('aside.facets .facet-btn').first().click()
    await phone.getByRole('list', { name: 'Filters' }).waitFor()
    await phone.locator('aside.facets .facet-btn').first().waitFor()
    t.equal(await phone.getByRole('button', { name: 'Hide facets' }).count(), 1, 'the facets are still shown')
    await phone.close()
  })

  t.test('at 1280 px the spend tables fit their cards and long names stay whole words', async (t) => {
    t.equal(page.viewportSize()?.width, 1280)
    for (const title of ['By agent', 'By model']) {
      const card = page.locator('section.card', { has: page.getByRole('heading', { name: title }) })
      const fit = await card.evaluate((c) => {
        const wrap = c.querySelector('.table-wrap')!
        const table = c.querySelector('table')!
        return { card: c.clientWidth, table: table.getBoundingClientRect().width, wrap: wrap.clientWidth, scroll: wrap.scrollWidth }
      })
      t.ok(fit.scroll <= fit.wrap && fit.table <= fit.card, `${title}: the table fits its card (${JSON.stringify(fit)})`)
    }
    const name = page.locator('table.breakdown .name', { hasText: /^anthropic\.claude/ })
    t.equal(await name.getAttribute('title'), longModel, 'the whole name is in its tooltip')
    t.equal(await name.evaluate((el) => el.getClientRects().length), 1, 'on one line, not broken mid-word')
    t.equal(await name.evaluate((el) => getComputedStyle(el).textOverflow), 'ellipsis')
    const agent = page.locator('table.breakdown .name', { hasText: /^customer-support/ })
    t.equal(await agent.getAttribute('title'), longAgent)
    t.equal(await agent.evaluate((el) => el.getClientRects().length), 1, 'a long agent name on one line too')
    await page.getByRole('button', { name: '7 days' }).click()
    await page.getByText('7 days.', { exact: false }).first().waitFor()
  })

  t.test('the spend chart by day covers the days chosen, each bar on its day', async (t) => {
    await visit('#/spend')
    await heading(page, 'Spend').waitFor()
    const chart = page.locator('figure.chart').filter({ hasText: 'Spend per day' })
    const today = Math.floor(Date.now() / 86_400_000) * 86_400_000
    for (const [button, days] of [['Today', 1], ['7 days', 7], ['30 days', 30]] as const) {
      await page.getByRole('button', { name: button }).click()
      await page.locator(`figure.chart[data-points="${days}"]`).waitFor()
      const from = Date.parse(await chart.getAttribute('data-x-from') ?? '')
      const to = Date.parse(await chart.getAttribute('data-x-to') ?? '')
      t.equal(to - from, days * 86_400_000, `${button}: the axis spans ${days} days, not more`)
      t.equal(from, today - (days - 1) * 86_400_000 - 43_200_000, `${button}: from half a day before the first bar (the first day's midnight, UTC)`)
      t.equal(to, today + 43_200_000, `${button}: to half a day after today's bar`)
    }
    if (process.env.UI_SCREENSHOTS) {
      await page.getByRole('button', { name: 'Today' }).click()
      await page.locator('figure.chart[data-points="1"]').waitFor()
      await chart.screenshot({ path: `${process.env.UI_SCREENSHOTS}/spend-today.png` })
      await page.getByRole('button', { name: '7 days' }).click()
      await page.locator('figure.chart[data-points="7"]').waitFor()
      await chart.screenshot({ path: `${process.env.UI_SCREENSHOTS}/spend-7.png` })
    }
  })

  t.test('events sent without a privacy level, a tool, a model or a span name', async (t) => {
    const bare = randomId('bare-')
    const thought = 'Compare the two refund policies before answering the customer about the late parcel'
    await send([
      { agentId: planner, type: 'action', metadata: { traceId: bare, sessionId: `s-${bare}` } },
      { agentId: planner, type: 'reasoning', reasoning: thought, metadata: { traceId: bare, sessionId: `s-${bare}` } },
      { agentId: planner, type: 'error', errorMessage: 'RateLimitError: 429 from the model provider, retry after 20 s', model: 'gpt-4o', metadata: { traceId: bare } },
    ])
    await shipped(app)
    for (const [hash, title] of [[`#/traces/${bare}`, `Trace ${bare}`], [`#/sessions/s-${bare}`, `Session s-${bare}`]] as const) {
      await visit(hash)
      await heading(page, title).waitFor()
      await page.locator('.waterfall .wf-row:not(.wf-head)').first().waitFor()
      const text = await page.locator('main').innerText()
      t.match(text, /Privacy: not set\b/, `${hash}: the privacy level is said to be not set`)
      t.notMatch(text, /Privacy:\s*(\n|$)/, `${hash}: never a bare "Privacy:"`)
    }
    await visit('#/live')
    await heading(page, 'Live events').waitFor()
    await page.getByLabel('Type').selectOption('')
    const cells = page.locator('table.events tbody tr td.span-cell')
    await page.locator('table.events tbody tr', { hasText: 'Compare the two refund' }).first().waitFor()
    const row = page.locator('table.events tbody tr', { hasText: 'Compare the two refund' }).first()
    t.match(await row.locator('td.span-cell').innerText(), /^Compare the two refund policies before answering the…$/, 'a reasoning event shows its first words')
    t.equal(await row.locator('td.span-cell .name').getAttribute('title'), thought, 'all of it in the tooltip')
    const failed = page.locator('table.events tbody tr', { hasText: 'RateLimitError' }).first()
    t.match(await failed.locator('td.span-cell').innerText(), /gpt-4o · RateLimitError: 429 from the model provider, retry after…/, 'an error shows what went wrong in its row')
    t.equal(await failed.locator('td.span-cell .bad').count(), 1)
    const texts = await cells.allInnerTexts()
    t.ok(texts.length > 0 && texts.every((x) => x.trim() !== ''), 'no empty span cell')
    t.ok(texts.includes('action'), 'an event with nothing else shows its type')
  })

  t.test('spans named by the project\'s client (metadata.spanName) show their names; a tool of several words once', async (t) => {
    const named = randomId('named-')
    const meta = (spanId: string, spanName: string, parentSpanId?: string) => ({ traceId: named, sessionId: `s-${named}`, spanId, spanName, ...(parentSpanId ? { parentSpanId } : {}) })
    await send([
      { agentId: planner, type: 'action', durationMs: 900, metadata: { ...meta('root', 'answer ticket 2'), tokensBreakdown: { inputBase: 1000, cacheRead: 400, cacheCreation: 50, output: 100 } } },
      { agentId: planner, type: 'tool', toolExecuted: 'lookup invoice', durationMs: 300, metadata: meta('tool', 'lookup invoice', 'root') },
      { agentId: planner, type: 'tool', toolExecuted: 'fetch_order', durationMs: 200, metadata: meta('plan', 'plan the refund', 'root') },
    ])
    await shipped(app)
    await visit(`#/traces/${named}`)
    await heading(page, `Trace ${named}`).waitFor()
    const rows = page.locator('.waterfall .wf-row:not(.wf-head)')
    await rows.nth(2).waitFor()
    const labels = await rows.locator('.span-name').allInnerTexts()
    t.same(labels, ['answer ticket 2', 'lookup invoice', 'plan the refund'], 'each span by the name the client gave it, not its type')
    const texts = await rows.allInnerTexts()
    t.notMatch(texts[1], /lookup invoice[\s\S]*lookup invoice/, 'the tool, which is the span\'s name, is not said twice')
    t.match(texts[2], /plan the refund[\s\S]*fetch_order/, 'a tool the name does not say is shown beside it')
    t.match(await page.locator('.kpi', { has: page.locator('.kpi-label', { hasText: /^Tokens$/ }) }).innerText(),
      /1,550[\s\S]*1,000 in · 400 cache read · 50 cache write · 100 out/, 'the parts under the total add up to it, cache tokens included')
  })

  t.test('the Edit and Remove buttons of a price are the same size and style', async (t) => {
    await visit('#/prices')
    const row = page.locator('table.prices tr', { hasText: pricedLater })
    const edit = row.getByRole('button', { name: 'Edit' })
    const remove = row.getByRole('button', { name: 'Remove' })
    await edit.waitFor()
    const look = (b: typeof edit) => b.evaluate((el) => {
      const s = getComputedStyle(el)
      return { height: el.getBoundingClientRect().height, font: s.fontSize, padding: s.padding, color: s.color, border: s.borderColor, background: s.backgroundColor }
    })
    t.same(await look(remove), await look(edit))
  })

  t.test('a new user is shown how to send a first event, and no 0.0 % before there is one', async (t) => {
    const newcomer = await newUser(app)
    const p = await browser.context.newPage()
    await p.goto(`${base}/#token=${newcomer.token}`)
    await p.getByRole('heading', { name: 'Send your first event' }).waitFor()
    t.equal(await p.getByRole('link', { name: 'Create an API key' }).getAttribute('href'), '#/keys')
    t.match(await p.getByLabel('curl example').innerText(), `curl ${base}/v1/events \\\n  -H 'Authorization: Bearer vk_…'`)
    const otel = await p.getByLabel('OpenTelemetry environment variables').innerText()
    t.match(otel, `OTEL_EXPORTER_OTLP_ENDPOINT=${base}\n`)
    t.match(otel, 'OTEL_EXPORTER_OTLP_HEADERS=Authorization=Bearer%20vk_…')
    const help = await p.locator('.first-event').innerText()
    t.match(help, /OTEL_SERVICE_NAME through its NodeSDK only/, 'says where the service name is read, and where it is not')
    t.match(help, /agent-telemetry-client/, 'and names the client library')
    const rate = await p.locator('.kpi').filter({ hasText: 'Error rate, 30 days' }).innerText()
    t.notMatch(rate, /%/, 'no error rate without events')
    t.match(rate, /—/)
    t.equal(await p.locator('figure.chart').count(), 0, 'no empty charts')
    const newKey = await newcomer.createKey('first')
    const res = await fetch(`${base}/v1/events`, { method: 'POST', headers: { authorization: `Bearer ${newKey.secret}`, 'content-type': 'application/json' }, body: JSON.stringify({ agentId: 'first-agent', type: 'tool', toolExecuted: 'hello' }) })
    t.equal(res.status, 202)
    await p.getByText(/^1 event in the last hour$/).waitFor()
    t.equal(await p.getByRole('heading', { name: 'Send your first event' }).count(), 0, 'the help goes once the first event is in')
    await p.close()
  })

  t.test('no script errors on any page, and every separator has its spaces', async (t) => {
    for (const hash of ['#/agents', '#/sessions', '#/errors', '#/alerts', '#/channels', '#/live', `#/traces/${traceId}`, '#/spend', '#/overview']) {
      const since = requested
      await visit(hash)
      await page.locator('main h1').waitFor()
      await answered(since)
      const text = await page.locator('main').innerText()
      t.notOk(/\S·|·\S/.test(text), `${hash}: no "·" without a space on each side`)
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
