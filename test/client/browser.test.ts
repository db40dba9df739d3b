import './built-client.ts'
import t from 'tap'
import { createServer } from 'node:http'
import { readFileSync } from 'node:fs'
import type { AddressInfo } from 'node:net'
import { CHROMIUM, hasChromium, launchChromium } from '../helpers/browser.ts'

// The client as a web page uses it: the built package served by a local page on another origin,
// sending to the real service through the browser's fetch (CORS preflight, Idempotency-Key and all).

if (!hasChromium()) {
  t.plan(0, `the client's browser test needs Chromium at ${CHROMIUM} (Debian: apt-get install -y chromium); skipped`)
} else {
  await run()
}

async function run () {
  const { buildTestApp, newUser, randomId, shipped } = await import('../helpers/app.ts')
  const dist = new URL('../../client/dist/', import.meta.url)
  const marker = randomId('page-')
  const page = createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://page')
    if (url.pathname.startsWith('/client/') && /^\/client\/[a-z-]+\.js$/.test(url.pathname)) {
      res.writeHead(200, { 'content-type': 'text/javascript' }).end(readFileSync(new URL(url.pathname.slice('/client/'.length), dist)))
    } else if (url.pathname === '/') {
      res.writeHead(200, { 'content-type': 'text/html' }).end(PAGE)
    } else {
      res.writeHead(404).end()
    }
  })
  await new Promise<void>((resolve) => page.listen(0, '127.0.0.1', resolve))
  t.teardown(() => page.close())
  const pageOrigin = `http://127.0.0.1:${(page.address() as AddressInfo).port}`

  const app = await buildTestApp(t, { CORS_ORIGINS: pageOrigin })
  await app.listen({ port: 0, host: '127.0.0.1' })
  const baseUrl = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`
  const user = await newUser(app, { tier: 'enterprise', burst: 100_000 })
  const key = await user.createKey('page')

  const browser = await launchChromium()
  t.teardown(() => browser.close())

  t.test('a page sends its events, spans and a scrubbed prompt, each stored once', async (t) => {
    const tab = await browser.context.newPage()
    const problems: string[] = []
    tab.on('pageerror', (err) => problems.push(err.message))
    await tab.goto(`${pageOrigin}/?${new URLSearchParams({ apiKey: key.secret, baseUrl, marker })}`)
    await tab.waitForFunction(() => (window as unknown as { done?: boolean }).done === true, undefined, { timeout: 60_000 })
    const result = await tab.evaluate(() => (window as unknown as { result: { stats: { sent: number; dropped: Record<string, number> }; hasAsyncContext: boolean; traceId: string } }).result)
    t.same(problems, [])
    t.equal(result.hasAsyncContext, false, 'no async context in a browser: spans are passed explicitly')
    t.equal(result.stats.sent, 53, 'the 50 events, two spans and the prompt acknowledged')
    t.same(Object.entries(result.stats.dropped).filter(([, n]) => n > 0), [])

    await shipped(app)
    const rows = await (await app.clickhouse.query({
      query: `SELECT reasoning, input, privacy_level, trace_id, JSONExtractString(metadata, 'spanName') AS span_name, JSONExtractString(metadata, 'parentSpanId') AS parent,
        JSONExtractString(metadata, 'spanId') AS span_id, duration_ms FROM events WHERE user_id = {u:String} ORDER BY ts, reasoning`,
      query_params: { u: user.id },
      format: 'JSONEachRow',
    })).json<{ reasoning: string; input: string; privacy_level: string; trace_id: string; span_name: string; parent: string; span_id: string; duration_ms: number | null }>()
    t.equal(rows.length, 53, 'stored once each')
    t.equal(new Set(rows.filter((r) => r.reasoning.startsWith(marker)).map((r) => r.reasoning)).size, 50)
    t.ok(rows.every((r) => r.privacy_level === 'standard'))
    const prompt = rows.find((r) => r.input !== '')
    t.match(prompt?.input, '[redacted:email]', 'scrubbed in the page, before it was sent')
    t.notMatch(prompt?.input, 'alice@example.com')
    const root = rows.find((r) => r.span_name === 'checkout')
    const child = rows.find((r) => r.span_name === 'pay')
    t.ok(root && child, 'both spans stored')
    t.equal(child?.trace_id, root?.trace_id)
    t.equal(child?.trace_id, result.traceId)
    t.equal(child?.parent, root?.span_id, 'the child names its parent')
  })
}

const PAGE = `<!doctype html><meta charset="utf-8"><title>client</title>
<script type="module">
import { AgentTelemetry, hasAsyncContext } from '/client/index.js'
const q = new URLSearchParams(location.search)
const telemetry = new AgentTelemetry({ apiKey: q.get('apiKey'), baseUrl: q.get('baseUrl'), agentId: 'web-page', flushAt: 20 })
const marker = q.get('marker')
for (let i = 0; i < 50; i++) telemetry.track({ type: 'action', reasoning: marker + '-' + i })
let traceId
await telemetry.trace('checkout', async (root) => {
  traceId = root.traceId
  await root.span('pay', async () => { await new Promise((r) => setTimeout(r, 5)) }, { type: 'tool' })
})
telemetry.track({ type: 'decision', reasoning: 'p', input: { prompt: 'write to alice@example.com' } })
await telemetry.flush()
window.result = { stats: telemetry.stats(), hasAsyncContext, traceId }
window.done = true
</script>`
