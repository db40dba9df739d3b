import type { FastifyBaseLogger, FastifyReply } from 'fastify'
import { HttpError } from '../http-error.ts'
import { parseLiveId } from '../domain/live-events.ts'
import type { SearchFilters } from '../domain/search-filters.ts'
import type { LiveHub } from './live-hub.ts'
import { LiveStream, type LiveStreamOptions, type StreamAgents } from './live-stream.ts'

export interface LiveTailLimits extends LiveStreamOptions {
  /** Streams open on this instance at most, all users together. */
  maxStreams: number
  /** Streams of one user on this instance at most. */
  maxStreamsPerUser: number
  /** The reconnection delay a reader is told (SSE `retry:`, ms). */
  retryMs: number
}

/** Who opens a stream, with what. */
export interface StreamRequest {
  userId: string
  filters: SearchFilters
  /** The Last-Event-ID the reader sent, if any. */
  lastEventId: string | undefined
  /** The user's agents now, and how to read them again (for agents created, renamed or deleted later). */
  agents: StreamAgents
  agentsOf: () => Promise<StreamAgents>
  /** When the caller's token expires (unix ms): the stream ends then, telling the reader why. */
  expiresAt?: number
}

/** The longest a timer can wait (setTimeout's limit, about 24.8 days): a later expiry is waited for in steps. */
const MAX_TIMER_MS = 2 ** 31 - 1

/**
 * The live tails this instance serves (docs/api.md#live-tail): opens each stream (within the limits
 * per user and in all, so memory is bounded by maxStreams × bufferBytes), resumes it from a
 * Last-Event-ID, and ends every stream when the instance closes.
 */
export class LiveTail {
  /** Each open stream and its user. */
  private readonly streams = new Map<LiveStream, string>()
  private readonly perUser = new Map<string, number>()

  constructor (private readonly hub: LiveHub, private readonly limits: LiveTailLimits, private readonly log: FastifyBaseLogger) {}

  get open (): number {
    return this.streams.size
  }

  /** Checks the limits (a 429 or 503 answered as JSON), then takes over the response and streams until the reader goes. */
  async serve (reply: FastifyReply, req: StreamRequest): Promise<void> {
    const after = parseLiveId(req.lastEventId)
    // An id after every one the stream gave would resume from nowhere, silently: refused, as a
    // malformed one is. Asked first: from the limits' checks to the stream's count nothing waits.
    if (after && !(await this.hub.couldHaveGiven(req.userId, after))) {
      throw new HttpError(400, 'validation_failed', {
        message: 'the Last-Event-ID header is not valid',
        details: [{ path: ['Last-Event-ID'], message: 'must be an id this stream gave: it is after the newest one' }],
      })
    }
    if (this.streams.size >= this.limits.maxStreams) {
      throw new HttpError(503, 'unavailable', { reason: 'live_streams_full', message: `this instance serves ${this.limits.maxStreams} live streams at most` }, { 'retry-after': '5' })
    }
    const mine = this.perUser.get(req.userId) ?? 0
    if (mine >= this.limits.maxStreamsPerUser) {
      throw new HttpError(429, 'rate_limited', { reason: 'too_many_streams', message: `at most ${this.limits.maxStreamsPerUser} live streams of one user on one instance` }, { 'retry-after': '5' })
    }
    reply.hijack()
    const res = reply.raw
    // The headers hooks set (CORS, the request id) go out with the stream's own.
    for (const [name, value] of Object.entries(reply.getHeaders())) if (value !== undefined) res.setHeader(name, value)
    res.writeHead(200, {
      'content-type': 'text/event-stream; charset=utf-8',
      'cache-control': 'no-cache, no-transform',
      'x-accel-buffering': 'no',
    })
    const stream = new LiveStream(res, req.filters, req.agents, req.agentsOf, this.limits)
    this.streams.set(stream, req.userId)
    this.perUser.set(req.userId, mine + 1)
    let stop: (() => void) | null = null
    let expiry: NodeJS.Timeout | undefined
    const ended = () => {
      if (!this.streams.delete(stream)) return
      clearTimeout(expiry)
      const left = (this.perUser.get(req.userId) ?? 1) - 1
      if (left > 0) this.perUser.set(req.userId, left)
      else this.perUser.delete(req.userId)
      stop?.()
      stream.close()
    }
    res.on('close', ended)
    res.on('error', ended)
    // A stream reads no longer than its token allows: at its expiry it ends, saying so, and the
    // reader's reconnection needs a valid token.
    const expireAt = (at: number) => {
      expiry = setTimeout(() => {
        if (Date.now() < at) return expireAt(at)
        stream.write(`event: error\ndata: ${JSON.stringify({ error: 'unauthorized', reason: 'token_expired', message: 'the token has expired: sign in again' })}\n\n`)
        ended()
      }, Math.min(Math.max(0, at - Date.now()), MAX_TIMER_MS))
      expiry.unref()
    }
    if (req.expiresAt !== undefined) expireAt(req.expiresAt)
    try {
      stop = await this.hub.listen(req.userId, (batch) => stream.push(batch))
      if (stream.closed || !this.streams.has(stream)) {
        stop()
        return
      }
      stream.write(`retry: ${this.limits.retryMs}\n\n`)
      if (after) await stream.replay((entry, count, inclusive, index) => this.hub.replay(req.userId, entry, count, inclusive, index), after)
      if (stream.closed) return
      stream.start()
      // From here on, every event acknowledged on any instance reaches this stream.
      stream.write(': ready\n\n')
    } catch (err) {
      // Redis out of reach: the stream cannot be served; the reader reconnects after `retry`.
      stream.write(`event: error\ndata: ${JSON.stringify({ error: 'unavailable', message: 'the live tail is unavailable; try again shortly' })}\n\n`)
      this.log.warn({ err, userId: req.userId }, 'live tail: a stream could not be opened')
      ended()
    }
  }

  /** The agents of a user (`*`: of every user) changed: their streams read them again before their next batch. */
  agentsChanged (userId: string): void {
    for (const [stream, user] of this.streams) if (userId === '*' || user === userId) stream.agentsChanged()
  }

  /** Ends every stream (the instance is closing): readers reconnect to another one. */
  closeAll (): void {
    for (const stream of [...this.streams.keys()]) stream.close()
  }
}
