import t from 'tap'
import type { AddressInfo } from 'node:net'
import { CHROMIUM, hasChromium, launchChromium } from '../helpers/browser.ts'

// What a person reading the dashboard every day ran into, in a real browser against the real
// service: a page whose first read failed said "retrying" and never did; a long trace id pushed
// every figure of the list off the screen; the facets came after a hundred rows in keyboard order;
// a cancelled confirmation dropped the focus to the page; every tab had the same title.
if (!hasChromium()) {
  t.plan(0, `the reader's test needs Chromium at ${CHROMIUM} (Debian: apt-get install -y chromium); skipped`)
} else {
  await run()
}

async function run () {
  const { buildTestApp, newUser, acceptedBatch, shipped, randomId } = await import('../helpers/app.ts')
  const app = await buildTestApp(t)
  await app.listen({ port: 0, host: '127.0.0.1' })
  const base = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`
  const user = await newUser(app, { tier: 'enterprise', burst: 100_000 })
  const key = await user.createKey('reader')
  const longTrace = `trace-${'x'.repeat(194)}`
  await acceptedBatch(app, key.secret, [
    { agentId: randomId('reader-'), type: 'tool', toolExecuted: 'search', metadata: { traceId: longTrace, sessionId: `s-${'y'.repeat(198)}` } },
    { agentId: randomId('reader-'), type: 'tool', toolExecuted: 'fetch', metadata: { traceId: 'short-trace' } },
  ])
  await shipped(app)

  const browser = await launchChromium()
  t.teardown(browser.close)
  const page = await browser.context.newPage()
  await page.setViewportSize({ width: 1366, height: 900 })
  page.setDefaultTimeout(30_000)
  await page.clock.install()
  const visit = (hash: string) => page.evaluate((h) => { location.hash = h }, hash)
  const heading = (name: string) => page.getByRole('heading', { level: 1, name })
  await page.goto(`${base}/#token=${user.token}`)
  await heading('Overview').waitFor()

  t.test('a page whose first read is refused for a while asks again by itself', async (t) => {
    let refusals = 0
    await page.route('**/v1/me/keys*', async (route) => {
      if (refusals++ < 2) return route.fulfill({ status: 429, headers: { 'retry-after': '1', 'content-type': 'application/json' }, body: '{"error":"rate_limited"}' })
      return route.continue()
    })
    await visit('#/keys')
    await heading('API keys').waitFor()
    await page.getByText('Too many requests; retrying shortly.').waitFor()
    await page.clock.runFor(2_500)
    await page.clock.runFor(4_500)
    await page.getByRole('rowheader', { name: 'reader' }).waitFor()
    t.equal(refusals, 3, 'two refusals, then the read that answered')
    t.equal(await page.getByText('Too many requests; retrying shortly.').count(), 0, 'the note is gone with the refusal')
    await page.unroute('**/v1/me/keys*')
  })

  t.test('a cancelled confirmation gives the focus back to its button', async (t) => {
    const revoke = page.getByRole('button', { name: 'Revoke' }).first()
    await revoke.click()
    await page.keyboard.press('Escape')
    t.equal(await page.evaluate(() => document.activeElement?.textContent), 'Revoke', 'not the page\'s body')
  })

  t.test('a 200-character trace or session id is cut in its list; the figures stay on the screen', async (t) => {
    for (const [hash, title] of [['#/traces', 'Traces'], ['#/sessions', 'Sessions']] as const) {
      await visit(hash)
      await heading(title).waitFor()
      await page.locator('table.groups tbody tr').first().waitFor()
      const { table, card } = await page.evaluate(() => ({
        table: document.querySelector('table.groups')!.getBoundingClientRect().width,
        card: document.querySelector('.results')!.getBoundingClientRect().width,
      }))
      t.ok(table <= card + 1, `${title}: the table (${Math.round(table)} px) fits its column (${Math.round(card)} px)`)
      t.equal(await page.title(), `${title} · Agent telemetry`, 'the tab says which page')
    }
    const id = await page.locator('table.groups tbody th a .name').first().getAttribute('title')
    t.match(id, /^s-y+$/, 'the whole id is in the tooltip')
  })

  t.test('the facets come before the list in keyboard order', async (t) => {
    await visit('#/live')
    await heading('Live events').waitFor()
    await page.locator('table.events tbody tr').first().waitFor()
    const facetsFirst = await page.evaluate(() => {
      const facets = document.querySelector('aside.facets')!
      const list = document.querySelector('table.events')!
      return Boolean(facets.compareDocumentPosition(list) & Node.DOCUMENT_POSITION_FOLLOWING)
    })
    t.ok(facetsFirst, 'the facets precede the table in the page')
    const { facets, list } = await page.evaluate(() => ({
      facets: document.querySelector('aside.facets')!.getBoundingClientRect().top,
      list: document.querySelector('table.events')!.getBoundingClientRect().top,
    }))
    t.ok(facets < list, 'and are drawn above it at this width')
    t.equal(await page.title(), 'Live events · Agent telemetry')
  })

  t.test('an agent that appears while the live page is open is named and offered in its filter', async (t) => {
    const name = randomId('newcomer-')
    await acceptedBatch(app, key.secret, [{ agentId: name, type: 'action' }])
    const select = page.getByRole('combobox', { name: 'Agent' })
    await page.waitForFunction((n) => [...document.querySelectorAll('select option')].some((o) => o.textContent === n), name)
    t.ok(await select.locator('option', { hasText: name }).count() === 1, 'offered without a reload')
  })

  t.test('an address changed while the dashboard first draws is the page shown', async (t) => {
    // The moment between the first draw and the router's listener (effects run after the paint): a
    // fresh tab whose address changes as soon as the dashboard's frame is in the document.
    const tab = await browser.context.newPage()
    tab.setDefaultTimeout(30_000)
    await tab.addInitScript(() => {
      new MutationObserver((_, observer) => {
        if (!document.querySelector('main#main')) return
        observer.disconnect()
        location.hash = '#/traces/short-trace'
      }).observe(document, { childList: true, subtree: true })
    })
    await tab.goto(`${base}/#token=${user.token}`)
    await tab.getByRole('heading', { level: 1, name: 'Trace short-trace' }).waitFor()
    t.equal(await tab.title(), 'Traces: short-trace · Agent telemetry')
    await tab.close()
  })
}
