import { Worker } from 'node:worker_threads'
import { buildEventRow, type EventSource, type IncomingEvent } from '../domain/event-row.ts'
import { pricesNamedBy, type UserPriceTable } from '../domain/pricing.ts'
import { eventLine } from '../domain/event-line.ts'
import { rowBytes, type RowBytes } from './log/entry-codec.ts'

/** The rows of one request: its events, and per event the id and agent the pipeline gave it. */
export interface RowJob {
  events: IncomingEvent[]
  eventIds: string[]
  agentIds: string[]
  userId: string
  receivedAt: number
  source: EventSource
  /** The prices the user set, looked up once for the request; absent when the user has set none. */
  prices?: UserPriceTable | undefined
  /**
   * The JSON text the events were parsed from, when the caller has it: `events` are the items at
   * `indices` of its `key` array. The row thread is sent this text instead of the events (a string
   * is copied whole, where event objects are walked, copied and rebuilt one value at a time) and
   * parses it again. Only for text parsed by plain JSON.parse into objects no one changed after.
   */
  parsedFrom?: { text: string; key: string; indices: number[] }
}

/**
 * What the row thread is sent of a job: its events, or the text they were parsed from instead; and of
 * the user's prices only those of the models its events name. A message is copied object by object:
 * a table of 200 prices costs about 0.4 ms to copy, one price 2 µs, and a lookup per event 20 ns.
 */
function threadJob (job: RowJob): RowJob {
  const events = job.parsedFrom ? [] : job.events
  if (!job.prices) return events === job.events ? job : { ...job, events }
  return { ...job, events, prices: pricesNamedBy(job.prices, job.events) }
}

/** A job the row thread was sent, with its events again (parsed from its text when it came with one). */
export function withEvents (job: RowJob): RowJob {
  const from = job.parsedFrom
  if (!from) return job
  const text = from.text.charCodeAt(0) === 0xfeff ? from.text.slice(1) : from.text // as the body parser reads it
  const items = (JSON.parse(text) as Record<string, unknown>)[from.key]
  if (!Array.isArray(items)) throw new Error(`the job's text has no array "${from.key}"`)
  const events = from.indices.map((i) => {
    if (!(i in items)) throw new Error(`the job's text has no item ${i}`)
    return items[i] as IncomingEvent
  })
  if (events.length !== job.eventIds.length) throw new Error('the job names a different number of events than ids')
  return { ...job, events, parsedFrom: undefined }
}

/** The ingest log lines of a job's events, in order: the `row` step of the pipeline. */
export function rowLines (job: RowJob): string[] {
  const lines = new Array<string>(job.events.length)
  for (let i = 0; i < job.events.length; i++) {
    lines[i] = eventLine(buildEventRow(job.events[i]!, {
      eventId: job.eventIds[i]!, userId: job.userId, agentId: job.agentIds[i]!, receivedAt: job.receivedAt, source: job.source, prices: job.prices,
    }))
  }
  return lines
}

/** The job's lines as the ingest log takes them (UTF-8, joined by newlines), built here. */
export function rowBytesOf (job: RowJob): RowBytes {
  return rowBytes(rowLines(job))
}

export interface RowThreadOptions {
  /** Jobs with fewer events are built on the calling thread (a hand-off costs more than it saves). */
  minEvents: number
  /** Told when the thread fails; its jobs are then built on the calling thread. */
  onFailure?: (err: unknown) => void
  /**
   * A thread that has answered none of its jobs for this long is taken as stuck: it is ended, and
   * its jobs are built on the calling thread (default 5 s; a job takes milliseconds).
   */
  jobTimeoutMs?: number
  /** The thread's entry module (tests give it one that never answers). */
  script?: URL
}

/** The thread's answer: the job's lines in UTF-8, joined by newlines (their memory moved, not copied), or why it failed. */
type Reply = { id: number; rows: number; bytes: Uint8Array } | { id: number; error: string }

/** A job handed to the thread, with the promise its caller awaits. */
interface Waiting { job: RowJob; since: number; resolve: (rows: RowBytes) => void; reject: (err: unknown) => void }

/** After this many failures the thread is not started again: every job is built on the calling thread. */
const MAX_FAILURES = 3
const JOB_TIMEOUT_MS = 5000

/**
 * Builds the rows of large requests (batches, OTLP exports) on a worker thread, so that the main
 * thread, which parses requests and answers them, spends on them only the hand-off: the content
 * hash, canonical JSON, pricing and the line's JSON text are most of what an event costs it.
 *
 * The thread starts at the first large job, and jobs are built on the calling thread until it is
 * ready (about half a second, while it loads the modules). A job the thread cannot build (an error
 * in it, or the thread ending) is built on the calling thread instead, so the outcome is the same as
 * without the thread: the lines, or the error building them throws. A thread that answers no job
 * for `jobTimeoutMs`, or whose answer cannot be read, is ended and counts as failed, the same way.
 */
export class RowThread {
  private worker: Worker | null = null
  private ready = false
  private failures = 0
  private nextId = 1
  private readonly waiting = new Map<number, Waiting>()
  private readyWaiters: (() => void)[] = []
  private closed = false
  /** Checks, while jobs wait, that the thread still answers them. */
  private watchdog: NodeJS.Timeout | null = null
  /** When the thread last answered a job (performance.now(): a clock that never steps). */
  private lastAnswer = 0
  private readonly jobTimeoutMs: number
  /** Events whose lines the thread built. */
  builtOnThread = 0
  /** Events sent to the thread as the text they were parsed from, not as objects. */
  sentAsText = 0

  constructor (private readonly opts: RowThreadOptions) {
    this.jobTimeoutMs = opts.jobTimeoutMs ?? JOB_TIMEOUT_MS
  }

  /** The rows of the job's events, built on the thread when the job is large and the thread is up. */
  rows (job: RowJob): RowBytes | Promise<RowBytes> {
    if (this.opts.minEvents <= 0 || job.events.length < this.opts.minEvents || this.closed) return rowBytesOf(job)
    if (!this.ready) {
      this.start()
      return rowBytesOf(job)
    }
    const id = this.nextId++
    return new Promise((resolve, reject) => {
      const waiting: Waiting = { job, since: performance.now(), resolve, reject }
      try {
        this.worker!.postMessage({ id, job: threadJob(job) })
        if (job.parsedFrom) this.sentAsText += job.events.length
      } catch {
        return this.buildHere(waiting) // a value the hand-off cannot copy: built here, as without the thread
      }
      this.waiting.set(id, waiting)
      this.watch()
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
    if (this.watchdog) clearInterval(this.watchdog)
    this.watchdog = null
    this.buildWaitingHere()
    for (const wake of this.readyWaiters.splice(0)) wake()
    if (worker) await worker.terminate()
  }

  /**
   * Starts the watchdog while jobs wait: the thread must answer one within jobTimeoutMs of the last
   * answer or of the oldest job's hand-off, whichever is later (a long queue of jobs it keeps
   * answering is not a stuck thread).
   */
  private watch (): void {
    if (this.watchdog) return
    this.watchdog = setInterval(() => {
      const oldest = this.waiting.values().next().value as Waiting | undefined // a Map keeps insertion order
      if (!oldest) {
        clearInterval(this.watchdog!)
        this.watchdog = null
      } else if (performance.now() - Math.max(oldest.since, this.lastAnswer) > this.jobTimeoutMs && this.worker) {
        this.giveUp(this.worker, new Error(`the row thread answered no job for ${this.jobTimeoutMs} ms`))
      }
    }, Math.max(10, this.jobTimeoutMs / 4))
    this.watchdog.unref()
  }

  private start (): void {
    if (this.worker || this.closed || this.failures >= MAX_FAILURES) return
    let worker: Worker
    try {
      worker = new Worker(this.opts.script ?? new URL('./row-thread-boot.mjs', import.meta.url))
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
      this.lastAnswer = performance.now()
      const waiting = this.waiting.get(msg.id)
      if (!waiting) return
      this.waiting.delete(msg.id)
      if ('error' in msg) return this.buildHere(waiting) // the calling thread throws the same error, as it would without the thread
      // The log takes the row count as given: an answer that does not hold one row per event is built here.
      if (msg.rows !== waiting.job.events.length || !(msg.bytes instanceof Uint8Array)) return this.buildHere(waiting)
      this.builtOnThread += msg.rows
      waiting.resolve({ rows: msg.rows, bytes: Buffer.from(msg.bytes.buffer, msg.bytes.byteOffset, msg.bytes.byteLength) })
    })
    worker.on('error', (err) => this.giveUp(worker, err))
    // An answer that cannot be read: which job it was for is unknown, so the thread is given up.
    worker.on('messageerror', (err) => this.giveUp(worker, err))
    worker.on('exit', (code) => this.giveUp(worker, new Error(`the row thread exited with code ${code}`)))
  }

  /** The thread failed (an error, an exit, an unreadable answer, no answer): it is ended, its jobs built here. */
  private giveUp (worker: Worker, err: unknown): void {
    if (this.worker !== worker) return
    this.failures++
    this.worker = null
    this.ready = false
    worker.terminate().catch(() => {})
    if (!this.closed) this.opts.onFailure?.(err)
    this.buildWaitingHere()
    // Whoever waits for the thread is told it is not coming (it starts again at the next large job).
    for (const wake of this.readyWaiters.splice(0)) wake()
  }

  private buildWaitingHere (): void {
    const jobs = [...this.waiting.values()]
    this.waiting.clear()
    for (const waiting of jobs) this.buildHere(waiting)
  }

  private buildHere (waiting: Waiting): void {
    try {
      waiting.resolve(rowBytesOf(waiting.job))
    } catch (err) {
      waiting.reject(err)
    }
  }
}
