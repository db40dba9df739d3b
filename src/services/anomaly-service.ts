import type { FastifyBaseLogger } from 'fastify'
import { clusterStatus } from '../domain/dashboard.ts'
import { evaluateAgent, mergeThresholds, type RuleName } from '../domain/anomaly-rules.ts'
import type { AgentsRepository } from '../storage/agents-repository.ts'
import type { AlertsRepository } from '../storage/alerts-repository.ts'
import type { AnomalyRepository, AnomalyWindows } from '../storage/anomaly-repository.ts'
import type { ErrorClustersRepository } from '../storage/error-clusters-repository.ts'
import type { ScoreAlertsService } from './score-alerts-service.ts'

const RULES: RuleName[] = ['error_rate', 'spend_spike', 'latency_spike', 'silence']
/** Agents seen within this long are evaluated on a tick (the longest window is a day plus the silence window). */
const CANDIDATE_MS = 26 * 3_600_000
/**
 * A cluster whose first event is this recent is announced as new (once). Evaluations run every
 * minute, so an hour leaves room for workers that were down; older clusters are not new any more.
 */
const NEW_CLUSTER_MS = 3_600_000

export interface EvaluationResult { evaluatedAgents: number; raised: number; updated: number; cleared: number }

/**
 * Anomaly evaluation: reads aggregates, applies the rules, records alerts, and records the error
 * clusters seen for the first time. Idempotent: running it twice (or concurrently) for the same
 * state leaves one open alert per agent and rule, and announces a new cluster once.
 */
export class AnomalyService {
  constructor (
    private readonly agents: AgentsRepository,
    private readonly alerts: AlertsRepository,
    private readonly anomalies: AnomalyRepository,
    private readonly clusters: ErrorClustersRepository,
    private readonly log: FastifyBaseLogger,
    /** The `score.dropped` rule of score configs, evaluated on each tick; none without it. */
    private readonly scoreAlerts?: Pick<ScoreAlertsService, 'evaluate'>,
  ) {}

  /** Evaluates one user's agents (all recently seen ones, or the given ones) at `nowMs`. */
  async evaluateUser (userId: string, nowMs: number, agentIds?: string[]): Promise<EvaluationResult> {
    const candidates = agentIds ?? (await this.agents.activeSince(nowMs - CANDIDATE_MS, userId)).get(userId) ?? []
    const result = await this.evaluate(new Map([[userId, candidates]]), nowMs)
    return this.addRegressions(userId, result)
  }

  /**
   * The scheduled tick: wakes ended snoozes, evaluates every recently seen agent of every user (one
   * ClickHouse query per distinct set of windows, so users on the defaults share one), then checks
   * the resolved clusters of every user that has some.
   */
  async tick (nowMs: number): Promise<EvaluationResult> {
    await this.alerts.wakeSnoozed()
    const active = await this.agents.activeSince(nowMs - CANDIDATE_MS)
    const result = await this.evaluate(active, nowMs)
    if (this.scoreAlerts) {
      const scores = await this.scoreAlerts.evaluate(nowMs)
      result.raised += scores.raised
      result.updated += scores.updated
      result.cleared += scores.cleared
    }
    for (const userId of await this.clusters.usersWithResolved()) {
      try {
        await this.addRegressions(userId, result)
      } catch (err) {
        // One user's failure must not starve the others; the next tick tries again.
        this.log.error({ err, userId }, 'regression check failed for a user')
      }
    }
    return result
  }

  private async evaluate (candidates: Map<string, string[]>, nowMs: number): Promise<EvaluationResult> {
    const users = [...candidates.keys()]
    const overrides = await this.alerts.thresholdsFor(users)
    const thresholds = new Map(users.map((u) => [u, mergeThresholds(overrides.get(u))]))
    const groups = new Map<string, { windows: AnomalyWindows; agents: { userId: string; agentId: string }[] }>()
    for (const [userId, agentIds] of candidates) {
      const t = thresholds.get(userId)!
      const windows = { errorMinutes: t.error_rate.windowMinutes, latencyMinutes: t.latency_spike.windowMinutes, silenceMinutes: t.silence.silenceMinutes }
      const key = `${windows.errorMinutes}/${windows.latencyMinutes}/${windows.silenceMinutes}`
      const group = groups.get(key) ?? { windows, agents: [] }
      for (const agentId of agentIds) group.agents.push({ userId, agentId })
      groups.set(key, group)
    }
    const result: EvaluationResult = { evaluatedAgents: 0, raised: 0, updated: 0, cleared: 0 }
    const firing = new Set<string>()
    for (const group of groups.values()) {
      result.evaluatedAgents += group.agents.length
      for (const a of await this.anomalies.aggregates(group.agents, nowMs, group.windows)) {
        for (const f of evaluateAgent(a, thresholds.get(a.userId)!)) {
          firing.add(`${a.agentId}\u0000${f.rule}`)
          const { created } = await this.alerts.raise({ userId: a.userId, agentId: a.agentId, rule: f.rule, severity: f.severity, message: f.message, figures: f.figures })
          result[created ? 'raised' : 'updated']++
        }
      }
    }
    result.cleared = await this.alerts.clearQuiet([...candidates.values()].flat(), firing, RULES)
    const pairs = [...candidates].flatMap(([userId, agentIds]) => agentIds.map((agentId) => ({ userId, agentId })))
    await this.clusters.announce(await this.anomalies.newClusters(pairs, nowMs - NEW_CLUSTER_MS))
    if (result.raised > 0) this.log.info({ ...result }, 'anomaly evaluation raised alerts')
    return result
  }

  /**
   * Raises a regression alert for each resolved cluster of the user that has a later event, and
   * clears acknowledged regression alerts whose cluster is quiet again.
   */
  private async addRegressions (userId: string, result: EvaluationResult): Promise<EvaluationResult> {
    const resolved = await this.clusters.allResolved(userId)
    const hidden = resolved.size > 0 ? await this.agents.hiddenIds(userId) : []
    const states = resolved.size > 0 ? await this.anomalies.clusterStates(userId, resolved, hidden) : []
    const regressions = states.filter((s) => clusterStatus(s.lastSeenMs, resolved.get(s.fingerprint), s.reopened) === 'open')
    result.cleared += await this.alerts.clearQuietRegressions(userId, regressions.map((r) => `regression:${r.fingerprint}`))
    for (const r of regressions) {
      const { created } = await this.alerts.raise({
        userId,
        agentId: r.agentId,
        rule: `regression:${r.fingerprint}`,
        severity: 'warning',
        message: `resolved error cluster ${r.fingerprint} happened again: ${r.sample || '(no message)'}`,
        // The cluster's facts: `error_cluster.reopened` is rendered from them.
        figures: {
          fingerprint: r.fingerprint,
          resolvedAt: new Date(resolved.get(r.fingerprint)!).toISOString(),
          firstSeenAt: new Date(r.firstSeenMs).toISOString(),
          lastSeenAt: new Date(r.lastSeenMs).toISOString(),
          events: r.count,
          sampleMessage: r.sample,
        },
      })
      result[created ? 'raised' : 'updated']++
    }
    return result
  }
}
