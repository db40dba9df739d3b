// Sessions and traces: lists, and a detail page with the waterfall of its events and, where spans
// have parents, their tree.
import { useEffect, useState } from 'preact/hooks'
import { api, agentOf, agentsOf } from '../api.js'
import { html, useData, ErrorNote, Loading, Empty, Kpi, PrivacyChip, Cost, Time, AgentLink, count, money, duration } from '../ui.js'

const spanOf = (e) => e.spanId ?? e.metadata?.spanId ?? null
const parentOf = (e) => e.parentSpanId ?? e.metadata?.parentSpanId ?? null

/**
 * Rows of the waterfall: each event with its offset from the first event, its depth in the span
 * tree (0 when spans carry no parents) and whether the tree is in use. Children follow their
 * parent, siblings in time order; an event whose parent is unknown is a root.
 */
export function waterfallRows (events) {
  if (!events.length) return { rows: [], totalMs: 0, tree: false }
  const start = Math.min(...events.map((e) => Date.parse(e.timestamp)))
  const items = events.map((e) => ({ e, offsetMs: Date.parse(e.timestamp) - start, durationMs: e.durationMs ?? null, depth: 0 }))
  items.sort((a, b) => a.offsetMs - b.offsetMs)
  const bySpan = new Map()
  for (const it of items) if (spanOf(it.e)) bySpan.set(spanOf(it.e), it)
  const tree = items.some((it) => parentOf(it.e) && bySpan.has(parentOf(it.e)))
  let rows = items
  if (tree) {
    const children = new Map()
    const roots = []
    for (const it of items) {
      const p = parentOf(it.e)
      const parent = p && p !== spanOf(it.e) ? bySpan.get(p) : undefined
      if (parent) children.set(parent, [...(children.get(parent) || []), it])
      else roots.push(it)
    }
    rows = []
    const seen = new Set()
    const walk = (it, depth) => {
      if (seen.has(it)) return
      seen.add(it)
      rows.push({ ...it, depth })
      for (const c of children.get(it) || []) walk(c, depth + 1)
    }
    for (const r of roots) walk(r, 0)
    for (const it of items) if (!seen.has(it)) walk(it, 0) // a cycle of parents: shown flat
  }
  const totalMs = Math.max(1, ...rows.map((r) => r.offsetMs + (r.durationMs || 0)))
  return { rows, totalMs, tree }
}

function Waterfall ({ events, names }) {
  const [open, setOpen] = useState(null)
  const { rows, totalMs, tree } = waterfallRows(events)
  if (!rows.length) return html`<${Empty}>No events.</${Empty}>`
  return html`<div class="waterfall" role="table" aria-label=${tree ? 'Timeline of events as a span tree' : 'Timeline of events'}>
    <div class="wf-row wf-head" role="row">
      <span role="columnheader">Event${tree ? ' (tree)' : ''}</span><span role="columnheader">Timeline · ${duration(totalMs)}</span>
    </div>
    ${rows.map((r) => {
      const left = (r.offsetMs / totalMs) * 100
      const width = r.durationMs ? Math.max((r.durationMs / totalMs) * 100, 0.6) : 0.6
      const e = r.e
      const label = `${e.type}${e.toolExecuted ? ` · ${e.toolExecuted}` : ''}`
      return html`<div class=${`wf-row ${e.errorFingerprint ? 'row-error' : ''}`} role="row" key=${e.eventId}>
        <span role="cell" class="wf-label" style=${`padding-left:${r.depth * 1.1}rem`}>
          <button class="link" aria-expanded=${open === e.eventId} onClick=${() => setOpen(open === e.eventId ? null : e.eventId)}>${r.depth ? '└ ' : ''}${label}</button>
          <span class="muted"> <${AgentLink} agent=${agentOf(e, names)} /></span>
          <span class="wf-text"> +${duration(r.offsetMs)} · ${r.durationMs === null ? '—' : duration(r.durationMs)}</span>
        </span>
        <span role="cell" class="wf-track" title=${`+${duration(r.offsetMs)}, ${r.durationMs === null ? 'no duration' : duration(r.durationMs)}`}>
          <span class=${`wf-bar type-${e.type} ${r.durationMs ? '' : 'instant'}`} style=${`left:${Math.min(left, 99.4)}%;width:${Math.min(width, 100 - Math.min(left, 99.4))}%`}></span>
        </span>
        ${open === e.eventId
? html`<div class="wf-detail" role="cell">
          <dl class="detail">
            <dt>Outcome</dt><dd>${e.outcome || '—'}</dd>
            <dt>Model</dt><dd>${e.model || '—'}</dd>
            <dt>Tokens</dt><dd>${count(e.tokens?.total)}</dd>
            <dt>Cost</dt><dd><${Cost} event=${e} /></dd>
            <dt>Privacy</dt><dd><${PrivacyChip} chip=${e.privacyChip} /></dd>
            ${spanOf(e) ? html`<dt>Span</dt><dd><code>${spanOf(e)}</code>${parentOf(e) ? html` ← <code>${parentOf(e)}</code>` : null}</dd>` : null}
            ${e.errorMessage ? html`<dt>Error</dt><dd class="bad">${e.errorMessage}</dd>` : null}
            <dt>Event</dt><dd><code>${e.eventId}</code></dd>
          </dl></div>`
: null}
      </div>`
    })}
  </div>`
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

function Detail ({ kind, item, names }) {
  const events = item.events || []
  const unpriced = events.filter((e) => e.costStatus === 'unknown_model').length
  return html`
    <div class="kpis">
      <${Kpi} label="Duration" value=${duration(item.durationMs)} hint=${html`<${Time} iso=${item.start} />`} />
      <${Kpi} label="Events" value=${count(item.eventCount ?? events.length)} hint=${`${count(item.errors)} errors`} tone=${item.errors ? 'bad' : ''} />
      <${Kpi} label="Tokens" value=${count(item.tokens?.total)} hint=${`${count(item.tokens?.inputBase)} in · ${count(item.tokens?.output)} out`} />
      <${Kpi} label="Cost" value=${money(item.costUsd)} hint=${unpriced ? `${unpriced} events unpriced` : null} />
    </div>
    <p>Agents: ${agentsOf(item, names).map((a, i) => html`${i ? ', ' : ''}<${AgentLink} agent=${a} />`)}
      · Privacy: ${chipsOf(events).map((c) => html`<${PrivacyChip} chip=${c} /> `)}</p>
    <${Git} git=${item.git} cwd=${item.cwd} />
    <section class="card wide" aria-labelledby="tl"><h2 id="tl">Timeline</h2><${Waterfall} events=${events} names=${names} /></section>
    ${kind === 'trace' ? null : html`<p class="muted">Traces in this session: ${[...new Set(events.map((e) => e.traceId).filter(Boolean))].map((t, i) => html`${i ? ', ' : ''}<a href=${`#/traces/${encodeURIComponent(t)}`}>${t}</a>`)}</p>`}`
}

function List ({ kind, names }) {
  const [since, setSince] = useState('7d')
  const [pages, setPages] = useState([])
  const key = kind === 'trace' ? 'traces' : 'sessions'
  const idKey = kind === 'trace' ? 'traceId' : 'sessionId'
  useEffect(() => setPages([]), [since])
  const { data, error } = useData(async () => {
    return api(`/v1/me/${key}`, { query: { limit: 50, since: kind === 'trace' ? since : undefined } })
  }, [since], 10_000)
  const [more, setMore] = useState(null)
  const rows = [...(data?.[key] || []), ...pages.flatMap((p) => p[key] || [])]
  const cursor = pages.length ? pages[pages.length - 1].nextCursor : data?.nextCursor
  const loadMore = async () => {
    try { const page = await api(`/v1/me/${key}`, { query: { limit: 50, since: kind === 'trace' ? since : undefined, cursor } }); setPages([...pages, page]) } catch (err) { setMore(err) }
  }
  return html`
    <h1 tabindex="-1">${kind === 'trace' ? 'Traces' : 'Sessions'}</h1>
    ${kind === 'trace'
? html`<form class="filters" onSubmit=${(e) => e.preventDefault()}><label>Since <select value=${since} onChange=${(e) => setSince(e.target.value)}>
      <option value="24h">24 hours</option><option value="7d">7 days</option><option value="30d">30 days</option><option value="all">all time</option></select></label></form>`
: null}
    <${ErrorNote} error=${error || more} />
    ${!data
? html`<${Loading} />`
: rows.length === 0
? html`<${Empty}>No ${key} yet: events carry them in <code>metadata.${idKey}</code>.</${Empty}>`
: html`
    <div class="table-wrap"><table>
      <thead><tr><th scope="col">${kind === 'trace' ? 'Trace' : 'Session'}</th><th scope="col">Started</th><th scope="col" class="num">Duration</th>
        <th scope="col" class="num">Events</th><th scope="col" class="num">Errors</th><th scope="col" class="num">Tokens</th><th scope="col" class="num">Cost</th><th scope="col">Agents</th></tr></thead>
      <tbody>${rows.map((s) => html`<tr key=${s[idKey]}>
        <th scope="row"><a href=${`#/${key}/${encodeURIComponent(s[idKey])}`}>${s[idKey]}</a></th>
        <td><${Time} iso=${s.start} /></td><td class="num">${duration(s.durationMs)}</td>
        <td class="num">${count(s.eventCount)}</td><td class=${`num ${s.errors ? 'bad' : ''}`}>${count(s.errors)}</td>
        <td class="num">${count(s.tokens?.total ?? s.tokens)}</td><td class="num">${money(s.costUsd)}</td>
        <td>${agentsOf(s, names).map((a, i) => html`${i ? ', ' : ''}<${AgentLink} agent=${a} />`)}</td></tr>`)}</tbody>
    </table></div>
    ${cursor ? html`<button onClick=${loadMore}>Load more</button>` : null}`}`
}

function DetailPage ({ kind, id, names }) {
  const key = kind === 'trace' ? 'traces' : 'sessions'
  const { data, error } = useData(() => api(`/v1/me/${key}/${encodeURIComponent(id)}`), [id], 10_000)
  return html`
    <p class="crumbs"><a href=${`#/${key}`}>${kind === 'trace' ? 'Traces' : 'Sessions'}</a> /</p>
    <h1 tabindex="-1">${kind === 'trace' ? 'Trace' : 'Session'} <code>${id}</code></h1>
    ${error?.status === 404 ? html`<p>Not found: no events of yours carry this id.</p>` : html`<${ErrorNote} error=${error} />`}
    ${data ? html`<${Detail} kind=${kind} item=${data} names=${names} />` : error ? null : html`<${Loading} />`}`
}

export const SessionsPage = ({ names }) => html`<${List} kind="session" names=${names} />`
export const TracesPage = ({ names }) => html`<${List} kind="trace" names=${names} />`
export const SessionPage = ({ id, names }) => html`<${DetailPage} kind="session" id=${id} names=${names} />`
export const TracePage = ({ id, names }) => html`<${DetailPage} kind="trace" id=${id} names=${names} />`
