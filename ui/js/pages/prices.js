// Model prices: the models used without a price (with their events at $0), the prices set, and a
// form to set or change one. A price applies to events ingested from then on.
import { useState, useRef } from 'preact/hooks'
import { api } from '../api.js'
import { html, useData, useAction, ErrorNote, Loading, Empty, Time, ConfirmButton, Name, count } from '../ui.js'

const FIELDS = [
  ['inputPerMTok', 'Input', true],
  ['outputPerMTok', 'Output', true],
  ['cacheReadPerMTok', 'Cache read', false],
  ['cacheWritePerMTok', 'Cache write', false],
]
const EMPTY_FORM = { model: '', inputPerMTok: '', outputPerMTok: '', cacheReadPerMTok: '', cacheWritePerMTok: '' }
const priceUrl = (model) => `/v1/me/model-prices/${encodeURIComponent(model)}`
const perMTok = (n) => (n === null || n === undefined ? html`<span class="muted">as input</span>` : `$${n}`)

/** The form's text fields as the PUT body: the optional cache prices are left out when empty. */
function bodyOf (form) {
  const body = {}
  for (const [key, , required] of FIELDS) if (required || form[key].trim() !== '') body[key] = Number(form[key])
  return body
}

function PriceForm ({ form, setForm, onSaved, field }) {
  const save = useAction()
  const set = (key) => (e) => setForm({ ...form, [key]: e.target.value })
  const submit = (e) => {
    e.preventDefault()
    save.run(() => api(priceUrl(form.model), { method: 'PUT', body: bodyOf(form) }), onSaved)
  }
  return html`<section class="card wide" aria-labelledby="set-price"><h2 id="set-price">Set a price</h2>
    <form onSubmit=${submit}>
      <div class="inline">
        <label>Model <input ref=${field} value=${form.model} maxLength="200" required class="wide-input mono" onInput=${set('model')} placeholder="acme/house-llm-7b" /></label>
      </div>
      <div class="inline">
        ${FIELDS.map(([key, label, required]) => html`<label>${label} <input type="number" min="0" max="10000" step="any" class=${required ? 'short' : ''} required=${required}
          value=${form[key]} onInput=${set(key)} placeholder=${required ? '' : 'as input'} /></label>`)}
        <span class="muted">USD per million tokens</span>
        <button class="primary" type="submit" disabled=${save.busy}>Save price</button>
      </div>
      <p class="muted">The model name must be exactly what your events send. A price applies to events ingested from now on; events already stored keep their cost.</p>
      <${ErrorNote} error=${save.error} />
    </form>
  </section>`
}

function PriceRow ({ p, onEdit, onRemoved }) {
  const action = useAction()
  return html`<tr data-model=${p.model}>
    <th scope="row"><${Name} text=${p.model} mono /></th>
    <td class="num">${perMTok(p.inputPerMTok)}</td><td class="num">${perMTok(p.outputPerMTok)}</td>
    <td class="num">${perMTok(p.cacheReadPerMTok)}</td><td class="num">${perMTok(p.cacheWritePerMTok)}</td>
    <td><${Time} iso=${p.updatedAt} /></td>
    <td><span class="inline row-actions"><button class="small" onClick=${() => onEdit(p)}>Edit</button>
      <${ConfirmButton} small quiet label="Remove" confirmLabel="Remove now" busy=${action.busy}
        question=${`Remove the price of ${p.model}? Its next events are priced by the catalogue, or not at all.`}
        onConfirm=${() => action.run(() => api(priceUrl(p.model), { method: 'DELETE' }), onRemoved)} /></span>
      <${ErrorNote} error=${action.error} /></td>
  </tr>`
}

function Unpriced ({ models, priced, onPrice }) {
  if (models.length === 0) return html`<${Empty}>Every model your events used in the last 30 days had a price.</${Empty}>`
  return html`<div class="table-wrap"><table class="unpriced">
    <thead><tr><th scope="col">Model</th><th scope="col" class="num">Events at $0, 30 days</th><th scope="col"><span class="sr-only">Actions</span></th></tr></thead>
    <tbody>${models.map((m) => html`<tr data-model=${m.model}>
      <th scope="row"><${Name} text=${m.model} mono /></th><td class="num">${count(m.eventCount)}</td>
      <td>${priced.has(m.model)
        ? html`<span class="muted">priced from now on; these events keep $0</span>`
        : html`<button class="small" onClick=${() => onPrice(m.model)}>Set a price</button>`}</td>
    </tr>`)}</tbody>
  </table></div>`
}

export function PricesPage ({ params }) {
  const { data, error, reload } = useData(() => api('/v1/me/model-prices'), [])
  const [form, setForm] = useState({ ...EMPTY_FORM, model: params.get('model') || '' })
  const field = useRef()
  const edit = (model, price = {}) => {
    const text = (n) => (n === null || n === undefined ? '' : String(n))
    setForm({ model, inputPerMTok: text(price.inputPerMTok), outputPerMTok: text(price.outputPerMTok), cacheReadPerMTok: text(price.cacheReadPerMTok), cacheWritePerMTok: text(price.cacheWritePerMTok) })
    field.current?.focus()
  }
  const saved = async () => {
    setForm(EMPTY_FORM)
    await reload()
  }
  const priced = new Set((data?.prices || []).map((p) => p.model))
  return html`
    <h1 tabindex="-1">Model prices</h1>
    <p class="muted">Your own prices, in USD per million tokens, win over the price catalogue for your events: for models it does not know (fine-tunes, self-hosted models) or prices that differ from the list.</p>
    <${ErrorNote} error=${error} />
    <div class="grid">
    <${PriceForm} form=${form} setForm=${setForm} onSaved=${saved} field=${field} />
    ${!data
? html`<${Loading} />`
: html`
    <section class="card wide" aria-labelledby="unpriced"><h2 id="unpriced">Models without a price</h2>
      <${Unpriced} models=${data.unpricedModels} priced=${priced} onPrice=${(model) => edit(model)} /></section>
    <section class="card wide" aria-labelledby="yours"><h2 id="yours">Your prices</h2>
    ${data.prices.length === 0
? html`<${Empty}>No prices set.</${Empty}>`
: html`<div class="table-wrap"><table class="prices">
      <thead><tr><th scope="col">Model</th>${FIELDS.map(([, label]) => html`<th scope="col" class="num">${label}</th>`)}<th scope="col">Set</th><th scope="col"><span class="sr-only">Actions</span></th></tr></thead>
      <tbody>${data.prices.map((p) => html`<${PriceRow} key=${p.model} p=${p} onEdit=${(price) => edit(price.model, price)} onRemoved=${reload} />`)}</tbody>
    </table></div>`}
    </section>`}
    </div>`
}
