// Spend: total, by agent, by model and by day, for a chosen number of days.
import { useState } from 'preact/hooks'
import { api, agentOf } from '../api.js'
import { html, useData, ErrorNote, Loading, Empty, Kpi, Chart, AgentLink, Name, money, count, percent, plural, tokenParts } from '../ui.js'
import { dailySpend } from './overview.js'

const PRESETS = [1, 7, 30, 90, 365]

/** The first cell of a by-model row: the name, and whether its events had a price. */
function ModelCell ({ r, zero }) {
  if (!r.model) return html`<span class="muted">no model</span>`
  const z = zero.get(r.model)
  return html`<${Name} text=${r.model} mono />${!z
    ? null
    : z.pricedAt
      ? html` <span class="chip chip-was-unpriced" title=${`priced by your own price since ${new Date(z.pricedAt).toLocaleString()}; ${plural(z.eventCount, 'event')} before it counted at $0`}>${plural(z.eventCount, 'event')} at $0 before its price</span>`
      : html` <a class="chip chip-unpriced" href=${`#/prices?model=${encodeURIComponent(r.model)}`} title=${`no price known for this model: ${plural(z.eventCount, 'event')} counted at $0; set one`}>unpriced</a>`}`
}

function Breakdown ({ title, rows, first, names, zero = new Map() }) {
  if (!rows.length) return html`<section class="card wide"><h2>${title}</h2><${Empty}>Nothing in this window.</${Empty}></section>`
  const total = rows.reduce((a, r) => a + r.costUsd, 0)
  return html`<section class="card wide"><h2>${title}</h2><div class="table-wrap"><table class="breakdown">
    <thead><tr><th scope="col">${first}</th><th scope="col" class="num">Spend</th><th scope="col" class="num">Share</th><th scope="col" class="num">Events</th><th scope="col" class="num">Tokens</th><th scope="col" class="num">Errors</th></tr></thead>
    <tbody>${[...rows].sort((a, b) => b.costUsd - a.costUsd).map((r) => {
      const agent = 'model' in r ? null : { ...agentOf(r, names), displayName: r.displayName ?? names.get(r.agentId) ?? null }
      return html`<tr>
      <th scope="row">${agent ? html`<${Name} text=${agent.displayName || agent.id}><${AgentLink} agent=${agent} /></${Name}>` : html`<${ModelCell} r=${r} zero=${zero} />`}</th>
      <td class="num">${money(r.costUsd)}</td><td class="num">${percent(total ? r.costUsd / total : null)}</td>
      <td class="num">${count(r.eventCount)}</td><td class="num">${count(r.tokens?.total)}</td><td class="num">${count(r.errors)}</td></tr>`
    })}</tbody>
  </table></div></section>`
}

/**
 * The models whose events in the window were counted at $0 for want of a price, with how many, and
 * `pricedAt` when the user has priced the model since (its earlier events keep their $0, its next
 * ones are priced): the summary's `unpriced_models` says which events had no price when they
 * arrived, the user's prices say which models have one now.
 */
export function zeroPriced (summary, prices) {
  const now = new Map((prices || []).map((p) => [p.model, p.updatedAt]))
  return new Map((summary.unpriced_models || []).map((m) => [m.model, { eventCount: m.eventCount, pricedAt: now.get(m.model) ?? null }]))
}

/** The window is in the URL (`#/spend?days=7`), so it is shared and the back button returns to it. */
export function SpendPage ({ params, names }) {
  const asked = Number(params?.get('days'))
  const days = Number.isInteger(asked) && asked >= 1 && asked <= 365 ? asked : 30
  const setDays = (n) => { window.location.hash = `#/spend?days=${n}` }
  const [input, setInput] = useState(String(days))
  const { data, error } = useData(async () => {
    const [summary, prices] = await Promise.all([
      api('/v1/me/spend-summary', { query: { days } }),
      api('/v1/me/model-prices').then((p) => p.prices, () => []),
    ])
    return { ...summary, zero: zeroPriced(summary, prices) }
  }, [days], 30_000)
  const submit = (e) => {
    e.preventDefault()
    const n = Number(input)
    if (Number.isInteger(n) && n >= 1 && n <= 365) setDays(n)
  }
  const t = data?.total
  const unpriced = data ? [...data.zero.values()].filter((z) => !z.pricedAt).length : 0
  return html`
    <h1 tabindex="-1">Spend</h1>
    <form class="filters" onSubmit=${submit}>
      <span role="group" aria-label="Window presets">${PRESETS.map((n) => html`<button type="button" aria-pressed=${days === n} onClick=${() => { setDays(n); setInput(String(n)) }}>${n === 1 ? 'Today' : `${n} days`}</button>`)}</span>
      <label>Days <input type="number" min="1" max="365" required class="short" value=${input} onInput=${(e) => setInput(e.target.value)} /></label>
      <button type="submit">Show</button>
    </form>
    <${ErrorNote} error=${error} />
    ${!data
? html`<${Loading} />`
: html`
    <p class="muted">From ${data.from} (UTC) to today: ${plural(data.days, 'day')}.</p>
    <div class="kpis">
      <${Kpi} label="Total spend" value=${money(t.costUsd)} hint=${unpriced ? html`<a href="#/prices">${plural(unpriced, 'model')} without a price</a>, counted at $0` : null} />
      <${Kpi} label="Events" value=${count(t.eventCount)} hint=${plural(t.errors, 'error')} />
      <${Kpi} label="Tokens" value=${count(t.tokens?.total)} hint=${tokenParts(t.tokens)} />
      <${Kpi} label="Average per day" value=${money(t.costUsd / data.days)} />
    </div>
    <div class="grid">
      <section class="card wide"><h2>By day</h2>
        <${Chart} label="Spend per day (USD)" data=${dailySpend(data.by_day, data.days, Date.now())} series=${[{ label: 'USD' }]} bars=${data.days <= 90} days yFormat=${money} /></section>
      <${Breakdown} title="By agent" first="Agent" rows=${data.by_agent} names=${names} />
      <${Breakdown} title="By model" first="Model" rows=${data.by_model} names=${names} zero=${data.zero} />
    </div>`}`
}
