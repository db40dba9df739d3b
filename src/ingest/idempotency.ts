import { createHash, randomBytes } from 'node:crypto'
import { promisify } from 'node:util'
import { deflateRaw, inflateRaw } from 'node:zlib'
import type { FastifyRequest, onSendHookHandler, preHandlerHookHandler } from 'fastify'
import type { Result } from 'ioredis'
import { HttpError } from '../http-error.ts'
import type { BestEffortRedis } from './best-effort-redis.ts'
import type { KeyIdentity } from '../storage/keys-repository.ts'

/** The request header (IETF httpapi draft "The Idempotency-Key HTTP Header Field", as Stripe uses it). */
const IDEMPOTENCY_KEY_HEADER = 'idempotency-key'
/** Set on an answer replayed from the record of an earlier request with the same key. */
const REPLAYED_HEADER = 'idempotent-replayed'

const deflate = promisify(deflateRaw)
const inflate = promisify(inflateRaw)

interface IdempotencyOptions {
  /** REDIS_PREFIX. */
  prefix: string
  /** How long an answer is kept and replayed (IDEMPOTENCY_WINDOW_HOURS). */
  windowMs: number
  /** How long a request under way holds its key, unless it finishes sooner (after a crash: then free again). */
  inFlightMs: number
}

/**
 * What to do with a request that carries a key: run it (and record its answer when `recorded`,
 * handing `token` back to `finish`), or answer it as the first time.
 */
export type Begun =
  | { kind: 'run'; recorded: false }
  | { kind: 'run'; recorded: true; token: string }
  | { kind: 'replay'; status: number; retryAfter: string | undefined; body: string }

/**
 * Records the answer of a request. KEYS: the record; ARGV: the in-flight record the request took,
 * the done record ('' to free the key), the window, the start of an in-flight record of the same
 * request (`p <fingerprint> `). A request that outlived its hold may find the key free, or taken by
 * a retry: a 2xx is still recorded (its events were stored: its retries are replayed), unless an
 * answer is there already (the first recorded is the one replayed); a failure frees the key only
 * while it holds it, never a retry's hold or answer.
 */
const FINISH = `
local held = redis.call('GET', KEYS[1])
if ARGV[2] == '' then
  if held == ARGV[1] then redis.call('DEL', KEYS[1]) end
elseif not held or string.sub(held, 1, #ARGV[4]) == ARGV[4] then
  redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
end
return 0
`

declare module 'ioredis' {
  interface RedisCommander<Context> {
    idempotencyFinish(key: string, taken: string, record: string | Buffer, windowMs: number, sameRequest: string): Result<number, Context>
  }
}

/**
 * The records of Idempotency-Key requests, in Redis, shared by every instance: one per (user, key),
 * first "in flight" (for `inFlightMs`, with the fingerprint of the request and a token of its own,
 * so that a request slower than its hold frees neither a retry's hold nor its answer), then, once answered with a 2xx, "done" with that answer's status and body (deflated:
 * a batch's 207 compresses about tenfold) for the window. A request with the key of a done record gets its answer again; with the
 * key of a record in flight, 409; with the key of a record of another request (another body or
 * route), 422. An answer that is not a 2xx stored nothing, so its record is deleted and a retry
 * runs again: a 429, a 503 or a 400 never poisons a key.
 *
 * Redis out of reach (one warning, see BestEffortRedis): the request runs unrecorded, and a retry
 * of it during the outage is stored again (at least once).
 */
export class IdempotencyStore {
  constructor (private readonly redis: BestEffortRedis, private readonly opts: IdempotencyOptions) {
    redis.redis.defineCommand('idempotencyFinish', { numberOfKeys: 1, lua: FINISH })
  }

  /** Takes `key` for a request of `userId` (or a publishable key's scope, see scopeOf) whose fingerprint is `fingerprint`; throws 409 or 422 (see the class). */
  async begin (userId: string, key: string, fingerprint: string): Promise<Begun> {
    const token = randomBytes(9).toString('base64url')
    const held = await this.redis.run((redis) => redis.setBuffer(this.keyOf(userId, key), inFlightRecord(fingerprint, token), 'PX', this.opts.inFlightMs, 'NX', 'GET'))
    if (held === undefined) return { kind: 'run', recorded: false }
    if (held === null) return { kind: 'run', recorded: true, token }
    const record = parseRecord(held)
    if (record.fingerprint !== fingerprint) throw keyReused()
    if (record.state === 'in_flight') throw keyInFlight()
    return { kind: 'replay', status: record.status, retryAfter: record.retryAfter, body: (await inflate(record.body)).toString('utf8') }
  }

  /**
   * Records the answer of a request that `begin` let run (with `token`): kept when a 2xx, else the
   * key is freed; unless another request took the key meanwhile (see FINISH). Never throws.
   */
  async finish (userId: string, key: string, fingerprint: string, token: string, answer: Answer): Promise<void> {
    const { status, body, retryAfter } = answer
    const redisKey = this.keyOf(userId, key)
    const taken = inFlightRecord(fingerprint, token)
    const sameRequest = `p ${fingerprint} `
    if (status < 200 || status > 299 || body === null) {
      await this.redis.run((redis) => redis.idempotencyFinish(redisKey, taken, '', this.opts.windowMs, sameRequest))
      return
    }
    // Level 1: a 500-event 207 comes out as small as at the default level 6, in half the time (0.4 ms).
    const header = `d ${status} ${fingerprint}${retryAfter === undefined ? '' : ` ${retryAfter}`}\n`
    const record = Buffer.concat([Buffer.from(header), await deflate(body, { level: 1 })])
    await this.redis.run((redis) => redis.idempotencyFinish(redisKey, taken, record, this.opts.windowMs, sameRequest))
  }

  private keyOf (userId: string, key: string): string {
    return `${this.opts.prefix}idem:${userId}:${key}`
  }
}

/** An answer as sent: its status, its serialized body (null when not a string) and its Retry-After (a 207 may carry one). */
export interface Answer { status: number; body: string | null; retryAfter: string | undefined }

type IdempotencyRecord =
  | { state: 'in_flight'; fingerprint: string }
  | { state: 'done'; fingerprint: string; status: number; retryAfter: string | undefined; body: Buffer }

/** The record of a request in flight: its fingerprint and its token. */
function inFlightRecord (fingerprint: string, token: string): string {
  return `p ${fingerprint} ${token}\n`
}

/**
 * A record as stored: a header line, `p <fingerprint> <token>` or `d <status> <fingerprint>
 * [<retry-after>]`, then the deflated body.
 */
function parseRecord (stored: Buffer): IdempotencyRecord {
  const end = stored.indexOf(10)
  const [state, a, b, c] = stored.subarray(0, end).toString('latin1').split(' ')
  if (state === 'd') return { state: 'done', status: Number(a), fingerprint: b!, retryAfter: c, body: stored.subarray(end + 1) }
  return { state: 'in_flight', fingerprint: a! }
}

function keyInFlight (): HttpError {
  return new HttpError(409, 'conflict', {
    reason: 'idempotency_key_in_flight',
    message: 'a request with this Idempotency-Key is still under way; retry once it is answered',
  })
}

function keyReused (): HttpError {
  return new HttpError(422, 'idempotency_key_reused', {
    message: 'this Idempotency-Key was used for another request (another body or path) within the window; use a new key for a new request',
  })
}

/**
 * What identifies a request under its key: its route and body, and the agent its API key is bound
 * to (the same body sent with keys bound to two agents stores events of two agents). A batch's body
 * as the text it was parsed from (kept by the body parser), a single event's as its JSON (a retry
 * sends the same).
 */
function fingerprintOf (request: FastifyRequest): string {
  const body = request.jsonItemsText?.text ?? JSON.stringify(request.body)
  const hash = createHash('sha256').update(`${request.routeOptions.url}\n`).update(body)
  const bound = request.apiKey.agentId
  // An unbound key's fingerprint is as before bound keys counted, so retries across an upgrade replay.
  if (bound !== null) hash.update(`\nbound ${bound}`)
  return hash.digest('base64url')
}

/**
 * Whose records a key's Idempotency-Keys are among: its user's, except a publishable key's, which
 * has records of its own (`<user>:pk:<key id>`): a page holds its key in the open, so its holder
 * must neither probe nor take the keys of the owner's other requests; and a key bound to an agent,
 * whose records are its agent's (`<user>:ag:<agent id>`): it may not act for another agent, so it
 * must not take the keys of another agent's requests either (their retries would get a 422).
 */
function scopeOf (key: KeyIdentity): string {
  if (key.kind === 'publishable') return `${key.userId}:pk:${key.keyId}`
  return key.agentId !== null ? `${key.userId}:ag:${key.agentId}` : key.userId
}

/**
 * The route hooks of Idempotency-Key: `preHandler` answers a retry from its record, or takes the
 * key; `onSend` records the answer as sent (status and serialized body). A request without the
 * header costs one header lookup in each: no Redis command, no promise.
 */
export function idempotencyHooks (store: IdempotencyStore): { preHandler: preHandlerHookHandler; onSend: onSendHookHandler } {
  const taken = new WeakMap<FastifyRequest, { userId: string; key: string; fingerprint: string; token: string }>()
  return {
    preHandler (request, reply, done) {
      const key = request.headers[IDEMPOTENCY_KEY_HEADER]
      if (typeof key !== 'string') return done()
      const userId = scopeOf(request.apiKey)
      const fingerprint = fingerprintOf(request)
      store.begin(userId, key, fingerprint).then((begun) => {
        if (begun.kind === 'run') {
          if (begun.recorded) taken.set(request, { userId, key, fingerprint, token: begun.token })
          return done()
        }
        // Answered here: the handler does not run (and `done` is not called, as Fastify asks of a hook that replies).
        reply.code(begun.status).type('application/json; charset=utf-8').header(REPLAYED_HEADER, 'true')
        if (begun.retryAfter !== undefined) reply.header('retry-after', begun.retryAfter)
        reply.send(begun.body)
      }, done)
    },
    onSend (request, reply, payload, done) {
      const held = taken.get(request)
      if (held === undefined) return done(null, payload)
      taken.delete(request)
      const retryAfter = reply.getHeader('retry-after')
      const answer = { status: reply.statusCode, body: typeof payload === 'string' ? payload : null, retryAfter: retryAfter === undefined ? undefined : String(retryAfter) }
      store.finish(held.userId, held.key, held.fingerprint, held.token, answer)
        .then(() => done(null, payload), (err: Error) => done(err))
    },
  }
}
