// Spend: total, by agent, by model and by day, for a chosen number of days.
import { useState } from 'preact/hooks'
import { api, agentOf } from '../api.js'
import { html, useData, ErrorNote, Loading, Empty, Kpi, Chart, AgentLink, money, count, percent } from '../ui.js'
import { dailySpend } from './overview.js'

const PRESETS = [1, 7, 30, 90, 365]

function Breakdown ({ title, rows, first, names, unpriced = new Map() }) {
  if (!rows.length) return html`<section class="card"><h2>${title}</h2><${Empty}>Nothing in this window.</${Empty}></section>`
  const total = rows.reduce((a, r) => a + r.costUsd, 0)
  return html`<section class="card"><h2>${title}</h2><div class="table-wrap"><table>
    <thead><tr><th scope="col">${first}</th><th scope="col" class="num">Spend</th><th scope="col" class="num">Share</th><th scope="col" class="num">Events</th><th scope="col" class="num">Tokens</th><th scope="col" class="num">Errors</th></tr></thead>
    <tbody>${[...rows].sort((a, b) => b.costUsd - a.costUsd).map((r) => html`<tr>
      <th scope="row">${'model' in r
        ? html`${r.model || html`<span class="muted">no model</span>`}${unpriced.has(r.model) ? html` <a class="chip chip-unpriced" href=${`#/prices?model=${encodeURIComponent(r.model)}`} title=${`no price known for this model: ${count(unpriced.get(r.model))} events counted at $0; set one`}>unpriced</a>` : null}`
        : html`<${AgentLink} agent=${{ ...agentOf(r, names), displayName: r.displayName ?? names.get(r.agentId) ?? null }} />`}</th>
      <td class="num">${money(r.costUsd)}</td><td class="num">${percent(total ? r.costUsd / total : 0)}</td>
      <td class="num">${count(r.eventCount)}</td><td class="num">${count(r.tokens?.total)}</td><td class="num">${count(r.errors)}</td></tr>`)}</tbody>
  </table></div></section>`
}

/**
 * Models without a price, counted at $0: the summary's `unpriced_models` where the server sends it,
 * else guessed from rows with tokens but no cost.
 */
function unpricedModels (data) {
  if (Array.isArray(data.unpriced_models)) return new Map(data.unpriced_models.map((m) => [m.model, m.eventCount]))
  return new Map(data.by_model.filter((r) => r.model && r.costUsd === 0 && r.tokens?.total > 0).map((r) => [r.model, r.eventCount]))
}

export function SpendPage ({ names }) {
  const [days, setDays] = useState(30)
  const [input, setInput] = useState('30')
  const { data, error } = useData(() => api('/v1/me/spend-summary', { query: { days } }), [days], 30_000)
  const submit = (e) => {
    e.preventDefault()
    const n = Number(input)
    if (Number.isInteger(n) && n >= 1 && n <= 365) setDays(n)
  }
  const t = data?.total
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
    <p class="muted">From ${data.from} (UTC) to today: ${data.days} ${data.days === 1 ? 'day' : 'days'}.</p>
    <div class="kpis">
      <${Kpi} label="Total spend" value=${money(t.costUsd)} />
      <${Kpi} label="Events" value=${count(t.eventCount)} hint=${`${count(t.errors)} errors`} />
      <${Kpi} label="Tokens" value=${count(t.tokens?.total)} hint=${`${count(t.tokens?.inputBase)} in · ${count(t.tokens?.output)} out`} />
      <${Kpi} label="Average per day" value=${money(t.costUsd / data.days)} hint=${unpricedModels(data).size ? `${unpricedModels(data).size} unpriced models not included` : null} />
    </div>
    <div class="grid">
      <section class="card wide"><h2>By day</h2>
        <${Chart} label="Spend per day (USD)" data=${dailySpend(data.by_day, data.days, Date.now())} series=${[{ label: 'USD' }]} bars=${data.days <= 90} yFormat=${money} /></section>
      <${Breakdown} title="By agent" first="Agent" rows=${data.by_agent} names=${names} />
      <${Breakdown} title="By model" first="Model" rows=${data.by_model} names=${names} unpriced=${unpricedModels(data)} />
    </div>`}`
}
