import type { FastifyBaseLogger } from 'fastify'
import type { EventRow } from '../domain/event-row.ts'
import { storeUnavailable } from '../errors.ts'

interface Pending {
  rows: EventRow[]
  bytes: number
  resolve: () => void
  reject: (err: Error) => void
}

export interface WriterCaps { maxRows: number; maxBytes: number }

/** Inserts rows into the event store; resolves once they are committed. */
export type InsertRows = (rows: EventRow[]) => Promise<void>

/** A cheap upper-bound estimate of a row's JSON size, without serialising it twice. */
export function estimateRowBytes(row: EventRow): number {
  return 700 + row.input.length + row.reasoning.length + row.metadata.length + row.error_message.length +
    row.git.length + row.cwd.length + row.tools_considered.reduce((n, t) => n + t.length + 3, 0)
}

/**
 * Group commit (ARCHITECTURE §1). `append` resolves only when the rows are committed. One insert is
 * in flight at a time; rows that arrive meanwhile form the next batch, sent the moment the current
 * insert returns, up to the row and byte caps. Rows of one `append` call always travel in one
 * insert. If an insert fails, every append in that batch is rejected with a 503, and nothing else.
 */
export class EventWriter {
  private queue: Pending[] = []
  private inFlight: Promise<void> | null = null
  private closed = false
  private idleWaiters: (() => void)[] = []

  constructor(
    private readonly insert: InsertRows,
    private readonly caps: WriterCaps,
    private readonly log: FastifyBaseLogger,
  ) {}

  append(rows: EventRow[]): Promise<void> {
    if (this.closed) return Promise.reject(storeUnavailable())
    if (rows.length === 0) return Promise.resolve()
    let bytes = 0
    for (const row of rows) bytes += estimateRowBytes(row)
    return new Promise<void>((resolve, reject) => {
      this.queue.push({ rows, bytes, resolve, reject })
      if (!this.inFlight) this.inFlight = this.run()
    })
  }

  /** Rows waiting for their insert, and inserts under way (for health and tests). */
  get pendingRows(): number {
    return this.queue.reduce((n, p) => n + p.rows.length, 0)
  }

  /** Refuses new rows and resolves once every accepted row is committed or refused. */
  async close(): Promise<void> {
    this.closed = true
    if (!this.inFlight) return
    await new Promise<void>((resolve) => this.idleWaiters.push(resolve))
  }

  private takeBatch(): Pending[] {
    const batch: Pending[] = []
    let rows = 0
    let bytes = 0
    while (this.queue.length > 0) {
      const next = this.queue[0]!
      if (batch.length > 0 && (rows + next.rows.length > this.caps.maxRows || bytes + next.bytes > this.caps.maxBytes)) break
      batch.push(this.queue.shift()!)
      rows += next.rows.length
      bytes += next.bytes
    }
    return batch
  }

  private async run(): Promise<void> {
    while (this.queue.length > 0) {
      const batch = this.takeBatch()
      const rows = batch.length === 1 ? batch[0]!.rows : batch.flatMap((p) => p.rows)
      try {
        await this.insert(rows)
        for (const p of batch) p.resolve()
      } catch (err) {
        this.log.error({ err, rows: rows.length, requests: batch.length }, 'event insert failed; answering 503 to every request in the batch')
        const refusal = storeUnavailable()
        for (const p of batch) p.reject(refusal)
      }
    }
    this.inFlight = null
    for (const wake of this.idleWaiters.splice(0)) wake()
  }
}
