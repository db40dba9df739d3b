// Overview: events per minute over the last hour (live), spend per day over 30 days, top agents by
// spend, error rate and open alerts.
import { api, listAll, agentOf } from '../api.js'
import { html, useData, Chart, Kpi, money, count, percent, ErrorNote, Loading, Empty, AgentLink, ago } from '../ui.js'

const MINUTE = 60_000
const DAY = 86_400_000

/** Counts per minute for the 60 minutes up to now, from the events list (paged while in the hour). */
export function perMinute (events, now) {
  const end = Math.floor(now / MINUTE) * MINUTE
  const xs = Array.from({ length: 60 }, (_, i) => (end - (59 - i) * MINUTE) / 1000)
  const ys = new Array(60).fill(0)
  for (const e of events) {
    const i = 59 - Math.floor((end - Math.floor(Date.parse(e.timestamp) / MINUTE) * MINUTE) / MINUTE)
    if (i >= 0 && i < 60) ys[i]++
  }
  return [xs, ys]
}

/** 30 zero-filled days (UTC), oldest first, from the spend summary's by_day rows. */
export function dailySpend (byDay, days, now) {
  const costs = new Map(byDay.map((d) => [d.day, d.costUsd]))
  const xs = []
  const ys = []
  const today = Math.floor(now / DAY) * DAY
  for (let i = days - 1; i >= 0; i--) {
    const t = today - i * DAY
    xs.push(t / 1000)
    ys.push(costs.get(new Date(t).toISOString().slice(0, 10)) ?? 0)
  }
  return [xs, ys]
}

function EventsPerMinute () {
  const { data, error } = useData(async () => {
    const since = Date.now() - 60 * MINUTE
    const events = await listAll('/v1/me/events', 'events', {
      query: { since: '24h', limit: 1000 },
      more: (page) => Date.parse(page[page.length - 1].timestamp) >= since,
    })
    return perMinute(events, Date.now())
  }, [], 5000)
  const total = data ? data[1].reduce((a, b) => a + b, 0) : 0
  return html`<section class="card wide" aria-labelledby="epm">
    <h2 id="epm">Events per minute, last hour <span class="live-dot" title="refreshes every 5 s">live</span></h2>
    <${ErrorNote} error=${error} />
    ${data ? html`<p class="muted">${count(total)} events in the last hour</p><${Chart} label="Events per minute" data=${data} series=${[{ label: 'events' }]} bars height=${180} />` : html`<${Loading} />`}
  </section>`
}

export function Overview ({ names }) {
  const spend = useData(() => api('/v1/me/spend-summary', { query: { days: 30 } }), [], 30_000)
  const today = useData(() => api('/v1/me/spend-summary', { query: { days: 1 } }), [], 15_000)
  const alerts = useData(() => api('/v1/me/alerts', { query: { status: 'active', count: true, limit: 5 } }), [], 15_000)
  const s = spend.data
  const d = today.data
  const top = s ? [...s.by_agent].sort((a, b) => b.costUsd - a.costUsd).slice(0, 5) : []
  const open = alerts.data?.counts?.active ?? alerts.data?.alerts?.length
  return html`
    <h1 tabindex="-1">Overview</h1>
    <div class="kpis">
      <${Kpi} label="Spend, 30 days" value=${s ? money(s.total.costUsd) : '…'} hint=${d ? `${money(d.total.costUsd)} today (UTC)` : null} />
      <${Kpi} label="Events, 30 days" value=${s ? count(s.total.eventCount) : '…'} hint=${d ? `${count(d.total.eventCount)} today` : null} />
      <${Kpi} label="Error rate, 30 days" value=${s ? percent(s.total.eventCount ? s.total.errors / s.total.eventCount : 0) : '…'}
        hint=${d ? `${percent(d.total.eventCount ? d.total.errors / d.total.eventCount : 0)} today` : null}
        tone=${s && s.total.eventCount && s.total.errors / s.total.eventCount > 0.1 ? 'bad' : ''} />
      <${Kpi} label="Open alerts" value=${alerts.data ? count(open) : '…'} tone=${open ? 'bad' : ''} />
    </div>
    <div class="grid">
      <${EventsPerMinute} />
      <section class="card wide" aria-labelledby="spd">
        <h2 id="spd">Spend per day, 30 days</h2>
        <${ErrorNote} error=${spend.error} />
        ${s ? html`<${Chart} label="Spend per day (USD)" data=${dailySpend(s.by_day, 30, Date.now())} series=${[{ label: 'USD' }]} bars yFormat=${money} />` : html`<${Loading} />`}
      </section>
      <section class="card" aria-labelledby="top">
        <h2 id="top">Top agents by spend, 30 days</h2>
        ${s && top.length === 0 ? html`<${Empty}>No spend yet.</${Empty}>` : null}
        ${top.length
? html`<table>
          <thead><tr><th scope="col">Agent</th><th scope="col" class="num">Spend</th><th scope="col" class="num">Events</th></tr></thead>
          <tbody>${top.map((a) => html`<tr>
            <td><${AgentLink} agent=${{ ...agentOf(a, names), displayName: a.displayName ?? names.get(a.agentId) }} /></td>
            <td class="num">${money(a.costUsd)}</td><td class="num">${count(a.eventCount)}</td></tr>`)}</tbody>
        </table>`
: null}
      </section>
      <section class="card" aria-labelledby="alerts">
        <h2 id="alerts">Open alerts</h2>
        <${ErrorNote} error=${alerts.error} />
        ${alerts.data && alerts.data.alerts.length === 0 ? html`<${Empty}>No open alerts.</${Empty}>` : null}
        <ul class="plain">${(alerts.data?.alerts || []).map((a) => html`<li>
          <span class=${`sev sev-${a.severity}`}>${a.severity}</span>
          <a href="#/alerts">${a.message}</a>
          <span class="muted"> · <${AgentLink} agent=${agentOf(a, names)} /> · ${ago(a.lastTriggeredAt)}</span></li>`)}</ul>
      </section>
    </div>`
}
