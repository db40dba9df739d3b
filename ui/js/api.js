// The only way the UI talks to the service: the public /v1/me/* API with the dashboard token.

const TOKEN_KEY = 'agent-telemetry.token'

/** The token is kept for this tab only (sessionStorage), never in a cookie or localStorage. */
export const token = {
  get: () => sessionStorage.getItem(TOKEN_KEY),
  set: (value) => sessionStorage.setItem(TOKEN_KEY, value),
  clear: () => sessionStorage.removeItem(TOKEN_KEY),
}

/** The claims of a JWT, read without verifying it (the server verifies); null when unreadable. */
export function claimsOf (jwt) {
  try {
    const part = jwt.split('.')[1]
    const json = atob(part.replace(/-/g, '+').replace(/_/g, '/').padEnd(Math.ceil(part.length / 4) * 4, '='))
    return JSON.parse(json)
  } catch {
    return null
  }
}

/** Why a token would be refused before asking the server, or null. */
export function tokenProblem (jwt) {
  const claims = claimsOf(jwt)
  if (!claims) return 'That is not a dashboard token (a JWT has three parts separated by dots).'
  if (typeof claims.exp === 'number' && claims.exp * 1000 <= Date.now()) return 'That token has expired. Make a new one with npm run token.'
  return null
}

export class ApiError extends Error {
  constructor (status, body) {
    super(describe(status, body))
    this.status = status
    this.body = body
  }
}

/**
 * Whether a failure would be the same if asked again: a 4xx other than 401 (signs out) and 429
 * (retried after a wait), such as a 400 for a search the service refuses. Shown, never retried.
 */
export function isPermanent (err) {
  return err?.status >= 400 && err.status < 500 && err.status !== 401 && err.status !== 429
}

function describe (status, body) {
  const code = body && (body.reason || body.error)
  if (status === 0) return body?.message || 'The service cannot be reached.'
  if (status === 429) return 'Too many requests; retrying shortly.'
  if (status === 503) return 'The service is briefly unavailable; retrying shortly.'
  if (body && Array.isArray(body.details) && body.details.length) {
    return body.details.map((d) => `${(d.path || []).join('.') || 'body'}: ${d.message}`).join('; ')
  }
  return code ? `${status} ${code.replace(/_/g, ' ')}` : `request failed (${status})`
}

/** Called when the server refuses the token (expired or revoked): the app returns to sign-in. */
let onUnauthorized = () => {}
export function whenUnauthorized (fn) { onUnauthorized = fn }

/** Whether a query value goes in the URL: an empty one is left out, but for `meta.<path>`, where it is the filter (an empty value). */
function sent (key, value) {
  return value !== undefined && value !== null && (value !== '' || key.startsWith('meta.'))
}

/** fetch with the token; JSON in and out (query values may be arrays); 401 signs out; other failures throw ApiError. */
export async function api (path, { method = 'GET', body, query } = {}) {
  const url = new URL(path, window.location.origin)
  // A list is a repeated parameter (`type=tool&type=error`).
  for (const [k, v] of Object.entries(query || {})) {
    for (const x of [].concat(v)) if (sent(k, x)) url.searchParams.append(k, String(x))
  }
  const headers = { authorization: `Bearer ${token.get() || ''}` }
  if (body !== undefined) headers['content-type'] = 'application/json'
  let res
  try {
    res = await fetch(url, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) })
  } catch (err) {
    // The browser's own words ("Failed to fetch", "NetworkError when attempting to fetch resource") say less.
    if (err?.name === 'AbortError') throw err
    throw new ApiError(0, { message: 'The service cannot be reached (it may be restarting or your network is down); this page retries on its own.' })
  }
  const text = await res.text()
  let data = null
  try { data = text ? JSON.parse(text) : null } catch { data = null }
  if (res.status === 401) {
    const t = token.get()
    const expired = t && claimsOf(t)?.exp * 1000 <= Date.now()
    onUnauthorized(expired ? 'Your token has expired. Sign in with a new one.' : 'The service refused the token. Sign in again.')
    throw new ApiError(401, data)
  }
  if (!res.ok) throw new ApiError(res.status, data)
  return data
}

/**
 * Reads a Server-Sent Events stream of the API (GET /v1/me/events/stream) with fetch, since a
 * browser's EventSource cannot send the token: `onMessage({ event, id, data })` for each message,
 * `onReady()` at the server's `: ready` comment (from then on nothing acknowledged is missed).
 * Resolves when the server ends the stream; a 401 signs out as api() does; other refusals throw ApiError.
 */
export async function readStream (path, { query, lastEventId, signal, onMessage, onReady = () => {} }) {
  const url = new URL(path, window.location.origin)
  for (const [k, v] of Object.entries(query || {})) {
    for (const one of [].concat(v)) if (sent(k, one)) url.searchParams.append(k, String(one))
  }
  const headers = { authorization: `Bearer ${token.get() || ''}`, accept: 'text/event-stream' }
  if (lastEventId) headers['last-event-id'] = lastEventId
  const res = await fetch(url, { headers, signal })
  if (!res.ok) {
    const data = await res.json().catch(() => null)
    if (res.status === 401) onUnauthorized('The service refused the token. Sign in again.')
    throw new ApiError(res.status, data)
  }
  const reader = res.body.pipeThrough(new TextDecoderStream()).getReader()
  let text = ''
  for (;;) {
    const { value, done } = await reader.read()
    if (done) return
    text += value
    let end
    while ((end = text.indexOf('\n\n')) !== -1) {
      const message = { event: 'message', id: null, data: '' }
      let isMessage = false
      for (const line of text.slice(0, end).split('\n')) {
        if (line === ': ready') onReady()
        const colon = line.indexOf(': ')
        const field = colon === -1 ? line : line.slice(0, colon)
        const v = colon === -1 ? '' : line.slice(colon + 2)
        if (field === 'event') message.event = v
        else if (field === 'id') message.id = v
        else if (field === 'data') message.data += v
        else continue
        isMessage = true
      }
      text = text.slice(end + 2)
      if (isMessage) onMessage(message)
    }
  }
}

/**
 * Reads a list and follows `nextCursor` (added to list bodies by paging) while `more(page)` says so,
 * at most `maxPages` requests. Works the same against a server without paging (one request).
 */
export async function listAll (path, key, { query = {}, maxPages = 5, more = () => true } = {}) {
  const items = []
  let cursor
  for (let i = 0; i < maxPages; i++) {
    const page = await api(path, { query: { ...query, cursor } })
    const list = page?.[key] || []
    items.push(...list)
    cursor = page?.nextCursor
    if (!cursor || list.length === 0 || !more(list)) break
  }
  return items
}

/**
 * An agent reference as the API gives it: a plain id today, `{ id, displayName }` objects in the
 * newer bodies. Always returns `{ id, displayName }` (displayName null when unknown).
 */
export function agentRef (value, names) {
  if (value && typeof value === 'object') return { id: value.id ?? null, displayName: value.displayName ?? names?.get(value.id) ?? null }
  if (typeof value === 'string') return { id: value, displayName: names?.get(value) ?? null }
  return { id: null, displayName: null }
}

/** The agent of an event, alert or session row, whichever field the server used. */
export function agentOf (row, names) {
  return agentRef(row?.agent ?? row?.agentId, names)
}

/** The agents of a session, trace or cluster (ids or objects). */
export function agentsOf (row, names) {
  return (row?.agents || []).map((a) => agentRef(a, names))
}
