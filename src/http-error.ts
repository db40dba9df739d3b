import type { ErrorDetail } from './validation.ts'

/**
 * An error that becomes an HTTP response: a status, a machine-readable `error` code and optional
 * extra fields (reason, details). Thrown anywhere, turned into JSON by the one error handler.
 */
export class HttpError extends Error {
  constructor (
    readonly statusCode: number,
    readonly code: string,
    readonly extra: Record<string, unknown> = {},
    readonly headers: Record<string, string> = {},
  ) {
    super(code)
  }

  body (): Record<string, unknown> {
    return { error: this.code, ...this.extra }
  }
}

export const unauthorized = (reason?: string) =>
  new HttpError(401, 'unauthorized', reason ? { reason } : {})
export const forbidden = (reason: string) => new HttpError(403, 'forbidden', { reason })
export const notFound = () => new HttpError(404, 'not_found')
export const invalidCursor = () =>
  new HttpError(400, 'invalid_cursor', { message: 'cursor was not handed out by this list; start again without it' })
/** A 409: `reason` is the machine-readable cause, `message` says what state stood in the way and what would work. */
export const conflict = (reason: string, message: string, extra: Record<string, unknown> = {}) =>
  new HttpError(409, 'conflict', { reason, message, ...extra })
/** A 400 of a request's body, naming each field at fault (as the schema's own refusals do). */
export const validationFailed = (details: ErrorDetail[]) => new HttpError(400, 'validation_failed', { message: 'the body is not valid', details })
/** A 400 for text Postgres cannot store (a NUL character, an unpaired UTF-16 surrogate). */
export const invalidText = () =>
  new HttpError(400, 'invalid_text', { message: 'a value in the request is not valid text (NUL characters and unpaired UTF-16 surrogates are refused)' })
/** A 400 of a request's query string, naming each parameter at fault. */
export const querystringInvalid = (details: ErrorDetail[]) =>
  new HttpError(400, 'validation_failed', { message: 'the querystring is not valid', details })
/** A body (or a batch's item, which may be no larger than a body of its own) over `limit` bytes. */
export const payloadTooLarge = (limit: number) => new HttpError(413, 'payload_too_large', { message: `request body exceeds ${limit} bytes` })
export const agentDeleted = () => new HttpError(410, 'agent_deleted')
export const rateLimited = (retryAfterSeconds: number) =>
  new HttpError(429, 'rate_limited', {}, { 'retry-after': String(Math.max(1, Math.ceil(retryAfterSeconds))) })
/**
 * A 503 of a `/v1/me` read whose caller's acknowledged events are not yet in ClickHouse when
 * READ_YOUR_WRITES_TIMEOUT_MS runs out: an answer without them would say they are not there.
 */
export const writesNotYetReadable = (timeoutMs: number) => new HttpError(503, 'writes_not_yet_readable', {
  message: `events this instance acknowledged to you are not yet readable (still on their way to ClickHouse after ${timeoutMs} ms); retry shortly`,
}, { 'retry-after': '1' })
