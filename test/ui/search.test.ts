import t from 'tap'
import type { AddressInfo } from 'node:net'
import { CHROMIUM, hasChromium, launchChromium } from '../helpers/browser.ts'

// Search in a real browser against the real service: a query typed in the bar, a facet value
// clicked, its chip and the narrowed list, the search kept in the URL through a reload and undone by
// Back, and the empty result; on the live page and on the traces page; a run's breadcrumb back to
// its list as searched, and a query written by hand with a `?` in it. What is shown is held against
// what was ingested.
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

  // Six events, one trace each: four mention a refund (in reasoning or in the error message), two
  // of them ran lookup_invoice; env is prod on three of the refund ones.
  const agent = randomId('support-bot-')
  const trace = (n: number) => `${agent}-t${n}`
  const seed = [
    { type: 'tool', toolExecuted: 'lookup_invoice', reasoning: 'Refund requested for the late parcel', metadata: { traceId: trace(1), env: 'prod' } },
    { type: 'tool', toolExecuted: 'issue_refund', reasoning: 'Approved after checking the policy', metadata: { traceId: trace(2), env: 'prod' } },
    { type: 'reasoning', reasoning: 'The customer asked about a REFUND for order 1234', metadata: { traceId: trace(3), env: 'staging' } },
    { type: 'tool', toolExecuted: 'lookup_invoice', reasoning: 'Invoice fetched', metadata: { traceId: trace(4), env: 'prod' } },
    { type: 'decision', reasoning: 'Escalate to a human', metadata: { traceId: trace(5) } },
    { type: 'tool', toolExecuted: 'lookup_invoice', outcome: 'failed', errorMessage: 'refund service unavailable', metadata: { traceId: trace(6), env: 'prod' } },
  ]
  const res = await fetch(`${base}/v1/events/batch`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key.secret}`, 'content-type': 'application/json' },
    body: JSON.stringify({ events: seed.map((e, i) => ({ agentId: agent, timestamp: Date.now() - 60_000 + i * 1000, ...e })) }),
  })
  const body = await res.json() as { results: { status: number; eventId: string }[] }
  if (res.status !== 207 || body.results.some((r) => r.status !== 202)) throw new Error(`batch: ${res.status} ${JSON.stringify(body)}`)
  const ids = body.results.map((r) => r.eventId)
  /** The ids of the seeded events (1-based, as numbered above). */
  const events = (...n: number[]) => n.map((i) => ids[i - 1]!).sort()
  await shipped(app)

  const browser = await launchChromium()
  t.teardown(browser.close)
  const page = await browser.context.newPage()
  const pageErrors: string[] = []
  page.on('pageerror', (err) => pageErrors.push(err.message))
  const apiCalls = new Set<string>()
  const recordCalls = (req: { url: () => string; method: () => string }) => {
    const url = new URL(req.url())
    if (url.pathname.startsWith('/v1/')) apiCalls.add(`${req.method()} ${url.pathname}`)
  }
  page.on('request', recordCalls)
  page.setDefaultTimeout(30_000)
  // The page's timers on a clock the test can move (it flows as usual otherwise): a retry or a
  // refresh that must not come is made due, not waited for.
  await page.clock.install()
  const visit = (hash: string) => page.evaluate((h) => { location.hash = h }, hash)
  const heading = (name: string) => page.getByRole('heading', { level: 1, name })
  /** The parameters of the page's hash: everything after its first `?`, as the UI reads them. */
  const hashParams = (p = page) => {
    const hash = new URL(p.url()).hash
    return new URLSearchParams(hash.includes('?') ? hash.slice(hash.indexOf('?') + 1) : '')
  }
  const chips = () => page.locator('.chips .filter-chip').allInnerTexts()
  const facets = page.locator('aside.facets')
  const total = (n: number) => facets.locator('.facet-total strong', { hasText: new RegExp(`^${n} events?$`) }).waitFor()

  /** Waits until the live table shows exactly these events, and returns them. */
  async function liveShows (expected: string[]) {
    await page.waitForFunction((want) => {
      const shown = [...document.querySelectorAll('table.events tbody tr[data-event-id]')].map((r) => r.getAttribute('data-event-id')).sort()
      return JSON.stringify(shown) === JSON.stringify(want)
    }, expected)
    return page.locator('table.events tbody tr[data-event-id]').evaluateAll((rows) => rows.map((r) => r.getAttribute('data-event-id')).sort())
  }
  /** Waits until the traces table lists exactly these traces, and returns them. */
  async function tracesShow (expected: string[]) {
    await page.waitForFunction((want) => {
      const shown = [...document.querySelectorAll('table.groups tbody th a')].map((a) => a.textContent).sort()
      return JSON.stringify(shown) === JSON.stringify(want)
    }, expected)
    return page.locator('table.groups tbody th a').allInnerTexts().then((x) => x.sort())
  }

  await page.goto(`${base}/#token=${user.token}`)
  await heading('Overview').waitFor()

  t.test('live events: a typed query, a facet value, its chip, a reload, Back and the empty result', async (t) => {
    await visit('#/live')
    await heading('Live events').waitFor()
    t.same(await liveShows(events(1, 2, 3, 4, 5, 6)), events(1, 2, 3, 4, 5, 6), 'all six events before a search')

    const box = page.getByRole('searchbox', { name: 'Search events' })
    await box.fill('refund')
    await box.press('Enter')
    t.same(await liveShows(events(1, 3, 6, 2)), events(1, 2, 3, 6), 'the four events that mention a refund, in any case and any field')
    t.equal(hashParams().get('q'), 'refund', 'the query is in the URL')
    await total(4)
    const tool = facets.locator('section.facet', { has: page.getByRole('heading', { name: 'Tool' }) })
    t.same((await tool.locator('li').allInnerTexts()).map((x) => x.replace(/\s+/g, ' ').trim()).sort(), ['(none) 1', 'issue_refund 1', 'lookup_invoice 2'], 'the tool facet counts the matching events')
    t.same(await chips(), [], 'no chip for the text: it is in the box')

    await tool.getByRole('button', { name: 'lookup_invoice 2' }).click()
    t.same(await liveShows(events(1, 6)), events(1, 6), 'narrowed to the refund events that ran lookup_invoice')
    t.same(await chips(), ['tool: lookup_invoice ×'], 'the filter is a chip')
    t.equal(hashParams().toString(), 'q=refund&tool=lookup_invoice', 'the search and the filter are in the URL')
    await total(2)
    t.equal(await tool.getByRole('button', { name: 'lookup_invoice 2' }).getAttribute('aria-pressed'), 'true', 'the facet value is shown as on')

    await page.reload()
    await heading('Live events').waitFor()
    t.same(await liveShows(events(1, 6)), events(1, 6), 'a reload keeps the search')
    t.equal(await page.getByRole('searchbox', { name: 'Search events' }).inputValue(), 'refund')
    t.same(await chips(), ['tool: lookup_invoice ×'])

    await page.goBack()
    t.same(await liveShows(events(1, 2, 3, 6)), events(1, 2, 3, 6), 'Back removes the filter clicked last')
    t.same(await chips(), [])
    t.equal(hashParams().toString(), 'q=refund')

    const meta = facets.locator('section.facet', { hasText: 'metadata env' })
    await meta.getByRole('button', { name: 'prod 3' }).click()
    t.same(await liveShows(events(1, 2, 6)), events(1, 2, 6), 'a metadata value filters too')
    t.same(await chips(), ['env = prod ×'])
    await page.getByRole('button', { name: 'env = prod' }).click()
    t.same(await liveShows(events(1, 2, 3, 6)), events(1, 2, 3, 6), 'removing the chip removes the filter')

    await page.getByLabel('Type').selectOption('decision')
    await page.locator('.no-match').waitFor()
    t.equal(await page.locator('table.events').count(), 0, 'no table for no match')
    t.match(await page.locator('.no-match').innerText(), /No events match this search/, 'the empty result says so')
    t.same(await chips(), ['type: decision ×'])
    await total(0)

    await page.getByRole('button', { name: 'Clear the search' }).click()
    t.same(await liveShows(events(1, 2, 3, 4, 5, 6)), events(1, 2, 3, 4, 5, 6), 'clearing the search shows every event again')
    t.equal(hashParams().toString(), '')
    t.equal(await page.getByRole('searchbox', { name: 'Search events' }).inputValue(), '')
  })

  t.test('traces: a query and a facet value list the traces with a matching event', async (t) => {
    await visit('#/traces')
    await heading('Traces').waitFor()
    t.same(await tracesShow([1, 2, 3, 4, 5, 6].map(trace)), [1, 2, 3, 4, 5, 6].map(trace).sort())
    const box = page.getByRole('searchbox', { name: 'Search traces' })
    await box.fill('"refund for order"')
    await box.press('Enter')
    t.same(await tracesShow([trace(3)]), [trace(3)], 'a quoted phrase, its words in order')
    await box.fill('refund')
    await box.press('Enter')
    t.same(await tracesShow([1, 2, 3, 6].map(trace)), [1, 2, 3, 6].map(trace).sort())
    await facets.locator('section.facet', { hasText: 'Outcome' }).getByRole('button', { name: 'failed 1' }).click()
    t.same(await tracesShow([trace(6)]), [trace(6)], 'the failed one')
    t.same(await chips(), ['outcome: failed ×'])
    t.equal(hashParams().toString(), 'q=refund&outcome=failed')
    await page.reload()
    t.same(await tracesShow([trace(6)]), [trace(6)], 'a reload keeps the search')
    await page.goBack()
    t.same(await tracesShow([1, 2, 3, 6].map(trace)), [1, 2, 3, 6].map(trace).sort(), 'Back undoes the facet')
    await box.fill('refund parcel zebra')
    await box.press('Enter')
    await page.locator('.no-match').waitFor()
    t.match(await page.locator('.no-match').innerText(), /No traces match this search/)
    t.equal(hashParams().get('q'), 'refund parcel zebra')
  })

  t.test('a search the service refuses shows its error once: no retries, nothing left loading', async (t) => {
    const calls: string[] = []
    const onRequest = (req: { url: () => string }) => { calls.push(new URL(req.url()).pathname) }
    page.on('request', onRequest)
    t.teardown(() => { page.off('request', onRequest) })
    const results = page.locator('.results')
    const refused = /minCostUsd: must be a decimal number/

    await visit('#/live?minCostUsd=abc')
    await heading('Live events').waitFor()
    await results.getByRole('alert').filter({ hasText: refused }).waitFor()
    await facets.getByRole('alert').filter({ hasText: refused }).waitFor()
    await page.clock.runFor(7_000) // past the first two reconnects' backoff (2 s, 4 s)
    await page.waitForTimeout(300) // for a request the timers would have sent to be seen here
    t.equal(calls.filter((p) => p === '/v1/me/events/stream').length, 1, 'the stream is not reopened after a 400')
    t.equal(calls.filter((p) => p === '/v1/me/events/facets').length, 1, 'the facets are not asked again')
    t.match(await page.getByRole('status').filter({ hasText: 'Not connected' }).innerText(), /the service refused this search/)
    t.equal(await results.getByText('Loading…').count(), 0, 'the list does not say it is loading')
    t.equal(await facets.getByText('Counting…').count(), 0, 'the facets do not say they are counting')

    calls.length = 0
    await visit('#/traces?minCostUsd=abc')
    await heading('Traces').waitFor()
    await results.getByRole('alert').filter({ hasText: refused }).waitFor()
    await page.clock.runFor(16_000) // past the list's 10 s refresh and the facets' 15 s
    await page.waitForTimeout(300)
    t.equal(calls.filter((p) => p === '/v1/me/traces').length, 1, 'the list is not asked again every 10 s')
    t.equal(calls.filter((p) => p === '/v1/me/events/facets').length, 1, 'nor the facets every 15 s')
    t.equal(await results.getByText('Loading…').count(), 0, 'the list does not say it is loading')
    t.equal(await facets.getByText('Counting…').count(), 0, 'the facets do not say they are counting')
  })

  t.test('every meta. parameter is a filter: an empty value gets its chip, a bad path the service\'s message', async (t) => {
    const asked = page.waitForRequest((r) => new URL(r.url()).pathname === '/v1/me/events/facets' && new URL(r.url()).searchParams.has('meta.region'))
    await visit('#/live?meta.region=')
    await heading('Live events').waitFor()
    await page.locator('.chips .filter-chip').first().waitFor()
    t.match(await chips(), [/^region = \(empty\)/], 'an empty metadata value is a filter, shown as (empty)')
    t.equal(new URL((await asked).url()).searchParams.get('meta.region'), '', 'and is sent as one')
    await visit('#/traces/%E0')
    await heading('Trace %E0').waitFor()
    t.pass('a hand-written % that is no escape opens the page, as written')
    await visit('#/live?meta.=x')
    await page.locator('.results').getByRole('alert').filter({ hasText: /metadata path/ }).waitFor()
    t.pass('a metadata filter without a path is refused with the service\'s message, not left out')
    t.match(await chips(), [/^meta\. \(no path\) = x/], 'its chip says it has no path')
  })

  t.test('the address\'s own mistakes: an agent id the service drops gets no chip; an escape that is not UTF-8 is said', async (t) => {
    await visit('#/live?agentId=notacuid&tool=lookup_invoice')
    await heading('Live events').waitFor()
    await page.locator('.chips .filter-chip').first().waitFor()
    t.same(await chips(), ['tool: lookup_invoice ×'], 'no chip for an agent filter that is no filter')
    const asked = page.waitForRequest((r) => new URL(r.url()).pathname === '/v1/me/events' && new URL(r.url()).searchParams.get('tool') === 'issue_refund')
    await visit('#/live?q=%ED%A0%80&tool=issue_refund')
    const sent = new URL((await asked).url()).searchParams
    t.equal(sent.get('q'), null, 'the unreadable q is not searched for as replacement characters')
    t.equal(sent.get('tool'), 'issue_refund')
    await page.getByRole('alert').filter({ hasText: /Left out of this search: q, whose %-escapes in the address are not UTF-8 text/ }).waitFor()
    t.equal(await page.getByRole('searchbox', { name: 'Search events' }).inputValue(), '', 'nor shown in the search box')
  })

  t.test('a score filter written in the address filters the list and shows its chip', async (t) => {
    const scored = await fetch(`${base}/v1/scores`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key.secret}`, 'content-type': 'application/json' },
      body: JSON.stringify({ traceId: trace(2), name: 'accuracy', value: 0.95 }),
    })
    t.equal(scored.status, 202)
    await shipped(app)
    await visit('#/traces?score.accuracy=0.9..1')
    await heading('Traces').waitFor()
    t.same(await tracesShow([trace(2)]), [trace(2)], 'only the trace scored 0.9 to 1')
    t.same(await chips(), ['score accuracy = 0.9..1 ×'])
  })

  t.test('traces with a from in the address: the facets count the window the list shows', async (t) => {
    const from = new Date(Date.now() - 30 * 86_400_000).toISOString()
    const asked = page.waitForRequest((r) => new URL(r.url()).pathname === '/v1/me/events/facets' && new URL(r.url()).searchParams.get('from') === from)
    await visit(`#/traces?from=${encodeURIComponent(from)}`)
    await heading('Traces').waitFor()
    const facetsAsked = new URL((await asked).url()).searchParams
    t.equal(facetsAsked.get('since'), 'all', 'the 7 days the list lifts are not asked of the facets')
    await facets.getByText(`from ${from}`).first().waitFor()
  })

  t.test('a run\'s breadcrumb leads back to its list as it was searched, not the whole list', async (t) => {
    await visit('#/traces?q=refund&outcome=failed&since=30d')
    t.same(await tracesShow([trace(6)]), [trace(6)])
    await page.getByRole('link', { name: trace(6), exact: true }).click()
    await heading(`Trace ${trace(6)}`).waitFor()
    const crumb = page.locator('.crumbs').getByRole('link', { name: 'Traces' })
    t.equal(await crumb.getAttribute('href'), '#/traces?q=refund&outcome=failed&since=30d', 'the breadcrumb carries the search')
    await crumb.click()
    await heading('Traces').waitFor()
    t.equal(hashParams().toString(), 'q=refund&outcome=failed&since=30d', 'back on the list with the same query in the URL')
    t.same(await tracesShow([trace(6)]), [trace(6)], 'the list is searched as before')
    t.same(await chips(), ['outcome: failed ×'])
    t.equal(await page.getByRole('searchbox', { name: 'Search traces' }).inputValue(), 'refund')
  })

  t.test('a query written by hand keeps every ? after the first: q=why? searches for why?', async (t) => {
    // Another user, so that these events leave the lists above as they are: one asks "why?", one
    // says "why" without the mark; each a trace and a session of its own.
    const other = await newUser(app, { tier: 'enterprise', burst: 100_000 })
    const otherKey = await other.createKey('seed')
    const run = randomId('why-')
    const asks = await fetch(`${base}/v1/events/batch`, {
      method: 'POST',
      headers: { authorization: `Bearer ${otherKey.secret}`, 'content-type': 'application/json' },
      body: JSON.stringify({
        events: [
          { agentId: run, type: 'reasoning', reasoning: 'The customer asked why? twice', metadata: { traceId: `${run}-t1`, sessionId: `${run}-s1` } },
          { agentId: run, type: 'reasoning', reasoning: 'Nobody knows why the parcel was late', metadata: { traceId: `${run}-t2`, sessionId: `${run}-s2` } },
        ],
      }),
    })
    const sent = await asks.json() as { results: { status: number; eventId: string }[] }
    t.equal(asks.status, 207)
    await shipped(app)
    const tab = await browser.context.newPage()
    t.teardown(() => tab.close())
    tab.on('pageerror', (err) => pageErrors.push(err.message))
    tab.on('request', recordCalls)
    tab.setDefaultTimeout(30_000)
    await tab.goto(`${base}/#token=${other.token}`)
    await tab.getByRole('heading', { level: 1, name: 'Overview' }).waitFor()
    const shows = async (selector: string, attribute: string | null, expected: string[]) => {
      await tab.waitForFunction(([sel, attr, want]) => {
        const shown = [...document.querySelectorAll(sel as string)].map((x) => (attr ? x.getAttribute(attr as string) : x.textContent)).sort()
        return JSON.stringify(shown) === JSON.stringify(want)
      }, [selector, attribute, expected] as const)
      return expected
    }

    await tab.evaluate(() => { location.hash = '#/live?q=why?' })
    await tab.getByRole('heading', { level: 1, name: 'Live events' }).waitFor()
    t.equal(await tab.getByRole('searchbox', { name: 'Search events' }).inputValue(), 'why?', 'the box holds the whole text')
    t.same(await shows('table.events tbody tr[data-event-id]', 'data-event-id', [sent.results[0]!.eventId]), [sent.results[0]!.eventId], 'only the event that asks "why?"')
    await tab.locator('aside.facets .facet-total strong', { hasText: /^1 event$/ }).waitFor()

    for (const [list, what] of [['traces', 'Search traces'], ['sessions', 'Search sessions']] as const) {
      const id = `${run}-${list === 'traces' ? 't1' : 's1'}`
      await tab.evaluate((h) => { location.hash = h }, `#/${list}?q=why?`)
      t.equal(await tab.getByRole('searchbox', { name: what }).inputValue(), 'why?', `${list}: the box holds the whole text`)
      t.same(await shows('table.groups tbody th a', null, [id]), [id], `${list}: only the run that asks "why?"`)
      await tab.getByRole('link', { name: id, exact: true }).click()
      await tab.locator('.crumbs a').waitFor()
      t.equal(hashParams(tab).get('q'), 'why?', `${list}: the run's page keeps the text in its URL`)
      await tab.locator('.crumbs a').click()
      t.same(await shows('table.groups tbody th a', null, [id]), [id], `${list}: its breadcrumb leads back to the list as searched`)
      t.equal(hashParams(tab).get('q'), 'why?')
    }
  })

  t.test('the search calls only operations of the published API contract, without script errors', async (t) => {
    const doc = await (await fetch(`${base}/openapi.json`)).json() as { paths: Record<string, Record<string, unknown>> }
    const operations = Object.entries(doc.paths).flatMap(([path, ops]) => Object.keys(ops).map((method) => ({
      method: method.toUpperCase(),
      pattern: new RegExp(`^${path.replace(/\{[^}]+\}/g, '[^/]+')}$`),
    })))
    t.ok(apiCalls.has('GET /v1/me/events/facets'), 'the facets were read')
    for (const call of apiCalls) {
      const [method, path] = call.split(' ') as [string, string]
      t.ok(operations.some((o) => o.method === method && o.pattern.test(path)), `${call} is documented`)
    }
    t.same(pageErrors, [])
  })
}
