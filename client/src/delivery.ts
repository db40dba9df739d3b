/** One event's answer inside a 207: 202 with its ids, or the status and error body it alone would have got. */
export interface ItemResult { status: number; eventId?: string; error?: string; reason?: string; message?: string; details?: unknown }

/** What one POST of a batch came to. */
export type Attempt =
  /** The batch was answered (207): one result per event, in order. */
  | { kind: 'answered'; results: ItemResult[]; retryAfterMs: number | undefined; replayed: boolean }
  /** Nothing was stored; the same body may be sent again under the same key. */
  | { kind: 'retry'; reason: string; retryAfterMs: number | undefined }
  /** 413: the body is over the service's limit; split it. */
  | { kind: 'too_large' }
  /** Refused as a whole for a reason a retry cannot change (401, 403, 400, 422, ...). */
  | { kind: 'refused'; status: number; reason: string }

/** Statuses whose request stored nothing and may succeed later (408, 409 key in flight, 429, 5xx but 501/505). */
export function isRetryable (status: number): boolean {
  return status === 408 || status === 409 || status === 429 || (status >= 500 && status !== 501 && status !== 505)
}

/** `Retry-After` as milliseconds: delay-seconds or an HTTP date; undefined when absent or unreadable. */
export function parseRetryAfter (value: string | null, now = Date.now()): number | undefined {
  if (value === null || value.trim() === '') return undefined
  if (/^\s*\d+\s*$/.test(value)) return Number(value) * 1000
  const at = Date.parse(value)
  return Number.isNaN(at) ? undefined : Math.max(0, at - now)
}

export interface PostOptions {
  fetch: typeof fetch
  url: string
  apiKey: string
  body: string
  idempotencyKey: string
  timeoutMs: number
  /** Keeps the timeout timer from holding a Node process open when nothing waits for the answer. */
  unref: boolean
  /** Aborts the request (the client gave up: shutdown() timed out). */
  signal?: AbortSignal
}

/**
 * POSTs one batch body and classifies the answer. Never throws. The timeout and the client's own
 * abort end the wait whether or not `fetch` heeds the signal (a wrapper may not pass it on): the
 * request is then abandoned, and its batch retried under the same key.
 */
export async function postBatch (o: PostOptions): Promise<Attempt> {
  const abort = new AbortController()
  let gaveUp: () => void = () => {}
  const abandoned = new Promise<never>((_resolve, reject) => { gaveUp = () => reject(new Error('abandoned')) })
  abandoned.catch(() => {})
  const stop = () => {
    abort.abort()
    gaveUp()
  }
  const timer = setTimeout(stop, o.timeoutMs)
  if (o.unref) (timer as { unref?: () => void }).unref?.()
  o.signal?.addEventListener('abort', stop)
  try {
    const answer = (async () => {
      const res = await o.fetch(o.url, {
        method: 'POST',
        headers: { authorization: `Bearer ${o.apiKey}`, 'content-type': 'application/json', 'idempotency-key': o.idempotencyKey },
        body: o.body,
        signal: abort.signal,
        // A redirect would turn the POST into a GET elsewhere: it is an answer of its own, said as one.
        redirect: 'manual',
      })
      return { res, text: await res.text() }
    })()
    answer.catch(() => {})
    const { res, text } = await Promise.race([answer, abandoned])
    if ((res.status >= 300 && res.status < 400) || res.type === 'opaqueredirect') {
      return { kind: 'refused', status: res.status, reason: `redirected_${res.status}${res.headers.get('location') ? ` to ${res.headers.get('location')}` : ''}: set baseUrl to the service's own address` }
    }
    const retryAfterMs = parseRetryAfter(res.headers.get('retry-after'))
    if (res.status === 207 || (res.status >= 200 && res.status < 300)) {
      const results = readResults(text)
      if (results) return { kind: 'answered', results, retryAfterMs, replayed: res.headers.get('idempotent-replayed') === 'true' }
      return { kind: 'retry', reason: `unreadable_${res.status}`, retryAfterMs }
    }
    if (res.status === 413) return { kind: 'too_large' }
    if (isRetryable(res.status)) return { kind: 'retry', reason: `http_${res.status}`, retryAfterMs }
    return { kind: 'refused', status: res.status, reason: errorCode(text) ?? `http_${res.status}` }
  } catch (err) {
    if (abort.signal.aborted) return { kind: 'retry', reason: 'timeout', retryAfterMs: undefined }
    return { kind: 'retry', reason: `network_error (${networkCause(err)})`, retryAfterMs: undefined }
  } finally {
    clearTimeout(timer)
    o.signal?.removeEventListener('abort', stop)
  }
}

/** What a failed fetch says of its cause: `ENOTFOUND no-such-host.invalid`, `ECONNREFUSED 127.0.0.1:1`, … */
function networkCause (err: unknown): string {
  const cause = (err as { cause?: { code?: unknown; message?: unknown } } | null)?.cause
  const text = typeof cause?.message === 'string' && cause.message ? cause.message : err instanceof Error ? err.message : String(err)
  const code = typeof cause?.code === 'string' ? cause.code : ''
  return (code && !text.includes(code) ? `${code}: ${text}` : text).slice(0, 200)
}

function readResults (text: string): ItemResult[] | undefined {
  try {
    const body = JSON.parse(text) as { results?: unknown }
    return Array.isArray(body.results) ? body.results as ItemResult[] : undefined
  } catch {
    return undefined
  }
}

function errorCode (text: string): string | undefined {
  try {
    const body = JSON.parse(text) as { error?: unknown; reason?: unknown }
    if (typeof body.error !== 'string') return undefined
    return typeof body.reason === 'string' ? `${body.error}:${body.reason}` : body.error
  } catch {
    return undefined
  }
}

/**
 * The wait before retry number `attempt` (1, 2, ...): exponential from `baseMs`, capped at `maxMs`,
 * with "equal jitter" (half fixed, half random, so clients that failed together spread out and none
 * retries at once); never less than the server's `Retry-After` (capped at `maxMs` too), to which up
 * to a fifth of it is added at random: a fleet told the same `Retry-After` does not come back at
 * the same instant.
 */
export function backoffMs (attempt: number, baseMs: number, maxMs: number, retryAfterMs: number | undefined, random = Math.random): number {
  const exp = Math.min(maxMs, baseMs * 2 ** (attempt - 1))
  const jittered = exp / 2 + random() * exp / 2
  if (retryAfterMs === undefined || retryAfterMs <= 0) return jittered
  const told = Math.min(retryAfterMs, maxMs)
  return Math.max(jittered, told + random() * told / 5)
}
