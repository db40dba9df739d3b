import type { FastifyBaseLogger, FastifyReply } from 'fastify'
import { HttpError } from '../http-error.ts'
import { parseLiveId } from '../domain/live-events.ts'
import type { SearchFilters } from '../domain/search-filters.ts'
import type { LiveHub } from './live-hub.ts'
import { LiveStream, type LiveStreamOptions } from './live-stream.ts'

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
  /** The names of the user's agents now, and how to read them again (for agents created later). */
  names: ReadonlyMap<string, string>
  namesOf: () => Promise<ReadonlyMap<string, string>>
}

/**
 * The live tails this instance serves (docs/api.md#live-tail): opens each stream (within the limits
 * per user and in all, so memory is bounded by maxStreams × bufferBytes), resumes it from a
 * Last-Event-ID, and ends every stream when the instance closes.
 */
export class LiveTail {
  private readonly streams = new Set<LiveStream>()
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
    const stream = new LiveStream(res, req.filters, req.names, req.namesOf, this.limits)
    this.streams.add(stream)
    this.perUser.set(req.userId, mine + 1)
    let stop: (() => void) | null = null
    const ended = () => {
      if (!this.streams.delete(stream)) return
      const left = (this.perUser.get(req.userId) ?? 1) - 1
      if (left > 0) this.perUser.set(req.userId, left)
      else this.perUser.delete(req.userId)
      stop?.()
      stream.close()
    }
    res.on('close', ended)
    res.on('error', ended)
    try {
      stop = await this.hub.listen(req.userId, (batch) => stream.push(batch))
      if (stream.closed || !this.streams.has(stream)) {
        stop()
        return
      }
      stream.write(`retry: ${this.limits.retryMs}\n\n`)
      if (after) await stream.replay((entry, count, inclusive) => this.hub.replay(req.userId, entry, count, inclusive), after)
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

  /** Ends every stream (the instance is closing): readers reconnect to another one. */
  closeAll (): void {
    for (const stream of [...this.streams]) stream.close()
  }
}
