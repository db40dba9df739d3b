import { Queue, Worker, type JobsOptions, type Processor } from 'bullmq'
import { Redis } from 'ioredis'
import type { FastifyBaseLogger } from 'fastify'
import { isConnectionError, type RedisOutageLog } from '../storage/redis-outage.ts'

/** A BullMQ job scheduler: a job `name` with `data` every `everyMs`, kept under the id `id`. */
interface JobSchedule<Data> {
  id: string
  everyMs: number
  name: string
  data: Data
}

/** A queue's contract (from a jobs/*.queue.ts). */
export interface QueueContract {
  name: string
  defaultJobOptions: JobsOptions
}

/** What the worker role runs for a queue. */
export interface QueueWork<Data> {
  /** The thin processor (a jobs/*.processor.ts). */
  processor: Processor<Data>
  /** Jobs a worker of this process runs at once. */
  concurrency: number
  schedules: JobSchedule<Data>[]
}

/** One queue: its contract and what the worker role runs for it. */
export type QueueSpec<Data> = QueueContract & QueueWork<Data>

export interface QueueWiringOptions {
  redisUrl: string
  /** The deployment's Redis prefix: BullMQ's keys live under `${prefix}bull`. */
  prefix: string
  /** The worker role: run a worker per queue and keep the job schedulers. */
  worker: boolean
  log: FastifyBaseLogger
  /** Where the connection's errors go, and the queues' and workers' that say the connection is gone. */
  outage: RedisOutageLog
}

// Longest time between two checks that a job scheduler still exists in Redis.
const SCHEDULE_CHECK_MAX_MS = 30_000

interface Wired {
  queue: Queue
  worker: Worker | undefined
  stopKeeping: (() => Promise<void>) | undefined
}

/**
 * The one BullMQ wiring every queue of the service goes through: queues and workers on one Redis
 * connection and one key prefix, the same error and failed-job logs for each, schedulers kept alive
 * the same way, and one shutdown in order.
 */
export class QueueWiring {
  private readonly wired: Wired[] = []
  // BullMQ shares this connection among the queues and gives each worker its own copies of it (a
  // worker blocks while it waits for jobs). Its commands wait out a Redis outage (BullMQ's requirement).
  private readonly connection: Redis
  private readonly prefix: string

  constructor (private readonly opts: QueueWiringOptions) {
    this.connection = new Redis(opts.redisUrl, { maxRetriesPerRequest: null })
    opts.outage.watch(this.connection, 'queues')
    this.prefix = `${opts.prefix}bull`
  }

  /** A queue's or worker's error: part of an outage when it says the connection is gone, else logged. */
  private failed (err: Error, message: string): void {
    if (isConnectionError(err) || this.opts.outage.active) this.opts.outage.failed('queues', err)
    else this.opts.log.error({ err }, message)
  }

  /** Every queue added, in order (metrics read their job counts). */
  get all (): readonly Queue[] {
    return this.wired.map((w) => w.queue)
  }

  /**
   * Creates the queue (every role enqueues); in the worker role also its worker, and upserts its job
   * schedulers before returning.
   */
  async add<Data> (spec: QueueSpec<Data>): Promise<Queue<Data>> {
    const queue = this.queue<Data>(spec)
    await this.work(queue, spec)
    return queue
  }

  /**
   * Creates the queue alone, for a processor that needs it (one whose jobs enqueue on their own
   * queue): build what the processor calls on this queue, then start its worker with `work`.
   */
  queue<Data> (contract: QueueContract): Queue<Data> {
    const queue = new Queue<Data>(contract.name, { connection: this.connection, prefix: this.prefix, defaultJobOptions: contract.defaultJobOptions })
    queue.on('error', (err) => this.failed(err, `${contract.name} queue error`))
    this.wired.push({ queue, worker: undefined, stopKeeping: undefined })
    return queue
  }

  /**
   * In the worker role, the worker of a queue created by `queue` (once), and its job schedulers
   * upserted before returning; in other roles nothing.
   */
  async work<Data> (queue: Queue<Data>, work: QueueWork<Data>): Promise<void> {
    const { log } = this.opts
    const wired = this.wired.find((w) => w.queue === queue)
    if (!wired) throw new Error(`the ${queue.name} queue was not created by this wiring`)
    if (wired.worker) throw new Error(`the ${queue.name} queue already has its worker`)
    if (!this.opts.worker) return

    const worker = new Worker<Data>(queue.name, work.processor, { connection: this.connection, prefix: this.prefix, concurrency: work.concurrency })
    worker.on('failed', (job, err) => log.error({ err, job: job?.name, attempts: job?.attemptsMade }, `${queue.name} job failed`))
    worker.on('error', (err) => this.failed(err, `${queue.name} worker error`))
    wired.worker = worker
    if (work.schedules.length > 0) wired.stopKeeping = await keepSchedules(queue, work.schedules, log)
  }

  /** Stops keeping schedulers, lets the workers finish their current jobs, then closes the queues and the connection. */
  async close (): Promise<void> {
    await Promise.all(this.wired.map((w) => w.stopKeeping?.()))
    await Promise.all(this.wired.map((w) => w.worker?.close()))
    await Promise.all(this.wired.map((w) => w.queue.close()))
    this.connection.disconnect()
  }
}

/**
 * Upserts the queue's job schedulers, then keeps them: they live only in Redis, so a Redis restarted
 * empty or flushed loses them, and their jobs would stop until this process restarts.
 *
 * How: check that each still exists as often as the most frequent one runs (at most every 30 s), and
 * upsert only the missing ones. The other way, upserting every scheduler on a timer, is not free in
 * BullMQ: each upsert removes the scheduler's pending job and adds it again, every time and in every
 * worker process, racing with the workers that move the schedule along. The check is one read per
 * scheduler, writes only after a loss (and logs it), and upserting stays idempotent when several
 * workers find the same loss. Returns the function that stops the checks, after the one in flight.
 */
async function keepSchedules (queue: Queue, schedules: JobSchedule<unknown>[], log: FastifyBaseLogger): Promise<() => Promise<void>> {
  const upsert = (s: JobSchedule<unknown>) => queue.upsertJobScheduler(s.id, { every: s.everyMs }, { name: s.name, data: s.data })
  await Promise.all(schedules.map(upsert))

  const restoreMissing = async () => {
    for (const s of schedules) {
      try {
        if (await queue.getJobScheduler(s.id)) continue
        await upsert(s)
        log.warn({ queue: queue.name, scheduler: s.id }, 'a job scheduler was missing from Redis; re-created it')
      } catch (err) {
        log.warn({ err, queue: queue.name, scheduler: s.id }, 'could not check a job scheduler; trying again later')
      }
    }
  }
  let checking: Promise<void> | undefined
  const timer = setInterval(() => {
    checking ??= restoreMissing().finally(() => { checking = undefined })
  }, Math.min(SCHEDULE_CHECK_MAX_MS, ...schedules.map((s) => s.everyMs)))
  return async () => {
    clearInterval(timer)
    await checking
  }
}
