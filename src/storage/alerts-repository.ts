import type pg from 'pg'
import { newCuid } from '../domain/ids.ts'
import { iso, isoOrNull } from './timestamps.ts'

export type AlertStatus = 'active' | 'acknowledged' | 'snoozed'

export type Alert = {
  id: string
  agentId: string
  agent: { id: string; displayName: string }
  agentDeleted: boolean
  rule: string
  severity: 'warning' | 'critical'
  message: string
  figures: Record<string, unknown>
  status: AlertStatus
  snoozedUntil: string | null
  /** Changes into firing: the opening, then each time the condition holds again after an evaluation found it quiet. */
  triggerCount: number
  createdAt: string
  updatedAt: string
  /** The last change into firing. */
  lastTriggeredAt: string
  /** The last evaluation that found the condition true. */
  lastSeenFiringAt: string
  acknowledgedAt: string | null
  clearedAt: string | null
}

export interface RaiseInput {
  userId: string
  agentId: string
  rule: string
  severity: string
  message: string
  figures: Record<string, unknown>
}

/** An alert that opened (a new alert, not an update of an open one) or cleared: what people are told about. */
export interface AlertStateChange { change: 'opened' | 'cleared'; ids: string[] }
export type AlertStateListener = (change: AlertStateChange) => Promise<void>

// A snooze that has ended reads as active even before the scheduled tick writes it back.
const STATUS = 'CASE WHEN a.status = \'snoozed\' AND a.snoozed_until <= now() THEN \'active\' ELSE a.status END'
const COLUMNS = `a.id, a.agent_id, g.display_name AS agent_name, (g.deleted_at IS NOT NULL) AS agent_deleted, a.rule, a.severity, a.message, a.figures,
  ${STATUS} AS status, CASE WHEN ${STATUS} = 'snoozed' THEN a.snoozed_until END AS snoozed_until, a.trigger_count,
  a.created_at, a.updated_at, a.last_triggered_at, a.last_seen_firing_at, a.acknowledged_at, a.cleared_at`

function toAlert (r: Record<string, any>): Alert {
  return {
    id: r.id,
    agentId: r.agent_id,
    agent: { id: r.agent_id, displayName: r.agent_name },
    agentDeleted: r.agent_deleted,
    rule: r.rule,
    severity: r.severity,
    message: r.message,
    figures: r.figures,
    status: r.status,
    snoozedUntil: isoOrNull(r.snoozed_until),
    triggerCount: r.trigger_count,
    createdAt: iso(r.created_at),
    updatedAt: iso(r.updated_at),
    lastTriggeredAt: iso(r.last_triggered_at),
    lastSeenFiringAt: iso(r.last_seen_firing_at),
    acknowledgedAt: isoOrNull(r.acknowledged_at),
    clearedAt: isoOrNull(r.cleared_at),
  }
}

/** Alerts and alert settings in Postgres. Every method that takes a user id is scoped to that user. */
export class AlertsRepository {
  private readonly listeners: AlertStateListener[] = []

  constructor (private readonly db: pg.Pool) {}

  /**
   * Calls `listener` after each state change this repository writes (an alert opened, alerts
   * cleared), and waits for it. A listener must not throw.
   */
  onStateChange (listener: AlertStateListener): void {
    this.listeners.push(listener)
  }

  private async changed (change: AlertStateChange['change'], ids: string[]): Promise<void> {
    if (ids.length === 0) return
    for (const listener of this.listeners) await listener({ change, ids })
  }

  /**
   * Raises an alert or, when the agent already has an open one for the rule, updates it (figures,
   * message, severity, `lastSeenFiringAt`) without touching its status. The trigger count and time
   * move only when the open alert was quiet at the last evaluation (a change into firing), not at
   * each evaluation that finds it still firing. Safe under concurrent evaluations: the partial
   * unique index admits one open alert per (agent, rule), and the row lock orders the updates.
   */
  async raise (input: RaiseInput): Promise<{ id: string; created: boolean }> {
    const { rows } = await this.db.query(
      `/* svc:alert_raise */ INSERT INTO alerts (id, user_id, agent_id, rule, severity, message, figures)
       VALUES ($1, $2, $3, $4, $5, $6, $7)
       ON CONFLICT (agent_id, rule) WHERE cleared_at IS NULL DO UPDATE SET
         severity = EXCLUDED.severity, message = EXCLUDED.message, figures = EXCLUDED.figures,
         trigger_count = alerts.trigger_count + CASE WHEN alerts.firing THEN 0 ELSE 1 END,
         last_triggered_at = CASE WHEN alerts.firing THEN alerts.last_triggered_at ELSE now() END,
         last_seen_firing_at = now(), firing = true, updated_at = now()
       RETURNING id, (xmax = 0) AS created`,
      [newCuid(), input.userId, input.agentId, input.rule, input.severity, input.message, input.figures],
    )
    if (rows[0].created) await this.changed('opened', [rows[0].id])
    return { id: rows[0].id, created: rows[0].created }
  }

  /**
   * Of the open alerts of these agents whose rule no longer fires: clears the acknowledged ones, and
   * marks the others quiet (their next firing is a new trigger). Returns how many it cleared.
   */
  async clearQuiet (agentIds: string[], firing: Set<string>, rules: string[]): Promise<number> {
    if (agentIds.length === 0) return 0
    const { rows } = await this.db.query(
      `/* svc:alert_open */ SELECT id, agent_id, rule, status, firing FROM alerts
       WHERE agent_id = ANY($1) AND rule = ANY($2) AND cleared_at IS NULL`,
      [agentIds, rules],
    )
    const quiet = rows.filter((r) => !firing.has(`${r.agent_id}\u0000${r.rule}`))
    const toQuiet = quiet.filter((r) => r.status !== 'acknowledged' && r.firing).map((r) => r.id)
    if (toQuiet.length > 0) {
      await this.db.query('/* svc:alert_quiet */ UPDATE alerts SET firing = false, updated_at = now() WHERE id = ANY($1) AND cleared_at IS NULL AND firing', [toQuiet])
    }
    const toClear = quiet.filter((r) => r.status === 'acknowledged').map((r) => r.id)
    if (toClear.length === 0) return 0
    const res = await this.db.query(
      '/* svc:alert_clear */ UPDATE alerts SET cleared_at = now(), firing = false, updated_at = now() WHERE id = ANY($1) AND cleared_at IS NULL RETURNING id',
      [toClear],
    )
    await this.changed('cleared', res.rows.map((r) => r.id))
    return res.rows.length
  }

  /**
   * Clears every open alert of one of the user's agents (it is being deleted: its anomalies are over
   * for good, and the channels are told, so that a PagerDuty incident resolves). Returns how many.
   */
  async clearOfAgent (userId: string, agentId: string): Promise<number> {
    const res = await this.db.query(
      `/* svc:alert_clear_agent */ UPDATE alerts SET cleared_at = now(), firing = false, updated_at = now()
       WHERE user_id = $1 AND agent_id = $2 AND cleared_at IS NULL RETURNING id`,
      [userId, agentId],
    )
    await this.changed('cleared', res.rows.map((r) => r.id))
    return res.rows.length
  }

  /**
   * Clears the user's acknowledged regression alerts whose cluster is not regressing now (resolved
   * again, or re-opened by hand), so that its next regression opens a new, active alert.
   */
  async clearQuietRegressions (userId: string, firing: string[]): Promise<number> {
    await this.db.query(
      `/* svc:alert_quiet_regressions */ UPDATE alerts SET firing = false, updated_at = now()
       WHERE user_id = $1 AND rule LIKE 'regression:%' AND status <> 'acknowledged' AND cleared_at IS NULL AND firing AND NOT (rule = ANY($2))`,
      [userId, firing],
    )
    const res = await this.db.query(
      `/* svc:alert_clear_regressions */ UPDATE alerts SET cleared_at = now(), firing = false, updated_at = now()
       WHERE user_id = $1 AND rule LIKE 'regression:%' AND status = 'acknowledged' AND cleared_at IS NULL AND NOT (rule = ANY($2))
       RETURNING id`,
      [userId, firing],
    )
    await this.changed('cleared', res.rows.map((r) => r.id))
    return res.rows.length
  }

  /**
   * Clears the user's acknowledged regression alert of one cluster (it was resolved or re-opened by
   * hand), or marks it quiet when it is not acknowledged (its next regression is a new trigger).
   */
  async clearRegression (userId: string, fingerprint: string): Promise<void> {
    await this.db.query(
      `/* svc:alert_quiet_regression */ UPDATE alerts SET firing = false, updated_at = now()
       WHERE user_id = $1 AND rule = $2 AND status <> 'acknowledged' AND cleared_at IS NULL AND firing`,
      [userId, `regression:${fingerprint}`],
    )
    const res = await this.db.query(
      `/* svc:alert_clear_regression */ UPDATE alerts SET cleared_at = now(), firing = false, updated_at = now()
       WHERE user_id = $1 AND rule = $2 AND status = 'acknowledged' AND cleared_at IS NULL RETURNING id`,
      [userId, `regression:${fingerprint}`],
    )
    await this.changed('cleared', res.rows.map((r) => r.id))
  }

  /** Writes back snoozes that have ended (reads already show them active). */
  async wakeSnoozed (): Promise<number> {
    const res = await this.db.query(
      `/* svc:alert_wake */ UPDATE alerts SET status = 'active', snoozed_until = NULL, updated_at = now()
       WHERE status = 'snoozed' AND snoozed_until <= now()`,
    )
    return res.rowCount ?? 0
  }

  /**
   * A page of the user's alerts, newest first. The order is by creation, which never changes (a
   * re-triggered alert keeps its place), so a walk over pages hands out each alert once.
   */
  async list (userId: string, status: AlertStatus | 'all', limit: number, after: { ms: number; id: string } | null = null): Promise<Alert[]> {
    const { rows } = await this.db.query(
      `/* svc:alert_list */ SELECT ${COLUMNS} FROM alerts a JOIN agents g ON g.id = a.agent_id
       WHERE a.user_id = $1 AND ($2 = 'all' OR ${STATUS} = $2)
         AND ($4::bigint IS NULL OR (date_trunc('milliseconds', a.created_at), a.id) < ('epoch'::timestamptz + $4::bigint * interval '1 millisecond', $5::text))
       ORDER BY date_trunc('milliseconds', a.created_at) DESC, a.id DESC LIMIT $3`,
      [userId, status, limit, after?.ms ?? null, after?.id ?? ''],
    )
    return rows.map(toAlert)
  }

  async counts (userId: string): Promise<Record<AlertStatus | 'total', number>> {
    const { rows } = await this.db.query(
      `/* svc:alert_counts */ SELECT ${STATUS} AS status, count(*)::int AS n FROM alerts a WHERE a.user_id = $1 GROUP BY 1`,
      [userId],
    )
    const counts = { active: 0, acknowledged: 0, snoozed: 0, total: 0 }
    for (const r of rows) {
      counts[r.status as AlertStatus] = r.n
      counts.total += r.n
    }
    return counts
  }

  async get (userId: string, id: string): Promise<Alert | null> {
    const { rows } = await this.db.query(
      `/* svc:alert_get */ SELECT ${COLUMNS} FROM alerts a JOIN agents g ON g.id = a.agent_id WHERE a.id = $1 AND a.user_id = $2`,
      [id, userId],
    )
    return rows[0] ? toAlert(rows[0]) : null
  }

  /** These alerts with the user each belongs to, whoever that is (for notifications). */
  async withOwners (ids: string[]): Promise<{ userId: string; alert: Alert }[]> {
    const { rows } = await this.db.query(
      `/* svc:alert_with_owners */ SELECT a.user_id, ${COLUMNS} FROM alerts a JOIN agents g ON g.id = a.agent_id WHERE a.id = ANY($1)`,
      [ids],
    )
    return rows.map((r) => ({ userId: r.user_id, alert: toAlert(r) }))
  }

  /**
   * Moves the caller's open alert from one of `from` to `to`; null when the alert is not theirs; the
   * current alert unchanged (changed false) when its status is not one of `from` or it was cleared
   * (a cleared alert is closed: the unique index of open alerts no longer covers it).
   */
  async transition (userId: string, id: string, from: AlertStatus[], to: AlertStatus, snoozeHours?: number): Promise<{ alert: Alert; changed: boolean } | null> {
    const res = await this.db.query(
      `/* svc:alert_transition */ UPDATE alerts a SET status = $4, updated_at = now(),
         snoozed_until = CASE WHEN $4 = 'snoozed' THEN now() + make_interval(hours => $5::int) END,
         acknowledged_at = CASE WHEN $4 = 'acknowledged' THEN now() WHEN $4 = 'active' THEN NULL ELSE a.acknowledged_at END
       WHERE a.id = $1 AND a.user_id = $2 AND ${STATUS} = ANY($3) AND a.cleared_at IS NULL`,
      [id, userId, from, to, snoozeHours ?? 0],
    )
    const alert = await this.get(userId, id)
    if (!alert) return null
    return { alert, changed: (res.rowCount ?? 0) > 0 }
  }

  async thresholds (userId: string): Promise<Record<string, Record<string, unknown>>> {
    const { rows } = await this.db.query('/* svc:alert_settings_get */ SELECT thresholds FROM alert_settings WHERE user_id = $1', [userId])
    return rows[0]?.thresholds ?? {}
  }

  /** Overrides of many users at once (users without settings are absent). */
  async thresholdsFor (userIds: string[]): Promise<Map<string, Record<string, Record<string, unknown>>>> {
    if (userIds.length === 0) return new Map()
    const { rows } = await this.db.query('/* svc:alert_settings_many */ SELECT user_id, thresholds FROM alert_settings WHERE user_id = ANY($1)', [userIds])
    return new Map(rows.map((r) => [r.user_id, r.thresholds]))
  }

  async setThresholds (userId: string, thresholds: Record<string, unknown>): Promise<void> {
    await this.db.query(
      `/* svc:alert_settings_set */ INSERT INTO alert_settings (user_id, thresholds) VALUES ($1, $2)
       ON CONFLICT (user_id) DO UPDATE SET thresholds = EXCLUDED.thresholds, updated_at = now()`,
      [userId, thresholds],
    )
  }
}
