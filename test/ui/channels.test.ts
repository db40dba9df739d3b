import t from 'tap'
import type { AddressInfo } from 'node:net'
import { Webhook } from 'standardwebhooks'
import { CHROMIUM, hasChromium, launchChromium } from '../helpers/browser.ts'

// The channels page in a real browser against the real service, with a real receiver on a local port
// (allowed by NOTIFY_ALLOW_PRIVATE_NETWORKS=1) and the notify worker running in the same process.
if (!hasChromium()) {
  t.plan(0, `the channels page test needs Chromium at ${CHROMIUM} (Debian: apt-get install -y chromium); skipped`)
} else {
  await run()
}

async function run () {
  const { buildTestApp, newUser, randomId, shipped } = await import('../helpers/app.ts')
  const { ownTestDatabase } = await import('../helpers/env.ts')
  const { startReceiver } = await import('../helpers/receiver.ts')
  const receiver = await startReceiver(t)
  // A Postgres database of its own (ownTestDatabase): this file runs a worker (test/helpers/env.ts).
  const app = await buildTestApp(t, { ROLES: 'api,worker', NOTIFY_ALLOW_PRIVATE_NETWORKS: '1', DATABASE_URL: ownTestDatabase('ui_channels') })
  await app.listen({ port: 0, host: '127.0.0.1' })
  const base = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`
  const user = await newUser(app, { tier: 'enterprise', burst: 100_000 })
  const key = await user.createKey('seed')

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
  const channelItem = (name: string) => page.locator('li.channel', { hasText: name })
  const deliveryRow = (name: string, event: string) => channelItem(name).locator('tr', { hasText: event })

  t.test('adding a webhook shows its signing secret once; a test delivery is signed and logged', async (t) => {
    await page.goto(`${base}/#token=${user.token}`)
    await page.getByRole('heading', { level: 1, name: 'Overview' }).waitFor()
    await page.getByRole('link', { name: 'Channels' }).click()
    await page.getByRole('heading', { level: 1, name: 'Notification channels' }).waitFor()
    await page.getByText('No channels yet').waitFor()

    const path = `/ui-hook/${randomId()}`
    await page.getByLabel('URL').fill(receiver.url(path))
    await page.getByLabel('Label').fill('ops hook')
    await page.getByRole('button', { name: 'Add channel' }).click()
    const secret = await page.getByLabel('Secret').inputValue()
    t.match(secret, /^whsec_/)
    t.ok(await page.getByText('shown only this once').isVisible())
    await page.getByRole('button', { name: 'I have stored it' }).click()
    t.equal(await page.getByLabel('Secret').count(), 0, 'the secret is not shown again')

    await channelItem('ops hook').getByRole('button', { name: 'Send test' }).click()
    const row = deliveryRow('ops hook', 'Test')
    await row.filter({ hasText: 'delivered' }).waitFor()
    t.match(await row.innerText(), /HTTP 200/)
    const [req] = receiver.at(path)
    t.match(new Webhook(secret).verify(req!.body, req!.headers as Record<string, string>), { type: 'channel.test' }, 'the request verifies with the secret shown')
  })

  t.test('an error spike shows in the delivery log as it is delivered', async (t) => {
    const name = randomId('flaky-')
    const res = await fetch(`${base}/v1/events/batch`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key.secret}`, 'content-type': 'application/json' },
      body: JSON.stringify({ events: Array.from({ length: 12 }, () => ({ agentId: name, outcome: 'failed', errorMessage: 'upstream 502' })) }),
    })
    t.equal(res.status, 207)
    await shipped(app)
    await app.activity.flush()
    await app.anomaly.evaluateUser(user.id, Date.now())
    await deliveryRow('ops hook', 'Alert triggered').filter({ hasText: 'delivered' }).waitFor()
    await deliveryRow('ops hook', 'New error cluster').filter({ hasText: 'delivered' }).waitFor()
  })

  t.test('a Slack channel whose receiver fails shows the failure; disable, enable and delete', async (t) => {
    const path = `/ui-slack/${randomId()}`
    receiver.script(path, [{ status: 500, body: 'no_service' }])
    await page.getByLabel('Kind').selectOption('slack')
    await page.getByText('create an app with an incoming webhook').waitFor()
    await page.getByLabel('URL').fill(receiver.url(path))
    await page.getByLabel('Label').fill('team slack')
    await page.getByLabel('New error cluster').uncheck()
    await page.getByRole('button', { name: 'Add channel' }).click()
    const item = channelItem('team slack')
    await item.waitFor()
    t.equal(await page.getByLabel('Secret').count(), 0, 'no signing secret for Slack')
    t.match(await item.innerText(), /…/, 'the Slack URL is shown masked')
    t.notMatch(await item.innerText(), /New error cluster/)

    await item.getByRole('button', { name: 'Send test' }).click()
    const row = deliveryRow('team slack', 'Test')
    await row.filter({ hasText: 'failed' }).waitFor()
    t.match(await row.innerText(), /HTTP 500/)
    t.equal(receiver.at(path).length, 1, 'a test is one attempt')

    await item.getByRole('button', { name: 'Disable' }).click()
    await item.locator('.badge', { hasText: 'disabled' }).waitFor()
    await item.getByRole('button', { name: 'Enable' }).click()
    await item.locator('.badge', { hasText: 'enabled' }).waitFor()
    await item.getByRole('button', { name: 'Delete' }).click()
    await item.getByRole('button', { name: 'Delete now' }).click()
    await item.waitFor({ state: 'detached' })
    t.equal((await (await fetch(`${base}/v1/me/channels`, { headers: user.auth })).json() as { channels: unknown[] }).channels.length, 1, 'the service has one channel left')
  })

  t.test('no script errors, and only operations of the published API contract', async (t) => {
    t.same(pageErrors, [])
    const doc = await (await fetch(`${base}/openapi.json`)).json() as { paths: Record<string, Record<string, unknown>> }
    const operations = Object.entries(doc.paths).flatMap(([path, ops]) => Object.keys(ops).map((method) => ({
      method: method.toUpperCase(),
      pattern: new RegExp(`^${path.replace(/\{[^}]+\}/g, '[^/]+')}$`),
    })))
    for (const call of apiCalls) {
      const [method, path] = call.split(' ') as [string, string]
      t.ok(operations.some((o) => o.method === method && o.pattern.test(path)), `${call} is documented`)
    }
    for (const call of ['POST /v1/me/channels', 'PATCH /v1/me/channels/', 'DELETE /v1/me/channels/']) {
      t.ok([...apiCalls].some((c) => c.startsWith(call)), `the page used ${call}`)
    }
  })
}
