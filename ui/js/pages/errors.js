// Error clusters: counts, first and last seen, latest message, tools; resolve and re-open.
import { useEffect } from 'preact/hooks'
import { api, agentsOf } from '../api.js'
import { html, useData, useAction, ErrorNote, Loading, Empty, Badge, Time, AgentLink, count, plural, noun, dotted } from '../ui.js'

function Cluster ({ c, names, highlight, onChange }) {
  const action = useAction()
  const resolved = c.status === 'resolved'
  const toggle = () => action.run(() => api(`/v1/me/errors/${c.fingerprint}/resolve`, { method: resolved ? 'DELETE' : 'POST' }), onChange)
  return html`<li class=${`cluster ${highlight ? 'highlight' : ''}`} id=${`fp-${c.fingerprint}`} data-fingerprint=${c.fingerprint}>
    <div class="cluster-head">
      <${Badge} tone=${resolved ? 'ok' : 'bad'}>${resolved ? 'resolved' : 'open'}</${Badge}>
      <strong class="cluster-msg">${c.sampleMessage || '(no message)'}</strong>
    </div>
    <p class="muted">
      ${dotted(
        `× ${count(c.count)}`,
        html`first <${Time} iso=${c.firstSeen} />`,
        html`last <${Time} iso=${c.lastSeen} />`,
        c.tools?.length ? `${noun(c.tools.length, 'tool')} ${c.tools.join(', ')}` : null,
        html`${agentsOf(c, names).map((a, i) => html`${i ? ', ' : ''}<${AgentLink} agent=${a} />`)}`,
        resolved && c.resolvedAt ? html`resolved <${Time} iso=${c.resolvedAt} />` : null,
        html`<code>${c.fingerprint}</code>`,
      )}
    </p>
    <p class="cluster-links">${dotted(
      html`<a href=${`#/live?fingerprint=${encodeURIComponent(c.fingerprint)}`}>Its events</a>`,
      html`<a href=${`#/traces?fingerprint=${encodeURIComponent(c.fingerprint)}`}>its traces</a>`,
      html`<a href=${`#/sessions?fingerprint=${encodeURIComponent(c.fingerprint)}`}>its sessions</a>`,
    )}</p>
    <button onClick=${toggle} disabled=${action.busy} aria-label=${`${resolved ? 'Re-open' : 'Resolve'}: ${c.sampleMessage || c.fingerprint}`}>${resolved ? 'Re-open' : 'Resolve'}</button>
    <${ErrorNote} error=${action.error} />
  </li>`
}

const SINCE = ['24h', '7d', '30d', 'all']
const STATUS = ['all', 'open', 'resolved']

/**
 * The window and status are in the URL (`#/errors?since=30d&status=open`), so a view is shared and the
 * back button returns to it. A link to one cluster (`#/errors/<fingerprint>`) looks over all time
 * unless it says otherwise, and scrolls the cluster into view.
 */
/** How many clusters GET /v1/me/errors lists at most (the latest). */
const CLUSTERS_LISTED = 500

export function ErrorsPage ({ id, params, names }) {
  const since = SINCE.includes(params?.get('since')) ? params.get('since') : id ? 'all' : '7d'
  const status = STATUS.includes(params?.get('status')) ? params.get('status') : 'all'
  const choose = (key, value) => {
    const next = new URLSearchParams(params)
    next.set(key, value)
    window.location.hash = `#/errors${id ? `/${encodeURIComponent(id)}` : ''}?${next}`
  }
  const setSince = (v) => choose('since', v)
  const setStatus = (v) => choose('status', v)
  const { data, error, reload } = useData(() => api('/v1/me/errors', { query: { since } }), [since], 15_000)
  const shown = Boolean(data)
  useEffect(() => {
    if (shown && id) document.getElementById(`fp-${id}`)?.scrollIntoView({ block: 'center' })
  }, [shown, id])
  const clusters = (data?.clusters || []).filter((c) => status === 'all' || c.status === status)
  const open = (data?.clusters || []).filter((c) => c.status === 'open').length
  return html`
    <h1 tabindex="-1">Errors</h1>
    <form class="filters" onSubmit=${(e) => e.preventDefault()}>
      <label>Since <select value=${since} onChange=${(e) => setSince(e.target.value)}>
        <option value="24h">24 hours</option><option value="7d">7 days</option><option value="30d">30 days</option><option value="all">all time</option></select></label>
      <label>Status <select value=${status} onChange=${(e) => setStatus(e.target.value)}>
        <option value="all">all</option><option value="open">open</option><option value="resolved">resolved</option></select></label>
      ${data ? html`<span class="muted">${plural(data.clusters.length, 'cluster')}, ${count(open)} open</span>` : null}
    </form>
    <${ErrorNote} error=${error} />
    ${data && id && !data.clusters.some((c) => c.fingerprint === id)
      ? data.clusters.length >= CLUSTERS_LISTED
        ? html`<p class="note" role="status">Error cluster <code>${id}</code> is not among the ${CLUSTERS_LISTED} latest listed below${since === 'all' ? '' : ' for this window'}.</p>`
        : html`<p class="note" role="status">No error cluster <code>${id}</code> of yours${since === 'all' ? '' : ' in this window'}: it may be another user's, or mistyped. Your clusters are listed below.</p>`
      : null}
    ${!data
? html`<${Loading} />`
: clusters.length === 0
? html`<${Empty}>No error clusters${status === 'all' ? '' : ` ${status}`} in this window.</${Empty}>`
: html`
    <ul class="clusters">${clusters.map((c) => html`<${Cluster} key=${c.fingerprint} c=${c} names=${names} highlight=${c.fingerprint === id} onChange=${reload} />`)}</ul>`}`
}
