// Live events: streamed as the service acknowledges them (GET /v1/me/events/stream), new ones at the
// top; searched and filtered by the search in the URL (search.js), which the stream applies too, with
// the facets of the matching events beside the list.
import { useEffect, useRef, useState } from 'preact/hooks'
import { api, agentOf, isPermanent, readStream } from '../api.js'
import { SearchBar, Facets, NoMatch, go, searchQuery, searching } from '../search.js'
import { html, ErrorNote, Empty, PrivacyChip, Cost, Time, AgentLink, Name, count, duration, dotted, spanName, spanFacts, firstWords, tokenParts } from '../ui.js'

const TYPES = ['decision', 'reasoning', 'tool', 'action', 'tx', 'error']
const RECONNECT_MS = 2000
const RECONNECT_MAX_MS = 30000

/** How long to wait before reconnect attempt `failures` (1, 2, …): doubling from 2 s, at most 30 s. */
export function reconnectDelay (failures) {
  return Math.min(RECONNECT_MAX_MS, RECONNECT_MS * 2 ** Math.max(0, failures - 1))
}
/** Events read per page of GET /v1/me/events: the latest, and each older page *Load more* reads. */
const PAGE = 100
/** Rows kept while no older page is loaded: the newest, as the stream adds more. */
const KEEP = 500
/**
 * When the latest page is read once more after a catch-up: an event acknowledged on another instance
 * just before the stream was ready (or during a gap) reaches neither the stream nor, until it is in
 * ClickHouse (about 2 s), the page read at once.
 */
const LATE_MS = 3000

/**
 * Merges events (a page read, or one from the stream) into those shown, newest first, each once;
 * the newest `keep` are kept, and `cut` says whether older ones were dropped.
 */
export function mergeEvents (shown, fresh, keep = KEEP) {
  const seen = new Set(shown.map((e) => e.eventId))
  const added = fresh.filter((e) => !seen.has(e.eventId))
  if (added.length === 0) return { list: shown, added, cut: false }
  const list = [...added, ...shown].sort((a, b) => (a.timestamp < b.timestamp ? 1 : a.timestamp > b.timestamp ? -1 : a.eventId < b.eventId ? 1 : -1))
  return { list: list.slice(0, keep), added, cut: list.length > keep }
}

/**
 * What an event is: its span name, model and tool; for an event with none of them, the first words of
 * its reasoning, else its type (muted), so the cell is never empty.
 */
function SpanCell ({ e }) {
  const name = spanName(e)
  const facts = spanFacts(e)
  // What went wrong, in the row: an error is read from the list, not only from its details.
  const failure = firstWords(e.errorMessage)
  if (name === e.type && !facts.length) {
    if (failure) return html`<${Name} text=${e.errorMessage}><span class="bad">${failure}</span></${Name}>`
    const said = firstWords(e.reasoning)
    return said ? html`<${Name} text=${e.reasoning}><span class="muted">${said}</span></${Name}>` : html`<span class="muted">${e.type}</span>`
  }
  return html`<${Name} text=${[name, ...facts, ...(e.errorMessage ? [e.errorMessage] : [])].join(' · ')}>${dotted(
    name === e.type ? null : html`<strong class="span-name">${name}</strong>`, ...facts.map((f) => html`<span class="muted">${f}</span>`),
    failure ? html`<span class="bad">${failure}</span>` : null)}</${Name}>`
}

/** Metadata keys the rows above already show (or the tokens, the chip). */
const SHOWN_METADATA = new Set(['tokensBreakdown', 'sessionId', 'traceId', 'spanId', 'parentSpanId', 'privacyLevel'])

/** The event's metadata but what the detail shows elsewhere: the agent's own keys, git, cwd, the OTLP attributes. */
function otherMetadata (e) {
  const m = e.metadata && typeof e.metadata === 'object' ? e.metadata : {}
  return Object.fromEntries(Object.entries(m).filter(([k]) => !SHOWN_METADATA.has(k)))
}

/** An amount as people write it: `129.99 USDC`; anything else as its JSON. */
function amountText (amount) {
  return amount && typeof amount === 'object' && amount.value !== undefined && typeof amount.token === 'string'
    ? `${amount.value} ${amount.token}`
    : JSON.stringify(amount)
}

function Detail ({ e }) {
  const rows = [
    ['Event', html`<code>${e.eventId}</code>`],
    ['Received', html`<${Time} iso=${e.receivedAt} />`],
    e.sessionId && ['Session', html`<a href=${`#/sessions/${encodeURIComponent(e.sessionId)}`}>${e.sessionId}</a>`],
    e.traceId && ['Trace', html`<a href=${`#/traces/${encodeURIComponent(e.traceId)}`}>${e.traceId}</a>`],
    e.toolsConsidered?.length && ['Tools considered', e.toolsConsidered.join(', ')],
    e.durationMs !== null && ['Duration', duration(e.durationMs)],
    e.model && ['Model', e.model],
    e.toolExecuted && ['Tool', e.toolExecuted],
    ['Tokens', tokenParts(e.tokens, true)],
    e.errorMessage && ['Error', html`<span class="bad">${e.errorMessage}</span>`],
    e.reasoning && ['Reasoning', e.reasoning],
    e.input !== null && e.input !== undefined && ['Input', html`<pre>${typeof e.input === 'string' ? e.input : JSON.stringify(e.input, null, 2)}</pre>`],
    e.amount && ['Amount', amountText(e.amount)],
    e.transaction && ['Transaction', e.transaction],
    Object.keys(otherMetadata(e)).length > 0 && ['Metadata', html`<pre>${JSON.stringify(otherMetadata(e), null, 2)}</pre>`],
  ].filter(Boolean)
  return html`<dl class="detail">${rows.map(([k, v]) => html`<dt>${k}</dt><dd>${v}</dd>`)}</dl>`
}

/** The one value of a parameter when it has exactly one, else '' (what a select can show). */
const single = (params, key) => (params.getAll(key).length === 1 ? params.get(key) : '')

/** The parameters with `key` set to `value` alone, or removed when `value` is ''. */
function only (params, key, value) {
  const next = new URLSearchParams(params)
  next.delete(key)
  if (value) next.append(key, value)
  return next
}

export function LivePage ({ names, params, refreshNames }) {
  const [events, setEvents] = useState(null)
  // An event of an agent made since the names were read (its first events): read them again, at most
  // every 10 s, so that the agent's name and the agent filter's choice appear without a reload.
  // Once per agent: one the names never hold (past the first 1,000 of a user's agents) is not asked again.
  const namesAskedAt = useRef(0)
  const askedFor = useRef(new Set())
  useEffect(() => {
    const unknown = (events || []).filter((e) => !names.has(e.agentId) && !askedFor.current.has(e.agentId))
    if (!refreshNames || unknown.length === 0 || Date.now() - namesAskedAt.current < 10_000) return
    for (const e of unknown) askedFor.current.add(e.agentId)
    namesAskedAt.current = Date.now()
    refreshNames()
  }, [events, names])
  const [fresh, setFresh] = useState(new Set())
  const [paused, setPaused] = useState(false)
  const [open, setOpen] = useState(null)
  const [error, setError] = useState(null)
  const [link, setLink] = useState('connecting')
  const shown = useRef([])
  // The walk of GET /v1/me/events that *Load more* goes on with: its next cursor (undefined until its
  // first page is read, null after its last), whether an older page was loaded (from then on no row
  // is dropped) and whether the rows past KEEP were dropped (then the cursor no longer follows the
  // last row shown). A new object for each start of the stream, so a late answer can tell.
  const walk = useRef({ cursor: undefined, loaded: false, cut: false })
  const [older, setOlder] = useState({ more: false, loaded: false, busy: false, error: null })
  // The page is drawn anew for each search (its URL changes), so the search is fixed here.
  const query = searchQuery(params)
  const isSearch = searching(params)
  const add = (list, mark) => {
    const w = walk.current
    const { list: merged, added, cut } = mergeEvents(shown.current, list, w.loaded ? Infinity : KEEP)
    shown.current = merged
    setEvents(merged)
    if (mark && added.length) setFresh(new Set(added.map((e) => e.eventId)))
    if (cut && !w.cut) {
      w.cut = true
      setOlder((o) => ({ ...o, more: true }))
    }
  }
  // The next older page of the walk, below the rows shown; new events still arrive at the top.
  const loadOlder = async () => {
    const w = walk.current
    setOlder((o) => ({ ...o, busy: true, error: null }))
    try {
      // Once rows were dropped, a new walk's first page reaches past the last row shown instead: the
      // rows shown and a page more (at most KEEP + PAGE, within the API's limit of 1,000).
      const page = await api('/v1/me/events', { query: w.cut ? { limit: shown.current.length + PAGE, ...query } : { limit: PAGE, ...query, cursor: w.cursor } })
      if (walk.current !== w) return
      w.loaded = true
      w.cut = false
      w.cursor = page?.nextCursor || null
      add(page?.events || [], false)
      setOlder({ more: Boolean(w.cursor), loaded: true, busy: false, error: null })
    } catch (err) {
      if (walk.current === w) setOlder((o) => ({ ...o, busy: false, error: err.status === 401 ? null : err }))
    }
  }
  useEffect(() => {
    // Paused: the stream stops (the cleanup below) and the rows shown stay, to be read; Resume starts afresh.
    if (paused) return
    shown.current = []
    const w = { cursor: undefined, loaded: false, cut: false }
    walk.current = w
    setEvents(null)
    setOlder({ more: false, loaded: false, busy: false, error: null })
    setLink('connecting')
    const stop = new AbortController()
    // The latest events, merged in: once the stream is ready (events before it), and after a gap or a
    // reconnection without a resume point. The first page read starts the walk Load more goes on with.
    // With rows shown, pages are read until they reach the newest of them (at most KEEP rows): more
    // than a page may have come meanwhile, and rows below a hole would look like the events before.
    const catchUp = async (mark) => {
      try {
        const newest = shown.current[0]?.timestamp
        const pages = [await api('/v1/me/events', { query: { limit: PAGE, ...query } })]
        const reaches = (page) => newest === undefined || !page?.nextCursor || (page.events || []).some((e) => e.timestamp <= newest)
        let read = pages[0]?.events?.length || 0
        while (!reaches(pages.at(-1)) && read < KEEP && !stop.signal.aborted) {
          pages.push(await api('/v1/me/events', { query: { limit: PAGE, ...query, cursor: pages.at(-1).nextCursor } }))
          read += pages.at(-1)?.events?.length || 0
        }
        if (stop.signal.aborted) return
        const last = pages.at(-1)
        if (!reaches(last)) {
          // More than KEEP came: the rows shown are older than a hole, so they go, and Load more
          // goes on below the pages read.
          shown.current = []
          w.cursor = last.nextCursor
          w.loaded = false
          w.cut = false
          setOlder((o) => ({ ...o, more: true, loaded: false }))
        } else if (w.cursor === undefined) {
          w.cursor = pages[0]?.nextCursor || null
          setOlder((o) => ({ ...o, more: Boolean(w.cursor) || w.cut }))
        }
        add(pages.flatMap((page) => page?.events || []), mark)
      } catch (err) {
        if (err.status !== 401) setError(err)
      }
    }
    const catchUpNowAndLater = (mark) => {
      catchUp(mark)
      const late = setTimeout(() => { if (!stop.signal.aborted) catchUp(true) }, LATE_MS)
      stop.signal.addEventListener('abort', () => clearTimeout(late), { once: true })
    }
    let lastEventId = null
    let failures = 0
    ;(async () => {
      while (!stop.signal.aborted) {
        try {
          await readStream('/v1/me/events/stream', {
            query,
            lastEventId,
            signal: stop.signal,
            onReady: () => {
              failures = 0
              setLink('live')
              setError(null)
              if (!lastEventId) catchUpNowAndLater(shown.current.length > 0)
            },
            onMessage: (m) => {
              if (m.event === 'gap') catchUpNowAndLater(true)
              if (m.event !== 'message') return
              lastEventId = m.id
              add([JSON.parse(m.data)], true)
            },
          })
        } catch (err) {
          if (stop.signal.aborted || err.status === 401) return
          if (err.name !== 'TypeError') setError(err)
          // A resume point the service refuses would be refused again: start afresh from the latest page.
          if (err.status === 400 && lastEventId) lastEventId = null
          else if (isPermanent(err)) {
            // The search itself is refused (a 400 naming a filter): asking again would be refused too.
            setLink('refused')
            return
          }
        }
        if (stop.signal.aborted) return
        // The stream ended (the instance restarted, the network dropped): again, from the last event
        // seen, waiting longer after each failure in a row, and saying so.
        failures++
        const wait = reconnectDelay(failures)
        setLink(`reconnecting in ${Math.round(wait / 1000)} s (attempt ${failures})`)
        await new Promise((resolve) => setTimeout(resolve, wait))
      }
    })()
    return () => stop.abort()
  }, [paused])
  const agents = [...names.entries()].sort((a, b) => a[1].localeCompare(b[1]))
  const agent = single(params, 'agentId')
  const type = single(params, 'type')
  return html`
    <h1 tabindex="-1">Live events</h1>
    <${SearchBar} page="live" params=${params} names=${names} what="events" />
    <form class="filters" onSubmit=${(e) => e.preventDefault()}>
      <label>Agent <select value=${agent} onChange=${(e) => go('live', only(params, 'agentId', e.target.value))}>
        <option value="">${params.getAll('agentId').length > 1 ? 'Several agents' : 'All agents'}</option>
        ${agents.map(([id, name]) => html`<option value=${id}>${name}</option>`)}
      </select></label>
      <label>Type <select value=${type} onChange=${(e) => go('live', only(params, 'type', e.target.value))}>
        <option value="">${params.getAll('type').length > 1 ? 'Several types' : 'All types'}</option>
        ${TYPES.map((t) => html`<option value=${t}>${t}</option>`)}
      </select></label>
      <button type="button" aria-pressed=${paused} onClick=${() => setPaused(!paused)}>${paused ? 'Resume' : 'Pause'}</button>
      <span class="muted" role="status">${paused ? 'Paused' : link === 'live' ? html`<span class="live-dot">live</span> streaming as events arrive` : link === 'connecting' ? 'Connecting…' : html`<span class="bad">Not connected</span>: ${link === 'refused' ? 'the service refused this search' : link}`}</span>
    </form>
    <div class="with-facets">
    <${Facets} page="live" params=${params} names=${names} since="30d" window="in the last 30 days" />
    <div class="results">
    <${ErrorNote} error=${error} />
    ${events === null && !paused && link !== 'refused' ? html`<p class="muted">Loading…</p>` : null}
    ${events && events.length === 0
      ? isSearch
        ? html`<${NoMatch} page="live" params=${params} what="events" />`
        : html`<${Empty}>No events yet. Send one with an API key (see API keys) and it appears here within a second or two.</${Empty}>`
      : null}
    ${events && events.length
? html`<div class="table-wrap"><table class="events" aria-live="polite" aria-relevant="additions">
      <thead><tr><th scope="col">Time</th><th scope="col">Agent</th><th scope="col">Type</th><th scope="col">Span · model · tool</th>
        <th scope="col">Outcome</th><th scope="col" class="num">Duration</th><th scope="col" class="num">Tokens</th><th scope="col" class="num">Cost</th><th scope="col">Privacy</th><th scope="col"><span class="sr-only">Details</span></th></tr></thead>
      <tbody>${events.map((e) => html`
        <tr key=${e.eventId} class=${`${fresh.has(e.eventId) ? 'fresh' : ''} ${e.errorFingerprint ? 'row-error' : ''}`} data-event-id=${e.eventId}>
          <td class="nowrap"><${Time} iso=${e.timestamp} /></td>
          <td><${Name} text=${agentOf(e, names).displayName || agentOf(e, names).id}><${AgentLink} agent=${agentOf(e, names)} /></${Name}></td>
          <td><span class=${`type type-${e.type}`}>${e.type}</span></td>
          <td class="span-cell"><${SpanCell} e=${e} /></td>
          <td class=${e.outcome === 'failed' ? 'bad' : ''}>${e.outcome || ''}</td>
          <td class="num">${e.durationMs == null ? '' : duration(e.durationMs)}</td>
          <td class="num">${e.tokens?.total ? count(e.tokens.total) : ''}</td>
          <td class="num"><${Cost} event=${e} /></td>
          <td><${PrivacyChip} chip=${e.privacyChip} /></td>
          <td><button class="small" aria-expanded=${open === e.eventId} aria-label=${`${open === e.eventId ? 'Hide' : 'Details'} of ${e.type} event ${e.eventId}`} onClick=${() => setOpen(open === e.eventId ? null : e.eventId)}>${open === e.eventId ? 'Hide' : 'Details'}</button></td>
        </tr>
        ${open === e.eventId ? html`<tr class="detail-row"><td colspan="10"><${Detail} e=${e} /></td></tr>` : null}`)}
      </tbody></table></div>
    <${ErrorNote} error=${older.error} />
    ${older.loaded ? html`<p class="muted">Older events loaded: new ones still arrive at the top, and every row is kept until the page is reloaded.</p>` : null}
    ${older.more ? html`<button onClick=${loadOlder} disabled=${older.busy} aria-busy=${older.busy}>Load more</button>` : null}`
: null}
    </div>
    </div>`
}
