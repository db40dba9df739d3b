// Overview: events per minute over the last hour (live), spend per day over 30 days, top agents by
// spend, error rate and open alerts.
import { useEffect, useState } from 'preact/hooks'
import { api, agentOf } from '../api.js'
import { html, useData, Chart, Kpi, money, count, percent, plural, dotted, ErrorNote, Loading, Empty, AgentLink, Name } from '../ui.js'
import { raisedText, firingText } from './alerts.js'

const MINUTE = 60_000
const DAY = 86_400_000

/** Counts per minute for the 60 minutes up to now, zero-filled, from the histogram's buckets of a minute. */
export function perMinute (buckets, now) {
  const end = Math.floor(now / MINUTE) * MINUTE
  const xs = Array.from({ length: 60 }, (_, i) => (end - (59 - i) * MINUTE) / 1000)
  const ys = new Array(60).fill(0)
  for (const b of buckets) {
    const i = 59 - Math.round((end - Date.parse(b.start)) / MINUTE)
    if (i >= 0 && i < 60) ys[i] += b.events
  }
  return [xs, ys]
}

/** `days` zero-filled days (UTC midnights, in seconds), oldest first, from the spend summary's by_day rows. */
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
  // Counted by the service (GET /v1/me/events/histogram), not by reading the hour's events: an hour
  // of a busy fleet is many thousands of them, every 5 s.
  const { data, error } = useData(async () => {
    const now = Date.now()
    const from = new Date(Math.floor(now / MINUTE) * MINUTE - 59 * MINUTE).toISOString()
    const hist = await api('/v1/me/events/histogram', { query: { from, interval: '1m' } })
    return perMinute(hist?.buckets || [], now)
  }, [], 5000)
  const total = data ? data[1].reduce((a, b) => a + b, 0) : 0
  return html`<section class="card wide" aria-labelledby="epm">
    <h2 id="epm">Events per minute, last hour <span class="live-dot" title="refreshes every 5 s">live</span></h2>
    <${ErrorNote} error=${error} />
    ${data ? html`<p class="muted">${plural(total, 'event')} in the last hour</p><${Chart} label="Events per minute" data=${data} series=${[{ label: 'events' }]} bars height=${180} />` : html`<${Loading} />`}
  </section>`
}

/** Errors over events, or null (shown as "—") when there are no events to have a rate of. */
export const errorRate = (totals) => (totals?.eventCount ? totals.errors / totals.eventCount : null)

/**
 * Whether the user has sent any event yet: true, false, or undefined while unknown. Asked every 5 s
 * until the first one arrives, then no more.
 */
function useHasEvents () {
  const [has, setHas] = useState(undefined)
  useEffect(() => {
    let stopped = false
    let timer
    const tick = async () => {
      try {
        const page = await api('/v1/me/events', { query: { limit: 1 } })
        if (stopped) return
        const found = (page?.events || []).length > 0
        setHas(found)
        if (found) return
      } catch {}
      if (!stopped) timer = setTimeout(tick, document.hidden ? 25_000 : 5000)
    }
    tick()
    return () => { stopped = true; clearTimeout(timer) }
  }, [])
  return has
}

/** What a new user sees until their first event: how to send one, by HTTP or by OpenTelemetry. */
export function FirstEvent () {
  const origin = window.location.origin
  const curl = `curl ${origin}/v1/events \\
  -H 'Authorization: Bearer vk_…' \\
  -H 'Content-Type: application/json' \\
  -d '{"agentId": "my-agent", "type": "tool", "toolExecuted": "web_search", "durationMs": 420, "outcome": "success"}'`
  const otel = `OTEL_EXPORTER_OTLP_ENDPOINT=${origin}
OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf
OTEL_EXPORTER_OTLP_HEADERS=Authorization=Bearer%20vk_…
OTEL_SERVICE_NAME=my-agent`
  return html`<section class="card wide first-event" aria-labelledby="first">
    <h2 id="first">Send your first event</h2>
    <p>Nothing has arrived yet. Charts and figures fill in here as soon as an event does (this page checks every few seconds).</p>
    <ol>
      <li><a href="#/keys">Create an API key</a>: it is shown once, starting with <code>vk_</code>.</li>
      <li>Send an event with it, in place of <code>vk_…</code>:
        <pre class="snippet" aria-label="curl example">${curl}</pre></li>
      <li>Or point an agent instrumented with OpenTelemetry (OpenLLMetry, OpenLIT, the Vercel AI SDK, the OpenAI Agents SDK…)
        at this service: its spans are sent to <code>${origin}/v1/traces</code>.
        <pre class="snippet" aria-label="OpenTelemetry environment variables">${otel}</pre>
        <span class="muted">HTTP only (protobuf or JSON), not gRPC; the space after <code>Bearer</code> is written <code>%20</code>, as the variable's format asks.
        The service name becomes the agent's name where a span names none (<code>gen_ai.agent.name</code>); the JavaScript SDK 2.x reads
        <code>OTEL_SERVICE_NAME</code> through its <code>NodeSDK</code> only: a provider built by hand takes it in its resource
        (<code>resourceFromAttributes({ 'service.name': 'my-agent' })</code>).</span></li>
      <li>Or, from Node or a browser, use the client library (<code>agent-telemetry-client</code>: batching, retries, privacy levels), as the project's docs/client.md shows.</li>
    </ol>
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
  const hasEvents = useHasEvents()
  const rate = errorRate(s?.total)
  const rateToday = errorRate(d?.total)
  return html`
    <h1 tabindex="-1">Overview</h1>
    <div class="kpis">
      <${Kpi} label="Spend, 30 days" value=${s ? money(s.total.costUsd) : '…'} hint=${d ? `${money(d.total.costUsd)} today (UTC)` : null} />
      <${Kpi} label="Events, 30 days" value=${s ? count(s.total.eventCount) : '…'} hint=${d ? `${count(d.total.eventCount)} today` : null} />
      <${Kpi} label="Error rate, 30 days" value=${s ? percent(rate) : '…'}
        hint=${d ? (rateToday === null ? 'no events today' : `${percent(rateToday)} today`) : null}
        tone=${rate > 0.1 ? 'bad' : ''} />
      <${Kpi} label="Open alerts" value=${alerts.data ? count(open) : '…'} tone=${open ? 'bad' : ''} />
    </div>
    ${hasEvents === false
? html`<div class="grid"><${FirstEvent} /></div>`
: html`<div class="grid">
      <${EventsPerMinute} />
      <section class="card wide" aria-labelledby="spd">
        <h2 id="spd">Spend per day, 30 days</h2>
        <${ErrorNote} error=${spend.error} />
        ${s ? html`<${Chart} label="Spend per day (USD)" data=${dailySpend(s.by_day, 30, Date.now())} series=${[{ label: 'USD' }]} bars days yFormat=${money} />` : html`<${Loading} />`}
      </section>
      <section class="card" aria-labelledby="top">
        <h2 id="top">Top agents by spend, 30 days</h2>
        ${s && top.length === 0 ? html`<${Empty}>No spend yet.</${Empty}>` : null}
        ${top.length
? html`<table>
          <thead><tr><th scope="col">Agent</th><th scope="col" class="num">Spend</th><th scope="col" class="num">Events</th></tr></thead>
          <tbody>${top.map((a) => html`<tr>
            <td><${Name} text=${a.displayName ?? names.get(a.agentId) ?? a.agentId}><${AgentLink} agent=${{ ...agentOf(a, names), displayName: a.displayName ?? names.get(a.agentId) }} /></${Name}></td>
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
          <span class="muted"> · ${dotted(html`<${AgentLink} agent=${agentOf(a, names)} />`, raisedText(a), firingText(a))}</span></li>`)}</ul>
      </section>
    </div>`}`
}
