import type { FastifyBaseLogger } from 'fastify'
import { SCORE_DROPPED, scoreDropped } from '../domain/score-alerts.ts'
import type { AgentsRepository } from '../storage/agents-repository.ts'
import type { AlertsRepository } from '../storage/alerts-repository.ts'
import type { ScoreConfigsRepository } from '../storage/score-configs-repository.ts'
import type { ScoresRepository } from '../storage/scores-repository.ts'

const MINUTE_MS = 60_000
const DAY_MS = 86_400_000

export interface ScoreAlertsResult { raised: number; updated: number; cleared: number }

/**
 * The `score.dropped` rule (src/domain/score-alerts.ts) of every score config that has one: per user
 * and name, each agent's mean over the window against the threshold and its baseline. Alerts are
 * raised, kept and cleared through the alerts repository like the other rules (one open alert per
 * agent and `score.dropped:<name>`), so they reach the channels like the others. Idempotent.
 */
export class ScoreAlertsService {
  constructor (
    private readonly configs: Pick<ScoreConfigsRepository, 'withAlerts'>,
    private readonly scores: Pick<ScoresRepository, 'windows'>,
    private readonly agents: Pick<AgentsRepository, 'namesOf'>,
    private readonly alerts: Pick<AlertsRepository, 'raise' | 'clearQuiet'>,
    private readonly log: Pick<FastifyBaseLogger, 'error'>,
  ) {}

  /** Evaluates every alerting config at `nowMs` (of one user only when `userId` is given). */
  async evaluate (nowMs: number, userId?: string): Promise<ScoreAlertsResult> {
    const result: ScoreAlertsResult = { raised: 0, updated: 0, cleared: 0 }
    const byUser = new Map<string, Awaited<ReturnType<typeof this.configs.withAlerts>>>()
    for (const c of await this.configs.withAlerts()) {
      if (userId !== undefined && c.userId !== userId) continue
      byUser.set(c.userId, [...byUser.get(c.userId) ?? [], c])
    }
    for (const [user, configs] of byUser) {
      try {
        await this.evaluateUser(user, configs, nowMs, result)
      } catch (err) {
        // One user's failure must not starve the others; the next tick tries again.
        this.log.error({ err, userId: user }, 'score alert evaluation failed for a user')
      }
    }
    return result
  }

  private async evaluateUser (userId: string, configs: Awaited<ReturnType<typeof this.configs.withAlerts>>, nowMs: number, result: ScoreAlertsResult): Promise<void> {
    const agents = await this.agents.namesOf(userId)
    const reader = { userId, hidden: agents.filter((a) => a.deleted).map((a) => a.id) }
    const firing = new Set<string>()
    for (const config of configs) {
      const rule = config.alert!
      const windowFromMs = nowMs - rule.windowMinutes * MINUTE_MS
      const windows = await this.scores.windows(reader, config.name, { baselineFromMs: windowFromMs - rule.baselineDays * DAY_MS, windowFromMs, nowMs })
      for (const w of windows) {
        const finding = scoreDropped(w, rule)
        if (!finding) continue
        firing.add(`${w.agentId}\u0000${finding.rule}`)
        const { created } = await this.alerts.raise({ userId, agentId: w.agentId, rule: finding.rule, severity: finding.severity, message: finding.message, figures: finding.figures })
        result[created ? 'raised' : 'updated']++
      }
    }
    // Every score.dropped alert of the user's names that no longer fires goes quiet (or clears once acknowledged).
    result.cleared += await this.alerts.clearQuiet(agents.map((a) => a.id), firing, configs.map((c) => `${SCORE_DROPPED}${c.name}`))
  }
}
