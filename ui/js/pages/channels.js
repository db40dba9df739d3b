// Notification channels: add a webhook, Slack or PagerDuty channel, send a test, see its deliveries.
import { useState } from 'preact/hooks'
import { api } from '../api.js'
import { html, useData, useAction, ErrorNote, Loading, Empty, Badge, Time, ConfirmButton, SecretOnce, ago, dotted } from '../ui.js'

const EVENTS = [
  ['alert.triggered', 'Alert triggered'],
  ['alert.resolved', 'Alert resolved'],
  ['error_cluster.created', 'New error cluster'],
  ['error_cluster.reopened', 'Error cluster re-opened'],
  ['score.dropped', 'Scores dropped'],
]
const EVENT_NAMES = Object.fromEntries([...EVENTS, ['channel.test', 'Test']])
const KINDS = { webhook: 'Webhook', slack: 'Slack', pagerduty: 'PagerDuty' }
const HINTS = {
  webhook: 'We POST each event as JSON, signed by the Standard Webhooks specification (webhook-id, webhook-timestamp, webhook-signature): verify it with the signing secret shown once after adding the channel.',
  slack: 'In Slack, create an app with an incoming webhook for the channel to post in (api.slack.com/messaging/webhooks), and paste its URL here.',
  pagerduty: 'In PagerDuty, add an Events API v2 integration to a service and paste its integration (routing) key: alerts open incidents and resolve them when they clear.',
}
const STATUS_TONE = { delivered: 'ok', failed: 'bad', retrying: 'warn', pending: 'plain', skipped: 'plain' }

const channelName = (c) => c.label || KINDS[c.kind]

function NewChannel ({ onCreated }) {
  const [kind, setKind] = useState('webhook')
  const [destination, setDestination] = useState('')
  const [label, setLabel] = useState('')
  const [events, setEvents] = useState(EVENTS.map(([e]) => e))
  const create = useAction()
  const submit = (e) => {
    e.preventDefault()
    const where = kind === 'pagerduty' ? { routingKey: destination.trim() } : { url: destination.trim() }
    create.run(() => api('/v1/me/channels', { method: 'POST', body: { kind, label: label.trim(), events, ...where } }), async (channel) => {
      setDestination('')
      setLabel('')
      await onCreated(channel)
    })
  }
  const toggle = (event) => setEvents(events.includes(event) ? events.filter((x) => x !== event) : [...events, event])
  return html`<section class="card" aria-labelledby="add-channel"><h2 id="add-channel">Add a channel</h2>
    <form onSubmit=${submit}>
      <div class="inline">
        <label>Kind <select value=${kind} onChange=${(e) => setKind(e.target.value)}>
          ${Object.entries(KINDS).map(([k, name]) => html`<option value=${k}>${name}</option>`)}</select></label>
        <label class="wide-input">${kind === 'pagerduty' ? 'Routing key' : 'URL'} <input value=${destination} required class="wide-input"
          maxLength=${kind === 'pagerduty' ? 128 : 2048} onInput=${(e) => setDestination(e.target.value)}
          placeholder=${kind === 'pagerduty' ? 'R0123456789ABCDEF0123456789ABCDE' : kind === 'slack' ? 'https://hooks.slack.com/services/…' : 'https://example.com/hooks/agent-telemetry'} /></label>
        <label>Label <input value=${label} maxLength="100" onInput=${(e) => setLabel(e.target.value)} placeholder="on-call" /></label>
      </div>
      <fieldset class="inline"><legend>Events</legend>
        ${EVENTS.map(([e, name]) => html`<label><input type="checkbox" checked=${events.includes(e)} onChange=${() => toggle(e)} /> ${name}</label>`)}
      </fieldset>
      <p class="muted">${HINTS[kind]}</p>
      <button class="primary" type="submit" disabled=${create.busy || !destination.trim() || events.length === 0}>Add channel</button>
    </form>
    <${ErrorNote} error=${create.error} />
  </section>`
}

function Delivery ({ d }) {
  const answer = d.lastError || (d.lastStatusCode ? `HTTP ${d.lastStatusCode}` : '—')
  return html`<tr data-delivery-id=${d.id}>
    <th scope="row">${EVENT_NAMES[d.event] || d.event}</th>
    <td><${Badge} tone=${STATUS_TONE[d.status] || 'plain'}>${d.status}</${Badge}></td>
    <td class="num">${d.attempts} / ${d.maxAttempts}</td>
    <td title=${d.lastResponse || ''}>${answer}</td>
    <td><${Time} iso=${d.createdAt} /></td>
    <td>${d.lastAttemptAt ? html`<${Time} iso=${d.lastAttemptAt} />` : '—'}</td>
    <td>${d.nextAttemptAt ? html`<${Time} iso=${d.nextAttemptAt} />` : '—'}</td>
  </tr>`
}

/** The channel's delivery log: the newest page refreshed every 3 s, older pages on demand. */
function Deliveries ({ channel }) {
  const path = `/v1/me/channels/${channel.id}/deliveries`
  const { data, error } = useData(() => api(path, { query: { limit: 20 } }), [channel.id], 3000)
  const [older, setOlder] = useState({ items: [], cursor: undefined })
  const more = useAction()
  const cursor = older.cursor === undefined ? data?.nextCursor : older.cursor
  const loadOlder = () => more.run(() => api(path, { query: { limit: 20, cursor } }), (page) => setOlder({ items: [...older.items, ...page.deliveries], cursor: page.nextCursor }))
  if (!data) return html`<${ErrorNote} error=${error} /><${Loading} what="Loading deliveries" />`
  const rows = [...data.deliveries, ...older.items.filter((o) => !data.deliveries.some((d) => d.id === o.id))]
  return html`<${ErrorNote} error=${error} />
    ${rows.length === 0
? html`<${Empty}>Nothing delivered yet.</${Empty}>`
: html`<div class="table-wrap"><table class="deliveries" aria-label=${`Deliveries to ${channelName(channel)}`}>
      <thead><tr><th scope="col">Event</th><th scope="col">Status</th><th scope="col" class="num">Attempts</th><th scope="col">Last answer</th>
        <th scope="col">Created</th><th scope="col">Last attempt</th><th scope="col">Next attempt</th></tr></thead>
      <tbody>${rows.map((d) => html`<${Delivery} key=${d.id} d=${d} />`)}</tbody>
    </table></div>`}
    ${cursor ? html`<button onClick=${loadOlder} disabled=${more.busy}>Older deliveries</button>` : null}
    <${ErrorNote} error=${more.error} />`
}

function Channel ({ c, onChange }) {
  const [open, setOpen] = useState(false)
  const action = useAction()
  const patch = (body) => action.run(() => api(`/v1/me/channels/${c.id}`, { method: 'PATCH', body }), onChange)
  const test = () => action.run(() => api(`/v1/me/channels/${c.id}/test`, { method: 'POST' }), () => setOpen(true))
  const remove = () => action.run(() => api(`/v1/me/channels/${c.id}`, { method: 'DELETE' }), onChange)
  return html`<li class="channel" data-channel-id=${c.id}>
    <div class="cluster-head">
      <${Badge} tone=${c.enabled ? 'ok' : 'bad'}>${c.enabled ? 'enabled' : 'disabled'}</${Badge}>
      <strong>${channelName(c)}</strong>${c.label ? html`<span class="muted">${KINDS[c.kind]}</span>` : null}
    </div>
    <p class="muted">
      ${dotted(
        html`<code>${c.url || c.routingKey}</code>`,
        c.events.map((e) => EVENT_NAMES[e] || e).join(', '),
        html`last delivered ${c.lastSuccessAt ? html`<span title=${c.lastSuccessAt}>${ago(c.lastSuccessAt)}</span>` : 'never'}`,
      )}
    </p>
    ${c.disabledReason ? html`<p class="note error">Disabled by the service: ${c.disabledReason}</p>` : null}
    <div class="actions">
      <button onClick=${test} disabled=${action.busy}>Send test</button>
      <button aria-expanded=${open} onClick=${() => setOpen(!open)}>${open ? 'Hide deliveries' : 'Deliveries'}</button>
      <button onClick=${() => patch({ enabled: !c.enabled })} disabled=${action.busy}>${c.enabled ? 'Disable' : 'Enable'}</button>
      <${ConfirmButton} label="Delete" confirmLabel="Delete now" busy=${action.busy}
        question=${`Delete “${channelName(c)}” and its delivery log?`} onConfirm=${remove} />
    </div>
    <${ErrorNote} error=${action.error} />
    ${open ? html`<${Deliveries} channel=${c} />` : null}
  </li>`
}

export function ChannelsPage () {
  const { data, error, reload } = useData(() => api('/v1/me/channels'), [], 15_000)
  const [created, setCreated] = useState(null)
  const onCreated = async (channel) => {
    if (channel.secret) setCreated(channel)
    await reload()
  }
  return html`
    <h1 tabindex="-1">Notification channels</h1>
    <p class="muted">Alerts and error clusters reach you where you work: as they trigger, resolve, appear or re-open, each is sent
      once to every enabled channel that takes it, retried for up to a day when the destination fails.</p>
    ${created
? html`<${SecretOnce} title=${created.label ? `Webhook “${created.label}” added` : 'Webhook added'} secret=${created.secret} onDismiss=${() => setCreated(null)}>
        Receivers verify each request's <code>webhook-signature</code> with it, using any Standard Webhooks library.</${SecretOnce}>`
: null}
    <${NewChannel} onCreated=${onCreated} />
    <${ErrorNote} error=${error} />
    ${!data
? html`<${Loading} />`
: data.channels.length === 0
? html`<${Empty}>No channels yet: alerts show only in the dashboard.</${Empty}>`
: html`<ul class="clusters">${data.channels.map((c) => html`<${Channel} key=${c.id} c=${c} onChange=${reload} />`)}</ul>`}`
}
