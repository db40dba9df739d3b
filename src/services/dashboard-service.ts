import { agentKpis, agentOf, calendar, clusterStatus, firstContext, groupTotals, traceSpans, windowStart, zeroTokens, DAY_MS, CALENDAR_DAYS } from '../domain/dashboard.ts'
import { isCuid } from '../domain/ids.ts'
import { clampInt, sinceBound } from '../domain/query-params.ts'
import { pageOf, pageStart, type CursorList, type PageStart } from '../domain/cursor.ts'
import { conflict, invalidCursor, notFound } from '../http-error.ts'
import type { AgentsRepository, OwnedAgentProfile } from '../storage/agents-repository.ts'
import type { AlertsRepository } from '../storage/alerts-repository.ts'
import type { ClusterAggregate, DashboardEvent, DashboardRepository, Reader, SpendRow } from '../storage/dashboard-repository.ts'
import type { ErrorClustersRepository } from '../storage/error-clusters-repository.ts'
import { TRACE_SPANS_MAX } from '../../schemas/dashboard.ts'
import type { ScoresRepository } from '../storage/scores-repository.ts'
import { scoreView } from './score-service.ts'

/**
 * The caller of a dashboard read: the reader (user, hidden agents), the names of their agents, and the
 * request's snapshot instant (`settledAt`, where a new walk over a paged list starts).
 */
export interface DashboardReader extends Reader { names: ReadonlyMap<string, string>; settledAt: number }

/** The models of spend rows by model whose events had no price (neither the catalogue's nor the user's), with how many. */
export function unpricedModels (byModel: SpendRow[]): { model: string; eventCount: number }[] {
  return byModel.filter((s) => s.unpricedEvents > 0).map((s) => ({ model: s.key, eventCount: s.unpricedEvents }))
}

/** Where the requested page of a list starts; a cursor this list did not hand out is a 400. */
export function startOf (list: CursorList, cursor: string | undefined, settledAt: number): PageStart {
  const start = pageStart(list, cursor, settledAt)
  if (!start) throw invalidCursor()
  return start
}

/** The dashboard reads the service composes (DashboardRepository is the one implementation). */
export type DashboardReads = Pick<DashboardRepository,
  'events' | 'sessions' | 'traces' | 'eventsOf' | 'clusters' | 'reopened' | 'spendBreakdown' | 'spend' | 'agentFigures' | 'agentWindow'>
/** What the service reads and changes of the reader's agents. */
export type AgentStore = Pick<AgentsRepository, 'namesOf' | 'pageOwned' | 'profileOwned' | 'update'>
/** The resolution state of error clusters. */
export type ClusterStates = Pick<ErrorClustersRepository, 'resolvedAt' | 'setResolved'>
/** The alerts a cluster's resolution clears. */
export type RegressionAlerts = Pick<AlertsRepository, 'clearRegression'>

/** The lenient query values of the dashboard lists, as sent. */
type Query = { limit?: string | undefined; since?: string | undefined; agentId?: string | undefined; cursor?: string | undefined }

/**
 * What the /v1/me routes answer, composed from the repositories and the rules of domain/dashboard.ts.
 * Lenient query values (limit, since, agentId) are interpreted here, by the spec's rules.
 */
export class DashboardService {
  constructor (
    private readonly dashboard: DashboardReads,
    private readonly agents: AgentStore,
    private readonly clusters: ClusterStates,
    private readonly alerts: RegressionAlerts,
    /** The scores trace and session details carry; none without it. */
    private readonly scores?: Pick<ScoresRepository, 'of'>,
  ) {}

  /** The scores of a trace or session (whole and per span), read beside its events. */
  private async scoresOf (r: DashboardReader, target: { traceId: string } | { sessionId: string }) {
    return this.scores ? (await this.scores.of(r, target, r.settledAt)).map((s) => scoreView(r.names, s)) : []
  }

  /** The user as a reader: their soft-deleted agents (hidden from every read) and every agent's name. */
  async readerOf (userId: string, settledAt: number): Promise<DashboardReader> {
    const all = await this.agents.namesOf(userId)
    return { userId, settledAt, hidden: all.filter((a) => a.deleted).map((a) => a.id), names: new Map(all.map((a) => [a.id, a.displayName])) }
  }

  private withAgent (r: DashboardReader, e: DashboardEvent) {
    return { ...e, agent: agentOf(r.names, e.agentId) }
  }

  /** limit clamps to 1..1000 (default 50); since and agentId that do not fit are dropped. */
  async events (r: DashboardReader, q: Query) {
    const start = startOf('events', q.cursor, r.settledAt)
    const page = await this.dashboard.events(r, {
      limit: clampInt(q.limit, 1, 1000, 50),
      sinceMs: sinceBound(q.since, start.asOf),
      agentId: q.agentId && isCuid(q.agentId) ? q.agentId : undefined,
      start,
    })
    return { events: page.items.map((e) => this.withAgent(r, e)), nextCursor: page.nextCursor }
  }

  /** limit clamps to 1..100 (default 20). */
  async sessions (r: DashboardReader, q: Query) {
    const page = await this.dashboard.sessions(r, { limit: clampInt(q.limit, 1, 100, 20), start: startOf('sessions', q.cursor, r.settledAt) })
    return { sessions: page.items.map((s) => this.summary(r, s)), nextCursor: page.nextCursor }
  }

  private summary<S extends { events: number; agents: string[] }>(r: DashboardReader, s: S) {
    const { events, agents, ...rest } = s
    return { ...rest, eventCount: events, agents: agents.map((id) => agentOf(r.names, id)) }
  }

  async session (r: DashboardReader, id: string) {
    const [list, scores] = await Promise.all([this.dashboard.eventsOf(r, 'session_id', id), this.scoresOf(r, { sessionId: id })])
    if (list.length === 0) throw notFound()
    return { sessionId: id, ...groupTotals(list, r.names), events: list.map((e) => this.withAgent(r, e)), scores }
  }

  /** since: 24h | 7d | 30d | all (default 7d; anything else is dropped); limit clamps to 1..200 (default 50). */
  async traces (r: DashboardReader, q: Query) {
    const start = startOf('traces', q.cursor, r.settledAt)
    const page = await this.dashboard.traces(r, { limit: clampInt(q.limit, 1, 200, 50), sinceMs: sinceBound(q.since, start.asOf, '7d'), start })
    return { traces: page.items.map((s) => this.summary(r, s)), nextCursor: page.nextCursor }
  }

  /**
   * The whole trace as one list of spans linked into a tree. A read holds every span in memory at
   * once, so a run longer than TRACE_SPANS_MAX (about 10 MB of JSON) is cut there and says so.
   */
  async trace (r: DashboardReader, traceId: string) {
    const [list, scores] = await Promise.all([this.dashboard.eventsOf(r, 'trace_id', traceId, TRACE_SPANS_MAX + 1), this.scoresOf(r, { traceId })])
    if (list.length === 0) throw notFound()
    const truncated = list.length > TRACE_SPANS_MAX
    if (truncated) list.length = TRACE_SPANS_MAX
    const cwd = firstContext(list, 'cwd')
    return {
      traceId,
      ...groupTotals(list, r.names),
      git: firstContext(list, 'git'),
      cwd: typeof cwd === 'string' ? cwd : null,
      truncated,
      ...traceSpans(list),
      scores,
    }
  }

  private present (r: DashboardReader, c: ClusterAggregate, resolvedAt: number | undefined, reopened: Set<string>) {
    const { lastSeenMs, agents, ...rest } = c
    return {
      ...rest,
      agents: agents.map((id) => agentOf(r.names, id)),
      status: clusterStatus(lastSeenMs, resolvedAt, reopened.has(c.fingerprint)),
      resolvedAt: resolvedAt === undefined ? null : new Date(resolvedAt).toISOString(),
    }
  }

  /** since: 24h | 7d | 30d | all (default 7d; anything else is dropped). Up to 500 clusters, latest first. */
  async errorClusters (r: DashboardReader, q: Query) {
    const list = await this.dashboard.clusters(r, { sinceMs: sinceBound(q.since, Date.now(), '7d'), limit: 500 })
    const resolved = await this.clusters.resolvedAt(r.userId, list.map((c) => c.fingerprint))
    const reopened = await this.dashboard.reopened(r, list, resolved)
    return { clusters: list.map((c) => this.present(r, c, resolved.get(c.fingerprint), reopened)) }
  }

  /**
   * Resolves or re-opens one of the caller's clusters. A handled regression alert of the cluster is
   * cleared, so its next regression opens a new one.
   */
  async setResolved (r: DashboardReader, fingerprint: string, resolved: boolean) {
    const [found] = await this.dashboard.clusters(r, { sinceMs: 0, fingerprint, limit: 1 })
    if (!found) throw notFound()
    const at = await this.clusters.setResolved(r.userId, found.fingerprint, resolved)
    await this.alerts.clearRegression(r.userId, found.fingerprint)
    const resolvedAt = at ?? undefined
    const reopened = resolvedAt === undefined ? new Set<string>() : await this.dashboard.reopened(r, [found], new Map([[found.fingerprint, resolvedAt]]))
    return this.present(r, found, resolvedAt, reopened)
  }

  /** days: 1..365: the window is today (UTC) and the days - 1 before it. */
  async spendSummary (r: DashboardReader, days: number) {
    const from = windowStart(Date.now(), days)
    const { total, agent_id: byAgent, model: byModel, day: byDay } = await this.dashboard.spendBreakdown(r, from)
    const figures = (s: SpendRow | undefined) =>
      ({ costUsd: s?.costUsd ?? 0, eventCount: s?.events ?? 0, errors: s?.errors ?? 0, tokens: s?.tokens ?? zeroTokens(), unpricedEvents: s?.unpricedEvents ?? 0 })
    return {
      days,
      from,
      total: figures(total[0]),
      by_agent: byAgent.map((s) => ({ agentId: s.key, agent: agentOf(r.names, s.key), displayName: r.names.get(s.key) ?? null, ...figures(s) })),
      by_model: byModel.map((s) => ({ model: s.key === '' ? null : s.key, ...figures(s) })),
      by_day: byDay.map((s) => ({ day: s.key, ...figures(s) })),
      // Models with no price: their events count with cost 0 in every figure above.
      unpriced_models: unpricedModels(byModel),
    }
  }

  /** KPIs of all the reader's agents: 24 h from the hourly rollup (and events at its edge), 30 days from the daily rollup. */
  private async kpis (r: DashboardReader, now: number) {
    const [day, month] = await Promise.all([
      this.dashboard.agentWindow(r, now - DAY_MS),
      this.dashboard.spend(r, 'agent_id', windowStart(now, CALENDAR_DAYS)),
    ])
    const byAgent = new Map(month.map((m) => [m.key, m]))
    return (id: string) => agentKpis(day.get(id), byAgent.get(id))
  }

  /** limit clamps to 1..1000 (default 100); newest agent first. */
  async agentList (r: DashboardReader, q: Query) {
    const limit = clampInt(q.limit, 1, 1000, 100)
    const start = startOf('agents', q.cursor, r.settledAt)
    const [owned, kpisOf] = await Promise.all([this.agents.pageOwned(r.userId, limit + 1, start.after), this.kpis(r, Date.now())])
    const page = pageOf('agents', start.asOf, owned, limit, (a) => ({ ms: Date.parse(a.createdAt), id: a.id }))
    return { agents: page.items.map((a) => ({ ...a, kpis: kpisOf(a.id) })), nextCursor: page.nextCursor }
  }

  async agentProfile (r: DashboardReader, id: string) {
    const profile = await this.agents.profileOwned(r.userId, id)
    if (!profile) throw notFound()
    const now = Date.now()
    // The last 24 hours, the 30 days' KPIs and the calendar come from one read.
    const [figures, sessions, clusters] = await Promise.all([
      this.dashboard.agentFigures(r, profile.id, now - DAY_MS, windowStart(now, CALENDAR_DAYS)),
      this.sessionsOf(r, profile.id),
      this.dashboard.clusters(r, { sinceMs: 0, agentId: profile.id, limit: 5 }),
    ])
    const resolved = await this.clusters.resolvedAt(r.userId, clusters.map((c) => c.fingerprint))
    const reopened = await this.dashboard.reopened(r, clusters, resolved)
    return {
      ...profile,
      kpis: agentKpis(figures.window, figures.total),
      calendar: calendar(now, new Map(figures.days.map((d) => [d.key, d]))),
      recentSessions: sessions,
      recentErrors: clusters.map((c) => ({
        fingerprint: c.fingerprint, count: c.count, lastSeen: c.lastSeen, sampleMessage: c.sampleMessage, status: clusterStatus(c.lastSeenMs, resolved.get(c.fingerprint), reopened.has(c.fingerprint)),
      })),
    }
  }

  private async sessionsOf (r: DashboardReader, agentId: string) {
    const page = await this.dashboard.sessions(r, { limit: 5, agentId, start: { asOf: r.settledAt, after: null } })
    return page.items.map((s) => this.summary(r, s))
  }

  /** Renames, publishes or unpublishes the owner's agent. */
  async updateAgent (userId: string, id: string, change: { displayName?: string | undefined; isPublic?: boolean | undefined }): Promise<OwnedAgentProfile> {
    const updated = await this.agents.update(userId, id, { displayName: change.displayName?.trim(), isPublic: change.isPublic })
    if (updated === 'taken') throw conflict('display_name_taken', 'another of your agents already has this display name; choose another')
    if (!updated) throw notFound()
    return updated
  }
}
