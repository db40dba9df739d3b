import t from 'tap'
import type { AddressInfo } from 'node:net'
import { CHROMIUM, hasChromium, launchChromium } from '../helpers/browser.ts'

// Lists longer than a page, in a real browser against the real service: the live page's Load more
// below the newest 100 matches of a search while new ones stream in at the top (also once the rows
// past 500 were dropped), and the traces and sessions lists, which stop refreshing once Load more
// has loaded a second page. Every list is held against the events ingested: each row once, none
// missing, in order.
if (!hasChromium()) {
  t.plan(0, `the paging test needs Chromium at ${CHROMIUM} (Debian: apt-get install -y chromium); skipped`)
} else {
  await run()
}

async function run () {
  const { buildTestApp, newUser, randomId, acceptedBatch, shipped } = await import('../helpers/app.ts')
  const app = await buildTestApp(t)
  await app.listen({ port: 0, host: '127.0.0.1' })
  const base = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`
  const user = await newUser(app, { tier: 'enterprise', burst: 100_000 })
  const key = await user.createKey('seed')
  const send = (events: Record<string, unknown>[]) => acceptedBatch(app, key.secret, events.map((e) => ({ agentId: agent, type: 'tool', ...e })))

  // 130 calls of paged_tool an hour ago, a second apart, each its own trace and session; 20 calls of
  // other_tool between them; and 150 calls of burst_tool half an hour ago.
  const agent = randomId('pager-')
  const start = Date.now() - 3_600_000
  const RUNS = 130
  const pad = (i: number) => String(i).padStart(3, '0')
  const trace = (i: number) => `${agent}-t${pad(i)}`
  const session = (i: number) => `${agent}-s${pad(i)}`
  const paged = await send(Array.from({ length: RUNS }, (_, i) => ({ toolExecuted: 'paged_tool', timestamp: start + i * 1000, metadata: { traceId: trace(i), sessionId: session(i) } })))
  await send(Array.from({ length: 20 }, (_, i) => ({ toolExecuted: 'other_tool', timestamp: start + i * 5000 + 500 })))
  const bursts = await send(Array.from({ length: 150 }, (_, i) => ({ toolExecuted: 'burst_tool', timestamp: start + 1_800_000 + i * 1000 })))
  await shipped(app)
  /** The paged_tool events' ids, newest first. */
  const pagedIds = paged.map((r) => r.eventId).reverse()

  const browser = await launchChromium()
  t.teardown(browser.close)
  const page = await browser.context.newPage()
  const pageErrors: string[] = []
  page.on('pageerror', (err) => pageErrors.push(err.message))
  // Every API read the page makes, in order, and how many are under way.
  const reads: URL[] = []
  let inFlight = 0
  const isRead = (req: { url(): string }) => new URL(req.url()).pathname.startsWith('/v1/') && new URL(req.url()).pathname !== '/v1/me/events/stream'
  page.on('request', (req) => { if (isRead(req)) { reads.push(new URL(req.url())); inFlight++ } })
  page.on('requestfinished', (req) => { if (isRead(req)) inFlight-- })
  page.on('requestfailed', (req) => { if (isRead(req)) inFlight-- })
  page.setDefaultTimeout(30_000)
  // The page's timers on a clock the test can move: a refresh is made to come, not waited for.
  await page.clock.install()
  const visit = (hash: string) => page.evaluate((h) => { location.hash = h }, hash)
  const heading = (name: string) => page.getByRole('heading', { level: 1, name })
  const loadMore = page.getByRole('button', { name: 'Load more' })
  /** Resolves once no API read is under way and the page has drawn a frame since. */
  async function settled () {
    const idle = () => inFlight === 0
    while (!idle()) await new Promise((resolve) => setTimeout(resolve, 20))
    await page.evaluate(() => new Promise((resolve) => requestAnimationFrame(() => resolve(null))))
  }
  /** Waits until the rows matching `selector` name exactly `expected`, in this order, and returns what they name. */
  async function rowsAre (selector: string, attribute: string | null, expected: string[]) {
    await page.waitForFunction(([sel, attr, want]) => {
      const shown = [...document.querySelectorAll(sel as string)].map((x) => (attr ? x.getAttribute(attr as string) : x.textContent))
      return JSON.stringify(shown) === JSON.stringify(want)
    }, [selector, attribute, expected] as const)
    return page.locator(selector).evaluateAll((xs, attr) => xs.map((x) => (attr ? x.getAttribute(attr) : x.textContent)), attribute)
  }
  const liveRows = 'table.events tbody tr[data-event-id]'
  const liveShows = (expected: string[]) => rowsAre(liveRows, 'data-event-id', expected)
  /** Waits until the live table shows exactly these events, in any order. */
  const liveHolds = (expected: string[]) => page.waitForFunction(([sel, want]) => {
    const shown = [...document.querySelectorAll(sel as string)].map((r) => r.getAttribute('data-event-id')).sort()
    return JSON.stringify(shown) === JSON.stringify(want)
  }, [liveRows, expected.slice().sort()] as const)
  const liveIds = () => page.locator(liveRows).evaluateAll((rows) => rows.map((r) => r.getAttribute('data-event-id')!))
  const runsShow = (expected: string[]) => rowsAre('table.groups tbody th a', null, expected)

  await page.goto(`${base}/#token=${user.token}`)
  await heading('Overview').waitFor()

  t.test('live: Load more pages past the newest 100 matches; new ones still arrive at the top, each once', async (t) => {
    await visit('#/live?tool=paged_tool')
    await heading('Live events').waitFor()
    t.same(await liveShows(pagedIds.slice(0, 100)), pagedIds.slice(0, 100), 'the newest 100 matches, newest first')
    await loadMore.click()
    t.same(await liveShows(pagedIds), pagedIds, 'Load more adds the 30 older matches below them, and no other event')
    t.equal(await loadMore.count(), 0, 'no Load more past the last page')
    const next = reads.filter((u) => u.pathname === '/v1/me/events').at(-1)!.searchParams
    t.ok(next.get('cursor') && next.get('tool') === 'paged_tool', 'the next page is read with the cursor and the search')
    await page.getByText(/^Older events loaded/).waitFor()

    const [fresh] = await send([{ toolExecuted: 'paged_tool', reasoning: 'after Load more' }, { toolExecuted: 'other_tool' }])
    t.same(await liveShows([fresh!.eventId, ...pagedIds]), [fresh!.eventId, ...pagedIds], 'a new match streams in at the top, the older pages stay below')

    // Pause keeps what is shown, to be read; nothing streams in; Resume starts from the newest again.
    await page.getByRole('button', { name: 'Pause' }).click()
    await page.getByRole('status').filter({ hasText: /^Paused$/ }).waitFor()
    const [whilePaused] = await send([{ toolExecuted: 'paged_tool', reasoning: 'while paused' }])
    await new Promise((resolve) => setTimeout(resolve, 1000))
    t.same(await liveIds(), [fresh!.eventId, ...pagedIds], 'paused: the rows stay, and what arrives is not added')
    await page.getByRole('button', { name: 'Resume' }).click()
    const newest = [whilePaused!.eventId, fresh!.eventId, ...pagedIds].slice(0, 100)
    t.same(await liveShows(newest), newest, 'resumed: the newest matches again')
  })

  t.test('live: once rows past 500 were dropped, Load more still reaches every older match, each once', async (t) => {
    const burstIds = bursts.map((r) => r.eventId).reverse()
    await visit('#/live?tool=burst_tool')
    await heading('Live events').waitFor()
    t.same(await liveShows(burstIds.slice(0, 100)), burstIds.slice(0, 100), 'the newest 100 of 150')
    // 450 more, streamed in 50 at a time (each batch shown before the next, so that none is missed):
    // the list keeps the newest 500 and drops the 50 oldest rows.
    let newest = burstIds
    for (let k = 0; k < 9; k++) {
      newest = [...(await send(Array.from({ length: 50 }, () => ({ toolExecuted: 'burst_tool' })))).map((r) => r.eventId).reverse(), ...newest]
      await liveHolds(newest.slice(0, Math.min(500, 100 + 50 * (k + 1))))
    }
    t.same((await liveIds()).sort(), newest.slice(0, 500).sort(), 'the newest 500 are shown')
    await loadMore.click()
    await liveHolds(newest)
    const shown = await liveIds()
    t.equal(new Set(shown).size, shown.length, 'no event twice')
    t.same(shown.sort(), newest.slice().sort(), 'every match, the dropped rows and the older ones included')
  })

  t.test('live: events that came while the stream was down are all shown after it reconnects, not only the newest page', async (t) => {
    // The stream is answered here: each connection says it is ready and ends at once, so the page
    // reconnects after its backoff (on the page's clock) and reads what came meanwhile.
    const streams: string[] = []
    await page.route('**/v1/me/events/stream**', (route) => {
      streams.push(route.request().url())
      return route.fulfill({ status: 200, headers: { 'content-type': 'text/event-stream' }, body: ': ready\n\n' })
    })
    t.teardown(() => page.unroute('**/v1/me/events/stream**'))
    const older = (await send(Array.from({ length: 40 }, (_, i) => ({ toolExecuted: 'gap_tool', timestamp: start + i * 1000 })))).map((r) => r.eventId).reverse()
    await visit('#/live?tool=gap_tool')
    await heading('Live events').waitFor()
    t.same(await liveShows(older), older, 'the 40 matches before')

    // 250 while the stream is down: more than a page.
    const meanwhile = (await send(Array.from({ length: 250 }, (_, i) => ({ toolExecuted: 'gap_tool', timestamp: start + 600_000 + i * 1000 })))).map((r) => r.eventId).reverse()
    const connections = streams.length
    await settled()
    await page.clock.runFor(2_500) // the first reconnection's backoff (2 s)
    while (streams.length === connections) await new Promise((resolve) => setTimeout(resolve, 20))
    const all = [...meanwhile, ...older]
    t.same(await liveShows(all), all, 'all 290, newest first: no hole between the newest page and the rows shown before')
    const pages = reads.filter((u) => u.pathname === '/v1/me/events' && u.searchParams.get('tool') === 'gap_tool')
    t.ok(pages.some((u) => u.searchParams.has('cursor')), 'the pages after the first were read with its cursor')

    // More than 500 meanwhile: the newest pages, the rows below the hole dropped, Load more goes on
    // below the pages read.
    const flood = [
      ...await send(Array.from({ length: 280 }, (_, i) => ({ toolExecuted: 'gap_tool', timestamp: start + 1_200_000 + i * 1000 }))),
      ...await send(Array.from({ length: 280 }, (_, i) => ({ toolExecuted: 'gap_tool', timestamp: start + 1_480_000 + i * 1000 }))),
    ].map((r) => r.eventId).reverse()
    const before = streams.length
    await settled()
    await page.clock.runFor(5_000) // the next backoff (4 s)
    while (streams.length === before) await new Promise((resolve) => setTimeout(resolve, 20))
    await liveShows(flood.slice(0, 500))
    const shown = await liveIds()
    t.same(shown, flood.slice(0, 500), 'the newest 500, nothing older than the hole')
    const every = [...flood, ...meanwhile, ...older]
    // Each click reads a page below the last row shown, until no page is left.
    for (let clicks = 0; clicks < 5 && await loadMore.count() > 0; clicks++) {
      await loadMore.click()
      await settled()
    }
    await liveHolds(every)
    t.equal(await loadMore.count(), 0, 'no Load more past the last page')
    const after = await liveIds()
    t.equal(new Set(after).size, after.length, 'Load more: no event twice')
    t.same(after.sort(), every.slice().sort(), 'Load more: every match')
  })

  t.test('live: an event the stream never carries (taken by an instance it does not hear) is shown once it is in ClickHouse', async (t) => {
    // Another instance on the same stores but another Redis prefix: its events reach no stream of
    // this one, as an event acknowledged on another instance just before the stream was ready does not.
    const elsewhere = await buildTestApp(t, { REDIS_PREFIX: `test:${randomId()}:` })
    await visit('#/live?tool=late_tool')
    await heading('Live events').waitFor()
    await page.getByRole('status').filter({ hasText: 'streaming as events arrive' }).waitFor()
    await settled()
    const [late] = await acceptedBatch(elsewhere, key.secret, [{ agentId: agent, type: 'tool', toolExecuted: 'late_tool' }])
    await shipped(elsewhere)
    await new Promise((resolve) => setTimeout(resolve, 300))
    t.same(await liveIds(), [], 'not streamed')
    await page.clock.runFor(3_100)
    t.same(await liveShows([late!.eventId]), [late!.eventId], 'the latest page is read again 3 s after the stream was ready')
  })

  t.test('traces and sessions: a list with more pages loaded is not refreshed: no run twice, none lost', async (t) => {
    for (const [list, title, runOf, field] of [['traces', 'Traces', trace, 'traceId'], ['sessions', 'Sessions', session, 'sessionId']] as const) {
      /** The runs, latest activity first. */
      const runs = Array.from({ length: RUNS }, (_, i) => runOf(RUNS - 1 - i))
      await visit(`#/${list}`)
      await heading(title).waitFor()
      t.same(await runsShow(runs.slice(0, 50)), runs.slice(0, 50), `${list}: the first page, the 50 latest`)
      const before = reads.length
      await loadMore.click()
      t.same(await runsShow(runs.slice(0, 100)), runs.slice(0, 100), `${list}: Load more adds the second page below`)
      const notice = page.getByText('More pages loaded: this list is not refreshed until the page is reloaded.')
      await notice.waitFor()

      // What a refreshed first page would show: a new run, and one of the second page active again.
      const added = `${runOf(RUNS)}-new`
      await send([{ toolExecuted: 'refresh_tool', metadata: { [field]: added } }, { toolExecuted: 'refresh_tool', metadata: { [field]: runs[75] } }])
      // Every refresh past its time: the list's every 10 s and the facets' every 15 s (read, so known to have run).
      await settled()
      const facetsRead = page.waitForResponse((r) => new URL(r.url()).pathname === '/v1/me/events/facets')
      await page.clock.fastForward(15_000)
      await facetsRead
      await settled()
      t.same(reads.slice(before).filter((u) => u.pathname === `/v1/me/${list}` && !u.searchParams.has('cursor')).map(String), [], `${list}: the first page is not read again`)
      const listed = await page.locator('table.groups tbody th a').allInnerTexts()
      t.equal(new Set(listed).size, listed.length, `${list}: no run listed twice`)
      t.same(listed, runs.slice(0, 100), `${list}: none lost, in the same order`)
      t.ok(await notice.isVisible(), `${list}: the list says it is not refreshed`)

      await page.reload()
      await heading(title).waitFor()
      await page.locator('table.groups tbody th a').nth(49).waitFor()
      const top = await page.locator('table.groups tbody th a').allInnerTexts()
      t.same(top.slice(0, 2).sort(), [added, runs[75]].sort(), `${list}: a reload starts again from the newest`)
      t.equal(new Set(top).size, 50)
    }
  })

  t.test('the pages run without script errors', async (t) => {
    t.same(pageErrors, [])
  })
}
