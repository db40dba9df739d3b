import t from 'tap'
import { DELIVERY_ATTEMPTS, alertEvent, eventKey, type NotificationEvent } from '../../src/domain/notifications.ts'
import { NotificationPublisher } from '../../src/services/notification-publisher.ts'
import type { AgentRef, AgentsRepository } from '../../src/storage/agents-repository.ts'
import type { Alert, AlertsRepository } from '../../src/storage/alerts-repository.ts'
import { FakeChannels, FakeClock, FakeQueue, LEVEL, channelOf, recordingLog } from './notification-fakes.ts'

// The publisher against fakes of the channels, alerts and agents repositories and of the queue: which
// deliveries a change becomes, what is queued, and what the listeners do when something fails. The
// integration tests (test/routes/v1/me/channels*.test.ts) run it for real.

const DASHBOARD = 'https://dash.example.com'

function alertOf (clock: FakeClock, fields: Partial<Alert> = {}): Alert {
  return {
    id: 'alert-1', agentId: 'agent-1', agent: { id: 'agent-1', displayName: 'billing' }, agentDeleted: false,
    rule: 'error_rate', severity: 'critical', message: '12 of 14 events failed', figures: { failed: 12, total: 14 }, status: 'active',
    snoozedUntil: null, triggerCount: 1, createdAt: clock.iso, updatedAt: clock.iso, lastTriggeredAt: clock.iso, lastSeenFiringAt: clock.iso,
    acknowledgedAt: null, clearedAt: null, ...fields,
  }
}

class FakeAlerts implements Pick<AlertsRepository, 'withOwners'> {
  owned: { userId: string; alert: Alert }[] = []
  failing: Error | null = null
  async withOwners (ids: string[]) {
    if (this.failing) throw this.failing
    return this.owned.filter((o) => ids.includes(o.alert.id))
  }
}

class FakeAgents implements Pick<AgentsRepository, 'getOwned'> {
  readonly agents: (AgentRef & { ownerId: string })[] = []
  async getOwned (ownerId: string, id: string) {
    return this.agents.find((a) => a.ownerId === ownerId && a.id === id && !a.deleted) ?? null
  }
}

function setup () {
  const clock = new FakeClock()
  const channels = new FakeChannels(clock)
  const alerts = new FakeAlerts()
  const agents = new FakeAgents()
  const queue = new FakeQueue()
  const { log, lines } = recordingLog()
  const publisher = new NotificationPublisher(channels, alerts, agents, queue, { dashboardUrl: DASHBOARD }, log, clock.now)
  return { clock, channels, alerts, agents, queue, publisher, lines }
}

const opened = (clock: FakeClock, alert = alertOf(clock)): NotificationEvent => alertEvent('opened', alert, alert.agent, DASHBOARD, new Date(clock.ms))

t.test('an event becomes one delivery per enabled channel of the user that takes it, each queued', async (t) => {
  const { clock, channels, queue, publisher } = setup()
  const hook = channels.add(channelOf({ kind: 'webhook' }, clock))
  const pager = channels.add(channelOf({ kind: 'pagerduty' }, clock))
  channels.add(channelOf({ kind: 'slack', events: ['error_cluster.created'] }, clock))
  channels.add(channelOf({ kind: 'slack', enabled: false }, clock))
  channels.add(channelOf({ kind: 'webhook', userId: 'someone-else' }, clock))
  const event = opened(clock)

  const added = await publisher.publish('user-1', event)
  t.same(added.map((d) => d.channelId), [hook.id, pager.id], 'the subscribed, enabled channels of that user only')
  t.same(queue.enqueued, added.map((d) => d.id), 'each queued by its id')
  for (const [channelId, d] of channels.calledWith('addDelivery') as [string, { id: string; eventKey: string; event: NotificationEvent; maxAttempts: number }][]) {
    t.match(d, { id: /^msg_[0-9A-Z]{26}$/, eventKey: eventKey(event, d.id), event, maxAttempts: DELIVERY_ATTEMPTS }, channelId)
  }
})

t.test('an event a channel already has is neither added nor queued again', async (t) => {
  const { clock, channels, queue, publisher } = setup()
  channels.add(channelOf({ kind: 'webhook' }, clock))
  const event = opened(clock)
  t.equal((await publisher.publish('user-1', event)).length, 1)
  t.same(await publisher.publish('user-1', event), [], 'the same state change again')
  t.equal(queue.enqueued.length, 1)
})

t.test('a delivery that cannot be queued is kept for the sweep, with a warning', async (t) => {
  const { clock, channels, queue, publisher, lines } = setup()
  channels.add(channelOf({ kind: 'webhook' }, clock))
  queue.failing = new Error('Redis is down')
  const [delivery] = await publisher.publish('user-1', opened(clock))
  t.ok(delivery, 'published: the delivery is stored')
  t.ok(channels.deliveries.has(delivery!.id))
  t.match(lines.find((l) => l.level === LEVEL.warn), { msg: 'could not queue a notification delivery; the sweep will', delivery: delivery!.id, err: { message: 'Redis is down' } })

  queue.failing = null
  clock.ms += 10 * 60_000
  t.equal(await publisher.sweep(300_000), 1, 'the sweep finds it overdue')
  t.same(queue.enqueued, [delivery!.id])
})

t.test('the sweep queues only overdue deliveries, and fails when it cannot queue (the job is retried)', async (t) => {
  const { clock, channels, queue, publisher } = setup()
  const c = channels.add(channelOf({ kind: 'webhook' }, clock))
  channels.store(c.id, 'msg_old', opened(clock), { createdAt: new Date(clock.ms - 10 * 60_000).toISOString() })
  channels.store(c.id, 'msg_new', opened(clock))
  channels.store(c.id, 'msg_done', opened(clock), { status: 'delivered', createdAt: new Date(clock.ms - 10 * 60_000).toISOString() })
  t.equal(await publisher.sweep(300_000), 1)
  t.same(queue.enqueued, ['msg_old'])
  queue.failing = new Error('Redis is down')
  await t.rejects(publisher.sweep(300_000), { message: 'Redis is down' })
})

t.test('a test send is one delivery of channel.test to that channel, one attempt, queued', async (t) => {
  const { clock, channels, queue, publisher } = setup()
  const disabled = channels.add(channelOf({ kind: 'slack', enabled: false, label: 'ops' }, clock))
  const delivery = await publisher.publishTest(disabled)
  t.match(delivery, { channelId: disabled.id, event: 'channel.test', status: 'pending', attempts: 0, maxAttempts: 1 })
  t.same(channels.deliveries.get(delivery.id)!.event, {
    type: 'channel.test',
    timestamp: clock.iso,
    data: { channel: { id: disabled.id, kind: 'slack', label: 'ops' }, message: 'A test notification from agent-telemetry: this channel works.', url: `${DASHBOARD}/` },
  })
  t.same(queue.enqueued, [delivery.id])
  t.not((await publisher.publishTest(disabled)).id, delivery.id, 'each test is its own delivery')
})

t.test('an alert state change is published to each owner\'s channels, not for a deleted agent\'s alert', async (t) => {
  const { clock, channels, alerts, publisher } = setup()
  const mine = channels.add(channelOf({ kind: 'webhook' }, clock))
  const theirs = channels.add(channelOf({ kind: 'webhook', userId: 'user-2' }, clock))
  const gone = channels.add(channelOf({ kind: 'webhook', userId: 'user-3' }, clock))
  alerts.owned = [
    { userId: 'user-1', alert: alertOf(clock, { id: 'a1' }) },
    { userId: 'user-2', alert: alertOf(clock, { id: 'a2', clearedAt: clock.iso }) },
    { userId: 'user-3', alert: alertOf(clock, { id: 'a3', agentDeleted: true }) },
  ]
  await publisher.onAlertStateChange({ change: 'cleared', ids: ['a1', 'a2', 'a3'] })
  const stored = [...channels.deliveries.values()]
  t.same(stored.map((s) => s.delivery.channelId), [mine.id, theirs.id])
  t.notOk(stored.some((s) => s.delivery.channelId === gone.id), 'none for the deleted agent')
  t.same(stored[1]!.event, alertEvent('cleared', alerts.owned[1]!.alert, alerts.owned[1]!.alert.agent, DASHBOARD, new Date(clock.ms)))
})

t.test('new clusters are published as error_cluster.created, for agents their user still owns', async (t) => {
  const { clock, channels, agents, publisher } = setup()
  const c = channels.add(channelOf({ kind: 'webhook' }, clock))
  agents.agents.push({ id: 'agent-1', ownerId: 'user-1', snsName: null, displayName: 'billing', deleted: false, framework: null })
  const first = Date.parse('2026-03-01T11:00:00.000Z')
  const cluster = { userId: 'user-1', fingerprint: '0123456789abcdef', agentId: 'agent-1', firstSeenMs: first, lastSeenMs: first + 60_000, count: 12, sample: '' }
  await publisher.onClustersAnnounced([cluster, { ...cluster, fingerprint: 'fedcba9876543210', agentId: 'agent-deleted' }])
  const stored = [...channels.deliveries.values()]
  t.equal(stored.length, 1, 'none for an agent not found')
  t.equal(stored[0]!.delivery.channelId, c.id)
  t.same(stored[0]!.event, {
    type: 'error_cluster.created',
    timestamp: clock.iso,
    data: {
      cluster: { fingerprint: '0123456789abcdef', status: 'open', sampleMessage: null, count: 12, firstSeen: '2026-03-01T11:00:00.000Z', lastSeen: '2026-03-01T11:01:00.000Z', resolvedAt: null },
      agent: { id: 'agent-1', displayName: 'billing' },
      url: `${DASHBOARD}/#/errors/0123456789abcdef`,
    },
  })
})

t.test('the listeners never throw: a failure is logged', async (t) => {
  const { clock, alerts, agents, publisher, lines } = setup()
  alerts.failing = new Error('Postgres is down')
  await t.resolves(publisher.onAlertStateChange({ change: 'opened', ids: ['a1'] }))
  t.match(lines.find((l) => l.msg === 'could not publish alert notifications'), { level: LEVEL.error, change: { change: 'opened', ids: ['a1'] }, err: { message: 'Postgres is down' } })

  agents.getOwned = async () => { throw new Error('Postgres is down') }
  const cluster = { userId: 'user-1', fingerprint: '0123456789abcdef', agentId: 'agent-1', firstSeenMs: clock.ms, lastSeenMs: clock.ms, count: 1, sample: 'x' }
  await t.resolves(publisher.onClustersAnnounced([cluster]))
  t.match(lines.find((l) => l.msg === 'could not publish error cluster notifications'), { level: LEVEL.error, clusters: 1 })
})
