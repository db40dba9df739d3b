// Sessions and traces: lists, and a detail page with the events as a span tree: subtrees collapse,
// indentation stops at INDENT_CAP levels (deeper rows show their depth instead), and only the rows
// in view are drawn, so a run of 10,000 spans stays responsive.
import { useEffect, useMemo, useRef, useState } from 'preact/hooks'
import { api, agentOf, agentsOf } from '../api.js'
import { SearchBar, Facets, NoMatch, go, hrefOf, searchQuery, searching } from '../search.js'
import { SessionScores, TraceScores } from '../scores.js'
import { html, useData, ErrorNote, Loading, Empty, Kpi, PrivacyChip, Cost, Time, AgentLink, count, money, duration, plural, dotted, spanName, spanFacts, tokenParts, Name } from '../ui.js'

/** Levels of indentation; deeper rows line up at the cap and show their depth. */
export const INDENT_CAP = 10
/** Subtrees below this depth start collapsed, so a long run opens on its outline. */
export const OPEN_DEPTH = 8
/** The height of a row in pixels: the same as `.tree-row` in app.css (rows are drawn by position). */
const ROW_PX = 30
/** Rows drawn above and below the visible ones, so a fast scroll does not show gaps. */
const OVERSCAN = 12
/** Details with more events than this are refreshed on demand, not every 10 s. */
const AUTO_REFRESH_MAX = 1000

/**
 * A session's events (in time order) in the shape of a trace detail, `{ roots, spans }`: each span
 * with `offsetMs`, `parent`, `children` and `depth` by positions, by the trace detail's rules (the
 * first event naming a span id is that span; an unknown parent makes a root; a cycle is cut at its
 * earliest event).
 */
export function treeOfEvents (events) {
  if (!events.length) return { roots: [], spans: [] }
  const start = Date.parse(events[0].timestamp)
  const bySpan = new Map()
  events.forEach((e, i) => { if (e.spanId && !bySpan.has(e.spanId)) bySpan.set(e.spanId, i) })
  const spans = events.map((e, i) => {
    const p = e.parentSpanId ? bySpan.get(e.parentSpanId) : undefined
    return { ...e, offsetMs: Date.parse(e.timestamp) - start, parent: p === undefined || p === i ? null : p, children: [], depth: -1 }
  })
  spans.forEach((s, i) => { if (s.parent !== null) spans[s.parent].children.push(i) })
  const roots = []
  const walk = (root) => {
    spans[root].depth = 0
    const stack = [root]
    while (stack.length) {
      const i = stack.pop()
      for (const c of spans[i].children) { spans[c].depth = spans[i].depth + 1; stack.push(c) }
    }
  }
  spans.forEach((s, i) => { if (s.parent === null) { roots.push(i); walk(i) } })
  spans.forEach((s, i) => {
    if (s.depth !== -1) return
    const p = spans[s.parent]
    p.children = p.children.filter((c) => c !== i)
    s.parent = null
    roots.push(i)
    walk(i)
  })
  return { roots, spans }
}

/** Positions of the rows to show, in tree order (a span, then its subtree), skipping collapsed subtrees. */
export function visibleRows (spans, roots, collapsed) {
  const rows = []
  const stack = [...roots].reverse()
  while (stack.length) {
    const i = stack.pop()
    rows.push(i)
    const children = spans[i].children
    if (children && !collapsed.has(spans[i].eventId)) for (let k = children.length - 1; k >= 0; k--) stack.push(children[k])
  }
  return rows
}

/** How many spans each span has below it (its whole subtree). */
function belowCounts (spans, roots) {
  const order = visibleRows(spans, roots, new Set())
  const below = new Array(spans.length).fill(0)
  for (let k = order.length - 1; k >= 0; k--) {
    const s = spans[order[k]]
    if (s.parent !== null) below[s.parent] += below[order[k]] + 1
  }
  return below
}

/** The event ids of the spans that have children and pass `test`. */
function parentsWhere (spans, test) {
  return new Set(spans.filter((s) => s.children?.length && test(s)).map((s) => s.eventId))
}

/** A span's label: its name, then its model and tool where the name does not say them. */
const labelOf = (s) => [spanName(s), ...spanFacts(s)].join(' · ')

function TreeRow ({ s, index, open, below, selected, onToggle, onSelect, totalMs, names, tree }) {
  const left = Math.min((s.offsetMs / totalMs) * 100, 99.4)
  const width = Math.min(s.durationMs ? Math.max((s.durationMs / totalMs) * 100, 0.6) : 0.6, 100 - left)
  const hasChildren = Boolean(s.children?.length)
  const label = labelOf(s)
  const agent = agentOf(s, names)
  const timing = `+${duration(s.offsetMs)} · ${s.durationMs == null ? '—' : duration(s.durationMs)}`
  const whole = [label, s.type, s.outcome, agent.displayName || agent.id, timing].filter(Boolean).join(' · ')
  // In a tree grid a row says its level and, when it has children, whether they are shown.
  return html`<div class=${`wf-row tree-row ${s.errorFingerprint ? 'row-error' : ''} ${selected ? 'selected' : ''}`} role="row"
      aria-rowindex=${index + 2} aria-level=${tree ? s.depth + 1 : undefined} aria-expanded=${tree && hasChildren ? String(open) : undefined}>
    <span role="cell" class="wf-label" style=${`--indent:${Math.min(s.depth, INDENT_CAP)}`} title=${`${whole} (depth ${s.depth})`}>
      ${hasChildren
        ? html`<button class="twisty" aria-expanded=${open} aria-label=${`${open ? 'Collapse' : 'Expand'} ${label} (${count(below)} below)`}
            onClick=${() => onToggle(s.eventId)}>${open ? '▾' : '▸'}</button>`
        : html`<span class="twisty" aria-hidden="true"></span>`}
      ${s.depth > INDENT_CAP ? html`<span class="depth" title=${`depth ${s.depth}`}>${s.depth}</span>` : null}
      <button class="link span-name" aria-pressed=${selected} onClick=${() => onSelect(index)}>${spanName(s)}</button>
      ${!open && hasChildren ? html`<span class="muted"> +${count(below)}</span>` : null}
      ${' '}<span class="wf-facts">${dotted(
        ...spanFacts(s).map((f) => html`<span class="fact">${f}</span>`),
        s.type !== spanName(s) ? html`<span class=${`type type-${s.type}`}>${s.type}</span>` : null,
        s.outcome === 'failed' ? html`<span class="bad">failed</span>` : s.outcome,
        s.durationMs == null ? null : duration(s.durationMs),
        html`<span class="muted">+${duration(s.offsetMs)}</span>`,
        html`<${AgentLink} agent=${agent} />`,
      )}</span>
    </span>
    <span role="cell" class="wf-track" title=${timing}>
      <span class=${`wf-bar type-${s.type} ${s.durationMs ? '' : 'instant'}`} style=${`left:${left}%;width:${width}%`}></span>
    </span>
  </div>`
}

function SpanDetail ({ s, names }) {
  const meta = s.metadata && Object.keys(s.metadata).length ? s.metadata : null
  return html`<section class="card wide span-detail" aria-labelledby="span-h">
    <h2 id="span-h">${labelOf(s)} <span class="muted">· depth ${s.depth}</span></h2>
    <dl class="detail">
      <dt>Agent</dt><dd><${AgentLink} agent=${agentOf(s, names)} /></dd>
      <dt>When</dt><dd>${dotted(`+${duration(s.offsetMs)}`, s.durationMs == null ? 'no duration' : duration(s.durationMs))}</dd>
      <dt>Type</dt><dd>${s.type}</dd>
      <dt>Outcome</dt><dd>${s.outcome || '—'}</dd>
      <dt>Model</dt><dd>${s.model || '—'}</dd>
      <dt>Tool</dt><dd>${s.toolExecuted || '—'}</dd>
      <dt>Tokens</dt><dd>${count(s.tokens?.total ?? 0)}</dd>
      <dt>Cost</dt><dd><${Cost} event=${s} /></dd>
      <dt>Privacy</dt><dd>${s.privacyChip ? html`<${PrivacyChip} chip=${s.privacyChip} />` : html`<span class="muted">not set</span>`}</dd>
      ${s.spanId ? html`<dt>Span</dt><dd><code>${s.spanId}</code>${s.parentSpanId ? html` ← <code>${s.parentSpanId}</code>${s.parent === null ? ' (not received)' : ''}` : null}</dd>` : null}
      ${s.errorMessage ? html`<dt>Error</dt><dd class="bad">${s.errorMessage}</dd>` : null}
      <dt>Event</dt><dd><code>${s.eventId}</code></dd>
    </dl>
    ${s.reasoning ? html`<h3>Reasoning</h3><pre>${s.reasoning}</pre>` : null}
    ${s.input != null ? html`<h3>Input</h3><pre>${JSON.stringify(s.input, null, 2)}</pre>` : null}
    ${meta ? html`<details><summary>Metadata</summary><pre>${JSON.stringify(meta, null, 2)}</pre></details>` : null}
  </section>`
}

/**
 * The span tree: one row per visible span, each after its parent, siblings in time order, with its
 * bar on the trace's time axis. Only the rows in the scrolled window are in the page.
 */
function SpanTree ({ roots, spans, names }) {
  // Collapsed at the open depth only: expanding one of them shows its whole subtree.
  const [collapsed, setCollapsed] = useState(() => parentsWhere(spans, (s) => s.depth === OPEN_DEPTH - 1))
  const [selected, setSelected] = useState(null)
  const [view, setView] = useState({ top: 0, height: window.innerHeight })
  const scroller = useRef()
  const rows = useMemo(() => visibleRows(spans, roots, collapsed), [spans, roots, collapsed])
  const below = useMemo(() => belowCounts(spans, roots), [spans, roots])
  const totalMs = useMemo(() => Math.max(1, ...spans.map((s) => s.offsetMs + (s.durationMs || 0))), [spans])
  const tree = spans.some((s) => s.parent !== null)
  useEffect(() => {
    const measure = () => scroller.current && setView({ top: scroller.current.scrollTop, height: scroller.current.clientHeight })
    measure()
    window.addEventListener('resize', measure)
    return () => window.removeEventListener('resize', measure)
  }, [])
  if (!spans.length) return html`<${Empty}>No events.</${Empty}>`
  const toggle = (id) => setCollapsed((c) => { const next = new Set(c); if (!next.delete(id)) next.add(id); return next })
  // The scroll position as the browser will clamp it once fewer rows fit (after a collapse): the rows
  // drawn must not wait for that scroll event.
  const top = Math.max(0, Math.min(view.top, rows.length * ROW_PX - view.height))
  const first = Math.max(0, Math.floor(top / ROW_PX) - OVERSCAN)
  const last = Math.min(rows.length, Math.ceil((top + view.height) / ROW_PX) + OVERSCAN)
  const onScroll = (e) => setView({ top: e.currentTarget.scrollTop, height: e.currentTarget.clientHeight })
  return html`
    ${tree
      ? html`<div class="tree-tools">
        <button class="small" onClick=${() => setCollapsed(new Set())}>Expand all</button>
        <button class="small" onClick=${() => setCollapsed(parentsWhere(spans, () => true))}>Collapse all</button>
        <span class="muted">${count(rows.length)} of ${plural(spans.length, 'span')} shown</span>
      </div>`
      : null}
    <div class="waterfall" role=${tree ? 'treegrid' : 'table'} aria-label=${tree ? 'Timeline of events as a span tree' : 'Timeline of events'} aria-rowcount=${rows.length + 1}>
      <div class="wf-row wf-head" role="row" aria-rowindex="1">
        <span role="columnheader">Event${tree ? ' (tree)' : ''}</span><span role="columnheader">Timeline · ${duration(totalMs)}</span>
      </div>
      <div class="tree-scroll" ref=${scroller} onScroll=${onScroll}>
        <div style=${`height:${rows.length * ROW_PX}px;position:relative`}>
          <div style=${`position:absolute;left:0;right:0;top:${first * ROW_PX}px`}>
            ${rows.slice(first, last).map((i, k) => html`<${TreeRow} key=${spans[i].eventId} s=${spans[i]} index=${first + k}
              open=${!collapsed.has(spans[i].eventId)} below=${below[i]} selected=${selected === i}
              onToggle=${toggle} onSelect=${() => setSelected(selected === i ? null : i)} totalMs=${totalMs} names=${names} tree=${tree} />`)}
          </div>
        </div>
      </div>
    </div>
    ${selected !== null && spans[selected] ? html`<${SpanDetail} s=${spans[selected]} names=${names} />` : null}`
}

function Git ({ git, cwd }) {
  if (!git && !cwd) return null
  const g = typeof git === 'string' ? { ref: git } : git || {}
  return html`<dl class="detail">
    ${Object.entries(g).map(([k, v]) => html`<dt>git ${k}</dt><dd><code>${typeof v === 'string' ? v : JSON.stringify(v)}</code></dd>`)}
    ${cwd ? html`<dt>cwd</dt><dd><code>${cwd}</code></dd>` : null}
  </dl>`
}

function chipsOf (events) {
  return [...new Set(events.map((e) => e.privacyChip).filter(Boolean))]
}

/**
 * The privacy levels of a run's events as chips, and "not set" for events sent without one (they
 * have no chip): never a bare "Privacy:".
 */
function PrivacyOf ({ events }) {
  const unset = events.some((e) => !e.privacyChip)
  return html`Privacy: ${chipsOf(events).map((c) => html`<${PrivacyChip} chip=${c} /> `)}${unset ? html`<span class="muted" title="events sent without a privacy level">not set</span>` : null}`
}

function Detail ({ kind, item, names }) {
  const { roots, spans } = useMemo(() => (kind === 'trace' ? item : treeOfEvents(item.events || [])), [item])
  const unpriced = spans.filter((s) => s.costStatus === 'unknown_model').length
  return html`
    <div class="kpis">
      <${Kpi} label="Duration" value=${duration(item.durationMs)} hint=${html`<${Time} iso=${item.start} />`} />
      <${Kpi} label="Events" value=${count(item.eventCount ?? spans.length)} hint=${item.errors ? html`<span class="bad">${plural(item.errors, 'error')}</span>` : plural(0, 'error')} />
      <${Kpi} label="Tokens" value=${count(item.tokens?.total)} hint=${tokenParts(item.tokens)} />
      <${Kpi} label="Cost" value=${money(item.costUsd)} hint=${unpriced ? `${plural(unpriced, 'event')} unpriced` : null} />
    </div>
    ${item.truncated ? html`<p class="note" role="status">This run has more spans than a trace detail holds: its first ${count(spans.length)} are shown, and the figures are theirs.</p>` : null}
    <p>${dotted(
      html`Agents: ${agentsOf(item, names).map((a, i) => html`${i ? ', ' : ''}<${AgentLink} agent=${a} />`)}`,
      html`<${PrivacyOf} events=${spans} />`,
    )}</p>
    <${Git} git=${item.git} cwd=${item.cwd} />
    <section class="card wide" aria-labelledby="tl"><h2 id="tl">Timeline</h2><${SpanTree} roots=${roots} spans=${spans} names=${names} /></section>
    ${kind === 'trace'
      ? html`<${TraceScores} traceId=${item.traceId} initial=${item.scores} spans=${spans} names=${names} />`
      : html`<${SessionScores} sessionId=${item.sessionId} initial=${item.scores} events=${item.events || []} names=${names} />`}
    ${kind === 'trace' ? null : html`<p class="muted">Traces in this session: ${[...new Set(spans.map((e) => e.traceId).filter(Boolean))].map((t, i) => html`${i ? ', ' : ''}<a href=${`#/traces/${encodeURIComponent(t)}`}>${t}</a>`)}</p>`}`
}

const SINCE = [['24h', '24 hours'], ['7d', '7 days'], ['30d', '30 days'], ['all', 'all time']]

/**
 * The sessions or traces list, searched by the search in the URL (search.js): a session or trace is
 * listed when any of its events matches, with the facets of the matching events beside the list.
 * `since` is in the URL too (traces: 7 days by default, sessions: all time).
 */
function List ({ kind, names, params }) {
  const [pages, setPages] = useState([])
  const key = kind === 'trace' ? 'traces' : 'sessions'
  const idKey = kind === 'trace' ? 'traceId' : 'sessionId'
  const fallback = kind === 'trace' ? '7d' : 'all'
  const since = SINCE.some(([v]) => v === params.get('since')) ? params.get('since') : fallback
  const query = { ...searchQuery(params), since: since === fallback ? undefined : since }
  const isSearch = searching(params)
  // Once Load more is pressed, the first page is no longer refreshed: a refreshed first page would
  // repeat a run the next pages hold and skip the ones pushed across its end, and so would a refresh
  // already on its way when it was pressed (its answer is dropped). Reloading the page (or another
  // search) starts again from the newest.
  const paged = useRef({ more: false, first: null })
  const { data, error } = useData(async () => {
    if (paged.current.more) return paged.current.first
    const first = await api(`/v1/me/${key}`, { query: { limit: 50, ...query } })
    if (!paged.current.more) paged.current.first = first
    return paged.current.first
  }, [], 10_000)
  const [more, setMore] = useState(null)
  const rows = [...(data?.[key] || []), ...pages.flatMap((p) => p[key] || [])]
  const cursor = pages.length ? pages[pages.length - 1].nextCursor : data?.nextCursor
  const loadMore = async () => {
    paged.current.more = true
    try {
      const page = await api(`/v1/me/${key}`, { query: { limit: 50, ...query, cursor } })
      setMore(null)
      setPages([...pages, page])
    } catch (err) {
      setMore(err)
      paged.current.more = pages.length > 0
    }
  }
  const setSince = (value) => {
    const next = new URLSearchParams(params)
    next.delete('since')
    if (value !== fallback) next.set('since', value)
    go(key, next)
  }
  // A `from` in the address lifts the traces' default window (the API's rule): the facets then count
  // from it too, as the list shows.
  const lifted = since === fallback && fallback !== 'all' && Boolean(params.get('from'))
  const facetSince = lifted ? 'all' : since
  const windowLabel = lifted ? `from ${params.get('from')}` : since === 'all' ? 'at any time' : `in the last ${SINCE.find(([v]) => v === since)[1]}`
  return html`
    <h1 tabindex="-1">${kind === 'trace' ? 'Traces' : 'Sessions'}</h1>
    <${SearchBar} page=${key} params=${params} names=${names} what=${key} />
    <form class="filters" onSubmit=${(e) => e.preventDefault()}><label>Since <select value=${since} onChange=${(e) => setSince(e.target.value)}>
      ${SINCE.map(([v, label]) => html`<option value=${v}>${label}</option>`)}</select></label></form>
    <div class="with-facets">
    <${Facets} page=${key} params=${params} names=${names} since=${facetSince} window=${windowLabel} />
    <div class="results">
    <${ErrorNote} error=${error || more} />
    ${!data
? error ? null : html`<${Loading} />`
: rows.length === 0
? isSearch
  ? html`<${NoMatch} page=${key} params=${params} what=${key} />`
  : html`<${Empty}>No ${key} ${windowLabel}: events carry them in <code>metadata.${idKey}</code>.</${Empty}>`
: html`
    <div class="table-wrap"><table class="groups">
      <thead><tr><th scope="col">${kind === 'trace' ? 'Trace' : 'Session'}</th><th scope="col" title="the list is in this order: the latest activity first">Last activity</th><th scope="col">Started</th><th scope="col" class="num">Duration</th>
        <th scope="col" class="num">Events</th><th scope="col" class="num">Errors</th><th scope="col" class="num">Tokens</th><th scope="col" class="num">Cost</th><th scope="col">Agents</th></tr></thead>
      <tbody>${rows.map((s) => html`<tr key=${s[idKey]}>
        <th scope="row"><a href=${hrefOf(`${key}/${encodeURIComponent(s[idKey])}`, params)}><${Name} text=${s[idKey]} mono /></a></th>
        <td><${Time} iso=${s.end ?? s.start} /></td><td><${Time} iso=${s.start} /></td><td class="num">${duration(s.durationMs)}</td>
        <td class="num">${count(s.eventCount)}</td><td class=${`num ${s.errors ? 'bad' : ''}`}>${count(s.errors)}</td>
        <td class="num">${count(s.tokens?.total ?? s.tokens)}</td><td class="num">${money(s.costUsd)}</td>
        <td>${agentsOf(s, names).map((a, i) => html`${i ? ', ' : ''}<${AgentLink} agent=${a} />`)}</td></tr>`)}</tbody>
    </table></div>
    ${pages.length ? html`<p class="muted">More pages loaded: this list is not refreshed until the page is reloaded.</p>` : null}
    ${cursor ? html`<button onClick=${loadMore}>Load more</button>` : null}`}
    </div>
    </div>`
}

/**
 * A session's or trace's page. `params` are those of the list it was opened from (its links carry
 * them: `#/traces/abc?q=refund`), so that the breadcrumb leads back to that list as it was searched.
 */
function DetailPage ({ kind, id, names, params }) {
  const key = kind === 'trace' ? 'traces' : 'sessions'
  const { data, error, reload } = useData(() => api(`/v1/me/${key}/${encodeURIComponent(id)}`), [id])
  const size = (data?.spans || data?.events || []).length
  // A small run is refreshed every 10 s; a large one is read again only when asked (it is megabytes).
  useEffect(() => {
    if (!data || size > AUTO_REFRESH_MAX) return
    const timer = setTimeout(reload, document.hidden ? 50_000 : 10_000)
    return () => clearTimeout(timer)
  }, [data, error])
  return html`
    <p class="crumbs"><a href=${hrefOf(key, params)}>${kind === 'trace' ? 'Traces' : 'Sessions'}</a> /</p>
    <h1 tabindex="-1">${kind === 'trace' ? 'Trace' : 'Session'} <code>${id}</code></h1>
    ${size > AUTO_REFRESH_MAX ? html`<p class="tree-tools"><button class="small" onClick=${reload}>Refresh</button> <span class="muted">(a run this long is not refreshed by itself)</span></p>` : null}
    ${error?.status === 404 ? html`<p>Not found: no events of yours carry this id.</p>` : html`<${ErrorNote} error=${error} />`}
    ${data ? html`<${Detail} kind=${kind} item=${data} names=${names} />` : error ? null : html`<${Loading} />`}`
}

export const SessionsPage = ({ names, params }) => html`<${List} kind="session" names=${names} params=${params} />`
export const TracesPage = ({ names, params }) => html`<${List} kind="trace" names=${names} params=${params} />`
export const SessionPage = ({ id, names, params }) => html`<${DetailPage} kind="session" id=${id} names=${names} params=${params} />`
export const TracePage = ({ id, names, params }) => html`<${DetailPage} kind="trace" id=${id} names=${names} params=${params} />`
