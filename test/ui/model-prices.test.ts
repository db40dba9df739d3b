import t from 'tap'
import type { AddressInfo } from 'node:net'
import { CHROMIUM, hasChromium, launchChromium } from '../helpers/browser.ts'

// The model prices page in a real browser against the real service: a model used without a price
// is listed, priced from the page, and the next event is priced by it; the price is changed and removed.
if (!hasChromium()) {
  t.plan(0, `the web UI test needs Chromium at ${CHROMIUM} (Debian: apt-get install -y chromium); skipped`)
} else {
  await run()
}

async function run () {
  const { buildTestApp, newUser, randomId, sendEvent, shipped } = await import('../helpers/app.ts')
  const app = await buildTestApp(t)
  await app.listen({ port: 0, host: '127.0.0.1' })
  const base = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`
  const user = await newUser(app)
  const key = await user.createKey('seed')
  const model = randomId('house-llm-')
  const tokensBreakdown = { inputBase: 1_000_000, output: 100_000 }
  const send = async (tool: string) => {
    const res = await sendEvent(app, key.secret, { agentId: 'pricing-bot', type: 'tool', toolExecuted: tool, model, metadata: { tokensBreakdown } })
    if (res.statusCode !== 202) throw new Error(`${res.statusCode} ${res.body}`)
    await shipped(app)
    return res.json().eventId as string
  }
  await send('before-1')
  await send('before-2')

  const browser = await launchChromium()
  t.teardown(browser.close)
  const page = await browser.context.newPage()
  const pageErrors: string[] = []
  page.on('pageerror', (err) => pageErrors.push(err.message))
  const apiCalls = new Set<string>()
  page.on('request', (req) => {
    const url = new URL(req.url())
    if (url.pathname.startsWith('/v1/')) apiCalls.add(`${req.method()} ${url.pathname}`)
  })
  page.setDefaultTimeout(30_000)
  const visit = (hash: string) => page.evaluate((h) => { location.hash = h }, hash)
  const field = (label: string) => page.getByLabel(label, { exact: true })
  await page.goto(`${base}/#token=${user.token}`)
  await page.getByRole('heading', { level: 1, name: 'Overview' }).waitFor()

  t.test('the spend page links an unpriced model to its price form', async (t) => {
    await visit('#/spend')
    await page.locator('tr', { hasText: model }).getByRole('link', { name: 'unpriced' }).click()
    await page.getByRole('heading', { level: 1, name: 'Model prices' }).waitFor()
    t.equal(await field('Model').inputValue(), model, 'the form names the model')
  })

  t.test('a model used without a price is listed with its events, and priced from the page', async (t) => {
    await visit('#/overview')
    await page.getByRole('link', { name: 'Model prices' }).click()
    await page.getByRole('heading', { level: 1, name: 'Model prices' }).waitFor()
    const unpriced = page.locator('table.unpriced tr', { hasText: model })
    await unpriced.waitFor()
    t.match(await unpriced.innerText(), /\b2\b/, 'its two events at $0')
    await unpriced.getByRole('button', { name: 'Set a price' }).click()
    t.equal(await field('Model').inputValue(), model)
    await field('Input').fill('1.5')
    await field('Output').fill('6')
    await page.getByRole('button', { name: 'Save price' }).click()
    const row = page.locator('table.prices tr', { hasText: model })
    await row.waitFor()
    t.match(await row.innerText(), /\$1\.5\b[\s\S]*\$6\b[\s\S]*as input[\s\S]*as input/)
    await unpriced.getByText('priced from now on').waitFor()
    t.equal(await field('Model').inputValue(), '', 'the form is cleared')

    const eventId = await send('after')
    const stored = await app.events.getRow(user.id, eventId)
    t.equal(stored!.cost_status, 'user_price')
    // 1,000,000 input tokens at $1.5/MTok and 100,000 output tokens at $6/MTok.
    t.equal(Number(stored!.cost_usd), 2.1, 'the next event is priced by it')
    await visit('#/live')
    const live = page.locator('tr', { hasText: 'after' }).first()
    await live.waitFor()
    t.ok(await live.locator('[title^="priced by your own price"]').isVisible(), 'the live page says the user\'s price was used')
    t.match(await live.innerText(), /\$2\.10/)
  })

  t.test('a price is changed and removed from the page', async (t) => {
    await visit('#/prices')
    const row = page.locator('table.prices tr', { hasText: model })
    await row.getByRole('button', { name: 'Edit' }).click()
    t.equal(await field('Output').inputValue(), '6', 'the form holds the price')
    await field('Output').fill('7')
    await field('Cache read').fill('0.15')
    await page.getByRole('button', { name: 'Save price' }).click()
    await row.getByText('$7').waitFor()
    t.match(await row.innerText(), /\$0\.15/)
    const [price] = (await app.inject({ url: '/v1/me/model-prices', headers: user.auth })).json().prices
    t.match(price, { model, inputPerMTok: 1.5, outputPerMTok: 7, cacheReadPerMTok: 0.15, cacheWritePerMTok: null })

    await row.getByRole('button', { name: 'Remove' }).click()
    await row.getByRole('button', { name: 'Remove now' }).click()
    await page.getByText('No prices set.').waitFor()
    t.same((await app.inject({ url: '/v1/me/model-prices', headers: user.auth })).json().prices, [])
    await page.locator('table.unpriced tr', { hasText: model }).getByRole('button', { name: 'Set a price' }).waitFor()
  })

  t.test('a refused price is explained in place', async (t) => {
    await field('Model').fill(model)
    await field('Input').fill('1')
    await field('Output').fill('1')
    // The browser's own checks would stop 20000; the service's bound is what is tested here.
    await field('Output').evaluate((el: HTMLInputElement) => el.removeAttribute('max'))
    await field('Output').fill('20000')
    await page.getByRole('button', { name: 'Save price' }).click()
    await page.getByRole('alert').filter({ hasText: 'outputPerMTok' }).waitFor()
    t.same(pageErrors, [])
  })

  t.test('the page calls only operations of the published API contract', async (t) => {
    const doc = await (await fetch(`${base}/openapi.json`)).json() as { paths: Record<string, Record<string, unknown>> }
    const operations = Object.entries(doc.paths).flatMap(([path, ops]) => Object.keys(ops).map((method) => ({
      method: method.toUpperCase(),
      pattern: new RegExp(`^${path.replace(/\{[^}]+\}/g, '[^/]+')}$`),
    })))
    for (const method of ['GET', 'PUT', 'DELETE']) t.ok([...apiCalls].some((c) => c.startsWith(`${method} /v1/me/model-prices`)), `${method} was called`)
    for (const call of apiCalls) {
      const [method, path] = call.split(' ') as [string, string]
      t.ok(operations.some((o) => o.method === method && o.pattern.test(path)), `${call} is documented`)
    }
  })
}
