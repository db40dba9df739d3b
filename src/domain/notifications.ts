/**
 * Notifications as pure functions: the events the service publishes, the body each kind of channel
 * receives (a Standard Webhooks message, a Slack incoming-webhook message, a PagerDuty Events API v2
 * event), and the retry schedule. No I/O.
 */

/** Event types a channel can subscribe to; a channel gets all of them unless it names some. */
export const EVENT_TYPES = ['alert.triggered', 'alert.resolved', 'error_cluster.created', 'error_cluster.reopened', 'score.dropped'] as const
export type EventType = (typeof EVENT_TYPES)[number]
/** What `POST /v1/me/channels/:id/test` sends; not subscribable. */
export const TEST_EVENT = 'channel.test'

export const CHANNEL_KINDS = ['webhook', 'slack', 'pagerduty'] as const
export type ChannelKind = (typeof CHANNEL_KINDS)[number]

/**
 * Attempts of one delivery, and the exponential schedule between them: 15 s × 4^(n-1) after the
 * n-th failed attempt (15 s, 1 min, 4 min, 16 min, 64 min, 4 h 16 min, 17 h 4 min), so the eighth
 * and last attempt comes 22 h 45 min 15 s after the first.
 */
export const DELIVERY_ATTEMPTS = 8
const RETRY_BASE_MS = 15_000
const RETRY_FACTOR = 4

/** How long to wait after `attemptsMade` failed attempts (1 after the first) before the next one. */
export function retryDelayMs (attemptsMade: number): number {
  return RETRY_BASE_MS * RETRY_FACTOR ** Math.max(0, attemptsMade - 1)
}

export interface AgentFacts { id: string; displayName: string | null }

/** An alert as notifications show it (a subset of the alert record). */
export interface AlertFacts {
  id: string
  rule: string
  severity: 'warning' | 'critical'
  status: string
  message: string
  figures: Record<string, unknown>
  triggerCount: number
  createdAt: string
  lastTriggeredAt: string
  lastSeenFiringAt: string
  clearedAt: string | null
}

export interface ClusterFacts {
  fingerprint: string
  status: 'open'
  sampleMessage: string | null
  count: number
  firstSeen: string | null
  lastSeen: string
  resolvedAt: string | null
}

/** The event a webhook receives as its body, and what Slack and PagerDuty bodies are rendered from. */
export type NotificationEvent =
  | { type: 'alert.triggered' | 'alert.resolved' | 'score.dropped'; timestamp: string; data: { alert: AlertFacts; agent: AgentFacts; url: string } }
  | { type: 'error_cluster.created'; timestamp: string; data: { cluster: ClusterFacts; agent: AgentFacts; url: string } }
  | { type: 'error_cluster.reopened'; timestamp: string; data: { cluster: ClusterFacts; alert: AlertFacts; agent: AgentFacts; url: string } }
  | { type: typeof TEST_EVENT; timestamp: string; data: { channel: { id: string; kind: ChannelKind; label: string }; message: string; url: string } }

/** Dashboard pages that events link to, from the dashboard's base address. */
export const dashboardLinks = (base: string) => ({
  home: `${base}/`,
  alerts: `${base}/#/alerts`,
  errors: `${base}/#/errors`,
  /** The errors page opened on one cluster (highlighted, scrolled to). */
  cluster: (fingerprint: string) => `${base}/#/errors/${encodeURIComponent(fingerprint)}`,
})

const REGRESSION = 'regression:'
/** The rule of a score alert (src/domain/score-alerts.ts): its opening is a `score.dropped`. */
const SCORE_DROPPED = 'score.dropped:'

function alertFacts (a: AlertFacts): AlertFacts {
  return {
    id: a.id,
    rule: a.rule,
    severity: a.severity,
    status: a.status,
    message: a.message,
    figures: a.figures,
    triggerCount: a.triggerCount,
    createdAt: a.createdAt,
    lastTriggeredAt: a.lastTriggeredAt,
    lastSeenFiringAt: a.lastSeenFiringAt,
    clearedAt: a.clearedAt,
  }
}

/**
 * The event of an alert that opened or cleared. A regression alert opening is the re-opening of
 * its error cluster (`error_cluster.reopened`), so a regression is announced once, not twice; its
 * clearing is an `alert.resolved` like any other. The cluster's facts come from the regression
 * alert's figures (`events`, `firstSeenAt`, `lastSeenAt`, `resolvedAt`, `sampleMessage`).
 */
export function alertEvent (change: 'opened' | 'cleared', alert: AlertFacts, agent: AgentFacts, base: string, at: Date): NotificationEvent {
  const links = dashboardLinks(base)
  const timestamp = at.toISOString()
  if (change === 'cleared') return { type: 'alert.resolved', timestamp, data: { alert: alertFacts(alert), agent, url: links.alerts } }
  if (alert.rule.startsWith(SCORE_DROPPED)) return { type: 'score.dropped', timestamp, data: { alert: alertFacts(alert), agent, url: links.alerts } }
  if (!alert.rule.startsWith(REGRESSION)) return { type: 'alert.triggered', timestamp, data: { alert: alertFacts(alert), agent, url: links.alerts } }
  const f = alert.figures
  const cluster: ClusterFacts = {
    fingerprint: alert.rule.slice(REGRESSION.length),
    status: 'open',
    sampleMessage: typeof f.sampleMessage === 'string' && f.sampleMessage !== '' ? f.sampleMessage : null,
    count: typeof f.events === 'number' ? f.events : 0,
    firstSeen: typeof f.firstSeenAt === 'string' ? f.firstSeenAt : null,
    lastSeen: typeof f.lastSeenAt === 'string' ? f.lastSeenAt : alert.lastSeenFiringAt,
    resolvedAt: typeof f.resolvedAt === 'string' ? f.resolvedAt : null,
  }
  return { type: 'error_cluster.reopened', timestamp, data: { cluster, alert: alertFacts(alert), agent, url: links.cluster(cluster.fingerprint) } }
}

/** The event of an error cluster seen for the first time. */
export function clusterCreatedEvent (cluster: ClusterFacts, agent: AgentFacts, base: string, at: Date): NotificationEvent {
  return { type: 'error_cluster.created', timestamp: at.toISOString(), data: { cluster, agent, url: dashboardLinks(base).cluster(cluster.fingerprint) } }
}

export function testEvent (channel: { id: string; kind: ChannelKind; label: string }, base: string, at: Date): NotificationEvent {
  return {
    type: TEST_EVENT,
    timestamp: at.toISOString(),
    data: { channel, message: 'A test notification from agent-telemetry: this channel works.', url: dashboardLinks(base).home },
  }
}

/**
 * What the event is about: deliveries are unique per channel and key, so each state change is
 * delivered at most once (an alert opens once and clears once; a cluster is created once and
 * re-opens once per regression alert).
 */
export function eventKey (event: NotificationEvent, deliveryId: string): string {
  switch (event.type) {
    case 'alert.triggered':
    case 'alert.resolved':
    case 'error_cluster.reopened':
    case 'score.dropped':
      return `${event.type}:${event.data.alert.id}`
    case 'error_cluster.created':
      return `${event.type}:${event.data.cluster.fingerprint}`
    case TEST_EVENT:
      return `${event.type}:${deliveryId}`
  }
}

const agentName = (agent: AgentFacts) => agent.displayName ?? agent.id

/** One line saying what happened, for Slack's `text` and PagerDuty's `summary`. */
export function summary (event: NotificationEvent): string {
  switch (event.type) {
    case 'alert.triggered':
      return `[${event.data.alert.severity}] ${event.data.alert.rule} on ${agentName(event.data.agent)}: ${event.data.alert.message}`
    case 'alert.resolved':
      // The alert's message says what it found when it fired: said as over, not as news.
      return `[resolved] ${event.data.alert.rule} on ${agentName(event.data.agent)} is over (it was: ${event.data.alert.message})`
    case 'score.dropped':
      return `[${event.data.alert.severity}] Scores dropped on ${agentName(event.data.agent)}: ${event.data.alert.message}`
    case 'error_cluster.created':
      return `New error cluster ${event.data.cluster.fingerprint} on ${agentName(event.data.agent)}: ${event.data.cluster.sampleMessage ?? '(no message)'}`
    case 'error_cluster.reopened':
      return `Error cluster ${event.data.cluster.fingerprint} re-opened on ${agentName(event.data.agent)}: ${event.data.alert.message}`
    case TEST_EVENT:
      return `Test notification for channel ${event.data.channel.label || event.data.channel.id}`
  }
}

function truncate (text: string, max: number): string {
  return text.length <= max ? text : `${text.slice(0, max - 1)}…`
}

// Slack's mrkdwn treats these three as control characters.
const slackEscape = (text: string) => text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;')

function figuresLine (figures: Record<string, unknown>): string {
  return Object.entries(figures)
    // A regression alert's sample message is already in its message, the line above.
    .filter(([k, v]) => (typeof v === 'number' || typeof v === 'string') && k !== 'sampleMessage')
    .slice(0, 8)
    .map(([k, v]) => `${k} ${v}`)
    .join(' · ')
}

/**
 * A Slack incoming-webhook message: `text` (notifications, fallbacks) and `blocks` (what people
 * see). Both are mrkdwn, so both have &, < and > escaped.
 */
export function slackMessage (event: NotificationEvent): { text: string; blocks: Record<string, unknown>[] } {
  const text = truncate(slackEscape(summary(event)), 3000)
  const context: string[] = []
  if ('agent' in event.data) context.push(`agent *${slackEscape(agentName(event.data.agent))}*`)
  if ('alert' in event.data) {
    const figures = figuresLine(event.data.alert.figures)
    if (figures) context.push(slackEscape(figures))
  }
  if (event.type === 'error_cluster.created') context.push(`${event.data.cluster.count} ${event.data.cluster.count === 1 ? 'event' : 'events'}`)
  context.push(`<${event.data.url}|Open in the dashboard>`)
  return {
    text,
    blocks: [
      { type: 'section', text: { type: 'mrkdwn', text } },
      { type: 'context', elements: [{ type: 'mrkdwn', text: truncate(context.join(' · '), 3000) }] },
    ],
  }
}

/** The PagerDuty incident an event triggers or resolves: the alert (or the new cluster, or the test). */
function dedupKey (event: NotificationEvent): string {
  switch (event.type) {
    case 'alert.triggered':
    case 'alert.resolved':
    case 'error_cluster.reopened':
    case 'score.dropped':
      return event.data.alert.id
    case 'error_cluster.created':
      return `error_cluster:${event.data.cluster.fingerprint}`
    case TEST_EVENT:
      return `channel.test:${event.data.channel.id}:${event.timestamp}`
  }
}

function pagerDutySeverity (event: NotificationEvent): 'critical' | 'error' | 'warning' | 'info' {
  if (event.type === 'channel.test') return 'info'
  if (event.type === 'error_cluster.created') return 'error'
  return event.data.alert.severity
}

/** A PagerDuty Events API v2 event: `trigger` for what opened, `resolve` (same `dedup_key`) for what cleared. */
export function pagerDutyEvent (event: NotificationEvent, routingKey: string): Record<string, unknown> {
  if (event.type === 'alert.resolved') return { routing_key: routingKey, event_action: 'resolve', dedup_key: dedupKey(event) }
  return {
    routing_key: routingKey,
    event_action: 'trigger',
    dedup_key: dedupKey(event),
    payload: {
      summary: truncate(summary(event), 1024),
      severity: pagerDutySeverity(event),
      source: 'agent' in event.data ? agentName(event.data.agent) : 'agent-telemetry',
      component: 'agent' in event.data ? event.data.agent.id : undefined,
      class: event.type,
      timestamp: event.timestamp,
      custom_details: event.data,
    },
    client: 'agent-telemetry',
    client_url: event.data.url,
    links: [{ href: event.data.url, text: 'Open in the dashboard' }],
  }
}

/** Characters at the end of a credential that a read shows, so its owner can tell which one it is. */
const SHOWN_TAIL = 4
/** A credential shows its tail only when at least this many characters stay hidden. */
const MIN_HIDDEN = 16

const tailOf = (secret: string) => (secret.length >= SHOWN_TAIL + MIN_HIDDEN ? secret.slice(-SHOWN_TAIL) : '')

/**
 * A URL or key that grants posting (Slack webhooks, PagerDuty routing keys), as reads show it: a
 * URL by its origin, and the last four characters of what follows it (or of a key) only when at
 * least 16 more stay hidden; a shorter one shows none of it (`…`).
 */
export function maskCredential (value: string): string {
  const url = parseDestination(value)
  if ('url' in url) return `${url.url.origin}/…${tailOf(url.url.pathname + url.url.search + url.url.hash)}`
  return `…${tailOf(value)}`
}

/**
 * A channel's destination parsed as the sender will use it, or why it cannot be: what the schema's
 * pattern lets through (`http://[/`, `http://:80`) may still not be a URL.
 */
export function parseDestination (text: string): { url: URL } | { problem: string } {
  let url: URL
  try {
    url = new URL(text)
  } catch {
    return { problem: 'is not a valid URL' }
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') return { problem: 'must be an http:// or https:// URL' }
  if (!url.hostname) return { problem: 'has no host' }
  return { url }
}
