/**
 * The named steps every ingested event goes through, in order (ARCHITECTURE §1). `decode` runs only
 * for OTLP (POST /v1/traces): the body decoded and each span mapped to an event, before `schema`.
 */
export const INGEST_STEPS = ['key', 'decode', 'schema', 'burst', 'resolve', 'row', 'log'] as const
export type IngestStep = (typeof INGEST_STEPS)[number]

export type StepFigures = {
  /** Times the step ran (once per request for key, burst and log; once per request for the others too). */
  calls: number
  /** Events the step handled. */
  events: number
  /** Wall time spent in the step, in total (ms), including waits on Redis, Postgres and the disk. */
  totalMs: number
  /** totalMs per event, in microseconds. */
  usPerEvent: number
}

/**
 * Wall-clock time per pipeline step (PostHog's runStep): cheap enough to stay on in production, read
 * by /health and by the ingestion benchmark.
 */
export class StepTimings {
  private readonly figures = new Map<IngestStep, { calls: number; events: number; totalMs: number }>(
    INGEST_STEPS.map((s) => [s, { calls: 0, events: 0, totalMs: 0 }]),
  )

  /** Runs `fn` as step `step` over `events` events and records its time, whether it succeeds or throws. */
  async run<T>(step: IngestStep, events: number, fn: () => T | Promise<T>): Promise<T> {
    const started = performance.now()
    try {
      return await fn()
    } finally {
      this.record(step, events, performance.now() - started)
    }
  }

  /**
   * The synchronous form of run, for steps that never wait. `events` may be counted from the result
   * (decoding learns how many spans a body held); a step that throws then counts none.
   */
  runSync<T>(step: IngestStep, events: number | ((result: T) => number), fn: () => T): T {
    const started = performance.now()
    let counted = typeof events === 'number' ? events : 0
    try {
      const result = fn()
      if (typeof events === 'function') counted = events(result)
      return result
    } finally {
      this.record(step, counted, performance.now() - started)
    }
  }

  /**
   * A request hook in Fastify's callback style, timed as `step` (one event): no promise at all when
   * `check` answers synchronously, as the key check does when this process holds the key.
   */
  hook<R>(step: IngestStep, check: (request: R) => void | Promise<void>): (request: R, reply: unknown, done: (err?: Error) => void) => void {
    return (request, _reply, done) => {
      const started = performance.now()
      const finish = (err?: unknown) => {
        this.record(step, 1, performance.now() - started)
        done(err as Error | undefined)
      }
      let pending: void | Promise<void>
      try {
        pending = check(request)
      } catch (err) {
        return finish(err)
      }
      if (pending === undefined) return finish()
      pending.then(() => finish(), finish)
    }
  }

  snapshot (): Record<IngestStep, StepFigures> {
    const out = {} as Record<IngestStep, StepFigures>
    for (const [step, f] of this.figures) {
      out[step] = { ...f, totalMs: round(f.totalMs), usPerEvent: f.events ? round((f.totalMs * 1000) / f.events) : 0 }
    }
    return out
  }

  /** Records one run of `step` over `events` events that started at `started` (performance.now()) and ends now. */
  recordSince (step: IngestStep, events: number, started: number): void {
    this.record(step, events, performance.now() - started)
  }

  private record (step: IngestStep, events: number, ms: number): void {
    const f = this.figures.get(step)!
    f.calls++
    f.events += events
    f.totalMs += ms
  }
}

function round (n: number): number {
  return Math.round(n * 1000) / 1000
}
