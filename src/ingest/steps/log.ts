import type { IngestLog } from '../log/ingest-log.ts'
import type { EventShipper } from '../shipper.ts'
import type { IngestCaller, IngestionStep, IngestItem, IngestVerdict } from './ingest-run.ts'

/** Told of the events just acknowledged (src/ingest/accepted-activity.ts records who was active). */
export interface AcceptedEvents { accepted(caller: IngestCaller, items: readonly IngestItem[]): void }

/**
 * `log`: the rows the `row` step built appended to the ingest log, synced; then the shipper is told
 * the user has rows waiting, the activity is recorded and the events are acknowledged.
 */
export function logStep (parts: {
  ingestLog: Pick<IngestLog, 'append'>
  shipper: Pick<EventShipper, 'acknowledged'>
  accepted: AcceptedEvents
}): IngestionStep {
  const { ingestLog, shipper, accepted } = parts
  return {
    name: 'log',
    run: async (run, items) => {
      const last = await ingestLog.append(run.rows!)
      shipper.acknowledged(run.caller.userId, last)
      accepted.accepted(run.caller, items)
      return items.map((item): IngestVerdict => ({ kind: 'accepted', ack: { id: item.eventId, accepted: true, agentId: item.agent!.id, eventId: item.eventId } }))
    },
  }
}
