import type { HttpError } from '../http-error.ts'
import { StepTimings, type IngestStep } from './steps.ts'
import { KeyedLogThrottle } from '../log-lines.ts'

/** How often a stalled step is told at most, per step. */
const STALL_LOG_EVERY_MS = 10_000

/**
 * What became of one item of a request: accepted with its acknowledgement, refused with the error it
 * alone would have got, or refused by the burst limit (its error carries the Retry-After).
 */
export type Outcome<A> =
  | { kind: 'accepted'; ack: A }
  | { kind: 'refused'; error: HttpError }
  | { kind: 'rate_limited'; error: HttpError }

/** An item's result in a batch's 207: its acknowledgement, or the status and body it alone would have got. */
export type BatchResult<A> = ({ status: 202 } & A) | ({ status: number } & Record<string, unknown>)

/**
 * An item's result in a 207: its acknowledgement, or the status and body it alone would have got;
 * a 429's `Retry-After` (a header, which a result cannot have) as `retryAfter`, in seconds.
 */
export function batchResult<A> (outcome: Outcome<A>): BatchResult<A> {
  if (outcome.kind === 'accepted') return { status: 202, ...outcome.ack }
  const result: BatchResult<A> = { status: outcome.error.statusCode, ...outcome.error.body() }
  if (outcome.kind === 'rate_limited') result.retryAfter = Number(outcome.error.headers['retry-after'])
  return result
}

/** The longest wait any refused item was told, for the whole answer's Retry-After. */
export function longestRetryAfter<A> (outcomes: readonly Outcome<A>[]): string | null {
  let longest: string | null = null
  for (const o of outcomes) {
    const after = o.kind === 'rate_limited' ? o.error.headers['retry-after'] : undefined
    if (after !== undefined && (longest === null || Number(after) > Number(longest))) longest = after
  }
  return longest
}

/** A step's answer for one item: its final outcome, or undefined to hand it on to the next step. */
export type Verdict<A> = Outcome<A> | undefined

/**
 * A named step of the pipeline: a function over the items still alive, in request order, with what
 * the steps of the request share (`context`), answering one verdict per item in the same order. It
 * answers without a promise when it need not wait: most requests then never leave the turn they
 * arrived in until the log step. A step that throws fails the whole request (see PipelineRunner).
 */
export interface Step<C, I, A> {
  readonly name: IngestStep
  run (context: C, items: I[]): Verdict<A>[] | Promise<Verdict<A>[]>
}

/** Where a stalled step is reported. */
export interface StallLogger {
  warn (details: object, message: string): void
}

/**
 * A step that has run longer than this is reported as stalled, while it still runs. A step takes
 * microseconds to a few milliseconds, a synced commit of the log included; a second is the Redis
 * command timeout and a fifth of Postgres' statement timeout, so a step this slow is waiting on a
 * store that has stopped answering in time, not on load. Each step that waits, waits on one store,
 * so the step's name says which: `key` Postgres or Redis (the key), `burst` Redis (the limiter),
 * `resolve` Postgres (agents), `prices` Postgres (model prices), `configs` Postgres (score configs),
 * `row` the row thread, `log` the disk.
 */
export const STEP_STALL_MS = 1000

/** A step under way that had to wait, as the stall watch sees it. */
interface Running { readonly name: IngestStep; readonly events: number; readonly started: number; warned: boolean }

/** Whether any verdict settles its item (a loop: no closure per step and request). */
function settlesAny (verdicts: readonly unknown[]): boolean {
  for (let i = 0; i < verdicts.length; i++) if (verdicts[i] !== undefined) return true
  return false
}

/** The verdicts of a step that hands every item on. */
export function passAll<A> (items: readonly unknown[]): Verdict<A>[] {
  return new Array<Verdict<A>>(items.length).fill(undefined)
}

/**
 * Runs the named steps of ingestion (PostHog's EventPipelineRunner): each step over the items still
 * alive, in order, until every item has its outcome. It records each step's wall time once, in
 * `timings` (read by /health, /metrics and the benchmark), and reports a step that stalls (PostHog's
 * timeoutGuard): a step that had to wait is watched while it waits and reported once it has run for
 * `stallMs`, before it ends; a step that held the thread that long is reported when it ends (nothing
 * can run while it does). A step is reported once. A step that throws (a full log, a store out of
 * reach) fails the whole request: its error is thrown again as it is, for the one error handler to
 * answer as it answers that error anywhere (503 with Retry-After for a full log or an unreachable
 * store, 500 otherwise); refusing one item is a step's verdict, never a throw.
 */
export class PipelineRunner {
  readonly timings = new StepTimings()
  /** The steps under way that are waiting on a promise: what the stall watch looks at. */
  private readonly waiting = new Set<Running>()
  private readonly stallLines = new KeyedLogThrottle<IngestStep>(STALL_LOG_EVERY_MS)
  /** Looks at the waiting steps every quarter of stallMs while there are any. */
  private watch: NodeJS.Timeout | null = null

  constructor (private readonly logger: StallLogger, private readonly stallMs = STEP_STALL_MS) {}

  /** Runs `steps` in order over `items`; answers each item's outcome, in the items' order. */
  async run<C, I, A> (steps: readonly Step<C, I, A>[], context: C, items: I[]): Promise<Outcome<A>[]> {
    const outcomes = new Array<Outcome<A>>(items.length)
    let alive = items
    // Where each item still alive stands in `items`; null while none has been settled (the same place).
    let positions: number[] | null = null
    for (const step of steps) {
      if (alive.length === 0) return outcomes
      const started = performance.now()
      let verdicts: Verdict<A>[] | Promise<Verdict<A>[]>
      let running: Running | null = null
      try {
        verdicts = step.run(context, alive)
        // Awaited only when the step had to wait: an await costs a turn of the event loop.
        if (verdicts instanceof Promise) {
          running = this.waitingOn(step.name, alive.length, started)
          verdicts = await verdicts
        }
      } finally {
        this.finish(step.name, alive.length, started, running)
      }
      if (verdicts.length !== alive.length) throw new Error(`step ${step.name} answered ${verdicts.length} verdicts for ${alive.length} items`)
      if (!settlesAny(verdicts)) continue
      const stillAlive: I[] = []
      const stillAt: number[] = []
      for (let i = 0; i < verdicts.length; i++) {
        const verdict = verdicts[i]
        const at = positions === null ? i : positions[i]!
        if (verdict !== undefined) outcomes[at] = verdict
        else {
          stillAlive.push(alive[i]!)
          stillAt.push(at)
        }
      }
      alive = stillAlive
      positions = stillAt
    }
    if (alive.length > 0) throw new Error(`${alive.length} items passed every step without an outcome`)
    return outcomes
  }

  /**
   * Runs `build`, which makes a request's items out of its body (OTLP's decode), as step `name`;
   * `count` says from what it built how many events it handled (none when it throws).
   */
  build<T> (name: IngestStep, build: () => T, count: (built: T) => number): T {
    const started = performance.now()
    let events = 0
    try {
      const built = build()
      events = count(built)
      return built
    } finally {
      this.finish(name, events, started)
    }
  }

  /**
   * A request hook in Fastify's callback style, run as step `name` over one event (the API key
   * check): no promise at all when `check` answers synchronously, as it does when this process
   * holds the key.
   */
  hook<R> (name: IngestStep, check: (request: R) => void | Promise<void>): (request: R, reply: unknown, done: (err?: Error) => void) => void {
    return (request, _reply, done) => {
      const started = performance.now()
      let pending: void | Promise<void>
      try {
        pending = check(request)
      } catch (err) {
        this.finish(name, 1, started)
        return done(err as Error)
      }
      if (pending === undefined) {
        this.finish(name, 1, started)
        return done()
      }
      // Closures only for a check that waits: the usual request makes none.
      const running = this.waitingOn(name, 1, started)
      pending.then(() => {
        this.finish(name, 1, started, running)
        done()
      }, (err: unknown) => {
        this.finish(name, 1, started, running)
        done(err as Error)
      })
    }
  }

  /** Watches a step that is waiting on a promise, started at `started`, until `finish`. */
  private waitingOn (name: IngestStep, events: number, started: number): Running {
    const running: Running = { name, events, started, warned: false }
    this.waiting.add(running)
    if (this.watch === null) {
      this.watch = setInterval(() => this.lookForStalls(), Math.max(1, this.stallMs / 4))
      // The watch never keeps the process alive: it only reports.
      this.watch.unref()
    }
    return running
  }

  /** Reports each waiting step past the threshold, once; stops looking when none waits. */
  private lookForStalls (): void {
    if (this.waiting.size === 0) {
      clearInterval(this.watch!)
      this.watch = null
      return
    }
    const now = performance.now()
    for (const running of this.waiting) {
      const ms = now - running.started
      if (!running.warned && ms >= this.stallMs) {
        running.warned = true
        this.stalled(running.name, running.events, ms, true)
      }
    }
  }

  private finish (name: IngestStep, events: number, started: number, running: Running | null = null): void {
    const ms = performance.now() - started
    this.timings.record(name, events, ms)
    if (running) this.waiting.delete(running)
    // A step the watch has not reported: one that held the thread, or ended between two looks.
    if (ms > this.stallMs && !running?.warned) this.stalled(name, events, ms, false)
  }

  /** One line per step every 10 s at most: in an outage every request's step stalls, and one line says so. */
  private stalled (step: IngestStep, events: number, ms: number, running: boolean): void {
    const held = this.stallLines.pass(step)
    if (held !== null) this.logger.warn({ step, ms: Math.round(ms), events, running, alsoStalled: held }, `ingest step ${step} stalled (this line at most every 10 s per step)`)
  }
}
