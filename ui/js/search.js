// Search on the list pages (live events, traces, sessions): a search bar, the filters as chips and a
// facets sidebar. The search lives in the page's URL (`#/live?q=refund&tool=lookup_invoice`): a link
// to it is shareable, a reload keeps it, and each change is a history entry the back button undoes.
import { useState } from 'preact/hooks'
import { api } from './api.js'
import { html, useData, ErrorNote, count, plural } from './ui.js'

/** The filter parameters of GET /v1/me/events, /traces and /sessions besides `q` and `meta.<path>` (docs/api.md#search). */
const FILTER_KEYS = [
  'type', 'outcome', 'model', 'tool', 'agentId', 'sessionId', 'traceId', 'fingerprint', 'privacyLevel', 'costStatus',
  'minCostUsd', 'maxCostUsd', 'minDurationMs', 'maxDurationMs', 'from', 'to', 'hasMeta',
]

/** How a filter reads on its chip. */
const CHIPS = {
  type: (v) => `type: ${v}`,
  outcome: (v) => `outcome: ${v}`,
  model: (v) => `model: ${v}`,
  tool: (v) => `tool: ${v}`,
  agentId: (v, names) => `agent: ${names?.get(v) || v}`,
  sessionId: (v) => `session: ${v}`,
  traceId: (v) => `trace: ${v}`,
  fingerprint: (v) => `error: ${v}`,
  privacyLevel: (v) => `privacy: ${v}`,
  costStatus: (v) => `pricing: ${v}`,
  minCostUsd: (v) => `cost ≥ $${v}`,
  maxCostUsd: (v) => `cost ≤ $${v}`,
  minDurationMs: (v) => `duration ≥ ${v} ms`,
  maxDurationMs: (v) => `duration ≤ ${v} ms`,
  from: (v) => `from ${v}`,
  to: (v) => `before ${v}`,
  hasMeta: (v) => `has ${v}`,
}

/** The facets of GET /v1/me/events/facets in the order shown, with their titles. */
const FACETS = [['type', 'Type of event'], ['outcome', 'Outcome'], ['agentId', 'By agent'], ['model', 'Model'], ['tool', 'Tool'], ['costStatus', 'Pricing']]

// Every `meta.` key is a filter, `meta.` itself included: the service says what is wrong with a bad
// path, rather than the page leaving it out unseen; so is every `score.` key (the live tail refuses
// them, saying why).
export const isFilterKey = (k) => FILTER_KEYS.includes(k) || k.startsWith('meta.') || k.startsWith('score.')

/** The filters of a route's parameters, in URL order: `[[key, value], …]` (not `q`, `since` or a page's own). */
// An empty metadata value is a value (a facet offers it: events that sent `""`); an empty value of
// any other filter is no filter.
// An agent id that is not a cuid is no filter: the service drops it (the spec's rule), so no chip says it is on.
export const filtersOf = (params) => [...params].filter(([k, v]) => isFilterKey(k) && (v !== '' || k.startsWith('meta.')) && (k !== 'agentId' || CUID.test(v)))

/** An agent id as the service makes them. */
const CUID = /^c[a-z0-9]{24}$/

/** True when the parameters hold a search: a non-blank `q` or any filter. */
export const searching = (params) => Boolean(params.get('q')?.trim()) || filtersOf(params).length > 0

/** The search as api() query values: `q` and each filter, a repeated one as an array. */
export function searchQuery (params) {
  const query = {}
  const q = params.get('q')?.trim()
  if (q) query.q = q
  for (const [k, v] of filtersOf(params)) query[k] = k in query ? [].concat(query[k], v) : v
  return query
}

/** The address of `page` (`traces`, `traces/<id>`) with these parameters: `#/traces?q=refund`. */
export function hrefOf (page, params) {
  const search = params.toString()
  return `#/${page}${search ? `?${search}` : ''}`
}

/** Opens `page` with these parameters: a new history entry, so Back returns to the search before. */
export function go (page, params) {
  window.location.hash = hrefOf(page, params)
}

/** The parameters with `key=value` added, or removed when it is there. */
export function toggled (params, key, value) {
  const has = params.getAll(key).includes(value)
  const next = without(params, key, value)
  if (!has) next.append(key, value)
  return next
}

/** The parameters without `key=value` (the key's other values kept, in order). */
export function without (params, key, value) {
  const next = new URLSearchParams(params)
  next.delete(key)
  for (const v of params.getAll(key)) if (v !== value) next.append(key, v)
  return next
}

/** The parameters without a search (`q` and every filter); the page's own (`since`) are kept. */
export function cleared (params) {
  return new URLSearchParams([...params].filter(([k]) => k !== 'q' && !isFilterKey(k)))
}

const chipText = (k, v, names) => (k.startsWith('meta.')
  ? `${k.slice(5) || 'meta. (no path)'} = ${v === '' ? '(empty)' : v}`
  : k.startsWith('score.') ? `score ${k.slice(6)} = ${v}` : CHIPS[k](v, names))

/**
 * The search bar of a list page: the text searched (`q`, every word must occur; "quoted phrases"),
 * the filters as chips (each removed by its ×) and Clear all.
 */
export function SearchBar ({ page, params, names, what }) {
  const [text, setText] = useState(params.get('q') || '')
  const filters = filtersOf(params)
  const submit = (e) => {
    e.preventDefault()
    const next = new URLSearchParams(params)
    next.delete('q')
    if (text.trim()) next.set('q', text.trim())
    if (next.toString() !== params.toString()) go(page, next)
  }
  return html`<div class="search">
    <form class="search-bar" role="search" onSubmit=${submit}>
      <label class="sr-only" for="search-q">Search ${what}</label>
      <input id="search-q" type="search" value=${text} onInput=${(e) => setText(e.target.value)} spellcheck="false"
        placeholder='Search text: words all must occur, "a phrase" in order' autocomplete="off" />
      <button class="primary" type="submit">Search</button>
      ${searching(params) ? html`<button type="button" onClick=${() => go(page, cleared(params))}>Clear all</button>` : null}
    </form>
    ${filters.length
      ? html`<ul class="chips" aria-label="Filters">${filters.map(([k, v]) => html`<li>
          <button class="filter-chip" data-key=${k} title="Remove this filter" onClick=${() => go(page, without(params, k, v))}>${chipText(k, v, names)} <span aria-hidden="true">×</span></button>
        </li>`)}</ul>`
      : null}
  </div>`
}

/** One facet value as a toggle: pressed when its filter is on. A missing value (null) cannot be filtered on. */
function FacetValue ({ page, params, k, value, label, n }) {
  if (value === null) return html`<li class="facet-value facet-none" title="events without one: cannot be filtered on"><span class="muted">(none)</span> <span class="facet-n">${count(n)}</span></li>`
  const on = params.getAll(k).includes(value)
  return html`<li class="facet-value"><button class="facet-btn" aria-pressed=${on} title=${label}
    onClick=${() => go(page, toggled(params, k, value))}><span class="facet-label">${label}</span> <span class="facet-n">${count(n)}</span></button></li>`
}

/** Whether the facets were last shown or hidden by hand in this tab (null: never). */
let facetsOpen = null

/**
 * The facets sidebar: how many events match the search, by type, outcome, agent, model, tool,
 * pricing and metadata; a value's button adds its filter (or removes it when on). `since` bounds the
 * counts (the page's own window).
 */
export function Facets ({ page, params, names, since, window: windowLabel }) {
  const query = searchQuery(params)
  const { data, error } = useData(() => api('/v1/me/events/facets', { query: { ...query, since } }), [params.toString(), since], 15_000)
  // On a phone the facets would push the list two screens down: folded there until asked for. The
  // choice holds while the tab is open: a press on a value draws the page anew, facets included.
  const [open, setOpenNow] = useState(() => facetsOpen ?? !window.matchMedia?.('(max-width: 700px)').matches)
  const setOpen = (value) => { facetsOpen = value; setOpenNow(value) }
  const total = data ? html` <span class="muted">(${plural(data.total, 'event')})</span>` : null
  return html`<aside class="facets card" aria-label="Facets">
    <div class="facets-head"><h2>Matching events</h2>
      <button class="small facets-toggle" aria-expanded=${open} onClick=${() => setOpen(!open)}>${open ? 'Hide facets' : html`Show facets${total}`}</button></div>
    ${open ? html`<${FacetsBody} data=${data} error=${error} page=${page} params=${params} names=${names} windowLabel=${windowLabel} />` : null}
  </aside>`
}

function FacetsBody ({ data, error, page, params, names, windowLabel }) {
  return html`
    <${ErrorNote} error=${error} />
    ${!data
      ? error ? null : html`<p class="muted" aria-busy="true">Counting…</p>`
      : html`<p class="facet-total"><strong>${plural(data.total, 'event')}</strong> <span class="muted">${windowLabel}</span></p>
        ${data.total === 0
          ? null
          : html`${FACETS.map(([k, title]) => (data.facets[k] || []).length
              ? html`<section class="facet"><h3>${title}</h3><ul class="plain">${data.facets[k].map((x) => html`<${FacetValue} page=${page} params=${params}
                  k=${k} value=${x.value} label=${k === 'agentId' ? x.displayName || names?.get(x.value) || x.value : x.value} n=${x.count} />`)}</ul></section>`
              : null)}
            ${(data.metadata || []).map((m) => html`<section class="facet"><h3>metadata <code>${m.key}</code> <span class="facet-n">${count(m.count)}</span></h3>
              <ul class="plain">${m.values.map((x) => html`<${FacetValue} page=${page} params=${params} k=${`meta.${m.key}`} value=${x.value} label=${x.value === '' ? '(empty)' : x.value} n=${x.count} />`)}</ul></section>`)}`}`}`
}

/** What an empty list says: nothing matches this search (with a way out), or nothing yet at all. */
export function NoMatch ({ page, params, what }) {
  return html`<div class="empty no-match" role="status">
    <p><strong>No ${what} match this search.</strong> Every word of the text and every filter must match; try fewer words or remove a filter.</p>
    <button onClick=${() => go(page, cleared(params))}>Clear the search</button>
  </div>`
}
