// Alerts: active, acknowledged and snoozed, with acknowledge, snooze (hours) and unacknowledge.
import { useState } from 'preact/hooks'
import { api, agentOf } from '../api.js'
import { html, useData, useAction, ErrorNote, Loading, Empty, Badge, Time, AgentLink, count, ago, dotted } from '../ui.js'

const TABS = [['all', 'All'], ['active', 'Active'], ['acknowledged', 'Acknowledged'], ['snoozed', 'Snoozed']]
const TONE = { active: 'bad', acknowledged: 'plain', snoozed: 'warn' }

const TIMES = (n) => (n === 1 ? 'once' : n === 2 ? 'twice' : `${count(n)} times`)
const At = ({ iso }) => html`<time datetime=${iso} title=${new Date(iso).toLocaleString()}>${ago(iso)}</time>`

/**
 * When the alert was raised: `lastTriggeredAt` and `triggerCount` count the times it was raised (a
 * notification each), not every evaluation that still found the condition true.
 */
export function raisedText (a) {
  if (!a.lastTriggeredAt) return null
  return a.triggerCount > 1 ? html`raised ${TIMES(a.triggerCount)}, last <${At} iso=${a.lastTriggeredAt} />` : html`raised <${At} iso=${a.lastTriggeredAt} />`
}

/**
 * `lastSeenFiringAt` (when the condition was last found true), shown only when the server sends it
 * and it is later than the last raise: "still firing" while the alert is not cleared.
 */
export function firingText (a) {
  const seen = a.lastSeenFiringAt
  if (!seen || (a.lastTriggeredAt && Date.parse(seen) <= Date.parse(a.lastTriggeredAt))) return null
  return a.clearedAt
    ? html`last seen firing <${At} iso=${seen} />`
    : html`<span class="firing">still firing, last seen <${At} iso=${seen} /></span>`
}

function Alert ({ a, names, onChange }) {
  const action = useAction()
  const [hours, setHours] = useState(1)
  const post = (path, query) => action.run(() => api(`/v1/me/alerts/${a.id}/${path}`, { method: 'POST', query }), onChange)
  return html`<li class="alert" data-alert-id=${a.id}>
    <div class="cluster-head">
      <span class=${`sev sev-${a.severity}`}>${a.severity}</span>
      <${Badge} tone=${TONE[a.status] || 'plain'}>${a.status}</${Badge}>
      <strong>${a.message}</strong>
    </div>
    <p class="muted">${dotted(
      a.rule,
      html`<${AgentLink} agent=${agentOf(a, names)} />${a.agentDeleted ? ' (deleted)' : ''}`,
      raisedText(a),
      firingText(a),
      a.status === 'snoozed' && a.snoozedUntil ? html`snoozed until <${Time} iso=${a.snoozedUntil} />` : null,
      a.acknowledgedAt && a.status === 'acknowledged' ? html`acknowledged <${Time} iso=${a.acknowledgedAt} />` : null,
      a.clearedAt ? html`cleared <${Time} iso=${a.clearedAt} />` : null,
    )}</p>
    <div class="actions">
      ${a.status !== 'acknowledged' ? html`<button onClick=${() => post('acknowledge')} disabled=${action.busy}>Acknowledge</button>` : null}
      ${a.status !== 'acknowledged'
? html`<span class="inline">
        <label>Snooze for <input type="number" min="1" max="168" value=${hours} onInput=${(e) => setHours(e.target.value)} class="short" /> hours</label>
        <button onClick=${() => post('snooze', { hours })} disabled=${action.busy}>Snooze</button></span>`
: null}
      ${a.status === 'acknowledged' && !a.clearedAt ? html`<button onClick=${() => post('unacknowledge')} disabled=${action.busy}>Unacknowledge</button>` : null}
    </div>
    <${ErrorNote} error=${action.error} />
  </li>`
}

export function AlertsPage ({ names, params }) {
  // The tab is in the address (`#/alerts?status=active`): shareable, and Back returns to it.
  const status = TABS.some(([s]) => s === params?.get('status')) ? params.get('status') : 'all'
  const setStatus = (s) => { window.location.hash = s === 'all' ? '#/alerts' : `#/alerts?status=${s}` }
  const { data, error, reload } = useData(() => api('/v1/me/alerts', { query: { status, count: true, limit: 200 } }), [status], 15_000)
  const counts = data?.counts || {}
  return html`
    <h1 tabindex="-1">Alerts</h1>
    <div class="tabs" role="group" aria-label="Alert status">
      ${TABS.map(([s, label]) => html`<button aria-pressed=${status === s} onClick=${() => setStatus(s)}>${label}${data?.counts ? ` (${count(s === 'all' ? counts.total : counts[s])})` : ''}</button>`)}
    </div>
    <${ErrorNote} error=${error} />
    ${!data
? html`<${Loading} />`
: data.alerts.length === 0
? html`<${Empty}>No ${status === 'all' ? '' : status + ' '}alerts.</${Empty}>`
: html`
    <ul class="clusters">${data.alerts.map((a) => html`<${Alert} key=${a.id} a=${a} names=${names} onChange=${reload} />`)}</ul>`}`
}
