import { activeSpan, runInSpan, type SpanContext } from './context.js'
import { backoffMs, postBatch, type ItemResult } from './delivery.js'
import { newIdempotencyKey, newSpanId, newTraceId } from './ids.js'
import { plainJson, utf8Length } from './json.js'
import { applyPrivacy, PRIVACY_LEVELS, type PrivacyLevel } from './privacy.js'
import { ItemQueue, type Item } from './queue.js'
import { checkScore, type ScoreFields, type ScoreValue, type TelemetryScore } from './score.js'
import { validateEvent, type Problem } from './validate.js'

export type { TelemetryScore } from './score.js'

/** One event, as the service's schema (schemas/event.ts) describes it. */
export interface TelemetryEvent {
  agentId?: string
  /** ISO 8601 or unix milliseconds; `track()` sets the time of the call when absent. */
  timestamp?: string | number | Date
  type?: 'reasoning' | 'tool' | 'tx' | 'decision' | 'action' | 'error'
  input?: { prompt?: string; context?: Record<string, unknown> }
  reasoning?: string
  toolsConsidered?: string[]
  toolExecuted?: string
  transaction?: string | null
  amount?: { token: string; value: number }
  outcome?: 'pending' | 'success' | 'failed'
  durationMs?: number
  errorMessage?: string
  model?: string
  metadata?: {
    tokensBreakdown?: { inputBase?: number; cacheCreation?: number; cacheRead?: number; output?: number; reasoning?: number }
    traceId?: string
    spanId?: string
    parentSpanId?: string
    provider?: string
    sessionId?: string
    cwd?: string
    git?: Record<string, unknown> | string
    privacyLevel?: PrivacyLevel
    tool?: string
    dedupKey?: string
    [key: string]: unknown
  }
}

/** Why events were dropped; each is a counter in `stats().dropped`. */
export type DropReason =
  /** refused by the client's check against the service's schema and input rules */
  | 'invalid'
  /** one event's JSON is larger than `maxBatchBytes` */
  | 'too_large'
  /** the queue was full (`maxQueue` or `maxQueueBytes`); the oldest queued event is dropped */
  | 'queue_full'
  /** the service refused the event inside a 207 (400, 403, 410): never retried */
  | 'rejected'
  /** the service refused the whole batch (401, 400, 422, ...): never retried */
  | 'refused'
  /** `maxRetries` retries of a batch failed */
  | 'retries_exhausted'
  /** still queued or unanswered when `shutdown()` timed out */
  | 'shutdown'
  /** tracked after `shutdown()` */
  | 'closed'
  /** still queued or unanswered when the Node process exited without `flush()` or `shutdown()` */
  | 'exit'

export const DROP_REASONS: readonly DropReason[] = ['invalid', 'too_large', 'queue_full', 'rejected', 'refused', 'retries_exhausted', 'shutdown', 'closed', 'exit']

/** What `onError` is told: events dropped (with the reason), or a batch being retried. */
export interface TelemetryError {
  reason: DropReason | 'retrying'
  /** how many events (or, with `kind: 'score'`, scores) this is about */
  count: number
  /** what was dropped or retried: events (the default) or scores */
  kind?: 'event' | 'score'
  message: string
  /** for `invalid`: what was wrong, by path; for `rejected`: the service's answer for the event */
  details?: Problem[] | ItemResult
  /** for `rejected` and `refused`: the HTTP status of the service's refusal */
  status?: number
}

export interface AgentTelemetryOptions {
  /** An API key (`vk_…`) from POST /v1/me/keys. */
  apiKey: string
  /** The service's address, e.g. `https://telemetry.example.com`. */
  baseUrl: string
  /** Set on events that carry none (not needed with a key bound to an agent). */
  agentId?: string
  /** What leaves the process: `minimal`, `standard` (default) or `full`; see docs/client.md. */
  privacyLevel?: PrivacyLevel
  /** Queued events that start a batch at once (default 100; a batch carries up to 500). */
  flushAt?: number
  /** The longest an event waits before its batch is sent, in ms (default 1000). */
  flushIntervalMs?: number
  /** Events the queue holds before it drops the oldest (default 10000). */
  maxQueue?: number
  /** Bytes of JSON the queue holds before it drops the oldest (default 16 MiB). */
  maxQueueBytes?: number
  /** Bytes of JSON in one request (default 4 MiB, under the service's 5 MiB batch limit). */
  maxBatchBytes?: number
  /** Bytes of JSON in one event or score (default 1 MiB, the service's `BODY_LIMIT` for one item): a larger one is dropped as `too_large` rather than sent. */
  maxItemBytes?: number
  /** Requests under way at once (default 1: events arrive in order; 1 to 16). More take a busy client's batches to the service side by side. */
  maxInFlight?: number
  /** Retries of one batch before its events are dropped (default 10). */
  maxRetries?: number
  /** First retry delay in ms, doubled each retry, with jitter (default 500). */
  retryBaseMs?: number
  /** Longest retry delay in ms, `Retry-After` included (default 30000). */
  retryMaxMs?: number
  /** How long one request may take before it is abandoned and retried, in ms (default 10000). */
  requestTimeoutMs?: number
  /** Called for every drop and retry; never throws back into the client. Default: a console warning once per reason. */
  onError?: (error: TelemetryError) => void
  /** The fetch to use (default: the global one). */
  fetch?: typeof fetch
}

/** Counters since the client was made. */
export interface TelemetryStats {
  /** events accepted by `track()` and not yet sent, dropped or in a request */
  queued: number
  /** events in the requests under way */
  inFlight: number
  /** events the service acknowledged (202 in the 207) */
  sent: number
  /** requests sent again (network errors, timeouts, 408, 409, 429, 5xx) */
  retries: number
  /** events refused by the burst limit inside a 207 and queued again (under a new key, after Retry-After) */
  limited: number
  /** answers the service replayed for a retried Idempotency-Key (stored once, answered twice) */
  replayed: number
  /** scrubbed values, over all events */
  redactions: number
  dropped: Record<DropReason, number>
  /** the same counters for scores (`score()`), kept apart from the events' */
  scores: ScoreStats
}

/** Counters of scores: queued, in the requests under way, acknowledged, rate-limited and queued again, dropped by reason. */
export interface ScoreStats {
  queued: number
  inFlight: number
  sent: number
  limited: number
  dropped: Record<DropReason, number>
}

type Kind = 'event' | 'score'
interface KindCounters { sent: number; limited: number; dropped: Record<DropReason, number> }
/** Events and scores each have a queue, a batch in flight and a batch endpoint; the delivery is shared. */
interface Channel { kind: Kind; url: string; field: 'events' | 'scores'; queue: ItemQueue; inFlight: Set<Item[]>; counters: KindCounters }
const inFlightCount = (ch: Channel): number => { let n = 0; for (const batch of ch.inFlight) n += batch.length; return n }
const noDrops = (): Record<DropReason, number> => Object.fromEntries(DROP_REASONS.map((r) => [r, 0])) as Record<DropReason, number>

/** A score given to `span.score()`: its target is the span (its trace and span ids). */
export type SpanScore = ScoreFields & ScoreValue

/** Fields a span's event carries, besides those the span sets itself. */
export type SpanFields = Omit<TelemetryEvent, 'timestamp' | 'durationMs'>

const MAX_BATCH_EVENTS = 500
const MAX_IN_FLIGHT = 16
const STRICTNESS: Record<PrivacyLevel, number> = { minimal: 0, standard: 1, full: 2 }

type Timer = ReturnType<typeof setTimeout>
function unref (timer: Timer): Timer {
  (timer as { unref?: () => void }).unref?.()
  return timer
}
function ref (timer: Timer | undefined): void {
  (timer as { ref?: () => void } | undefined)?.ref?.()
}
const now = (): number => (globalThis.performance?.now ? globalThis.performance.now() : Date.now())

/**
 * The clients of this Node process, told when it exits (one 'exit' listener for all of them, however
 * many are made): what is still queued then is lost, and is counted and reported rather than lost
 * without a word. Weak, so a client let go of is not kept for this.
 */
const clientsAtExit = new Set<WeakRef<AgentTelemetry>>()
let exitListening = false
function tellAtExit (client: AgentTelemetry): void {
  const proc = (globalThis as { process?: { once?: (event: string, listener: () => void) => unknown } }).process
  if (typeof proc?.once !== 'function' || typeof WeakRef !== 'function') return
  if (clientsAtExit.size >= 64) for (const ref of clientsAtExit) if (!ref.deref()) clientsAtExit.delete(ref)
  clientsAtExit.add(new WeakRef(client))
  if (exitListening) return
  exitListening = true
  proc.once('exit', () => { for (const ref of clientsAtExit) ref.deref()?.processExiting() })
}

/**
 * The client: `track()` checks, scrubs and queues an event synchronously and never throws; batches
 * go to POST /v1/events/batch by size (`flushAt`) and time (`flushIntervalMs`), one request at a time
 * (up to `maxInFlight`), each with an Idempotency-Key kept across its retries, so a retried batch is
 * stored once.
 */
export class AgentTelemetry {
  private readonly o: Required<Omit<AgentTelemetryOptions, 'agentId' | 'onError'>> & Pick<AgentTelemetryOptions, 'agentId' | 'onError'>
  private readonly events: Channel
  private readonly scores: Channel
  private readonly channels: Channel[]
  private seq = 0
  private drainTo = 0
  private closed = false
  private abandoned = false
  private readonly stop = new AbortController()
  /** sending loops running: at most maxInFlight, each with one request under way at a time */
  private senders = 0
  private intervalTimer: Timer | undefined
  private readonly sleepers = new Set<{ timer: Timer | undefined; wake: () => void }>()
  private pausedUntil = 0
  private limitedRounds = 0
  private waiters: { seq: number; resolve: (settled: boolean) => void }[] = []
  private readonly warned = new Set<string>()
  private readonly counters = { retries: 0, replayed: 0, redactions: 0 }

  constructor (options: AgentTelemetryOptions) {
    if (options === null || typeof options !== 'object') throw new TypeError('new AgentTelemetry(options): options must be an object with at least apiKey and baseUrl')
    const level = options.privacyLevel ?? 'standard'
    if (!PRIVACY_LEVELS.includes(level)) throw new TypeError(`privacyLevel must be one of ${PRIVACY_LEVELS.join(', ')}`)
    checkApiKey(options.apiKey)
    checkBaseUrl(options.baseUrl)
    // An agentId the service refuses would drop every event that takes it, so it is refused here.
    if (options.agentId !== undefined && (typeof options.agentId !== 'string' || options.agentId.length < 1 || options.agentId.length > 120 || options.agentId.includes('\u0000'))) {
      throw new TypeError(`agentId must be a string of 1 to 120 characters without NUL (got ${typeof options.agentId === 'string' ? `${options.agentId.length} characters` : typeof options.agentId})`)
    }
    if (options.onError !== undefined && typeof options.onError !== 'function') throw new TypeError(`onError must be a function (got ${typeof options.onError})`)
    warnUnknownOptions(options)
    if (options.fetch !== undefined && typeof options.fetch !== 'function') throw new TypeError(`fetch must be a function (got ${typeof options.fetch})`)
    const fetchFn = options.fetch ?? globalThis.fetch
    if (typeof fetchFn !== 'function') throw new TypeError('no fetch in this runtime: pass options.fetch')
    this.o = {
      apiKey: options.apiKey,
      baseUrl: options.baseUrl,
      agentId: options.agentId,
      privacyLevel: level,
      flushAt: numberOption(options, 'flushAt', 100, 1, MAX_BATCH_EVENTS, true),
      flushIntervalMs: numberOption(options, 'flushIntervalMs', 1000, 0, MAX_MS),
      maxQueue: numberOption(options, 'maxQueue', 10_000, 1, Number.MAX_SAFE_INTEGER, true),
      maxQueueBytes: numberOption(options, 'maxQueueBytes', 16 * 1024 * 1024, 1024, Number.MAX_SAFE_INTEGER, true),
      maxBatchBytes: numberOption(options, 'maxBatchBytes', 4 * 1024 * 1024, 1024, MAX_BATCH_BYTES, true),
      maxItemBytes: numberOption(options, 'maxItemBytes', 1024 * 1024, 1024, MAX_BATCH_BYTES, true),
      maxInFlight: numberOption(options, 'maxInFlight', 1, 1, MAX_IN_FLIGHT, true),
      maxRetries: numberOption(options, 'maxRetries', 10, 0, 1_000_000, true),
      retryBaseMs: numberOption(options, 'retryBaseMs', 500, 1, MAX_MS),
      retryMaxMs: numberOption(options, 'retryMaxMs', 30_000, 1, MAX_MS),
      requestTimeoutMs: numberOption(options, 'requestTimeoutMs', 10_000, 1, MAX_MS),
      onError: options.onError,
      fetch: fetchFn.bind(globalThis),
    }
    const base = options.baseUrl.replace(/\/+$/, '')
    this.events = { kind: 'event', url: `${base}/v1/events/batch`, field: 'events', queue: new ItemQueue(), inFlight: new Set(), counters: { sent: 0, limited: 0, dropped: noDrops() } }
    this.scores = { kind: 'score', url: `${base}/v1/scores/batch`, field: 'scores', queue: new ItemQueue(), inFlight: new Set(), counters: { sent: 0, limited: 0, dropped: noDrops() } }
    this.channels = [this.events, this.scores]
    tellAtExit(this)
  }

  /**
   * Queues one event: fills `agentId`, `timestamp` and the active span's ids where absent, applies
   * the privacy level, checks the result against the service's schema and queues its JSON.
   * Synchronous, never throws, never waits on the network; a dropped event is counted and reported
   * to `onError`. Returns whether the event was queued.
   */
  track (event: TelemetryEvent): boolean {
    try {
      return this.enqueue(event)
    } catch (err) {
      this.drop('invalid', 1, `could not be queued: ${String(err)}`)
      return false
    }
  }

  private enqueue (event: TelemetryEvent): boolean {
    if (this.closed) return this.drop('closed', 1, 'tracked after shutdown()')
    if (event === null || typeof event !== 'object' || Array.isArray(event)) return this.drop('invalid', 1, 'an event must be an object', [{ path: [], message: 'must be object' }])
    const problems: Problem[] = []
    const budget = { left: this.o.maxBatchBytes }
    const copy = plainJson(event, problems, undefined, 0, budget) as Record<string, unknown>
    if (budget.left < 0) return this.drop('too_large', 1, `over maxBatchBytes (${this.o.maxBatchBytes}) of JSON`)
    if (problems.length > 0) return this.drop('invalid', 1, describe(problems), problems)
    const copied = this.o.maxBatchBytes - budget.left
    if (copy.agentId === undefined && this.o.agentId !== undefined) copy.agentId = this.o.agentId
    if (copy.timestamp === undefined) copy.timestamp = Date.now()
    let metadata = copy.metadata as Record<string, unknown> | undefined
    if (metadata === undefined) metadata = copy.metadata = {}
    if (metadata !== null && typeof metadata === 'object' && !Array.isArray(metadata)) {
      const active = activeSpan()
      if (active && metadata.traceId === undefined) {
        metadata.traceId = active.traceId
        if (metadata.parentSpanId === undefined) metadata.parentSpanId = active.spanId
        if (metadata.spanId === undefined) metadata.spanId = newSpanId()
        const session = (active as { sessionId?: unknown }).sessionId
        if (metadata.sessionId === undefined && typeof session === 'string') metadata.sessionId = session
      }
      const asked = metadata.privacyLevel as PrivacyLevel | undefined
      // A level the event names but misspells is refused, as the service refuses it: falling back to
      // the client's level would send what a caller asking for `minimal` meant to keep.
      if (asked !== undefined && !PRIVACY_LEVELS.includes(asked)) {
        const invalid = validateEvent(copy)
        return this.drop('invalid', 1, describe(invalid), invalid)
      }
      // An event may ask for a stricter level than the client's, never a looser one.
      const level = asked !== undefined && STRICTNESS[asked] < STRICTNESS[this.o.privacyLevel] ? asked : this.o.privacyLevel
      // Over the item limit before scrubbing, an event is dropped now rather than scrubbed in full
      // first (seconds for megabytes of text); `minimal` keeps so little that its size is known after.
      if (level !== 'minimal' && copied > this.o.maxItemBytes) {
        return this.drop('too_large', 1, `about ${copied} bytes of JSON, over maxItemBytes (${this.o.maxItemBytes}, the service's limit for one event)`)
      }
      metadata.privacyLevel = level
      const redactions = applyPrivacy(copy, level)
      if (redactions > 0) {
        metadata.redactions = redactions
        this.counters.redactions += redactions
      }
    }
    const invalid = validateEvent(copy)
    // The service keeps agent names in Postgres, which refuses NUL (400 invalid_text), as the agentId option is refused.
    if (typeof copy.agentId === 'string' && copy.agentId.includes('\u0000')) invalid.push({ path: ['agentId'], message: 'must not contain NUL characters' })
    if (invalid.length > 0) return this.drop('invalid', 1, describe(invalid), invalid)
    return this.push(this.events, copy)
  }

  /** Queues one checked item's JSON on its channel, dropping the oldest when the queue is full. */
  private push (ch: Channel, copy: Record<string, unknown>): boolean {
    const json = JSON.stringify(copy)
    const bytes = utf8Length(json)
    if (bytes + 16 > this.o.maxBatchBytes) return this.drop('too_large', 1, `${bytes} bytes of JSON, over maxBatchBytes (${this.o.maxBatchBytes})`, undefined, ch.kind)
    if (bytes > this.o.maxItemBytes) return this.drop('too_large', 1, `${bytes} bytes of JSON, over maxItemBytes (${this.o.maxItemBytes}, the service's limit for one ${ch.kind})`, undefined, ch.kind)
    // One that could never fit the queue would only empty it.
    if (bytes > this.o.maxQueueBytes) return this.drop('too_large', 1, `${bytes} bytes of JSON, over maxQueueBytes (${this.o.maxQueueBytes})`, undefined, ch.kind)
    const q = ch.queue
    while (q.length > 0 && (q.length >= this.o.maxQueue || q.bytes + bytes > this.o.maxQueueBytes)) {
      q.shift()
      this.drop('queue_full', 1, `the ${ch.kind} queue is full (${this.o.maxQueue} items or ${this.o.maxQueueBytes} bytes): the oldest ${ch.kind} was dropped`, undefined, ch.kind)
    }
    q.push({ json, bytes, seq: ++this.seq })
    if (q.length >= this.o.flushAt) this.schedule()
    else this.armTimer()
    return true
  }

  /**
   * Queues one score of a trace (optionally one of its spans), a session or an event; sent in
   * batches to POST /v1/scores/batch beside the events, with the same retries. Checks the shape
   * (exactly one target, exactly one of `value`, `label`, `boolean`; a `name`), sets `source` to
   * `code` and a fresh `scoreId` when absent (so a retried or re-sent score replaces itself rather
   * than adding one), and applies the privacy level to `comment`. Synchronous, never throws; a
   * dropped score is counted in `stats().scores.dropped` and reported to `onError`. Returns whether
   * the score was queued.
   */
  score (score: TelemetryScore): boolean {
    try {
      if (this.closed) return this.drop('closed', 1, 'scored after shutdown()', undefined, 'score')
      const budget = { left: this.o.maxBatchBytes }
      const problems: Problem[] = []
      const copy = plainJson(score, problems, undefined, 0, budget) as Record<string, unknown>
      if (budget.left < 0) return this.drop('too_large', 1, `over maxBatchBytes (${this.o.maxBatchBytes}) of JSON`, undefined, 'score')
      const copied = this.o.maxBatchBytes - budget.left
      if (this.o.privacyLevel !== 'minimal' && copied > this.o.maxItemBytes) {
        return this.drop('too_large', 1, `about ${copied} bytes of JSON, over maxItemBytes (${this.o.maxItemBytes}, the service's limit for one score)`, undefined, 'score')
      }
      if (problems.length === 0) problems.push(...checkScore(copy, this.o.agentId, this.o.privacyLevel, this.counters))
      if (problems.length > 0) return this.drop('invalid', 1, describe(problems, '(score)'), problems, 'score')
      return this.push(this.scores, copy)
    } catch (err) {
      return this.drop('invalid', 1, `could not be queued: ${String(err)}`, undefined, 'score')
    }
  }

  /** Queues several scores, each as `score()` does; returns how many were queued. */
  scoreMany (scores: readonly TelemetryScore[]): number {
    if (!Array.isArray(scores)) { this.drop('invalid', 1, 'scoreMany() takes an array of scores', undefined, 'score'); return 0 }
    let n = 0
    for (const s of scores) if (this.score(s)) n++
    return n
  }

  /** Starts the interval timer unless it runs: what is queued now goes within `flushIntervalMs`. */
  private armTimer (): void {
    if (this.intervalTimer !== undefined || this.closed) return
    this.intervalTimer = unref(setTimeout(() => {
      this.intervalTimer = undefined
      this.drainTo = Math.max(this.drainTo, this.seq)
      this.schedule()
    }, this.o.flushIntervalMs))
  }

  /**
   * Runs `fn` as the root span of a new trace and tracks one event for it when it ends (timing,
   * outcome, the error message if it throws, which is thrown on). Inside `fn`, `track()`, `span()`
   * and `trace()` attach to it: implicitly where the runtime has async context (Node), through the
   * span given to `fn` everywhere.
   */
  trace<R> (name: string, fn: (span: Span) => R, fields: SpanFields = {}): R {
    return this.runSpan(name, fn, fields, null)
  }

  /**
   * Runs `fn` as a span: a child of `parent`, else of the active span, else the root of a new trace;
   * tracks one event for it when it ends, as `trace()` does.
   */
  span<R> (name: string, fn: (span: Span) => R, fields: SpanFields = {}, parent?: SpanContext): R {
    return this.runSpan(name, fn, fields, parent ?? activeSpan() ?? null)
  }

  /** Starts a span by hand; `end()` tracks its event. For code that cannot be wrapped in a function. */
  startSpan (name: string, fields: SpanFields = {}, parent?: SpanContext | null): Span {
    return new Span(this, name, fields ?? {}, parent === undefined ? activeSpan() ?? null : parent)
  }

  private runSpan<R> (name: string, fn: (span: Span) => R, fields: SpanFields, parent: SpanContext | null): R {
    if (typeof fn !== 'function') throw new TypeError(`span ${String(name)}: the second argument must be the function the span runs (or use startSpan())`)
    const span = new Span(this, name, fields ?? {}, parent)
    let result: R
    try {
      result = runInSpan(span, () => fn(span))
    } catch (err) {
      span.end({ outcome: 'failed', errorMessage: errorText(err) })
      throw err
    }
    if (isThenable(result)) {
      return (result as unknown as Promise<unknown>).then(
        (value) => { span.end(); return value },
        (err: unknown) => { span.end({ outcome: 'failed', errorMessage: errorText(err) }); throw err },
      ) as R
    }
    span.end()
    return result
  }

  /**
   * Sends everything queued so far and resolves `true` once each of those events is acknowledged or
   * given up (dropped and counted), or `false` after `timeoutMs` if given and some are still under
   * way: they stay queued and go on being sent (nothing is dropped for the timeout). Never rejects.
   * For serverless: `ctx.waitUntil(telemetry.flush())`, or `await telemetry.flush(2000)` where a
   * function must return in time whatever the service does.
   */
  flush (timeoutMs?: number): Promise<boolean> {
    const target = this.seq
    this.drainTo = Math.max(this.drainTo, target)
    if (this.settledThrough() >= target) return Promise.resolve(true)
    // While someone waits, the timers of a retry keep a Node process alive; otherwise they do not.
    for (const sleeper of this.sleepers) ref(sleeper.timer)
    const waiter = { seq: target, resolve: (_settled: boolean) => {} }
    const done = new Promise<boolean>((resolve) => { waiter.resolve = resolve })
    this.waiters.push(waiter)
    this.schedule()
    if (typeof timeoutMs !== 'number' || !(timeoutMs >= 0) || timeoutMs > MAX_MS) return done
    const timer = setTimeout(() => {
      this.waiters = this.waiters.filter((w) => w !== waiter)
      // Nobody waits any more: the retry timers stop holding the process, as before the call.
      if (this.waiters.length === 0) for (const sleeper of this.sleepers) if (sleeper.timer !== undefined) unref(sleeper.timer)
      waiter.resolve(false)
    }, timeoutMs)
    return done.finally(() => clearTimeout(timer))
  }

  /**
   * Stops taking events, sends what is queued and resolves when it is acknowledged or given up, or
   * after `timeoutMs` (default 30 s), when what is left is dropped as `shutdown`. Never rejects.
   */
  async shutdown (timeoutMs = 30_000): Promise<void> {
    this.closed = true
    if (this.intervalTimer !== undefined) clearTimeout(this.intervalTimer)
    this.intervalTimer = undefined
    // No limit (Infinity, NaN, or what a timer cannot hold): wait as flush() does, never a 1 ms timer.
    // A negative limit (time already up) is 0: what is left is given up at once.
    if (typeof timeoutMs === 'number' && timeoutMs < 0) timeoutMs = 0
    if (typeof timeoutMs !== 'number' || !(timeoutMs >= 0) || timeoutMs > MAX_MS) {
      await this.flush()
      return
    }
    let timer: Timer | undefined
    const timedOut = new Promise<'timeout'>((resolve) => { timer = setTimeout(() => resolve('timeout'), timeoutMs) })
    const outcome = await Promise.race([this.flush().then(() => 'flushed' as const), timedOut])
    clearTimeout(timer)
    if (outcome === 'timeout') this.abandon()
  }

  /** The counters: queued, in flight, sent, retries, rate-limited events, replayed answers, redactions, drops by reason. */
  stats (): TelemetryStats {
    const e = this.events
    const s = this.scores
    return {
      ...this.counters, sent: e.counters.sent, limited: e.counters.limited, dropped: { ...e.counters.dropped }, queued: e.queue.length, inFlight: inFlightCount(e),
      scores: { sent: s.counters.sent, limited: s.counters.limited, dropped: { ...s.counters.dropped }, queued: s.queue.length, inFlight: inFlightCount(s) },
    }
  }

  /**
   * Called as the Node process exits: what is still queued or unanswered is lost with it, counted as
   * `exit` and reported (synchronously: nothing else runs then). Not for use by callers.
   */
  processExiting (): void {
    if (this.abandoned) return
    for (const ch of this.channels) {
      const left = ch.queue.length + inFlightCount(ch)
      if (left > 0) this.drop('exit', left, `${left} ${ch.kind}s were still queued or unanswered when the process exited: await flush() or shutdown() before it ends`, undefined, ch.kind)
    }
  }

  /** Gives up on everything queued or in flight (counted as `shutdown`) and stops the sending loop. */
  private abandon (): void {
    this.abandoned = true
    this.stop.abort()
    for (const ch of this.channels) {
      const unanswered = inFlightCount(ch)
      const left = ch.queue.length + unanswered
      while (ch.queue.length > 0) ch.queue.shift()
      ch.inFlight.clear()
      // A request under way may have been stored: the service's answer is what did not arrive.
      const maybe = unanswered > 0 ? ` (${unanswered} of them in requests under way, which the service may have stored)` : ''
      if (left > 0) this.drop('shutdown', left, `${left} ${ch.kind}s were still queued or unanswered when shutdown() timed out${maybe}`, undefined, ch.kind)
    }
    for (const sleeper of [...this.sleepers]) sleeper.wake()
    this.settle()
  }

  /**
   * Starts a sending loop soon (not inside `track()`), unless one runs; with `maxInFlight` above 1,
   * another one while fewer run and a batch is due that no running loop has taken yet.
   */
  private schedule (): void {
    if (this.abandoned || this.senders >= this.o.maxInFlight) return
    if (this.senders > 0 && !this.due()) return
    this.senders++
    const current: { ch?: Channel; batch?: Item[] } = {}
    void Promise.resolve().then(() => this.sendLoop(current)).catch((err: unknown) => {
      // Not expected; but a rejection here would be unhandled in the host process, so it is counted.
      const { ch, batch } = current
      if (ch && batch && ch.inFlight.delete(batch)) this.drop('refused', batch.length, `the client failed while sending: ${String(err)}`, undefined, ch.kind)
      this.settle()
    }).finally(() => {
      this.senders--
      if (this.abandoned) return
      if (this.due()) this.schedule()
      // Events queued behind a full batch while no timer ran still leave within flushIntervalMs.
      else if (this.channels.some((ch) => ch.queue.length > 0)) this.armTimer()
    })
  }

  /** The channel with a batch due (the one whose oldest item is older, when both are), if any. */
  private dueChannel (): Channel | undefined {
    let pick: Channel | undefined
    for (const ch of this.channels) {
      const first = ch.queue.peek()
      if (first === undefined || !(ch.queue.length >= this.o.flushAt || first.seq <= this.drainTo)) continue
      if (pick === undefined || first.seq < pick.queue.peek()!.seq) pick = ch
    }
    return pick
  }

  private due (): boolean {
    return this.dueChannel() !== undefined
  }

  private async sendLoop (current: { ch?: Channel; batch?: Item[] }): Promise<void> {
    while (!this.abandoned && this.due()) {
      const wait = this.pausedUntil - Date.now()
      if (wait > 0) await this.sleep(wait)
      if (this.abandoned) return
      const ch = this.dueChannel()
      if (ch === undefined) return
      const batch = ch.queue.take(MAX_BATCH_EVENTS, this.o.maxBatchBytes)
      current.ch = ch
      current.batch = batch
      ch.inFlight.add(batch)
      // Another loop, when allowed, for what is due behind this batch.
      this.schedule()
      await this.deliver(ch, batch)
      ch.inFlight.delete(batch)
      current.batch = undefined
      this.settle()
    }
  }

  /** Sends one batch until it is answered, refused or out of retries; splits it on a 413. */
  private async deliver (ch: Channel, batch: Item[]): Promise<void> {
    const body = `{"${ch.field}":[${batch.map((i) => i.json).join(',')}]}`
    const k = ch.kind
    const idempotencyKey = newIdempotencyKey()
    for (let attempt = 1; ; attempt++) {
      const a = await postBatch({ fetch: this.o.fetch, url: ch.url, apiKey: this.o.apiKey, body, idempotencyKey, timeoutMs: this.o.requestTimeoutMs, unref: this.waiters.length === 0, signal: this.stop.signal })
      if (this.abandoned) return
      if (a.kind === 'answered' && a.results.length === batch.length) {
        if (a.replayed) this.counters.replayed++
        const limited: Item[] = []
        a.results.forEach((r, i) => {
          if (r.status >= 200 && r.status < 300) ch.counters.sent++
          else if (r.status === 429) limited.push(batch[i]!)
          else if (r.status === 413) this.drop('too_large', 1, `the service refused ${k === 'score' ? 'a score' : 'an event'} as too large (413; raise its BODY_LIMIT with maxItemBytes)${whyRefused(r)}`, r, k, r.status)
          else this.drop('rejected', 1, `the service refused ${k === 'score' ? 'a score' : 'an event'}: ${r.status} ${r.error ?? ''}${r.reason ? ` (${r.reason})` : ''}${whyRefused(r)}`, r, k, r.status)
        })
        if (limited.length > 0) {
          // Over the burst limit: these go first in a new batch (a new key), once the limit allows.
          ch.queue.unshiftAll(limited)
          ch.counters.limited += limited.length
          this.limitedRounds++
          this.pausedUntil = Date.now() + backoffMs(this.limitedRounds, this.o.retryBaseMs, this.o.retryMaxMs, a.retryAfterMs ?? 1000)
        } else {
          this.limitedRounds = 0
        }
        return
      }
      if (a.kind === 'too_large') {
        if (batch.length === 1) { this.drop('too_large', 1, `the service refused the ${k} as too large (413)`, undefined, k); return }
        const half = Math.ceil(batch.length / 2)
        await this.deliver(ch, batch.slice(0, half))
        if (!this.abandoned) await this.deliver(ch, batch.slice(half))
        return
      }
      if (a.kind === 'refused') {
        this.drop('refused', batch.length, `the service refused a batch of ${batch.length} ${k}s sent to ${ch.url}: ${a.status} ${a.reason}`, undefined, k, a.status)
        return
      }
      const reason = a.kind === 'retry' ? a.reason : 'results_mismatch'
      const retryAfterMs = a.kind === 'retry' ? a.retryAfterMs : undefined
      if (attempt > this.o.maxRetries) {
        this.drop('retries_exhausted', batch.length, `a batch of ${batch.length} ${k}s failed ${attempt} times (last: ${reason})`, undefined, k)
        return
      }
      const delay = backoffMs(attempt, this.o.retryBaseMs, this.o.retryMaxMs, retryAfterMs)
      this.counters.retries++
      this.report({ reason: 'retrying', count: batch.length, kind: k, message: `${reason} sending to ${ch.url}: retry ${attempt} of ${this.o.maxRetries} in ${Math.round(delay)} ms` })
      await this.sleep(delay)
      if (this.abandoned) return
    }
  }

  /** Waits `ms`; the timer holds a Node process open only while flush() or shutdown() waits. */
  private sleep (ms: number): Promise<void> {
    return new Promise((resolve) => {
      const sleeper = { timer: undefined as Timer | undefined, wake: () => { clearTimeout(sleeper.timer); this.sleepers.delete(sleeper); resolve() } }
      sleeper.timer = setTimeout(sleeper.wake, ms)
      if (this.waiters.length === 0) unref(sleeper.timer)
      this.sleepers.add(sleeper)
    })
  }

  /** Every event up to this sequence number is sent or dropped. */
  private settledThrough (): number {
    let lowest = Infinity
    for (const ch of this.channels) {
      lowest = Math.min(lowest, ch.queue.peek()?.seq ?? Infinity)
      for (const batch of ch.inFlight) for (const item of batch) lowest = Math.min(lowest, item.seq)
    }
    return lowest === Infinity ? this.seq : lowest - 1
  }

  private settle (): void {
    if (this.waiters.length === 0) return
    const through = this.settledThrough()
    const ready = this.waiters.filter((w) => w.seq <= through)
    this.waiters = this.waiters.filter((w) => w.seq > through)
    for (const w of ready) w.resolve(true)
  }

  private drop (reason: DropReason, count: number, message: string, details?: Problem[] | ItemResult, kind: Kind = 'event', status?: number): false {
    const ch = kind === 'score' ? this.scores : this.events
    ch.counters.dropped[reason] += count
    this.report({ reason, count, message, details, ...(kind === 'score' ? { kind } : {}), ...(status !== undefined ? { status } : {}) })
    return false
  }

  private report (error: TelemetryError): void {
    try {
      if (this.o.onError) {
        // An async handler's rejection is the caller's too: it must not become an unhandled one.
        const returned = this.o.onError(error) as unknown
        if (isThenable(returned)) Promise.resolve(returned).catch(() => {})
      } else {
        // Once per reason, and per status of a refusal: a key revoked later (401) is told after an
        // earlier wrong path (404).
        const once = error.status === undefined ? error.reason : `${error.reason} ${error.status}`
        if (this.warned.has(once)) return
        this.warned.add(once)
        console.warn(`agent-telemetry-client: ${error.reason}: ${error.message} (further ${once} reports are counted in stats(), not logged)`)
      }
    } catch {
      // onError is the caller's; its failure must not reach track().
    }
  }

  /** @internal Tracks a span's event. */
  trackSpan (event: TelemetryEvent): void {
    this.track(event)
  }
}

/** The service's own words for a refused item: its message, else its first problem and where. */
function whyRefused (r: ItemResult): string {
  const said = typeof r.message === 'string' && r.message ? `: ${r.message}` : ''
  // The first detail names the field at fault (`agentId is required when the API key is not bound to
  // an agent`), which the message (`the body is not valid`) does not.
  const first = Array.isArray(r.details) ? r.details[0] as { path?: unknown; message?: unknown } | undefined : undefined
  if (typeof first?.message !== 'string') return said
  const path = Array.isArray(first.path) && first.path.length > 0 ? `${first.path.join('.')} ` : ''
  return `${said}: ${path}${first.message}`
}

/** A unit of work in a trace; ends once, tracking one event with its timing and outcome. */
export class Span implements SpanContext {
  readonly traceId: string
  readonly spanId: string
  readonly parentSpanId: string | undefined
  /** unix milliseconds at the start */
  readonly startedAt: number
  private readonly started = now()
  private fields: SpanFields
  private ended = false

  private readonly inheritedSession: string | undefined

  constructor (private readonly client: AgentTelemetry, readonly name: string, fields: SpanFields, parent: SpanContext | null) {
    this.traceId = fields.metadata?.traceId ?? parent?.traceId ?? newTraceId()
    this.spanId = newSpanId()
    this.parentSpanId = parent?.spanId
    this.startedAt = Date.now()
    this.fields = fields
    // A child is of its parent's session as the parent stands when the child starts (set() included).
    const session = (parent as { sessionId?: unknown } | null)?.sessionId
    this.inheritedSession = typeof session === 'string' ? session : undefined
  }

  /** Adds fields to the span's event (model, tokens, tool, ...); metadata is merged. */
  set (fields: SpanFields): this {
    // Not fields (null, a string): nothing to add; the span goes on, as track() never throws.
    if (fields === null || typeof fields !== 'object' || Array.isArray(fields)) return this
    const metadata = fields.metadata !== null && typeof fields.metadata === 'object' ? fields.metadata : {}
    this.fields = { ...this.fields, ...fields, metadata: { ...this.fields.metadata, ...metadata } }
    return this
  }

  /** The session of the span: its own (`metadata.sessionId`), else its parent span's. */
  get sessionId (): string | undefined {
    const own = this.fields.metadata?.sessionId
    return typeof own === 'string' ? own : this.inheritedSession
  }

  /** Tracks an event inside this span (its trace and session, this span as the parent). */
  track (event: TelemetryEvent): boolean {
    // Not an event (null, a string): the client counts and reports it, as track() never throws.
    if (event === null || typeof event !== 'object' || Array.isArray(event)) return this.client.track(event)
    const session = this.sessionId
    return this.client.track({ ...event, metadata: { traceId: this.traceId, parentSpanId: this.spanId, spanId: newSpanId(), ...(session !== undefined ? { sessionId: session } : {}), ...event.metadata } })
  }

  /**
   * Queues a score of this span: `traceId` and `spanId` are the span's, the rest is `score()`'s
   * (checked, filled in and sent the same way). Returns whether the score was queued.
   */
  score (score: SpanScore): boolean {
    return this.client.score({ ...score, traceId: this.traceId, spanId: this.spanId })
  }

  /** Runs `fn` as a child span of this one. */
  span<R> (name: string, fn: (span: Span) => R, fields: SpanFields = {}): R {
    return this.client.span(name, fn, fields, this)
  }

  /** Ends the span and tracks its event; `outcome` defaults to `success`. Later calls do nothing. */
  end (result: { outcome?: 'success' | 'failed' | 'pending'; errorMessage?: string } | null = {}): void {
    if (this.ended) return
    this.ended = true
    // Not a result (null, a string): the span ends as it stands, as track() never throws.
    const r = result !== null && typeof result === 'object' ? result : {}
    const f = this.fields
    const type = f.type ?? 'action'
    const session = this.inheritedSession !== undefined && f.metadata?.sessionId === undefined ? { sessionId: this.inheritedSession } : {}
    this.client.trackSpan({
      ...f,
      type,
      ...(type === 'tool' && f.toolExecuted === undefined ? { toolExecuted: cutCodePoints(String(this.name), 200) } : {}),
      timestamp: this.startedAt,
      durationMs: Math.max(0, Math.round(now() - this.started)),
      outcome: r.outcome ?? f.outcome ?? 'success',
      ...(r.errorMessage !== undefined ? { errorMessage: r.errorMessage } : {}),
      metadata: { ...session, ...f.metadata, traceId: this.traceId, spanId: this.spanId, ...(this.parentSpanId ? { parentSpanId: this.parentSpanId } : {}), spanName: this.name },
    })
  }
}

/** The first `max` code points of `text` (the service counts names so): a surrogate pair is never split. */
function cutCodePoints (text: string, max: number): string {
  if (text.length <= max) return text
  let units = 0
  let points = 0
  while (units < text.length && points < max) {
    const c = text.charCodeAt(units)
    units += c >= 0xD800 && c <= 0xDBFF && units + 1 < text.length ? 2 : 1
    points++
  }
  return text.slice(0, units)
}

/** A key the service could read: a non-empty string without whitespace (a header cannot carry a line break). */
function checkApiKey (apiKey: unknown): void {
  if (apiKey === undefined || apiKey === null || apiKey === '') throw new TypeError('apiKey is required: an API key (vk_…) from POST /v1/me/keys')
  if (typeof apiKey !== 'string') throw new TypeError(`apiKey must be a string, not ${typeOf(apiKey)}`)
  if (/\s/.test(apiKey)) throw new TypeError('apiKey must not contain spaces or line breaks')
}

/**
 * An absolute http(s) URL without credentials, query or fragment: anything else would fail every
 * request later, out of sight. The value is not echoed (a key pasted in the wrong option would be).
 */
function checkBaseUrl (baseUrl: unknown): void {
  const example = 'an absolute http(s) URL such as https://telemetry.example.com'
  if (baseUrl === undefined || baseUrl === null || baseUrl === '') throw new TypeError(`baseUrl is required: ${example}`)
  if (typeof baseUrl !== 'string') throw new TypeError(`baseUrl must be a string (${example}), not ${typeOf(baseUrl)}`)
  let url: URL
  try {
    url = new URL(baseUrl)
  } catch {
    throw new TypeError(`baseUrl must be ${example}; the one given is not a URL`)
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new TypeError(`baseUrl must be ${example}, not a ${url.protocol} URL`)
  if (url.username !== '' || url.password !== '') throw new TypeError('baseUrl must not hold a user or password: the API key is the credential')
  if (url.search !== '' || url.hash !== '') throw new TypeError('baseUrl must not hold a query (?…) or fragment (#…): /v1/events/batch is appended to it')
}

function typeOf (value: unknown): string {
  return value === null ? 'null' : Array.isArray(value) ? 'an array' : typeof value
}

// The longest delay a timer takes (setTimeout's 2^31 - 1 ms, about 24.8 days).
const MAX_MS = 2_147_483_647
// Under the service's default 5 MiB BATCH_BODY_LIMIT, with room for the envelope.
const MAX_BATCH_BYTES = 5 * 1024 * 1024 - 1024

/**
 * Every option the client reads: another name is a mistake the client would otherwise pass over in
 * silence. A record of them all, so an option added to AgentTelemetryOptions without it fails to compile.
 */
const OPTIONS: Record<keyof AgentTelemetryOptions, true> = {
  apiKey: true, baseUrl: true, agentId: true, privacyLevel: true, flushAt: true, flushIntervalMs: true, maxQueue: true, maxQueueBytes: true,
  maxBatchBytes: true, maxItemBytes: true, maxInFlight: true, maxRetries: true, retryBaseMs: true, retryMaxMs: true, requestTimeoutMs: true,
  onError: true, fetch: true,
}
const OPTION_NAMES: ReadonlySet<string> = new Set(Object.keys(OPTIONS))

/** Whether a value is a promise or promise-like (a `then` method): what `await` would wait for. */
function isThenable (value: unknown): value is PromiseLike<unknown> {
  return value !== null && typeof value === 'object' && typeof (value as { then?: unknown }).then === 'function'
}

/** A console warning for each option the client does not know (`flushAT`), naming the one meant when only its case differs. */
function warnUnknownOptions (options: object): void {
  for (const name of Object.keys(options)) {
    if (OPTION_NAMES.has(name)) continue
    const meant = [...OPTION_NAMES].find((known) => known.toLowerCase() === name.toLowerCase())
    console.warn(`agent-telemetry-client: unknown option ${name}${meant ? ` (did you mean ${meant}?)` : ''}: it is ignored`)
  }
}

type NumberOptionName = 'flushAt' | 'flushIntervalMs' | 'maxQueue' | 'maxQueueBytes' | 'maxBatchBytes' | 'maxItemBytes' | 'maxInFlight' | 'maxRetries' | 'retryBaseMs' | 'retryMaxMs' | 'requestTimeoutMs'

/**
 * A number option, or its default when absent: one that is not a number (`'100'` from an environment
 * variable, `NaN`), out of its range or, where it counts things, not whole, throws at construction
 * rather than being bent into the range, where it would change what the client does out of sight.
 */
function numberOption (options: AgentTelemetryOptions, name: NumberOptionName, fallback: number, min: number, max: number, integer = false): number {
  const v: unknown = options[name]
  if (v === undefined) return fallback
  if (typeof v !== 'number' || Number.isNaN(v) || v < min || v > max || (integer && !Number.isInteger(v))) {
    const shown = typeof v === 'number' ? String(v) : typeof v
    throw new TypeError(`${name} must be ${integer ? 'an integer' : 'a number'} from ${min} to ${max} (got ${shown})`)
  }
  return v
}

function errorText (err: unknown): string {
  return err instanceof Error ? `${err.name}: ${err.message}` : String(err)
}

function describe (problems: Problem[], whole = '(event)'): string {
  return problems.slice(0, 3).map((p) => `${p.path.length ? p.path.join('.') : whole} ${p.message}`).join('; ')
}
