// Agents: the list with KPIs, and one agent's page (calendar heat map, recent sessions, error
// clusters; rename, publish or unpublish, delete).
import { useState } from 'preact/hooks'
import { api, listAll } from '../api.js'
import { html, useData, useAction, Kpi, money, count, percent, ago, Time, duration, ErrorNote, Loading, Empty, Badge, ConfirmButton, plural, dotted, Name } from '../ui.js'

export function AgentsPage () {
  const { data, error } = useData(() => listAll('/v1/me/agents', 'agents', { query: { limit: 200 } }), [], 15_000)
  return html`
    <h1 tabindex="-1">Agents</h1>
    <${ErrorNote} error=${error} />
    ${!data
? html`<${Loading} />`
: data.length === 0
? html`<${Empty}>No agents yet: they appear with their first event.</${Empty}>`
: html`
    <div class="table-wrap"><table>
      <thead><tr>
        <th scope="col">Agent</th><th scope="col" class="num">Events 24 h</th><th scope="col" class="num">Spend 24 h</th>
        <th scope="col" class="num">Events 30 d</th><th scope="col" class="num">Spend 30 d</th><th scope="col" class="num">Error rate 30 d</th>
        <th scope="col">Last seen</th><th scope="col">Visibility</th>
      </tr></thead>
      <tbody>${data.map((a) => html`<tr>
        <th scope="row"><${Name} text=${a.displayName}><a href=${`#/agents/${encodeURIComponent(a.id)}`}>${a.displayName}</a></${Name}>${a.framework ? html` <span class="muted">${a.framework}</span>` : null}</th>
        <td class="num">${count(a.kpis?.events24h)}</td><td class="num">${money(a.kpis?.cost24h)}</td>
        <td class="num">${count(a.kpis?.events30d)}</td><td class="num">${money(a.kpis?.cost30d)}</td>
        <td class=${`num ${a.kpis?.errorRate30d > 0.1 ? 'bad' : ''}`}>${percent(a.kpis?.events30d ? a.kpis.errorRate30d : null)}</td>
        <td>${ago(a.lastSeenAt)}</td>
        <td>${a.isPublic ? html`<${Badge} tone="ok">public</${Badge}>` : html`<${Badge} tone="plain">private</${Badge}>`}</td>
      </tr>`)}</tbody>
    </table></div>`}`
}

/** 30 days as a heat map: one cell per day, shaded by events, red-edged when errors occurred. */
function Calendar ({ days }) {
  const max = Math.max(1, ...days.map((d) => d.eventCount))
  const level = (n) => (n === 0 ? 0 : 1 + Math.min(3, Math.floor((n / max) * 4)))
  return html`<div class="calendar" role="list" aria-label="Activity, last 30 days">
    ${days.map((d) => html`<div role="listitem" class=${`day l${level(d.eventCount)} ${d.errors ? 'has-errors' : ''}`}
      title=${`${d.day}: ${plural(d.eventCount, 'event')}, ${plural(d.errors, 'error')}, ${money(d.costUsd)}`}
      aria-label=${`${d.day}: ${plural(d.eventCount, 'event')}, ${plural(d.errors, 'error')}, ${money(d.costUsd)}`}>
      <span aria-hidden="true">${Number(d.day.slice(8))}</span></div>`)}
  </div>
  <p class="legend muted" aria-hidden="true">less <span class="day l0"></span><span class="day l1"></span><span class="day l2"></span><span class="day l3"></span><span class="day l4"></span> more · outlined: errors that day</p>`
}

function Rename ({ agent, onDone }) {
  const [name, setName] = useState(agent.displayName)
  const action = useAction()
  return html`<form class="inline" onSubmit=${(e) => { e.preventDefault(); action.run(() => api(`/v1/me/agents/${agent.id}`, { method: 'PATCH', body: { displayName: name } }), onDone) }}>
    <label for="rename">Display name</label>
    <input id="rename" value=${name} maxLength="120" required onInput=${(e) => setName(e.target.value)} />
    <button type="submit" disabled=${action.busy || !name.trim() || name.trim() === agent.displayName}>Rename</button>
    <${ErrorNote} error=${action.error?.body?.reason === 'display_name_taken' ? { message: 'You already have an agent with that name.' } : action.error} />
  </form>`
}

/** isPublic through PATCH; a server that does not accept the field yet says so and the switch stays put. */
function Visibility ({ agent, onDone }) {
  const action = useAction()
  const [unsupported, setUnsupported] = useState(false)
  const flip = () => action.run(async () => {
    try {
      return await api(`/v1/me/agents/${agent.id}`, { method: 'PATCH', body: { isPublic: !agent.isPublic } })
    } catch (err) {
      if (err.status === 400 || err.status === 405 || err.status === 501) setUnsupported(true)
      else throw err
    }
  }, onDone)
  return html`<div class="inline">
    <span>Visibility: ${agent.isPublic ? html`<${Badge} tone="ok">public</${Badge}>` : html`<${Badge} tone="plain">private</${Badge}>`}</span>
    <button onClick=${flip} disabled=${action.busy || unsupported}>${agent.isPublic ? 'Unpublish' : 'Publish'}</button>
    ${unsupported ? html`<p class="note" role="status">This server does not support publishing from the dashboard yet.</p>` : null}
    <${ErrorNote} error=${action.error} />
  </div>`
}

export function AgentPage ({ id, refreshNames }) {
  const { data: agent, error, reload } = useData(() => api(`/v1/me/agents/${encodeURIComponent(id)}`), [id], 30_000)
  const del = useAction()
  const [deleted, setDeleted] = useState(false)
  if (deleted) return html`<h1 tabindex="-1">Agent deleted</h1><p>Its events are hidden and ingestion for it now answers 410. <a href="#/agents">Back to agents</a></p>`
  if (error?.status === 404) return html`<h1 tabindex="-1">Agent not found</h1><p><a href="#/agents">Back to agents</a></p>`
  if (!agent) return html`<h1 tabindex="-1">Agent</h1><${ErrorNote} error=${error} /><${Loading} />`
  const k = agent.kpis || {}
  const changed = async () => { await reload(); await refreshNames() }
  return html`
    <p class="crumbs"><a href="#/agents">Agents</a> /</p>
    <h1 tabindex="-1">${agent.displayName}</h1>
    <p class="muted">${dotted(agent.framework, html`created <${Time} iso=${agent.createdAt} />`, `last seen ${ago(agent.lastSeenAt)}`, html`<code>${agent.id}</code>`)}</p>
    <div class="kpis">
      <${Kpi} label="Events, 24 h" value=${count(k.events24h)} hint=${`${money(k.cost24h)} spent`} />
      <${Kpi} label="Events, 30 days" value=${count(k.events30d)} hint=${`${money(k.cost30d)} spent`} />
      <${Kpi} label="Errors, 30 days" value=${count(k.errors30d)} hint=${k.events30d ? `${percent(k.errorRate30d)} of events` : 'no events'} tone=${k.errorRate30d > 0.1 ? 'bad' : ''} />
    </div>
    <div class="grid">
      <section class="card" aria-labelledby="cal"><h2 id="cal">Activity, 30 days</h2><${Calendar} days=${agent.calendar || []} /></section>
      <section class="card" aria-labelledby="manage"><h2 id="manage">Manage</h2>
        <${Rename} agent=${agent} onDone=${changed} />
        <${Visibility} agent=${agent} onDone=${changed} />
        <div class="inline">
          <${ConfirmButton} label="Delete agent…" confirmLabel="Delete" busy=${del.busy}
            question=${`Delete ${agent.displayName}? Its events are hidden and new events for it are refused.`}
            onConfirm=${() => del.run(() => api(`/v1/me/agents/${agent.id}`, { method: 'DELETE' }), async () => { setDeleted(true); await refreshNames() })} />
          <${ErrorNote} error=${del.error} />
        </div>
      </section>
      <section class="card" aria-labelledby="rs"><h2 id="rs">Recent sessions</h2>
        ${(agent.recentSessions || []).length === 0
? html`<${Empty}>No sessions.</${Empty}>`
: html`<div class="table-wrap"><table>
          <thead><tr><th scope="col">Session</th><th scope="col">Last activity</th><th scope="col" class="num">Events</th><th scope="col" class="num">Duration</th><th scope="col" class="num">Cost</th></tr></thead>
          <tbody>${agent.recentSessions.map((s) => html`<tr>
            <td><a href=${`#/sessions/${encodeURIComponent(s.sessionId)}`}><${Name} text=${s.sessionId} mono /></a></td><td><${Time} iso=${s.end} /></td>
            <td class="num">${count(s.eventCount)}</td><td class="num">${duration(s.durationMs)}</td><td class="num">${money(s.costUsd)}</td></tr>`)}</tbody></table></div>`}
      </section>
      <section class="card" aria-labelledby="re"><h2 id="re">Error clusters</h2>
        ${(agent.recentErrors || []).length === 0
? html`<${Empty}>No errors.</${Empty}>`
: html`<ul class="plain">
          ${agent.recentErrors.map((c) => html`<li><${Badge} tone=${c.status === 'open' ? 'bad' : 'ok'}>${c.status}</${Badge}>
            <a href=${`#/errors/${c.fingerprint}`} title=${c.fingerprint}>${c.sampleMessage || '(no message)'}</a> <span class="muted">${dotted(`× ${count(c.count)}`, ago(c.lastSeen))}</span></li>`)}
        </ul>`}
      </section>
    </div>
    <p class="muted"><a href=${`#/live?agentId=${encodeURIComponent(agent.id)}`}>Live events of this agent</a></p>`
}
