import t from 'tap'
import { Webhook } from 'standardwebhooks'
import { alertEvent, retryDelayMs, testEvent, type NotificationEvent } from '../../src/domain/notifications.ts'
import { NotificationWorker } from '../../src/services/notification-worker.ts'
import type { Channel } from '../../src/storage/channels-repository.ts'
import { FakeChannels, FakeClock, FakeSender, LEVEL, channelOf, recordingLog } from './notification-fakes.ts'

// The delivery worker against fakes of the channels repository and the sender: what each attempt
// sends, records and answers. The integration tests (test/routes/v1/me/channels*.test.ts) run it for real.

const PAGERDUTY = 'https://events.example.com/v2/enqueue'

function alertOpened (clock: FakeClock): NotificationEvent {
  const at = clock.iso
  const alert = {
    id: 'alert-1', rule: 'error_rate', severity: 'critical' as const, status: 'active', message: '12 of 14 events failed', figures: {},
    triggerCount: 1, createdAt: at, lastTriggeredAt: at, lastSeenFiringAt: at, clearedAt: null,
  }
  return alertEvent('opened', alert, { id: 'agent-1', displayName: 'billing' }, 'https://dash.example.com', new Date(clock.ms))
}

function setup (script: ConstructorParameters<typeof FakeSender>[0] = [], channel: Partial<Channel> & { kind: Channel['kind'] } = { kind: 'webhook' }, clock = new FakeClock()) {
  const channels = new FakeChannels(clock)
  const sender = new FakeSender(script)
  const { log, lines } = recordingLog()
  const worker = new NotificationWorker(channels, sender, { pagerdutyEventsUrl: PAGERDUTY }, log, clock.now)
  const c = channels.add(channelOf(channel, clock))
  const event = alertOpened(clock)
  const delivery = channels.store(c.id, 'msg_01', event)
  return { clock, channels, sender, worker, channel: c, event, delivery, lines }
}

t.test('a delivered attempt is recorded, marks the channel reached, and asks for no retry', async (t) => {
  const { worker, channels, sender, channel, delivery } = setup([{ ok: true, statusCode: 204, response: '' }])
  t.same(await worker.attempt(delivery.id), { outcome: 'delivered', retryInMs: null })
  t.equal(sender.requests.length, 1)
  t.same(channels.calledWith('recordAttempt'), [[delivery.id, { status: 'delivered', statusCode: 204, error: null, response: '', retryInMs: null }]])
  t.same(channels.calledWith('markSucceeded'), [[channel.id]])
  t.same(channels.calledWith('disableAfterRun'), [])
})

t.test('a webhook attempt is the event, signed with the channel\'s secret and the delivery id', async (t) => {
  // standardwebhooks refuses a timestamp far from its own clock: the attempt is made now.
  const { worker, sender, channel, event, delivery, clock } = setup([], { kind: 'webhook' }, new FakeClock(Date.now()))
  await worker.attempt(delivery.id)
  const [req] = sender.requests
  t.equal(req!.url, channel.url)
  t.same(JSON.parse(req!.body), event)
  t.match(req!.headers, { 'webhook-id': delivery.id, 'webhook-timestamp': String(Math.floor(clock.ms / 1000)) })
  t.same(new Webhook(channel.signingSecret!).verify(req!.body, req!.headers), event, 'verifies with the channel\'s secret')
})

t.test('Slack gets its message at the channel\'s URL; PagerDuty its event at the Events API, with the routing key', async (t) => {
  const slack = setup([], { kind: 'slack', url: 'https://hooks.slack.example.com/services/T/B/x' })
  await slack.worker.attempt(slack.delivery.id)
  t.equal(slack.sender.requests[0]!.url, 'https://hooks.slack.example.com/services/T/B/x')
  t.same(slack.sender.requests[0]!.headers, {})
  t.match(JSON.parse(slack.sender.requests[0]!.body), { text: /error_rate on billing/, blocks: Array })

  const pd = setup([], { kind: 'pagerduty', routingKey: 'rk-123' })
  await pd.worker.attempt(pd.delivery.id)
  t.equal(pd.sender.requests[0]!.url, PAGERDUTY)
  t.match(JSON.parse(pd.sender.requests[0]!.body), { routing_key: 'rk-123', event_action: 'trigger', dedup_key: 'alert-1' })
})

t.test('a failure with attempts left is retrying, after the schedule\'s delay for that attempt', async (t) => {
  const { worker, channels, delivery, lines } = setup([{ ok: false, statusCode: 500, error: 'HTTP 500', response: 'down' }, { ok: false, statusCode: 502, error: 'HTTP 502' }])
  t.same(await worker.attempt(delivery.id), { outcome: 'retrying', retryInMs: retryDelayMs(1) })
  t.same(await worker.attempt(delivery.id), { outcome: 'retrying', retryInMs: retryDelayMs(2) })
  t.same(channels.calledWith('recordAttempt')[0], [delivery.id, { status: 'retrying', statusCode: 500, error: 'HTTP 500', response: 'down', retryInMs: 15_000 }])
  t.same(channels.calledWith('disableAfterRun'), [])
  t.match(lines.filter((l) => l.msg === 'notification delivery failed; it will be retried'), [
    { level: LEVEL.info, delivery: delivery.id, attempt: 1, statusCode: 500, error: 'HTTP 500', retryInMs: 15_000 },
    { level: LEVEL.info, attempt: 2, statusCode: 502, retryInMs: retryDelayMs(2) },
  ], 'each failed attempt is a line for the operator')
})

t.test('the last failure fails the delivery and disables the channel, saying for how long and why', async (t) => {
  const { worker, channels, channel, delivery, clock, lines } = setup([{ ok: false, statusCode: 503, error: 'HTTP 503' }])
  const firstAttemptAt = new Date(clock.ms - 22.75 * 3_600_000).toISOString()
  Object.assign(channels.deliveries.get(delivery.id)!.delivery, { status: 'retrying', attempts: 7, firstAttemptAt })
  t.same(await worker.attempt(delivery.id), { outcome: 'failed', retryInMs: null })
  const reason = 'every attempt for 22.8 h failed (8 attempts; last: HTTP 503); fix the destination, then enable the channel again'
  t.same(channels.calledWith('disableAfterRun'), [[channel.id, firstAttemptAt, reason]], 'the run since the first attempt')
  t.match(channels.channels.get(channel.id), { enabled: false, disabledReason: reason })
  t.match(lines.filter((l) => l.level === LEVEL.warn), [
    { msg: 'notification delivery failed for good', channel: channel.id, attempt: 8, statusCode: 503 },
    { msg: 'notification channel disabled after a run of failures', channel: channel.id, kind: 'webhook', reason },
  ])
})

t.test('a run under an hour is told in minutes; a channel reached meanwhile is not disabled, nor logged', async (t) => {
  const { worker, channels, channel, delivery, clock, lines } = setup([{ ok: false, statusCode: 500, error: 'HTTP 500' }])
  const firstAttemptAt = new Date(clock.ms - 20 * 60_000).toISOString()
  Object.assign(channels.deliveries.get(delivery.id)!.delivery, { status: 'retrying', attempts: 2, maxAttempts: 3, firstAttemptAt })
  channels.channels.get(channel.id)!.lastSuccessAt = new Date(clock.ms - 60_000).toISOString()
  t.same(await worker.attempt(delivery.id), { outcome: 'failed', retryInMs: null })
  t.match(channels.calledWith('disableAfterRun'), [[channel.id, firstAttemptAt, /^every attempt for 20 min failed \(3 attempts; last: HTTP 500\)/]])
  t.equal(channels.channels.get(channel.id)!.enabled, true)
  t.notOk(lines.some((l) => l.msg === 'notification channel disabled after a run of failures'), 'nothing disabled, nor logged as such')
  t.match(lines.filter((l) => l.level === LEVEL.warn), [{ msg: 'notification delivery failed for good', channel: channel.id, attempt: 3, maxAttempts: 3, statusCode: 500, error: 'HTTP 500' }],
    'the delivery given up is told')
})

t.test('a permanent failure (a refused destination) fails at once and does not disable the channel', async (t) => {
  const { worker, channels, delivery } = setup([{ ok: false, error: 'refused: 10.0.0.1 is a private address', permanent: true }])
  t.same(await worker.attempt(delivery.id), { outcome: 'failed', retryInMs: null })
  t.match(channels.calledWith('recordAttempt'), [[delivery.id, { status: 'failed', error: /^refused/, retryInMs: null }]])
  t.same(channels.calledWith('disableAfterRun'), [])
})

t.test('a test delivery is one attempt, also to a disabled channel, and its failure never disables one', async (t) => {
  const { worker, channels, sender, clock } = setup([{ ok: false, statusCode: 404, error: 'HTTP 404' }])
  const disabled = channels.add(channelOf({ kind: 'slack', enabled: false, disabledReason: 'earlier run' }, clock))
  const test = channels.store(disabled.id, 'msg_test', testEvent(disabled, 'https://dash.example.com', new Date(clock.ms)), { maxAttempts: 1 })
  t.same(await worker.attempt(test.id), { outcome: 'failed', retryInMs: null })
  t.equal(sender.requests.length, 1, 'sent, though the channel is disabled')
  t.same(channels.calledWith('disableAfterRun'), [])
})

t.test('a delivery to a channel disabled since it was queued is skipped, unsent', async (t) => {
  const { worker, channels, sender, channel, delivery } = setup()
  channels.channels.get(channel.id)!.enabled = false
  t.same(await worker.attempt(delivery.id), { outcome: 'skipped', retryInMs: null })
  t.same(channels.calledWith('skip'), [[delivery.id, 'the channel was disabled before this attempt']])
  t.equal(sender.requests.length, 0)
})

t.test('a stored payload that is not an event is skipped, saying so', async (t) => {
  const { worker, channels, sender, channel } = setup()
  const odd = channels.store(channel.id, 'msg_odd', {} as NotificationEvent)
  t.same(await worker.attempt(odd.id), { outcome: 'skipped', retryInMs: null })
  t.same(channels.calledWith('skip'), [[odd.id, 'the stored payload is not a notification event']])
  t.equal(sender.requests.length, 0)
})

t.test('a channel whose secret cannot be decrypted fails its delivery at once, logs why, and stays enabled', async (t) => {
  const unreadable = 'its signing secret was sealed with key k1, which is not configured'
  const { worker, channels, sender, channel, delivery, lines } = setup([], { kind: 'webhook', unreadable, signingSecret: null })
  t.same(await worker.attempt(delivery.id), { outcome: 'failed', retryInMs: null })
  t.equal(sender.requests.length, 0, 'nothing sent')
  t.same(channels.calledWith('recordAttempt'), [[delivery.id, { status: 'failed', statusCode: null, error: `the channel cannot be used: ${unreadable}`, response: null, retryInMs: null }]])
  t.same(channels.calledWith('disableAfterRun'), [])
  t.match(lines.find((l) => l.level === LEVEL.error), { channel: channel.id, delivery: delivery.id, reason: unreadable })
})

t.test('a delivery that is gone, or already finished, is not attempted', async (t) => {
  const { worker, channels, sender, delivery } = setup()
  t.same(await worker.attempt('msg_unknown'), { outcome: 'gone', retryInMs: null })
  for (const status of ['delivered', 'failed', 'skipped'] as const) {
    channels.deliveries.get(delivery.id)!.delivery.status = status
    t.same(await worker.attempt(delivery.id), { outcome: 'done', retryInMs: null }, status)
  }
  t.equal(sender.requests.length, 0)
  t.same(channels.calls, [])
})
