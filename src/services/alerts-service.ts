import { mergeThresholds } from '../domain/anomaly-rules.ts'

/** Thresholds per rule, field by field (the shape of schemas/alert.ts). */
type RuleFields = Record<string, Record<string, number | boolean>>
import { pageOf } from '../domain/cursor.ts'
import { conflict, notFound } from '../http-error.ts'
import { startOf } from './dashboard-service.ts'
import type { Alert, AlertsRepository, AlertStatus } from '../storage/alerts-repository.ts'

/** What each alert action moves from, to, and the status in which repeating it is a no-op. */
const TRANSITIONS = {
  acknowledge: { from: ['active', 'snoozed'], to: 'acknowledged' },
  snooze: { from: ['active', 'snoozed'], to: 'snoozed' },
  unacknowledge: { from: ['acknowledged'], to: 'active' },
} as const satisfies Record<string, { from: AlertStatus[]; to: AlertStatus }>

export type AlertAction = keyof typeof TRANSITIONS

const VERB: Record<AlertAction, string> = { acknowledge: 'acknowledged', snooze: 'snoozed', unacknowledge: 'unacknowledged' }
const HINT: Record<AlertStatus, string> = {
  acknowledged: ' (unacknowledge it first)',
  active: '',
  snoozed: '',
}

/** Why `action` does not apply to the alert: its status, and the statuses the action moves from. */
export function refusal (action: AlertAction, alert: Pick<Alert, 'id' | 'status'>): string {
  const from = TRANSITIONS[action].from.join(' or ')
  const article = /^[aeiou]/.test(from) ? 'an' : 'a'
  return `alert ${alert.id} is ${alert.status}; only ${article} ${from} alert can be ${VERB[action]}${HINT[alert.status]}`
}

/** What the service reads and changes of the alerts repository. */
export type AlertStore = Pick<AlertsRepository, 'list' | 'counts' | 'transition' | 'thresholds' | 'setThresholds'>

/**
 * Alerts as the dashboard handles them. Transitions: active|snoozed → acknowledged; active|snoozed →
 * snoozed (re-snoozing extends); acknowledged → active. Repeating a transition that already holds
 * answers the alert unchanged; a transition from a state that does not allow it is a 409.
 */
export class AlertsService {
  constructor (private readonly alerts: AlertStore) {}

  /** Newest first; `count` adds the counts per status. */
  async list (userId: string, settledAt: number, q: { status: AlertStatus | 'all'; count: boolean; limit: number; cursor?: string | undefined }) {
    const start = startOf('alerts', q.cursor, settledAt)
    const rows = await this.alerts.list(userId, q.status, q.limit + 1, start.after)
    const page = pageOf('alerts', start.asOf, rows, q.limit, (a) => ({ ms: Date.parse(a.createdAt), id: a.id }))
    const body = { alerts: page.items, nextCursor: page.nextCursor }
    return q.count ? { ...body, counts: await this.alerts.counts(userId) } : body
  }

  async transition (userId: string, id: string, action: AlertAction, snoozeHours?: number): Promise<Alert> {
    const { from, to } = TRANSITIONS[action]
    const result = await this.alerts.transition(userId, id, [...from], to, snoozeHours)
    if (!result) throw notFound()
    if (!result.changed && result.alert.status !== to) {
      throw conflict('invalid_transition', result.alert.clearedAt !== null
        ? `alert ${result.alert.id} was cleared at ${result.alert.clearedAt} and is closed; if its anomaly returns, a new alert opens`
        : refusal(action, result.alert))
    }
    return result.alert
  }

  async settings (userId: string) {
    const overrides = await this.alerts.thresholds(userId)
    return { thresholds: mergeThresholds(overrides) as unknown as RuleFields, overrides: overrides as RuleFields }
  }

  async replaceSettings (userId: string, overrides: RuleFields) {
    await this.alerts.setThresholds(userId, overrides)
    return { thresholds: mergeThresholds(overrides) as unknown as RuleFields, overrides }
  }
}
