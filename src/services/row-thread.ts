import { Worker } from 'node:worker_threads'
import { buildEventRow, type EventSource, type IncomingEvent } from '../domain/event-row.ts'
import { eventLine } from '../storage/events-repository.ts'

/** The rows of one request: its events, and per event the id and agent the pipeline gave it. */
export interface RowJob {
  events: IncomingEvent[]
  eventIds: string[]
  agentIds: string[]
  userId: string
  receivedAt: number
  source: EventSource
}

/** The ingest log lines of a job's events, in order: the `row` step of the pipeline. */
export function rowLines (job: RowJob): string[] {
  const lines = new Array<string>(job.events.length)
  for (let i = 0; i < job.events.length; i++) {
    lines[i] = eventLine(buildEventRow(job.events[i]!, {
      eventId: job.eventIds[i]!, userId: job.userId, agentId: job.agentIds[i]!, receivedAt: job.receivedAt, source: job.source,
    }))
  }
  return lines
}

export interface RowThreadOptions {
  /** Jobs with fewer events are built on the calling thread (a hand-off costs more than it saves). */
  minEvents: number
  /** Told when the thread fails; its jobs are then built on the calling thread. */
  onFailure?: (err: unknown) => void
}

type Reply = { id: number; lines: string[] } | { id: number; error: string }

/** A job handed to the thread, with the promise its caller awaits. */
interface Waiting { job: RowJob; resolve: (lines: string[]) => void; reject: (err: unknown) => void }

/** After this many failures the thread is not started again: every job is built on the calling thread. */
const MAX_FAILURES = 3

/**
 * Builds the rows of large requests (batches, OTLP exports) on a worker thread, so that the main
 * thread, which parses requests and answers them, spends on them only the hand-off: the content
 * hash, canonical JSON, pricing and the line's JSON text are most of what an event costs it.
 *
 * The thread starts at the first large job, and jobs are built on the calling thread until it is
 * ready (about half a second, while it loads the modules). A job the thread cannot build (an error
 * in it, or the thread ending) is built on the calling thread instead, so the outcome is the same as
 * without the thread: the lines, or the error building them throws.
 */
export class RowThread {
  private worker: Worker | null = null
  private ready = false
  private failures = 0
  private nextId = 1
  private readonly waiting = new Map<number, Waiting>()
  private readyWaiters: (() => void)[] = []
  private closed = false
  /** Events whose lines the thread built. */
  builtOnThread = 0

  constructor (private readonly opts: RowThreadOptions) {}

  /** The lines of the job's events, built on the thread when the job is large and the thread is up. */
  lines (job: RowJob): string[] | Promise<string[]> {
    if (this.opts.minEvents <= 0 || job.events.length < this.opts.minEvents || this.closed) return rowLines(job)
    if (!this.ready) {
      this.start()
      return rowLines(job)
    }
    const id = this.nextId++
    return new Promise((resolve, reject) => {
      const waiting: Waiting = { job, resolve, reject }
      try {
        this.worker!.postMessage({ id, job })
      } catch {
        return this.buildHere(waiting) // a value the hand-off cannot copy: built here, as without the thread
      }
      this.waiting.set(id, waiting)
    })
  }

  /** Starts the thread if it is not running; resolves once it takes jobs, or once it has failed (for tests). */
  whenReady (): Promise<void> {
    this.start()
    if (this.ready || !this.worker) return Promise.resolve() // up, or not coming (closed, or failed too often)
    return new Promise((resolve) => this.readyWaiters.push(resolve))
  }

  async close (): Promise<void> {
    this.closed = true
    const worker = this.worker
    this.worker = null
    this.ready = false
    this.buildWaitingHere()
    for (const wake of this.readyWaiters.splice(0)) wake()
    if (worker) await worker.terminate()
  }

  private start (): void {
    if (this.worker || this.closed || this.failures >= MAX_FAILURES) return
    let worker: Worker
    try {
      worker = new Worker(new URL('./row-thread-boot.mjs', import.meta.url))
    } catch (err) {
      this.failures++
      this.opts.onFailure?.(err)
      return
    }
    this.worker = worker
    // The thread never keeps the process alive: shutdown closes it, and its jobs fall back here.
    worker.unref()
    worker.on('message', (msg: 'ready' | Reply) => {
      if (this.worker !== worker) return // a thread already given up: its jobs were built here
      if (msg === 'ready') {
        this.ready = true
        for (const wake of this.readyWaiters.splice(0)) wake()
        return
      }
      const waiting = this.waiting.get(msg.id)
      if (!waiting) return
      this.waiting.delete(msg.id)
      if ('error' in msg) return this.buildHere(waiting) // the calling thread throws the same error, as it would without the thread
      this.builtOnThread += msg.lines.length
      waiting.resolve(msg.lines)
    })
    const fail = (err: unknown) => {
      if (this.worker !== worker) return
      this.failures++
      this.worker = null
      this.ready = false
      if (!this.closed) this.opts.onFailure?.(err)
      this.buildWaitingHere()
      // Whoever waits for the thread is told it is not coming (it starts again at the next large job).
      for (const wake of this.readyWaiters.splice(0)) wake()
    }
    worker.on('error', fail)
    worker.on('exit', (code) => fail(new Error(`the row thread exited with code ${code}`)))
  }

  private buildWaitingHere (): void {
    const jobs = [...this.waiting.values()]
    this.waiting.clear()
    for (const waiting of jobs) this.buildHere(waiting)
  }

  private buildHere (waiting: Waiting): void {
    try {
      waiting.resolve(rowLines(waiting.job))
    } catch (err) {
      waiting.reject(err)
    }
  }
}
