import { mergeThresholds } from '../domain/anomaly-rules.ts'

/** Thresholds per rule, field by field (the shape of schemas/alert.ts). */
type RuleFields = Record<string, Record<string, number | boolean>>
import { conflict, notFound } from '../errors.ts'
import type { Alert, AlertsRepository, AlertStatus } from '../storage/alerts-repository.ts'

/** What each alert action moves from, to, and the status in which repeating it is a no-op. */
const TRANSITIONS = {
  acknowledge: { from: ['active', 'snoozed'], to: 'acknowledged' },
  snooze: { from: ['active', 'snoozed'], to: 'snoozed' },
  unacknowledge: { from: ['acknowledged'], to: 'active' },
} as const satisfies Record<string, { from: AlertStatus[]; to: AlertStatus }>

export type AlertAction = keyof typeof TRANSITIONS

/**
 * Alerts as the dashboard handles them. Transitions: active|snoozed → acknowledged; active|snoozed →
 * snoozed (re-snoozing extends); acknowledged → active. Repeating a transition that already holds
 * answers the alert unchanged; a transition from a state that does not allow it is a 409.
 */
export class AlertsService {
  constructor(private readonly alerts: AlertsRepository) {}

  async list(userId: string, q: { status: AlertStatus | 'all'; count: boolean; limit: number }) {
    const list = await this.alerts.list(userId, q.status, q.limit)
    return q.count ? { alerts: list, counts: await this.alerts.counts(userId) } : { alerts: list }
  }

  async transition(userId: string, id: string, action: AlertAction, snoozeHours?: number): Promise<Alert> {
    const { from, to } = TRANSITIONS[action]
    const result = await this.alerts.transition(userId, id, [...from], to, snoozeHours)
    if (!result) throw notFound()
    if (!result.changed && result.alert.status !== to) throw conflict('invalid_transition')
    return result.alert
  }

  async settings(userId: string) {
    const overrides = await this.alerts.thresholds(userId)
    return { thresholds: mergeThresholds(overrides) as unknown as RuleFields, overrides: overrides as RuleFields }
  }

  async replaceSettings(userId: string, overrides: RuleFields) {
    await this.alerts.setThresholds(userId, overrides)
    return { thresholds: mergeThresholds(overrides) as unknown as RuleFields, overrides }
  }
}
