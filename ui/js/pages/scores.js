// Scores: per score name over a period (count, mean and percentiles or the labels' distribution,
// the change against the period before, a per-day trend and the agents), and the score configs.
import { useState } from 'preact/hooks'
import { api, agentRef } from '../api.js'
import { html, useData, useAction, ErrorNote, Loading, Empty, Kpi, AgentLink, ConfirmButton, count, percent, dotted } from '../ui.js'
import { fig, signed, Trend, FEEDBACK_NAME, scoreText } from '../scores.js'

const PERIODS = [['1', '24 hours'], ['7', '7 days'], ['30', '30 days'], ['90', '90 days']]
const DAY_MS = 86_400_000

/** The UTC days of [from, to), as YYYY-MM-DD. */
function daysOf (from, to) {
  const out = []
  for (let t = Date.parse(from.slice(0, 10)); t < Date.parse(to); t += DAY_MS) out.push(new Date(t).toISOString().slice(0, 10))
  return out
}

/** A label as the trace and session pages write it (scoreText): a boolean score's `true` and `false` as yes and no (up and down for feedback). */
function labelText (n, label) {
  if (n.dataType !== 'boolean' || (label !== 'true' && label !== 'false')) return label
  return scoreText({ name: n.name, dataType: 'boolean', boolean: label === 'true' })
}

/** The labels of a distribution, most frequent first, with their share. */
function Labels ({ labels, total, n: named }) {
  const rows = Object.entries(labels || {}).sort((a, b) => b[1] - a[1])
  if (!rows.length) return html`<span class="muted">—</span>`
  return html`<ul class="plain labels">${rows.map(([l, n]) => html`<li data-label=${l}><span class="label-name">${labelText(named, l)}</span> <span class="num label-count">${count(n)}</span> <span class="muted">${percent(total ? n / total : 0)}</span></li>`)}</ul>`
}

function NameCard ({ n, from, to, names }) {
  const numeric = n.numeric !== null && n.dataType !== 'categorical'
  // Percentiles of yes/no scores say nothing the share of yes does not.
  const percentiles = numeric && n.dataType !== 'boolean'
  // The agents with the most scores first, then by name.
  const byAgent = [...n.byAgent].sort((a, b) => b.count - a.count || String(a.agent?.displayName ?? a.agent?.id ?? a.agent ?? '').localeCompare(String(b.agent?.displayName ?? b.agent?.id ?? b.agent ?? '')))
  const byDay = new Map(n.byDay.map((d) => [d.day, d]))
  const points = daysOf(from, to).map((day) => ({ x: day, y: numeric ? (byDay.get(day)?.numeric?.mean ?? null) : (byDay.get(day)?.count ?? null) }))
  return html`<section class="card wide score-name" data-score-name=${n.name} aria-labelledby=${`sn-${n.name}`}>
    <h2 id=${`sn-${n.name}`}>${n.name} <span class="muted">· ${n.dataType}${n.name === FEEDBACK_NAME ? ' · thumbs up/down' : ''}</span></h2>
    <div class="kpis">
      <${Kpi} label="Scores" value=${html`<span data-figure="count">${count(n.count)}</span>`} hint=${html`<span data-figure="change-count">${signed(n.change.count)}</span> vs previous`} />
      ${numeric
        ? html`
          <${Kpi} label=${n.dataType === 'boolean' ? 'Mean (share of yes)' : 'Mean'} value=${html`<span data-figure="mean">${fig(n.numeric.mean)}</span>`} hint=${html`<span data-figure="change-mean">${signed(n.change.mean)}</span> vs previous`} />
          ${percentiles
? html`<${Kpi} label="p50" value=${html`<span data-figure="p50">${fig(n.numeric.p50)}</span>`} />
          <${Kpi} label="p90" value=${html`<span data-figure="p90">${fig(n.numeric.p90)}</span>`} />`
: null}`
        : null}
      <div class="kpi"><div class="kpi-label">${numeric ? 'Mean per day' : 'Scores per day'}</div><${Trend} points=${points} label=${`${n.name}, ${numeric ? 'mean' : 'scores'} per day`} /></div>
    </div>
    ${n.labels ? html`<h3>Labels</h3><${Labels} labels=${n.labels} total=${n.count} n=${n} />` : null}
    <h3>By agent</h3>
    ${byAgent.length === 0
      ? html`<${Empty}>No scores in this period.</${Empty}>`
      : html`<div class="table-wrap"><table class="by-agent">
      <thead><tr><th scope="col">Agent</th><th scope="col" class="num">Scores</th>${numeric ? html`<th scope="col" class="num">Mean</th>` : null}${percentiles ? html`<th scope="col" class="num">p50</th><th scope="col" class="num">p90</th>` : null}${n.labels ? html`<th scope="col">Labels</th>` : null}</tr></thead>
      <tbody>${byAgent.map((a) => html`<tr>
        <th scope="row">${a.agent ? html`<${AgentLink} agent=${agentRef(a.agent, names)} />` : html`<span class="muted">no agent</span>`}</th>
        <td class="num">${count(a.count)}</td>
        ${numeric ? html`<td class="num">${fig(a.numeric?.mean)}</td>` : null}${percentiles ? html`<td class="num">${fig(a.numeric?.p50)}</td><td class="num">${fig(a.numeric?.p90)}</td>` : null}
        ${n.labels ? html`<td>${dotted(...Object.entries(a.labels || {}).map(([l, c]) => `${labelText(n, l)} ${count(c)}`))}</td>` : null}
      </tr>`)}</tbody>
    </table></div>`}
  </section>`
}

const EMPTY_FORM = { name: '', dataType: 'numeric', min: '', max: '', labels: '', description: '' }

/** Create or edit a config: `editing` is the config edited (its name fixed), null for a new one. */
function ConfigForm ({ editing, onSaved, onCancel }) {
  const action = useAction()
  const [form, setForm] = useState(editing
    ? { name: editing.name, dataType: editing.dataType, min: editing.min ?? '', max: editing.max ?? '', labels: (editing.labels || []).join(', '), description: editing.description || '' }
    : EMPTY_FORM)
  const set = (k) => (e) => setForm({ ...form, [k]: e.target.value })
  const submit = (e) => {
    e.preventDefault()
    const body = { dataType: form.dataType }
    if (form.dataType === 'numeric') {
      if (String(form.min).trim() !== '') body.min = Number(form.min)
      if (String(form.max).trim() !== '') body.max = Number(form.max)
    }
    if (form.dataType === 'categorical') body.labels = form.labels.split(',').map((l) => l.trim()).filter(Boolean)
    if (form.description.trim()) body.description = form.description.trim()
    // An edit keeps the config's alert rule (set through the API).
    if (editing?.alert && form.dataType !== 'categorical') body.alert = editing.alert
    action.run(() => api(`/v1/me/score-configs/${encodeURIComponent(form.name.trim())}`, { method: 'PUT', body }), () => { if (!editing) setForm(EMPTY_FORM); onSaved() })
  }
  return html`<form class="config-form" aria-label=${editing ? `Edit the config of ${editing.name}` : 'New score config'} onSubmit=${submit}>
    <div class="inline">
      <label>Name <input name="name" required maxlength="200" value=${form.name} disabled=${Boolean(editing)} onInput=${set('name')} /></label>
      <label>Type <select name="dataType" value=${form.dataType} onChange=${set('dataType')}>
        <option value="numeric">numeric</option><option value="categorical">categorical</option><option value="boolean">boolean</option></select></label>
      ${form.dataType === 'numeric'
        ? html`<label>Min <input name="min" type="number" step="any" class="short" value=${form.min} onInput=${set('min')} /></label>
          <label>Max <input name="max" type="number" step="any" class="short" value=${form.max} onInput=${set('max')} /></label>`
        : null}
      ${form.dataType === 'categorical' ? html`<label>Labels <input name="labels" placeholder="correct, partial, wrong" value=${form.labels} onInput=${set('labels')} /></label>` : null}
      <label>Description <input name="description" maxlength="1000" value=${form.description} onInput=${set('description')} /></label>
      <button class="primary" type="submit" disabled=${action.busy || !form.name.trim()}>${editing ? 'Save' : 'Create config'}</button>
      ${editing ? html`<button type="button" onClick=${onCancel}>Cancel</button>` : null}
    </div>
    <${ErrorNote} error=${action.error} />
  </form>`
}

function Configs () {
  const { data, error, reload } = useData(() => api('/v1/me/score-configs'), [])
  const [editing, setEditing] = useState(null)
  const action = useAction()
  const remove = (c) => action.run(() => api(`/v1/me/score-configs/${encodeURIComponent(c.name)}`, { method: 'DELETE' }), reload)
  const configs = data?.configs || []
  return html`<section class="card wide" aria-labelledby="configs-h">
    <h2 id="configs-h">Score configs</h2>
    <p class="muted">A score whose name has a config must fit it (a number within the range, one of the labels, a yes/no), or it is refused with the reason. Scores already stored are kept.</p>
    <${ErrorNote} error=${error || action.error} />
    ${!data
      ? html`<${Loading} />`
      : configs.length === 0
      ? html`<${Empty}>No configs: every score name takes any score.</${Empty}>`
      : html`<div class="table-wrap"><table class="configs">
      <thead><tr><th scope="col">Name</th><th scope="col">Type</th><th scope="col">Allowed</th><th scope="col">Description</th><th scope="col">Alert</th><th scope="col"><span class="sr-only">Actions</span></th></tr></thead>
      <tbody>${configs.map((c) => html`<tr key=${c.name} data-config=${c.name}>
        <th scope="row">${c.name}</th><td>${c.dataType}</td>
        <td>${c.dataType === 'numeric' ? (c.min === null && c.max === null ? 'any number' : `${c.min === null ? '…' : fig(c.min)} to ${c.max === null ? '…' : fig(c.max)}`) : c.dataType === 'categorical' ? c.labels.join(', ') : 'yes / no'}</td>
        <td>${c.description || html`<span class="muted">—</span>`}</td>
        <td>${c.alert ? dotted(c.alert.below !== null ? `below ${fig(c.alert.below)}` : null, c.alert.dropShare !== null ? `drop ${percent(c.alert.dropShare)}` : null) : html`<span class="muted">—</span>`}</td>
        <td class="actions row-actions"><button class="small" onClick=${() => setEditing(c)}>Edit</button>
          <${ConfirmButton} small quiet label="Delete" question=${`Delete the config of ${c.name}?`} busy=${action.busy} onConfirm=${() => remove(c)} /></td>
      </tr>`)}</tbody>
    </table></div>`}
    ${editing ? html`<h3>Edit ${editing.name}</h3><${ConfigForm} key=${editing.name} editing=${editing} onSaved=${() => { setEditing(null); reload() }} onCancel=${() => setEditing(null)} />` : null}
    <h3>New config</h3>
    <${ConfigForm} editing=${null} onSaved=${reload} />
  </section>`
}

export function ScoresPage ({ names }) {
  const [days, setDays] = useState('7')
  const { data, error } = useData(() => {
    const to = new Date()
    const from = new Date(to.getTime() - Number(days) * DAY_MS)
    return api('/v1/me/scores/summary', { query: { from: from.toISOString(), to: to.toISOString() } })
  }, [days], 60_000)
  return html`
    <h1 tabindex="-1">Scores</h1>
    <form class="filters" onSubmit=${(e) => e.preventDefault()}><label>Period <select name="period" value=${days} onChange=${(e) => setDays(e.target.value)}>
      ${PERIODS.map(([v, l]) => html`<option value=${v}>${l}</option>`)}</select></label>
      <span class="muted">changes are against the ${PERIODS.find(([v]) => v === days)[1]} before</span></form>
    <${ErrorNote} error=${error} />
    ${!data
      ? html`<${Loading} />`
      : data.names.length === 0
      ? html`<${Empty}>No scores in this period. Send them with <code>POST /v1/scores</code>, or give one on a trace's page.</${Empty}>`
      : data.names.map((n) => html`<${NameCard} key=${n.name} n=${n} from=${data.from} to=${data.to} names=${names} />`)}
    <${Configs} />`
}
