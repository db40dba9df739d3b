import type { IncomingEvent } from '../domain/event-row.ts'
import type { ActivityRecorder } from './activity-recorder.ts'
import type { AcceptedEvents } from './steps/log.ts'
import type { IngestCaller, IngestItem } from './steps/ingest-run.ts'

/**
 * What acknowledged events say about activity: the key was used, the user sent events, each agent
 * was seen (its framework back-filled from the event's tool when it has none yet), and each agent
 * that just had events acknowledged is told to `onAgentActive` (its debounced anomaly check).
 */
export class AcceptedActivity implements AcceptedEvents {
  constructor (
    private readonly activity: Pick<ActivityRecorder, 'keyUsed' | 'eventsAccepted' | 'agentSeen'>,
    private readonly onAgentActive: (userId: string, agentId: string) => void = () => {},
    private readonly now: () => number = Date.now,
  ) {}

  accepted (caller: IngestCaller, items: readonly IngestItem[]): void {
    const now = this.now()
    if (caller.source.kind === 'api_key') this.activity.keyUsed(caller.source.keyId, now)
    this.activity.eventsAccepted(caller.userId, now, items.length)
    let last = ''
    for (const item of items) {
      const agent = item.agent!
      this.activity.agentSeen(agent.id, now, agent.framework === null ? (item.event as IncomingEvent).metadata?.tool ?? null : null)
      if (agent.id !== last) this.onAgentActive(caller.userId, agent.id)
      last = agent.id
    }
  }
}
