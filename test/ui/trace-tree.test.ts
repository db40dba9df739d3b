import t from 'tap'
import type { AddressInfo } from 'node:net'
import { CHROMIUM, hasChromium, launchChromium } from '../helpers/browser.ts'

// A long agent run in the web UI, in a real browser against the real service: a chain of spans 200
// levels deep opens on its outline, expands and collapses, keeps its labels on screen and shows depth.
if (!hasChromium()) {
  t.plan(0, `the trace tree test needs Chromium at ${CHROMIUM} (Debian: apt-get install -y chromium); skipped`)
} else {
  await run()
}

async function run () {
  const { buildTestApp, newUser, randomId, sendBatch, shipped } = await import('../helpers/app.ts')
  const { agentRun } = await import('../helpers/agent-run.ts')
  const app = await buildTestApp(t)
  await app.listen({ port: 0, host: '127.0.0.1' })
  const base = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`
  const user = await newUser(app, { tier: 'enterprise', burst: 100_000 })
  const key = await user.createKey()
  const traceId = randomId('deep-')
  const DEPTH = 200
  // As ui/js/pages/traces.js sets them: subtrees below depth 8 start collapsed, indentation stops at 10.
  const OPEN_DEPTH = 8
  const INDENT_CAP = 10
  // Each span the child of the one before it: depths 0 to 199.
  const chain = agentRun({ agentId: 'deep-agent', traceId, count: DEPTH, startMs: Date.now() - 60_000, parentOf: (i) => (i === 0 ? null : i - 1) })
  const sent = await sendBatch(app, key.secret, chain)
  if (sent.statusCode !== 207) throw new Error(`batch: ${sent.statusCode} ${sent.body}`)
  await shipped(app)

  const browser = await launchChromium()
  t.teardown(browser.close)
  const page = await browser.context.newPage()
  const pageErrors: string[] = []
  page.on('pageerror', (err) => pageErrors.push(err.message))
  page.setDefaultTimeout(30_000)
  await page.goto(`${base}/#token=${user.token}`)
  await page.getByRole('heading', { level: 1, name: 'Overview' }).waitFor()
  await page.evaluate((h) => { location.hash = h }, `#/traces/${traceId}`)
  await page.getByRole('heading', { level: 1, name: `Trace ${traceId}` }).waitFor()
  const rows = page.locator('.waterfall .tree-row')
  const shown = page.locator('.tree-tools .muted')
  const scroller = page.locator('.tree-scroll')

  t.test('the run opens on its outline: subtrees below the open depth are collapsed', async (t) => {
    await rows.first().waitFor()
    t.equal(await rows.count(), OPEN_DEPTH, `depths 0 to ${OPEN_DEPTH - 1}`)
    t.equal(await shown.innerText(), `${OPEN_DEPTH} of ${DEPTH} spans shown`)
    const deepest = rows.nth(OPEN_DEPTH - 1).getByRole('button', { name: /^Expand / })
    t.equal(await deepest.getAttribute('aria-expanded'), 'false')
    t.equal(await page.locator('.waterfall').getAttribute('role'), 'treegrid', 'a span tree is a tree grid, whose rows may have levels')
    t.equal(await rows.nth(OPEN_DEPTH - 1).getAttribute('aria-expanded'), 'false', 'a collapsed row says so')
    t.equal(await rows.nth(0).getAttribute('aria-expanded'), 'true', 'an open row says so')
    t.match(await deepest.getAttribute('aria-label'), `(${DEPTH - OPEN_DEPTH} below)`)
    t.match(await rows.nth(OPEN_DEPTH - 1).innerText(), `+${DEPTH - OPEN_DEPTH}`, 'a collapsed row says how many spans it hides')
  })

  t.test('expanding a subtree shows it; the deepest rows keep their labels on screen and show their depth', async (t) => {
    await rows.nth(OPEN_DEPTH - 1).getByRole('button', { name: /^Expand / }).click()
    await shown.filter({ hasText: `${DEPTH} of ${DEPTH} spans shown` }).waitFor()
    t.ok(await rows.count() < DEPTH / 2, `only the rows in view are drawn (${await rows.count()} of ${DEPTH})`)
    await scroller.evaluate((el) => { el.scrollTop = el.scrollHeight })
    const last = rows.filter({ has: page.locator('.depth', { hasText: new RegExp(`^${DEPTH - 1}$`) }) })
    await last.waitFor()
    t.equal(await last.getAttribute('aria-level'), String(DEPTH), 'aria-level is the depth + 1')
    t.match(await last.locator('.wf-label').getAttribute('style') ?? '', new RegExp(`--indent:\\s*${INDENT_CAP}\\b`), 'indentation stops at the cap')
    const label = (await last.locator('button.span-name').boundingBox())!
    const cell = (await last.locator('.wf-label').boundingBox())!
    t.ok(label.x + label.width <= cell.x + cell.width, `the label of depth ${DEPTH - 1} fits its cell (${(label.x - cell.x).toFixed(0)} to ${(label.x + label.width - cell.x).toFixed(0)} px of ${cell.width.toFixed(0)})`)
    await last.locator('button.span-name').click()
    const detail = page.locator('.span-detail')
    await detail.waitFor()
    t.match(await detail.locator('h2').innerText(), `depth ${DEPTH - 1}`)
    t.match(await detail.innerText(), /computeLateFee\(\) is only called for monthly plans/, 'the reasoning is shown')
  })

  t.test('collapse all, then expand one level, then expand all', async (t) => {
    await page.getByRole('button', { name: 'Collapse all' }).click()
    await shown.filter({ hasText: `1 of ${DEPTH} spans shown` }).waitFor()
    t.equal(await rows.count(), 1)
    await rows.first().getByRole('button', { name: /^Expand / }).click()
    await shown.filter({ hasText: `2 of ${DEPTH} spans shown` }).waitFor()
    t.equal(await rows.first().getByRole('button', { name: /^Collapse / }).getAttribute('aria-expanded'), 'true')
    await page.getByRole('button', { name: 'Expand all' }).click()
    await shown.filter({ hasText: `${DEPTH} of ${DEPTH} spans shown` }).waitFor()
    t.same(pageErrors, [], 'no script errors')
  })

  t.test('on a phone (390 px) every row shows the start of its name, however deep, never an ellipsis alone', async (t) => {
    const phone = await browser.context.newPage()
    await phone.setViewportSize({ width: 390, height: 844 })
    await phone.goto(`${base}/#token=${user.token}`)
    await phone.evaluate((h) => { location.hash = h }, `#/traces/${traceId}`)
    const phoneRows = phone.locator('.waterfall .tree-row')
    await phoneRows.nth(OPEN_DEPTH - 1).waitFor()
    for (let i = 0; i < OPEN_DEPTH; i++) {
      const name = (await phoneRows.nth(i).locator('button.span-name').boundingBox())!
      const cell = (await phoneRows.nth(i).locator('.wf-label').boundingBox())!
      t.ok(name.width >= 30 && name.x + 30 <= cell.x + cell.width, `depth ${i}: the name has room in its cell (${name.x.toFixed(0)} + ${name.width.toFixed(0)} px in ${cell.x.toFixed(0)} + ${cell.width.toFixed(0)})`)
    }
    await phone.close()
  })

  t.test('a session page draws its events as the same tree', async (t) => {
    await page.evaluate((h) => { location.hash = h }, `#/sessions/session-${traceId}`)
    await page.getByRole('heading', { level: 1, name: `Session session-${traceId}` }).waitFor()
    await shown.filter({ hasText: `${OPEN_DEPTH} of ${DEPTH} spans shown` }).waitFor()
    t.equal(await rows.count(), OPEN_DEPTH)
    t.same(pageErrors, [], 'no script errors')
  })
}
