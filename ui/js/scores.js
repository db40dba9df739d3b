// Scores in the UI: how a score reads, the scores of a trace or a session with "add a score" (thumbs up or down
// with a comment, and a named score following the user's score configs), and a small trend line.
import { useEffect, useState } from 'preact/hooks'
import { api, agentOf } from './api.js'
import { html, useAction, useData, ErrorNote, Empty, Time, AgentLink, Badge, spanName, plural } from './ui.js'

/** The name of the score a thumbs up or down on a trace is stored under (a boolean score). */
export const FEEDBACK_NAME = 'user_feedback'

const decimal = new Intl.NumberFormat('en-US', { maximumFractionDigits: 3 })
const scientific = new Intl.NumberFormat('en-US', { notation: 'scientific', maximumSignificantDigits: 4 })
/**
 * A score figure as every scores view writes it: at most 3 decimals, "—" when there is none; from a
 * million million up (or tiny but not zero), in scientific notation (1.2E20), which fits its tile.
 */
export const fig = (n) => (n === null || n === undefined
  ? '—'
  : Math.abs(n) >= 1e12 || (n !== 0 && Math.abs(n) < 1e-3) ? scientific.format(n) : decimal.format(n))
/** A change against the previous period, signed: "+0.12", "−3", "±0"; "—" when unknown. */
export const signed = (n) => (n === null || n === undefined ? '—' : n > 0 ? `+${fig(n)}` : n < 0 ? `−${fig(-n)}` : '±0')

/** What a score says: its number, its label, or yes/no for a boolean (▲ up / ▼ down for feedback). */
export function scoreText (s) {
  if (s.dataType === 'boolean' || s.boolean !== null) {
    const yes = s.boolean ?? s.value === 1
    return s.name === FEEDBACK_NAME ? (yes ? '▲ up' : '▼ down') : (yes ? 'yes' : 'no')
  }
  if (s.dataType === 'categorical' || s.label !== null) return s.label
  return fig(s.value)
}

/** The message of a refused score: the config's reason, naming the field, when that is why. */
export function refusal (err) {
  if (!err) return null
  if (err.body?.reason === 'score_config_mismatch') return { message: `Refused by the score config: ${err.message}` }
  return err
}

/** The signed-in user's id (to write "you" as a score's author), read once per page. */
let meOnce = null
function useMe () {
  const [me, setMe] = useState(null)
  useEffect(() => {
    meOnce = meOnce || api('/v1/me').catch(() => { meOnce = null; return null })
    meOnce.then(setMe)
  }, [])
  return me
}

/** A span's key among the spans of a trace or a session (span ids are unique within a trace). */
const spanKey = (traceId, spanId) => `${traceId || ''}/${spanId}`
const traceLink = (traceId) => html`trace <a href=${`#/traces/${encodeURIComponent(traceId)}`}>${traceId}</a>`

/**
 * What a score is of, as a row says it: on a trace's page "whole trace" or its span; on a session's
 * page (`session`) "whole session", or the trace (and span) with a link to the trace.
 */
function ScoreTarget ({ s, bySpan, session, traceId }) {
  if (s.spanId) {
    const span = bySpan.get(spanKey(s.traceId || traceId, s.spanId))
    const name = html`span <span title=${s.spanId}>${span ? spanName(span) : html`<code>${s.spanId}</code>`}</span>`
    return session ? html`${traceLink(s.traceId)}, ${name}` : name
  }
  if (s.traceId) return session ? traceLink(s.traceId) : 'whole trace'
  if (s.sessionId) return 'whole session'
  return html`event <code>${s.eventId}</code>`
}

/**
 * The scores of a trace (whole and per span) or of a session (whole, and of its traces and their
 * spans), in the order given.
 */
export function ScoreTable ({ scores, spans, names, me, session = false, traceId = null }) {
  if (!scores.length) return html`<${Empty}>No scores yet.</${Empty}>`
  const bySpan = new Map(spans.filter((s) => s.spanId).map((s) => [spanKey(s.traceId || traceId, s.spanId), s]))
  return html`<div class="table-wrap"><table class="scores">
    <thead><tr><th scope="col">Of</th><th scope="col">Name</th><th scope="col">Score</th><th scope="col">Source</th>
      <th scope="col">Author</th><th scope="col">Agent</th><th scope="col">Comment</th><th scope="col">When</th></tr></thead>
    <tbody>${scores.map((s) => html`<tr key=${s.scoreId} data-score-id=${s.scoreId}>
        <td><${ScoreTarget} s=${s} bySpan=${bySpan} session=${session} traceId=${traceId} /></td>
        <th scope="row">${s.name}</th>
        <td class="score-value">${scoreText(s)}</td>
        <td><${Badge} tone=${s.source === 'human' ? 'ok' : 'plain'}>${s.source}</${Badge}></td>
        <td class="score-author">${s.authorId ? (me && s.authorId === me.id ? html`you${me.handle ? ` (${me.handle})` : ''}` : html`<code>${s.authorId}</code>`) : html`<span class="muted">—</span>`}</td>
        <td><${AgentLink} agent=${agentOf(s, names)} /></td>
        <td class="score-comment">${s.comment || html`<span class="muted">—</span>`}</td>
        <td><${Time} iso=${s.createdAt} /></td>
      </tr>`)}</tbody>
  </table></div>`
}

/** Thumbs up or down (a boolean `user_feedback` score) with an optional comment. */
function Feedback ({ send }) {
  const action = useAction()
  const [comment, setComment] = useState('')
  const [done, setDone] = useState(null)
  const thumb = (up) => action.run(() => send({ name: FEEDBACK_NAME, boolean: up, ...(comment.trim() ? { comment: comment.trim() } : {}) }), () => { setComment(''); setDone(up ? 'Thanks: thumbs up recorded.' : 'Thanks: thumbs down recorded.') })
  return html`<form class="score-form" aria-labelledby="fb-h" onSubmit=${(e) => e.preventDefault()}>
    <h3 id="fb-h">Your feedback</h3>
    <label for="fb-comment">Comment <span class="muted">(optional)</span></label>
    <textarea id="fb-comment" rows="2" maxlength="4000" value=${comment} onInput=${(e) => setComment(e.target.value)}></textarea>
    <div class="inline">
      <button type="button" disabled=${action.busy} onClick=${() => thumb(true)}><span aria-hidden="true">▲</span> Thumbs up</button>
      <button type="button" disabled=${action.busy} onClick=${() => thumb(false)}><span aria-hidden="true">▼</span> Thumbs down</button>
      <span role="status" class="muted">${done || ''}</span>
    </div>
    <${ErrorNote} error=${refusal(action.error)} />
  </form>`
}

/** The field a named score needs: from its config when it has one, else the kind chosen. */
function ValueField ({ config, kind, value, setValue }) {
  const type = config?.dataType || kind
  if (type === 'categorical' && config?.labels) {
    return html`<label>Label <select name="label" value=${value} onChange=${(e) => setValue(e.target.value)}>
      <option value="">choose…</option>${config.labels.map((l) => html`<option value=${l}>${l}</option>`)}</select></label>`
  }
  if (type === 'categorical') return html`<label>Label <input name="label" value=${value} maxlength="200" onInput=${(e) => setValue(e.target.value)} /></label>`
  if (type === 'boolean') {
    return html`<label>Answer <select name="boolean" value=${value} onChange=${(e) => setValue(e.target.value)}>
      <option value="">choose…</option><option value="true">yes</option><option value="false">no</option></select></label>`
  }
  const range = config && (config.min !== null || config.max !== null) ? ` (${fig(config.min ?? -Infinity)} to ${fig(config.max ?? Infinity)})`.replace('-∞', '…').replace('∞', '…') : ''
  return html`<label>Value${range} <input name="value" type="number" step="any" class="short" value=${value}
    min=${config?.min ?? undefined} max=${config?.max ?? undefined} onInput=${(e) => setValue(e.target.value)} /></label>`
}

/** A named score: its name (the configs offered), then the field its config's type needs. */
function NamedScore ({ send, configs }) {
  const action = useAction()
  const [name, setName] = useState('')
  const [kind, setKind] = useState('numeric')
  const [value, setValue] = useState('')
  const [comment, setComment] = useState('')
  const [done, setDone] = useState(null)
  const config = configs.find((c) => c.name === name.trim()) || null
  const type = config?.dataType || kind
  const submit = (e) => {
    e.preventDefault()
    setDone(null)
    const body = { name: name.trim(), ...(comment.trim() ? { comment: comment.trim() } : {}) }
    if (type === 'numeric') {
      if (value === '' || !Number.isFinite(Number(value))) return action.setError({ message: 'value: a number is needed' })
      body.value = Number(value)
    } else if (type === 'boolean') {
      if (value !== 'true' && value !== 'false') return action.setError({ message: 'boolean: choose yes or no' })
      body.boolean = value === 'true'
    } else {
      if (!value.trim()) return action.setError({ message: 'label: a label is needed' })
      body.label = value.trim()
    }
    // The browser does not hold back a value outside the config's range: the service says why.
    action.run(() => send(body), () => { setValue(''); setComment(''); setDone(`Score ${body.name} recorded.`) })
  }
  return html`<form class="score-form" aria-labelledby="ns-h" onSubmit=${submit} novalidate>
    <h3 id="ns-h">Add a named score</h3>
    <div class="inline">
      <label>Name <input name="name" list="score-config-names" required maxlength="200" value=${name} onInput=${(e) => { setName(e.target.value); setValue('') }} /></label>
      <datalist id="score-config-names">${configs.map((c) => html`<option value=${c.name} />`)}</datalist>
      ${config
        ? html`<span class="muted config-hint">${config.dataType}${config.description ? ` · ${config.description}` : ''}</span>`
        : html`<label>Kind <select name="kind" value=${kind} onChange=${(e) => { setKind(e.target.value); setValue('') }}>
            <option value="numeric">number</option><option value="categorical">label</option><option value="boolean">yes/no</option></select></label>`}
      <${ValueField} config=${config} kind=${kind} value=${value} setValue=${setValue} />
    </div>
    <label for="ns-comment">Comment <span class="muted">(optional)</span></label>
    <textarea id="ns-comment" rows="2" maxlength="4000" value=${comment} onInput=${(e) => setComment(e.target.value)}></textarea>
    <div class="inline">
      <button class="primary" type="submit" disabled=${action.busy || !name.trim()}>Add score</button>
      <span role="status" class="muted">${done || ''}</span>
    </div>
    <${ErrorNote} error=${refusal(action.error)} />
  </form>`
}

/**
 * A card of scores with the forms that add one as the signed-in user. `targets` are what a score may
 * be of, the first being the page's whole trace or session: `{ key, label, path, extra }`, `path`
 * the route the score is posted to and `extra` what the body adds (a span's id). After a score is
 * acknowledged, `reread()` reads the scores again (the table shows it at once).
 */
function ScoresCard ({ className, scores, spans, names, targets, reread, session = false, traceId = null, error = null }) {
  const me = useMe()
  const [key, setKey] = useState('')
  const { data: configData } = useData(() => api('/v1/me/score-configs'), [])
  const configs = configData?.configs || []
  const target = targets.find((x) => x.key === key) || targets[0]
  const send = async (body) => {
    const ack = await api(target.path, { method: 'POST', body: { ...body, ...target.extra } })
    await reread()
    return ack
  }
  const human = scores.filter((s) => s.source === 'human').length
  return html`<section class=${`card wide ${className}`} aria-labelledby="scores-h">
    <h2 id="scores-h">Scores <span class="muted">· ${plural(scores.length, 'score')}${human ? `, ${human} by people` : ''}</span></h2>
    <${ErrorNote} error=${error} />
    <${ScoreTable} scores=${scores} spans=${spans} names=${names} me=${me} session=${session} traceId=${traceId} />
    ${targets.length > 1
      ? html`<p class="inline"><label>Score <select name="target" value=${key} onChange=${(e) => setKey(e.target.value)}>
          ${targets.map((x) => html`<option value=${x.key}>${x.label}</option>`)}</select></label></p>`
      : null}
    <div class="grid score-forms">
      <${Feedback} send=${send} />
      <${NamedScore} send=${send} configs=${configs} />
    </div>
  </section>`
}

/**
 * The scores of a trace (as its detail carries them, then as read again after a score is added) and
 * the forms that add one as the signed-in user, of the whole trace or of one of its spans.
 */
export function TraceScores ({ traceId, initial, spans, names }) {
  const [scores, setScores] = useState(initial || [])
  // The detail is read again every few seconds: its scores then replace these.
  useEffect(() => { if (initial) setScores(initial) }, [initial])
  const path = `/v1/me/traces/${encodeURIComponent(traceId)}/scores`
  const targets = [
    { key: '', label: 'the whole trace', path, extra: {} },
    ...spans.filter((s) => s.spanId).slice(0, 1000).map((s) => ({ key: s.spanId, label: `span ${spanName(s)} (${s.spanId})`, path, extra: { spanId: s.spanId } })),
  ]
  const reread = async () => setScores((await api(path)).scores)
  return html`<${ScoresCard} className="trace-scores" scores=${scores} spans=${spans} names=${names} targets=${targets} reread=${reread} traceId=${traceId} />`
}

/**
 * The traces of a session whose scores its page reads (one request each, again every
 * SESSION_TRACES_REFRESH_MS) and offers to score: 20 traces are 40 reads a minute, well inside the
 * per-user limit of `/v1/me` reads.
 */
export const SESSION_TRACES_MAX = 20
const SESSION_TRACES_REFRESH_MS = 30_000

/**
 * The scores of a session: its own (as its detail carries them) and those of its traces (whole and
 * per span, read from each trace's scores, for the first SESSION_TRACES_MAX traces), with the forms
 * that add one as the signed-in user, of the whole session or of one of its traces.
 */
export function SessionScores ({ sessionId, initial, events, names }) {
  const [own, setOwn] = useState(initial || [])
  useEffect(() => { if (initial) setOwn(initial) }, [initial])
  const traceIds = [...new Set(events.map((e) => e.traceId).filter(Boolean))].slice(0, SESSION_TRACES_MAX)
  const tracePath = (id) => `/v1/me/traces/${encodeURIComponent(id)}/scores`
  const path = `/v1/me/sessions/${encodeURIComponent(sessionId)}/scores`
  // Read again now and then, so a trace's new scores show here too.
  const ofTraces = useData(async () => (await Promise.all(traceIds.map((id) => api(tracePath(id))))).flatMap((x) => x.scores), [sessionId, traceIds.join('\n')], SESSION_TRACES_REFRESH_MS)
  const targets = [
    { key: '', label: 'the whole session', path, extra: {} },
    ...traceIds.map((id) => ({ key: `trace:${id}`, label: `trace ${id}`, path: tracePath(id), extra: {} })),
  ]
  const reread = async () => {
    const [fresh] = await Promise.all([api(path), ofTraces.reload()])
    setOwn(fresh.scores)
  }
  const scores = [...own, ...(ofTraces.data || [])].sort((a, b) => (a.createdAt < b.createdAt ? -1 : a.createdAt > b.createdAt ? 1 : 0))
  return html`<${ScoresCard} className="session-scores" scores=${scores} spans=${events} names=${names} targets=${targets} reread=${reread} session=${true} error=${ofTraces.error} />`
}

/**
 * A small trend line (inline SVG) of `points` ([{ x: label, y: number | null }]): days without a
 * figure leave a gap. The aria-label carries the figures.
 */
export function Trend ({ points, label, width = 220, height = 44 }) {
  const ys = points.map((p) => p.y).filter((y) => y !== null && y !== undefined)
  if (!ys.length) return html`<span class="muted">no trend</span>`
  const lo = Math.min(...ys)
  const hi = Math.max(...ys)
  const pad = 4
  const xOf = (i) => (points.length === 1 ? width / 2 : pad + (i * (width - 2 * pad)) / (points.length - 1))
  const yOf = (y) => (hi === lo ? height / 2 : height - pad - ((y - lo) * (height - 2 * pad)) / (hi - lo))
  const runs = []
  let run = []
  points.forEach((p, i) => {
    if (p.y === null || p.y === undefined) { if (run.length) runs.push(run); run = []; return }
    run.push(`${xOf(i).toFixed(1)},${yOf(p.y).toFixed(1)}`)
  })
  if (run.length) runs.push(run)
  const text = points.map((p) => `${p.x}: ${fig(p.y)}`).join(', ')
  return html`<svg class="trend" viewBox=${`0 0 ${width} ${height}`} width=${width} height=${height} role="img" aria-label=${`${label}: ${text}`}>
    ${runs.map((r) => (r.length === 1
      ? html`<circle cx=${r[0].split(',')[0]} cy=${r[0].split(',')[1]} r="2.5" />`
      : html`<polyline points=${r.join(' ')} />`))}
  </svg>`
}
