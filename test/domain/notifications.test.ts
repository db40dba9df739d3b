import t from 'tap'
import { Webhook } from 'standardwebhooks'
import {
  DELIVERY_ATTEMPTS, alertEvent, clusterCreatedEvent, eventKey, maskCredential, pagerDutyEvent, parseDestination, retryDelayMs, slackMessage, testEvent, type AlertFacts,
} from '../../src/domain/notifications.ts'
import { newSigningSecret, signedHeaders } from '../../src/domain/standard-webhooks.ts'
import { addressKind, isPublicAddress } from '../../src/domain/public-address.ts'

const BASE = 'https://dash.example.com'
const AT = new Date('2026-05-01T10:00:00.000Z')
const agent = { id: 'cagent00000000000000000000', displayName: 'research-bot' }
const alert: AlertFacts = {
  id: 'calert00000000000000000000',
  rule: 'error_rate',
  severity: 'critical',
  status: 'active',
  message: '12 of 14 events failed in the last 15 min (86 %)',
  figures: { failed: 12, total: 14, rate: 0.8571 },
  triggerCount: 1,
  createdAt: '2026-05-01T09:59:00.000Z',
  lastTriggeredAt: '2026-05-01T09:59:00.000Z',
  lastSeenFiringAt: '2026-05-01T10:00:00.000Z',
  clearedAt: null,
}

t.test('signatures follow Standard Webhooks: the reference library verifies them', async (t) => {
  const secret = newSigningSecret()
  t.match(secret, /^whsec_[A-Za-z0-9+/]{43}=$/, '32 random bytes in base64')
  const body = JSON.stringify(alertEvent('opened', alert, agent, BASE, AT))
  const now = Math.floor(Date.now() / 1000)
  const headers = signedHeaders(secret, 'msg_01TEST', now, body)
  t.same(new Webhook(secret).verify(body, { ...headers }), JSON.parse(body))
  t.throws(() => new Webhook(secret).verify(body.replace('12 of 14', '13 of 14'), { ...headers }), 'a changed body fails')
  t.throws(() => new Webhook(newSigningSecret()).verify(body, { ...headers }), 'another secret fails')
  t.throws(() => new Webhook(secret).verify(body, { ...headers, 'webhook-id': 'msg_OTHER' }), 'the id is signed')
})

t.test('events carry the alert or cluster, the agent and the dashboard link', async (t) => {
  const triggered = alertEvent('opened', alert, agent, BASE, AT)
  t.match(triggered, { type: 'alert.triggered', timestamp: AT.toISOString(), data: { alert: { id: alert.id, rule: 'error_rate', figures: { failed: 12 } }, agent, url: `${BASE}/#/alerts` } })
  t.equal(alertEvent('cleared', alert, agent, BASE, AT).type, 'alert.resolved')

  const regression = { ...alert, rule: 'regression:0123456789abcdef', severity: 'warning' as const, figures: { fingerprint: '0123456789abcdef', resolvedAt: '2026-05-01T08:00:00.000Z', lastSeenAt: '2026-05-01T09:58:00.000Z', events: 3 } }
  const reopened = alertEvent('opened', regression, agent, BASE, AT)
  t.match(reopened, {
    type: 'error_cluster.reopened',
    data: { cluster: { fingerprint: '0123456789abcdef', status: 'open', count: 3, resolvedAt: '2026-05-01T08:00:00.000Z' }, alert: { id: alert.id }, url: `${BASE}/#/errors/0123456789abcdef` },
  }, 'a regression alert opening is the cluster re-opening, announced once')
  t.equal(alertEvent('cleared', regression, agent, BASE, AT).type, 'alert.resolved', 'its clearing resolves the alert')

  const cluster = { fingerprint: 'fedcba9876543210', status: 'open' as const, sampleMessage: 'disk full', count: 2, firstSeen: AT.toISOString(), lastSeen: AT.toISOString(), resolvedAt: null }
  t.match(clusterCreatedEvent(cluster, agent, BASE, AT), { type: 'error_cluster.created', data: { cluster, agent } })
  const context = (count: number) => JSON.stringify(slackMessage(clusterCreatedEvent({ ...cluster, count }, agent, BASE, AT)).blocks)
  t.match(context(1), '· 1 event ·', 'one event, not "1 events"')
  t.match(context(2), '· 2 events ·')
})

t.test('one delivery key per state change', async (t) => {
  t.equal(eventKey(alertEvent('opened', alert, agent, BASE, AT), 'msg_1'), `alert.triggered:${alert.id}`)
  t.equal(eventKey(alertEvent('opened', alert, agent, BASE, new Date()), 'msg_2'), `alert.triggered:${alert.id}`, 'the same change published twice')
  t.equal(eventKey(alertEvent('cleared', alert, agent, BASE, AT), 'msg_1'), `alert.resolved:${alert.id}`)
  const test = testEvent({ id: 'c1', kind: 'webhook', label: 'x' }, BASE, AT)
  t.not(eventKey(test, 'msg_1'), eventKey(test, 'msg_2'), 'every test is its own delivery')
})

t.test('Slack gets text and blocks, with its control characters escaped', async (t) => {
  const msg = slackMessage(alertEvent('opened', { ...alert, message: 'a <b> & c' }, agent, BASE, AT))
  t.equal(msg.text, '[critical] error_rate on research-bot: a &lt;b&gt; &amp; c', 'the text of notifications')
  t.match(msg.blocks[0], { type: 'section', text: { type: 'mrkdwn', text: msg.text } })
  t.match(JSON.stringify(msg.blocks[1]), `<${BASE}/#/alerts|Open in the dashboard>`)
  t.match(JSON.stringify(msg.blocks[1]), /failed 12 · total 14/)
  const long = slackMessage(alertEvent('opened', { ...alert, message: 'x'.repeat(5000) }, agent, BASE, AT))
  t.ok(long.text.length <= 3000, 'within Slack\'s limit')
  const over = slackMessage(alertEvent('cleared', { ...alert, message: '12 of 14 events failed' }, agent, BASE, AT))
  t.equal(over.text, '[resolved] error_rate on research-bot is over (it was: 12 of 14 events failed)', 'a resolution reads as the end of the problem, not as it again')
})

t.test('PagerDuty: trigger with the alert as dedup key, resolve with the same', async (t) => {
  const trigger = pagerDutyEvent(alertEvent('opened', alert, agent, BASE, AT), 'R0UTINGKEY')
  t.match(trigger, {
    routing_key: 'R0UTINGKEY',
    event_action: 'trigger',
    dedup_key: alert.id,
    payload: { summary: /error_rate on research-bot/, severity: 'critical', source: 'research-bot', class: 'alert.triggered' },
    links: [{ href: `${BASE}/#/alerts` }],
  })
  t.same(pagerDutyEvent(alertEvent('cleared', alert, agent, BASE, AT), 'R0UTINGKEY'), { routing_key: 'R0UTINGKEY', event_action: 'resolve', dedup_key: alert.id })
  const long = pagerDutyEvent(alertEvent('opened', { ...alert, message: 'y'.repeat(2000) }, agent, BASE, AT), 'k') as { payload: { summary: string } }
  t.ok(long.payload.summary.length <= 1024, 'summary within PagerDuty\'s 1024 characters')
})

t.test('retries back off exponentially for under 24 h', async (t) => {
  const delays = Array.from({ length: DELIVERY_ATTEMPTS - 1 }, (_, i) => retryDelayMs(i + 1))
  t.same(delays, [15_000, 60_000, 240_000, 960_000, 3_840_000, 15_360_000, 61_440_000])
  const total = delays.reduce((a, b) => a + b, 0)
  t.equal(total, ((22 * 60 + 45) * 60 + 15) * 1000, 'the last attempt 22 h 45 min 15 s after the first')
  t.ok(total < 24 * 3_600_000)
})

t.test('only public addresses are public', async (t) => {
  const refused = ['127.0.0.1', '10.1.2.3', '172.16.0.1', '192.168.1.1', '169.254.169.254', '100.64.0.1', '0.0.0.0', '224.0.0.1', '255.255.255.255',
    '::1', '::', 'fe80::1', 'fd00::1', '::ffff:127.0.0.1', '::ffff:10.0.0.1', '64:ff9b::a00:1', '2002:a00:1::', '2001:db8::1', '::2']
  for (const a of refused) t.notOk(isPublicAddress(a), `${a} (${addressKind(a)}) is refused`)
  for (const a of ['93.184.216.34', '8.8.8.8', '2606:4700:4700::1111', '::ffff:8.8.8.8']) t.ok(isPublicAddress(a), `${a} is public`)
  t.equal(addressKind('not-an-address'), 'invalid')
})

t.test('credentials are masked to their last four characters, and short ones show none of it', async (t) => {
  t.equal(maskCredential('https://hooks.slack.com/services/T000/B000/abcdEFGH'), 'https://hooks.slack.com/…EFGH')
  t.equal(maskCredential('R0UTINGKEY1234R0UTINGKEY1234'), '…1234')
  t.equal(maskCredential('R0UTINGKEY1234'), '…', 'a 14-character key shows nothing')
  t.equal(maskCredential('https://hooks.example.com/abc'), 'https://hooks.example.com/…', 'nor a short path')
})

t.test('regression: a PagerDuty key of any length is masked', async (t) => {
  const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789'
  for (let length = 1; length <= 40; length++) {
    // Distinct characters, so any piece of the key that shows can be found.
    const key = Array.from({ length }, (_, i) => alphabet[(i * 7 + length) % alphabet.length]).join('')
    const masked = maskCredential(key)
    t.ok(masked.startsWith('…'), `length ${length}: ${masked}`)
    const shown = masked.slice(1)
    t.ok(shown.length <= 4 && (shown === '' || key.endsWith(shown)), `length ${length}: at most the last four characters show`)
    t.ok(key.length - shown.length >= 16 || shown === '', `length ${length}: at least 16 characters stay hidden`)
    if (length < 20) t.equal(masked, '…', `length ${length}: nothing shows`)
    else t.equal(masked, `…${key.slice(-4)}`, `length ${length}: the last four show`)
  }
})

t.test('a destination that passes the pattern but does not parse is named as such', async (t) => {
  for (const bad of ['http://[/', 'http://:80', 'https://exa mple.com', 'http://999.1.1.1/', 'http://exa%mple.com/']) {
    t.match(parseDestination(bad), { problem: String }, bad)
  }
  t.same(parseDestination('http://[/'), { problem: 'is not a valid URL' })
  t.match(parseDestination('https://hooks.example.com/a?b=c'), { url: { hostname: 'hooks.example.com' } })
})

t.test('error_cluster.reopened carries the cluster\'s sample message and first event from the regression alert', async (t) => {
  const regression = {
    ...alert,
    rule: 'regression:0123456789abcdef',
    severity: 'warning' as const,
    message: 'resolved error cluster 0123456789abcdef happened again: disk full',
    figures: {
      fingerprint: '0123456789abcdef', resolvedAt: '2026-05-01T08:00:00.000Z', firstSeenAt: '2026-04-30T07:00:00.000Z', lastSeenAt: '2026-05-01T09:58:00.000Z', events: 3, sampleMessage: 'disk full',
    },
  }
  const reopened = alertEvent('opened', regression, agent, BASE, AT)
  t.match(reopened, { type: 'error_cluster.reopened', data: { cluster: { sampleMessage: 'disk full', firstSeen: '2026-04-30T07:00:00.000Z', lastSeen: '2026-05-01T09:58:00.000Z', count: 3 } } })
  t.notMatch(JSON.stringify(slackMessage(reopened).blocks[1]), /sampleMessage/, 'Slack\'s figures line does not repeat the message')
})
