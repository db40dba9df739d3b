// Small shared pieces: formatting, polling, chips, KPI cards, confirmations, and the uPlot wrapper.
import { html } from 'htm/preact'
import { useEffect, useLayoutEffect, useRef, useState, useCallback } from 'preact/hooks'
import { isPermanent } from './api.js'

export { html }

const usd = new Intl.NumberFormat('en-US', { style: 'currency', currency: 'USD', maximumFractionDigits: 2 })
const usdSmall = new Intl.NumberFormat('en-US', { style: 'currency', currency: 'USD', maximumSignificantDigits: 3 })
const int = new Intl.NumberFormat('en-US')

export function money (n) {
  if (n === null || n === undefined) return '—'
  return n !== 0 && Math.abs(n) < 1 ? usdSmall.format(n) : usd.format(n)
}
export const count = (n) => (n === null || n === undefined ? '—' : int.format(n))
/** The noun for a count, singular only for exactly one: noun(1, 'tool') → "tool", noun(2, 'tool') → "tools". */
export const noun = (n, one, many = `${one}s`) => (n === 1 ? one : many)
/** A count with its noun, singular only for exactly one: plural(1, 'error') → "1 error", plural(2, 'error') → "2 errors". */
export const plural = (n, one, many = `${one}s`) => `${count(n)} ${noun(n, one, many)}`
/** A share as a percentage: one decimal, two under 1 %, and `< 0.01 %` for a share too small to show but not none. */
export function percent (r) {
  if (r === null || r === undefined) return '—'
  if (r > 0 && r < 0.0001) return '< 0.01 %'
  return `${(r * 100).toFixed(r > 0 && r < 0.01 ? 2 : 1)} %`
}
/** A duration in its largest units, rounded once (never "7 min 60 s" or "60.0 s"). */
export function duration (ms) {
  if (ms === null || ms === undefined) return '—'
  if (ms < 999.5) return `${Math.round(ms)} ms`
  if (ms < 9_995) return `${(ms / 1000).toFixed(2)} s`
  if (ms < 59_950) return `${(ms / 1000).toFixed(1)} s`
  const seconds = Math.round(ms / 1000)
  if (seconds < 3600) return `${Math.floor(seconds / 60)} min ${seconds % 60} s`
  const minutes = Math.round(ms / 60_000)
  return `${Math.floor(minutes / 60)} h ${minutes % 60} min`
}
/** A time as the reader's clock says it: the time alone today, the day too this year, else the year too. */
export function when (iso) {
  if (!iso) return '—'
  const d = new Date(iso)
  const now = new Date()
  const time = { hour: '2-digit', minute: '2-digit', second: '2-digit' }
  if (d.toDateString() === now.toDateString()) return d.toLocaleString(undefined, time)
  const year = d.getFullYear() === now.getFullYear() ? {} : { year: 'numeric' }
  return d.toLocaleString(undefined, { ...year, month: 'short', day: 'numeric', ...time })
}
export function ago (iso) {
  if (!iso) return 'never'
  const s = Math.round((Date.now() - Date.parse(iso)) / 1000)
  if (s < 60) return `${Math.max(s, 0)} s ago`
  if (s < 3600) return `${Math.floor(s / 60)} min ago`
  if (s < 86400) return `${Math.floor(s / 3600)} h ago`
  return `${Math.floor(s / 86400)} d ago`
}
/**
 * Parts separated by " · " (null, false and empty parts left out): the one way to write a dotted
 * line, so every separator has its spaces whatever line breaks the template has. A part may be a
 * fragment of several nodes (an array); spread a list to make each item a part.
 */
export function dotted (...parts) {
  const kept = parts.filter((p) => p !== null && p !== undefined && p !== false && p !== '')
  return kept.flatMap((p, i) => (i ? [' · ', p] : [p]))
}
/**
 * The parts of a tokens object that add up to its total: input, cache reads and writes, output. The
 * cache parts only where some were counted, unless `all`.
 */
export function tokenParts (tokens, all = false) {
  const part = (n, label) => (all || n > 0 ? `${count(n)} ${label}` : null)
  return dotted(`${count(tokens?.inputBase)} in`, part(tokens?.cacheRead ?? 0, 'cache read'), part(tokens?.cacheCreation ?? 0, 'cache write'), `${count(tokens?.output)} out`)
}
export const Time = ({ iso }) => html`<time datetime=${iso} title=${iso}>${when(iso)}</time>`

/** The waits before asking again after a failure that may pass (429, 503, no connection), by attempt. */
const RETRY_MS = [2_000, 4_000, 8_000, 15_000, 30_000]

/**
 * Loads `load()` now and every `everyMs` (when given) while the page is visible; keeps the last
 * good data when a refresh fails, and stops refreshing after a permanent refusal (isPermanent). A
 * failure that may pass is asked again after 2, 4, 8, 15, then every 30 s, also on a page that does
 * not refresh by itself, so "retrying" is true. Returns { data, error, reload }.
 */
export function useData (load, deps, everyMs) {
  const [state, setState] = useState({ data: undefined, error: null })
  const latest = useRef(load)
  latest.current = load
  const failures = useRef(0)
  const reload = useCallback(async () => {
    try {
      const data = await latest.current()
      failures.current = 0
      setState({ data, error: null })
      return true
    } catch (error) {
      failures.current++
      if (error.status !== 401) setState((s) => ({ data: s.data, error }))
      return !isPermanent(error)
    }
  }, [])
  useEffect(() => {
    let stopped = false
    let timer
    failures.current = 0
    // A refusal that asking again would repeat (a 400 for the search in the URL) ends the refresh.
    const tick = async () => {
      const again = await reload()
      if (stopped || !again) return
      const retry = failures.current > 0 ? RETRY_MS[Math.min(failures.current, RETRY_MS.length) - 1] : undefined
      const wait = everyMs && retry ? Math.min(everyMs, retry) : everyMs ?? retry
      if (wait) timer = setTimeout(tick, document.hidden ? wait * 5 : wait)
    }
    setState({ data: undefined, error: null })
    tick()
    return () => { stopped = true; clearTimeout(timer) }
  }, deps)
  return { ...state, reload }
}

/** Runs an API write, reports its error in place, then calls done(result). */
export function useAction () {
  const [busy, setBusy] = useState(false)
  const [error, setError] = useState(null)
  const run = async (fn, done) => {
    setBusy(true)
    setError(null)
    try {
      const result = await fn()
      if (done) await done(result)
      return result
    } catch (err) {
      if (err.status !== 401) setError(err)
      return undefined
    } finally {
      setBusy(false)
    }
  }
  return { busy, error, run, setError }
}

export const ErrorNote = ({ error }) => error ? html`<p class="note error" role="alert">${error.message || String(error)}</p>` : null
export const Loading = ({ what = 'Loading' }) => html`<p class="muted" aria-busy="true">${what}…</p>`
export const Empty = ({ children }) => html`<p class="empty">${children}</p>`

export function Kpi ({ label, value, hint, tone }) {
  return html`<div class=${`kpi ${tone || ''}`}><div class="kpi-label">${label}</div><div class="kpi-value">${value}</div>${hint ? html`<div class="kpi-hint">${hint}</div>` : null}</div>`
}

/** The privacy level of an event as a chip: MIN, STD or FULL. */
export function PrivacyChip ({ chip }) {
  if (!chip) return null
  const title = { MIN: 'minimal: content not stored', STD: 'standard', FULL: 'full content stored' }[chip] || chip
  return html`<span class=${`chip chip-${chip.toLowerCase()}`} title=${`privacy: ${title}`}>${chip}</span>`
}

/** Cost, with unpriced models (no price known for them) visibly marked, and your own prices named. */
export function Cost ({ event }) {
  if (event.costStatus === 'unknown_model') return html`<span class="chip chip-unpriced" title=${`no price was known for ${event.model} when this event arrived: counted at $0`}>unpriced</span>`
  if (event.costStatus === 'no_model') return html`<span class="muted">—</span>`
  if (event.costStatus === 'user_price') return html`<span title=${`priced by your own price for ${event.model}`}>${money(event.costUsd)}</span>`
  return html`<span>${money(event.costUsd)}</span>`
}

export const Badge = ({ tone, children }) => html`<span class=${`badge badge-${tone}`}>${children}</span>`

/**
 * A button that asks again in place before doing something that cannot be undone. `small` sizes it
 * as a row's action; `quiet` draws it as its row's other buttons until asked (the confirmation is red).
 */
export function ConfirmButton ({ label, question, confirmLabel, onConfirm, busy, small, quiet }) {
  const [asking, setAsking] = useState(false)
  // Focus goes to Cancel, not to the button that destroys: a stray Enter then undoes nothing. Escape
  // cancels. Before the browser paints: the button clicked is reused for the one that destroys, and
  // it would keep the focus until an effect ran.
  const no = useRef()
  const trigger = useRef()
  const asked = useRef(false)
  // Cancelled (or done, the row still there): focus goes back to the button that asked, not to the page.
  useLayoutEffect(() => {
    if (asking) no.current?.focus()
    else if (asked.current) trigger.current?.focus()
    asked.current = asking
  }, [asking])
  const size = small ? ' small' : ''
  if (!asking) return html`<button ref=${trigger} class=${`${quiet ? '' : 'danger'}${size}`.trim() || undefined} onClick=${() => setAsking(true)}>${label}</button>`
  return html`<span class="confirm" role="group" aria-label=${question} onKeyDown=${(e) => { if (e.key === 'Escape') { e.stopPropagation(); setAsking(false) } }}>
    <span>${question}</span>
    <button class=${`danger${size}`} disabled=${busy} onClick=${async () => { await onConfirm(); setAsking(false) }}>${confirmLabel || label}</button>
    <button class=${size.trim() || undefined} ref=${no} onClick=${() => setAsking(false)}>Cancel</button>
  </span>`
}

/** A secret the service shows only once (an API key, a signing secret), with a copy button; `children` say how to use it. */
export function SecretOnce ({ title, secret, onDismiss, children }) {
  const [copied, setCopied] = useState(null)
  const box = useRef()
  useEffect(() => box.current?.focus(), [])
  const copy = async () => {
    try {
      await navigator.clipboard.writeText(secret)
      setCopied('Copied to the clipboard.')
    } catch {
      box.current?.select()
      setCopied('Selected: press Ctrl+C (⌘C) to copy.')
    }
  }
  return html`<section class="card secret" aria-labelledby="new-secret">
    <h2 id="new-secret">${title}</h2>
    <p><strong>Copy the secret now: it is shown only this once.</strong> ${children}</p>
    <div class="inline">
      <label class="sr-only" for="secret">Secret</label>
      <input id="secret" ref=${box} readonly value=${secret} class="mono wide-input" onFocus=${(e) => e.target.select()} />
      <button class="primary" onClick=${copy}>Copy</button>
    </div>
    <p role="status" class="muted">${copied || ''}</p>
    <button onClick=${() => { focusHeading(); onDismiss() }}>I have stored it</button>
  </section>`
}

/** Moves the focus to the page's heading, so that removing the control that had it does not drop it to the page's body. */
export function focusHeading () {
  document.querySelector('main h1')?.focus()
}

function css (name) { return window.getComputedStyle(document.documentElement).getPropertyValue(name).trim() }

const DAY_SECONDS = 86_400
const dayLabel = (v) => new Date(v * 1000).toLocaleDateString(undefined, { month: 'short', day: 'numeric', timeZone: 'UTC' })

/**
 * A uPlot chart. `data` is uPlot's columns ([xs, ys…]); `series` describes the y series; `bars`
 * draws bars, each centred on its x and `step` wide at most (the x distance between two points;
 * by default that of the first two, which a single bar has not). `days` says the xs are UTC days
 * (their midnight, in seconds): the axis then labels the days themselves, under their bars, and
 * covers exactly the days shown, one or a year. The chart follows its container's width; the
 * figure's aria-label carries the figures for screen readers, and `data-x-from`/`data-x-to` the x
 * range drawn (ISO).
 */
/**
 * The y axis's width: its longest label as drawn (uPlot's own recipe), at least 64 px, so that
 * "$30,000.00" is not clipped to "0,000.00". On uPlot's later layout passes, the size it has.
 */
function yAxisSize (u, values, axisIdx, cycleNum) {
  const axis = u.axes[axisIdx]
  if (cycleNum > 1) return axis._size
  const longest = (values ?? []).reduce((a, v) => (v != null && String(v).length > a.length ? String(v) : a), '')
  if (!longest) return 64
  u.ctx.font = axis.font[0]
  return Math.max(64, Math.ceil(axis.ticks.size + axis.gap + u.ctx.measureText(longest).width / window.devicePixelRatio + 4))
}

export function Chart ({ data, series, bars, height = 220, label, yFormat = (v) => String(v), xTime = true, xFormat, step, days }) {
  const box = useRef()
  const figure = useRef()
  const plot = useRef()
  useEffect(() => {
    const UPlot = window.uPlot
    if (!UPlot || !box.current) return
    const width = box.current.clientWidth || 600
    const stroke = css('--accent')
    const grid = { stroke: css('--grid'), width: 1 }
    const axis = { stroke: css('--muted'), grid, ticks: grid }
    const stepOf = (u) => step ?? (days ? DAY_SECONDS : ((u.data[0][1] - u.data[0][0]) || 1))
    // Bars (and days) sit centred on their x value: the range is the data's, padded by half a step
    // so the end ones show whole (from the data: uPlot widens a single time point's range by itself).
    const padded = (u, min, max) => {
      const xs = u.data[0]
      if (!xs?.length) return [min, max]
      const half = stepOf(u) / 2
      return [xs[0] - half, xs[xs.length - 1] + half]
    }
    // One label per day, under its bar, as many as fit (today's always).
    const daySplits = (u) => {
      const xs = u.data[0]
      const every = Math.max(1, Math.ceil(xs.length / Math.max(1, Math.floor(u.width / 64))))
      return xs.filter((x, i) => (xs.length - 1 - i) % every === 0)
    }
    const xAxis = days
      ? { ...axis, splits: daySplits, values: (u, vals) => vals.map(dayLabel) }
      : xFormat ? { ...axis, values: (u, vals) => vals.map(xFormat) } : axis
    const opts = {
      width,
      height,
      legend: { show: false },
      cursor: { drag: { x: false, y: false } },
      scales: {
        x: bars || days ? { time: xTime, range: padded } : { time: xTime },
        // Amounts and counts start at zero, or bars would exaggerate differences.
        y: { range: (u, min, max) => [0, max > 0 ? max * 1.1 : 1] },
      },
      axes: [
        xAxis,
        { ...axis, size: yAxisSize, values: (u, vals) => vals.map(yFormat) },
      ],
      hooks: {
        setScale: [(u, key) => {
          if (key !== 'x' || !figure.current || u.scales.x.min == null) return
          const iso = (v) => (xTime ? new Date(v * 1000).toISOString() : String(v))
          figure.current.dataset.xFrom = iso(u.scales.x.min)
          figure.current.dataset.xTo = iso(u.scales.x.max)
        }],
      },
      series: [{}, ...series.map((s, i) => ({
        label: s.label,
        stroke: s.stroke || (i === 0 ? stroke : css('--danger')),
        width: 2,
        fill: bars ? (s.stroke || stroke) + '99' : (s.stroke || stroke) + '22',
        points: { show: false },
        paths: bars ? UPlot.paths.bars({ size: [0.7, 40] }) : undefined,
        value: (u, v) => (v === null ? '—' : yFormat(v)),
      }))],
    }
    plot.current = new UPlot(opts, data, box.current)
    const ro = new window.ResizeObserver(() => { if (box.current && plot.current) plot.current.setSize({ width: box.current.clientWidth, height }) })
    ro.observe(box.current)
    return () => { ro.disconnect(); plot.current?.destroy(); plot.current = null }
  }, [series.length, bars, height, days, step])
  useEffect(() => { plot.current?.setData(data) }, [data])
  const points = data[0]?.length || 0
  const total = series.map((s, i) => (data[i + 1] || []).reduce((a, b) => a + (b || 0), 0))
  return html`<figure class="chart" ref=${figure} data-points=${points}>
    <div ref=${box} class="chart-box" role="img" aria-label=${`${label}: ${plural(points, 'point')}, total ${total.map(yFormat).join(', ')}`}></div>
    <figcaption>${label}</figcaption>
  </figure>`
}

/**
 * What an event is, as a person looks for it: the OpenTelemetry span name when it came by OTLP
 * (`chat gpt-4o`, `execute_tool web_search`), else the name the project's client gives a span
 * (`metadata.spanName`), else the tool it ran, else its type.
 */
export function spanName (e) {
  const otel = e.metadata?.otel?.name
  const given = e.metadata?.spanName
  return (typeof otel === 'string' && otel) || (typeof given === 'string' && given.trim()) || e.toolExecuted || e.type
}

/** The model and the tool of an event where its name does not already say them (as words of it). */
export function spanFacts (e) {
  const words = spanName(e).split(/\s+/)
  const says = (part) => {
    const wanted = String(part).split(/\s+/)
    return words.some((_, i) => wanted.every((w, j) => words[i + j] === w))
  }
  return [
    e.model && !says(e.model) ? e.model : null,
    e.toolExecuted && !says(e.toolExecuted) ? e.toolExecuted : null,
  ].filter(Boolean)
}

/** The first words of a text, on one line, with an ellipsis when cut: firstWords('Compare the two plans and pick', 3) → "Compare the two…". */
export function firstWords (text, n = 8) {
  const words = String(text ?? '').trim().split(/\s+/).filter(Boolean)
  return words.length > n ? `${words.slice(0, n).join(' ')}…` : words.join(' ')
}

/** A name that may be long (an agent, a model): on one line, cut with an ellipsis, whole in its tooltip. */
export const Name = ({ text, children, mono }) => html`<span class=${`name${mono ? ' mono' : ''}`} title=${text}>${children ?? text}</span>`

/** A link to an agent, by name when it is known. */
export const AgentLink = ({ agent }) => agent.id
  ? html`<a href=${`#/agents/${encodeURIComponent(agent.id)}`} title=${agent.displayName || agent.id}>${agent.displayName || agent.id}</a>`
  : html`<span class="muted">—</span>`
