import type { RowBytes } from '../log/entry-codec.ts'
import type { IngestLog } from '../log/ingest-log.ts'
import type { EventShipper } from '../shipper.ts'
import type { IngestCaller, IngestionStep, IngestItem, IngestVerdict } from './ingest-run.ts'

/** Told of the events just acknowledged (src/ingest/accepted-activity.ts records who was active). */
export interface AcceptedEvents { accepted(caller: IngestCaller, items: readonly IngestItem[]): void }

/**
 * Told of each request's rows once they are in the log, before they are acknowledged (the live tail
 * publishes them): synchronous, never awaited, and must not throw.
 */
export type AcknowledgedRows = (userId: string, rows: RowBytes) => void

/**
 * `log`: the rows the `row` step built appended to the ingest log, synced; then the shipper is told
 * the user has rows waiting, the listeners of logged rows are given them, the activity is recorded
 * and the events are acknowledged.
 */
export function logStep (parts: {
  ingestLog: Pick<IngestLog, 'append'>
  shipper: Pick<EventShipper, 'acknowledged'>
  accepted: AcceptedEvents
  /** Listeners of the rows logged (read on every request: listeners may be added later). */
  logged?: readonly AcknowledgedRows[]
}): IngestionStep {
  const { ingestLog, shipper, accepted, logged = [] } = parts
  return {
    name: 'log',
    run: async (run, items) => {
      const last = await ingestLog.append(run.rows!)
      shipper.acknowledged(run.caller.userId, last)
      for (const listener of logged) {
        try {
          listener(run.caller.userId, run.rows!)
        } catch {
          // A listener's failure is its own: the events are in the log and are acknowledged.
        }
      }
      accepted.accepted(run.caller, items)
      return items.map((item): IngestVerdict => ({ kind: 'accepted', ack: { id: item.eventId, accepted: true, agentId: item.agent!.id, eventId: item.eventId } }))
    },
  }
}
