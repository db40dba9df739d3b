import type { IncomingEvent } from '../../domain/event-row.ts'
import { newEventId } from '../../domain/ids.ts'
import type { RowBytes } from '../log/entry-codec.ts'
import { passAll } from '../pipeline.ts'
import type { RowJob } from '../row-thread.ts'
import type { EventAck, IngestionStep } from './ingest-run.ts'

/** Builds a request's rows: on the row thread for large requests (src/ingest/row-thread.ts), else here. */
export interface RowBuilder { rows(job: RowJob): RowBytes | Promise<RowBytes> }

/**
 * `row`: each event's id and its ingest log line; large requests on the row thread, the others here
 * without a promise. The lines are kept on the run for the `log` step.
 */
export function rowStep (parts: { rows: RowBuilder }): IngestionStep {
  const builder = parts.rows
  return {
    name: 'row',
    run: (run, items) => {
      const job: RowJob = { events: [], eventIds: [], agentIds: [], userId: run.caller.userId, receivedAt: run.receivedAt, source: run.source }
      if (run.prices) job.prices = run.prices
      for (const item of items) {
        item.eventId = newEventId(run.receivedAt)
        job.events.push(item.event as IncomingEvent)
        job.eventIds.push(item.eventId)
        job.agentIds.push(item.agent!.id)
      }
      if (run.parsedFrom) job.parsedFrom = { ...run.parsedFrom, indices: items.map((item) => item.index) }
      const rows = builder.rows(job)
      // No closure unless the rows come from the row thread: a request builds none it need not.
      if (rows instanceof Promise) {
        return rows.then((built: RowBytes) => {
          run.rows = built
          return passAll<EventAck>(items)
        })
      }
      run.rows = rows
      return passAll<EventAck>(items)
    },
  }
}
