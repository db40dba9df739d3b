/**
 * The named steps every ingested event goes through, in order (ARCHITECTURE §1). `decode` runs only
 * for OTLP (POST /v1/traces): the body decoded and each span mapped to an event, before `schema`.
 * `prices` looks up, once per request, the model prices the user set, which `row` prices events by.
 * `configs` runs only for scores: each score checked against its name's score config.
 */
const INGEST_STEPS = ['key', 'decode', 'schema', 'burst', 'resolve', 'prices', 'configs', 'row', 'log'] as const
export type IngestStep = (typeof INGEST_STEPS)[number]

export type StepFigures = {
  /** Times the step ran: once per request that still had events for it. */
  calls: number
  /** Events the step handled. */
  events: number
  /** Wall time spent in the step, in total (ms), including waits on Redis, Postgres and the disk. */
  totalMs: number
  /** totalMs per event, in microseconds. */
  usPerEvent: number
}

/**
 * Wall-clock time per pipeline step, since start: cheap enough to stay on in production, read by
 * /health, /metrics and the ingestion benchmark. The runner (src/ingest/pipeline.ts) measures.
 */
export class StepTimings {
  private readonly figures = new Map<IngestStep, { calls: number; events: number; totalMs: number }>(
    INGEST_STEPS.map((s) => [s, { calls: 0, events: 0, totalMs: 0 }]),
  )

  /** Records one run of `step` over `events` events that took `ms`. */
  record (step: IngestStep, events: number, ms: number): void {
    const f = this.figures.get(step)!
    f.calls++
    f.events += events
    f.totalMs += ms
  }

  snapshot (): Record<IngestStep, StepFigures> {
    const out = {} as Record<IngestStep, StepFigures>
    for (const [step, f] of this.figures) {
      out[step] = { ...f, totalMs: round(f.totalMs), usPerEvent: f.events ? round((f.totalMs * 1000) / f.events) : 0 }
    }
    return out
  }
}

function round (n: number): number {
  return Math.round(n * 1000) / 1000
}
