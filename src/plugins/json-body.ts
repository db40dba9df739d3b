import fp from 'fastify-plugin'
import type { FastifyRequest } from 'fastify'
import { HttpError, payloadTooLarge, validationFailed } from '../http-error.ts'
import type { ErrorDetail } from '../validation.ts'
import { inputProblems, mayBreakInputRules, MAX_DEPTH, mergeProblems, numberLiteralProblems } from '../domain/input-rules.ts'

declare module 'fastify' {
  interface FastifyContextConfig {
    /**
     * The body key holding an array of independent items (the batch's `events`): each item obeys the
     * input rules on its own (depth counted from the item) and the app's `bodyLimit` (a body of its own
     * may be no larger), and its refusal is left for the handler to ask with `request.itemRefusal(i)`
     * instead of refusing the whole body.
     */
    jsonItems?: string
  }
  interface FastifyRequest {
    /**
     * The refusal of item i of the route's `jsonItems` array, as that item sent alone would get it:
     * 413 when its JSON is over the app's `bodyLimit`, else 400 naming its input-rule problems (paths
     * relative to the item); null when neither.
     */
    itemRefusal(i: number): HttpError | null
    /**
     * The JSON text of a route with `jsonItems`, as parsed into `body` (by JSON.parse, with no
     * reviver, no coercion and no defaults; poisoned keys refuse the body, never removed from it),
     * and the key of its items: null for other routes, bodies that are not JSON, and a parser set to
     * remove poisoned keys.
     */
    jsonItemsText: { text: string; key: string } | null
  }
}

interface Found {
  /** Problems outside the route's items: the request is refused. */
  body: ErrorDetail[]
  /** Problems of item i, paths relative to the item. */
  items: Map<number, ErrorDetail[]>
}

// Items over the app's body limit, by request: only requests whose body is over it have an entry.
const tooLarge = new WeakMap<FastifyRequest, Set<number>>()

// Only requests whose body looked suspicious have an entry.
const found = new WeakMap<FastifyRequest, Found>()

/**
 * The charset a Content-Type names when it is not UTF-8 (`application/json; charset=latin1`), else
 * null. JSON is UTF-8 (RFC 8259), and the body is read as UTF-8 whatever the header says: a body
 * declared in another encoding would have its accented letters turned into U+FFFD without a word.
 */
function foreignCharset (contentType: string | undefined): string | null {
  if (contentType === undefined || !contentType.includes('=')) return null
  // Each parameter in turn (a quoted value whole, so that `x="a;charset=b"` names no charset).
  for (const [, name, quoted, plain] of contentType.matchAll(PARAMETER)) {
    if (name!.toLowerCase() !== 'charset') continue
    const charset = (quoted ?? plain ?? '').replace(/^'(.*)'$/, '$1').trim().toLowerCase()
    return charset === '' || UTF8_CHARSETS.has(charset) ? null : charset.slice(0, 40)
  }
  return null
}

/** The start of the message of that refusal (an OTLP error body tells it apart from a wrong content type by it). */
export const CHARSET_REFUSED = 'send the JSON body as UTF-8'

/** The 415 of a JSON body whose Content-Type names a charset other than UTF-8; null for any other (and for no body). */
export function charsetRefusal (contentType: string | undefined, bodyLength: number): HttpError | null {
  const charset = bodyLength === 0 ? null : foreignCharset(contentType)
  return charset === null ? null : new HttpError(415, 'unsupported_media_type', { message: `${CHARSET_REFUSED} (charset=${charset} is not taken here)` })
}

const PARAMETER = /;\s*([^\s;=]+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^;]*))/g
// UTF-8 by its names, and ASCII, of which it is a superset.
const UTF8_CHARSETS = new Set(['utf-8', 'utf8', 'us-ascii', 'ascii'])

/** Whether a route's body may be left out: it has no body schema, or one that takes null. */
function bodyOptional (schema: unknown): boolean {
  if (schema === undefined) return true
  const type = (schema as { type?: unknown }).type
  return type === 'null' || (Array.isArray(type) && type.includes('null'))
}

/**
 * The JSON body parser: Fastify's own (empty body, invalid JSON, __proto__ and constructor poisoning,
 * body limits unchanged; an empty body is accepted as no body on routes without a body schema) followed by the input rules of src/domain/input-rules.ts. An ordinary body
 * costs a few regex tests on its text; only a suspicious one is walked. Problems outside the route's
 * `jsonItems` refuse the request with 400 validation_failed before validation or any handler runs.
 */
export default fp(async function jsonBody (app) {
  const protoAction = app.initialConfig.onProtoPoisoning ?? 'error'
  const constructorAction = app.initialConfig.onConstructorPoisoning ?? 'error'
  const parse = app.getDefaultJsonParser(protoAction, constructorAction)
  // The body is what JSON.parse makes of the text unless the parser removes poisoned keys from it.
  const keepText = protoAction !== 'remove' && constructorAction !== 'remove'

  // The largest body of a route without a limit of its own: what one item sent alone may be.
  const itemLimit = app.initialConfig.bodyLimit ?? 1_048_576
  app.decorateRequest('itemRefusal', function itemRefusal (this: FastifyRequest, i: number) {
    if (tooLarge.get(this)?.has(i) === true) return payloadTooLarge(itemLimit)
    const problems = found.get(this)?.items.get(i)
    return problems === undefined || problems.length === 0 ? null : validationFailed(problems)
  })
  app.decorateRequest('jsonItemsText', null)

  app.removeContentTypeParser('application/json')
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (request, raw, done) => {
    const text = raw as string
    // A compressed body would read as invalid JSON, and an encoding named but not applied would be
    // taken silently: neither is guessed at. (POST /v1/traces takes gzip, in its own parser.)
    const encoding = request.headers['content-encoding']?.trim().toLowerCase()
    if (encoding !== undefined && encoding !== '' && encoding !== 'identity') {
      done(new HttpError(415, 'unsupported_media_type', { message: `send the JSON body without Content-Encoding (${encoding} is not taken here)` }))
      return
    }
    const refusal = charsetRefusal(request.headers['content-type'], text.length)
    if (refusal !== null) {
      done(refusal)
      return
    }
    // An empty body on a route that takes none (a bare POST to acknowledge, resolve…) or whose body
    // may be left out (its schema takes null: rotate-secret) means no body: clients that send
    // `content-type: application/json` on every request are not refused for it. A route that needs
    // a body still gets Fastify's 400 for an empty one.
    if (text === '' && bodyOptional(request.routeOptions.schema?.body)) {
      done(null, undefined)
      return
    }
    // Fastify's parser answers synchronously, inside its own try: take its result out before going on.
    let error: Error | null = null
    let body: unknown
    parse(request, text, (err, value) => {
      error = err
      body = value
    })
    if (error !== null && (error as { code?: string }).code === 'FST_ERR_CTP_INVALID_JSON_BODY' && isPoisoned(text)) error = poisonedBody()
    if (!error && mayBreakInputRules(text)) found.set(request, check(request, text, body))
    const key = request.routeOptions.config.jsonItems
    if (!error && key !== undefined && overBytes(text, itemLimit)) {
      const over = itemsOverLimit(body, key, itemLimit)
      if (over.size > 0) tooLarge.set(request, over)
    }
    if (!error && keepText && key !== undefined) request.jsonItemsText = { text, key }
    done(error, body)
  })

  // Callback style: no promise for the ordinary body, which has no entry.
  app.addHook('preValidation', (request, _reply, done) => {
    const problems = found.get(request)?.body
    done(problems && problems.length > 0 ? validationFailed(problems) : undefined)
  })
}, { name: 'json-body', dependencies: ['errors'] })

/**
 * The items of `body[key]` whose JSON, written without whitespace, is over `limit` bytes: sent alone,
 * any such item would be over the limit however it was written.
 */
function itemsOverLimit (body: unknown, key: string, limit: number): Set<number> {
  const over = new Set<number>()
  const items = isObject(body) ? body[key] : undefined
  if (!Array.isArray(items)) return over
  items.forEach((item, i) => {
    const json = JSON.stringify(item)
    if (json !== undefined && overBytes(json, limit)) over.add(i)
  })
  return over
}

/** Whether `text` is over `limit` bytes of UTF-8; counted only when its length leaves it possible (3 bytes a UTF-16 unit at most). */
function overBytes (text: string, limit: number): boolean {
  return text.length > limit / 3 && Buffer.byteLength(text) > limit
}

/** The answer to JSON that parses but holds a key the parser refuses as prototype poisoning. */
export const POISONED_KEY_MESSAGE = 'the body holds a __proto__ or constructor.prototype key, which is refused'
const poisonedBody = () => new HttpError(400, 'invalid_json', { message: POISONED_KEY_MESSAGE })

/**
 * Whether `text`, refused by Fastify's parser, is valid JSON refused only for a poisoned key (its
 * parser says no more than "invalid"). Only refused bodies pay for this second parse.
 */
function isPoisoned (text: string): boolean {
  if (!text.includes('__proto__') && !text.includes('prototype') && !text.includes('\\u')) return false
  try {
    JSON.parse(text)
    return true
  } catch {
    return false
  }
}

function check (request: FastifyRequest, text: string, body: unknown): Found {
  const numbers = numberLiteralProblems(text)
  const itemsKey = request.routeOptions.config.jsonItems
  const items = itemsKey !== undefined && isObject(body) ? body[itemsKey] : undefined
  if (!Array.isArray(items)) {
    return { body: mergeProblems(numbers, inputProblems(body, MAX_DEPTH)), items: new Map() }
  }
  // Number problems inside item i belong to that item; the envelope is walked without its items.
  const byItem = new Map<number, ErrorDetail[]>()
  const rest: ErrorDetail[] = []
  for (const p of numbers) {
    const i = p.path[0] === itemsKey ? p.path[1] : undefined
    if (typeof i !== 'number') rest.push(p)
    else byItem.set(i, [...byItem.get(i) ?? [], { path: p.path.slice(2), message: p.message }])
  }
  items.forEach((item, i) => {
    const all = mergeProblems(byItem.get(i) ?? [], inputProblems(item, MAX_DEPTH))
    if (all.length > 0) byItem.set(i, all)
  })
  const envelope = inputProblems({ ...body as Record<string, unknown>, [itemsKey!]: [] }, MAX_DEPTH)
  return { body: mergeProblems(rest, envelope), items: byItem }
}

function isObject (value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === 'object' && !Array.isArray(value)
}
