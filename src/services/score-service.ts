import { agentOf } from '../domain/dashboard.ts'
import { configProblems, type ScoreConfig, type ScoreConfigInput } from '../domain/score-config.ts'
import type { IncomingScore, ScoreSource } from '../domain/score-row.ts'
import { summarise } from '../domain/score-summary.ts'
import { DAY_MS } from '../domain/dashboard.ts'
import { HttpError, conflict, notFound, querystringInvalid, validationFailed } from '../http-error.ts'
import type { DashboardEvent } from '../domain/dashboard-event.ts'
import type { DashboardRepository } from '../storage/dashboard-repository.ts'
import type { ScoreConfigsRepository } from '../storage/score-configs-repository.ts'
import type { ScoreFilter, ScoresRepository, StoredScore } from '../storage/scores-repository.ts'
import type { User } from '../storage/users-repository.ts'
import type { ScoreAck, ScoreIngestionService } from '../ingest/score-ingestion.ts'
import type { DashboardReader } from './dashboard-service.ts'
import { startOf } from './dashboard-service.ts'
import { MAX_SCORE_CONFIGS, SCORE_LIST_LIMIT } from '../../schemas/score.ts'
import { clampInt } from '../domain/query-params.ts'
import { parseSearchFilters } from '../domain/search-filters.ts'

/** The query of the summary, as validated by its schema (a repeatable filter is a list of its values). */
export interface ScoreSummaryQuery {
  name?: string | undefined
  source?: ScoreSource | undefined
  agentId?: unknown[] | undefined
  from?: string | undefined
  to?: string | undefined
}

/** The query of the list, as validated by its schema. */
export interface ScoreQuery extends ScoreSummaryQuery {
  traceId?: unknown[] | undefined
  sessionId?: unknown[] | undefined
  /** Lenient: clamped to SCORE_LIST_LIMIT, never refused. */
  limit?: string | undefined
  cursor?: string | undefined
}

/** The longest period a summary covers (and so the previous one too). */
const SUMMARY_MAX_DAYS = 366

/**
 * The filters of a read. `agentId`, `traceId`, `sessionId`, `from` and `to` are read by the search's
 * own parser, with its rules: a value of `agentId` that is not a cuid is dropped, at most 50 values
 * of one parameter, ids of 1 to 200 characters, instants as ISO 8601 date-times or unix milliseconds
 * with `from` earlier than `to`; else the search's 400 naming each parameter at fault.
 */
function filterOf (q: ScoreQuery): ScoreFilter {
  const parsed = parseSearchFilters({ agentId: q.agentId, traceId: q.traceId, sessionId: q.sessionId, from: q.from, to: q.to })
  if (!parsed.ok) throw querystringInvalid(parsed.problems)
  const f = parsed.filters
  return { name: q.name, source: q.source, agentIds: f.agentIds, traceIds: f.traceIds, sessionIds: f.sessionIds, fromMs: f.fromMs, toMs: f.toMs }
}

/**
 * Score configs, the reads of scores (lists, per trace and session, the summary) and the scores
 * people give from the dashboard, which go through the same ingestion as any other score.
 */
export class ScoreService {
  constructor (
    private readonly scores: ScoresRepository,
    private readonly configs: ScoreConfigsRepository,
    private readonly dashboard: Pick<DashboardRepository, 'eventsOf'>,
    private readonly ingestion: Pick<ScoreIngestionService, 'ingestOne'>,
  ) {}

  listConfigs (userId: string): Promise<ScoreConfig[]> {
    return this.configs.list(userId)
  }

  async config (userId: string, name: string): Promise<ScoreConfig> {
    return (await this.configs.get(userId, name)) ?? Promise.reject(notFound())
  }

  async putConfig (userId: string, name: string, body: ScoreConfigInput): Promise<ScoreConfig> {
    const problems = configProblems(body)
    if (problems.length > 0) throw validationFailed(problems)
    const config = await this.configs.put(userId, name, body, MAX_SCORE_CONFIGS)
    if (!config) throw conflict('too_many_score_configs', `at most ${MAX_SCORE_CONFIGS} score configs; remove one first`)
    return config
  }

  async removeConfig (userId: string, name: string): Promise<void> {
    if (!(await this.configs.remove(userId, name))) throw notFound()
  }

  /** A page of the reader's scores, newest first. */
  async list (r: DashboardReader, q: ScoreQuery) {
    const start = startOf('scores', q.cursor, r.settledAt)
    const { min, max, fallback } = SCORE_LIST_LIMIT
    const page = await this.scores.list(r, filterOf(q), { limit: clampInt(q.limit, min, max, fallback), start })
    return { scores: page.items.map((s) => this.view(r, s)), nextCursor: page.nextCursor }
  }

  /** Every score of a trace (whole and per span) or of a session. */
  async of (r: DashboardReader, target: { traceId: string } | { sessionId: string }) {
    return (await this.scores.of(r, target, r.settledAt)).map((s) => this.view(r, s))
  }

  /**
   * Per name, over [from, to) (default: the 7 days before now) against the period of the same length
   * before it: the figures, per UTC day and per agent.
   */
  async summary (r: DashboardReader, q: ScoreSummaryQuery) {
    // Only the summary's filters: the list's others, sent here, are unknown parameters (ignored).
    const { fromMs: givenFrom, toMs: givenTo, ...f } = filterOf({ name: q.name, source: q.source, agentId: q.agentId, from: q.from, to: q.to })
    const toMs = givenTo ?? r.settledAt
    const fromMs = givenFrom ?? toMs - 7 * DAY_MS
    // Also when `to` is left out: a `from` from now on has no period. The message says which end it is.
    const end = givenTo === undefined ? 'now (to defaults to now)' : 'to'
    if (fromMs >= toMs) throw querystringInvalid([{ path: ['from'], message: `must be earlier than ${end}` }])
    if (toMs - fromMs > SUMMARY_MAX_DAYS * DAY_MS) throw querystringInvalid([{ path: ['from'], message: `must be at most ${SUMMARY_MAX_DAYS} days before ${end}` }])
    const span = { previousFromMs: fromMs - (toMs - fromMs), fromMs, toMs }
    const [period, days, agents] = await Promise.all([
      this.scores.figures(r, f, 'period', span, r.settledAt),
      this.scores.figures(r, f, 'day', span, r.settledAt),
      this.scores.figures(r, f, 'agent', span, r.settledAt),
    ])
    return {
      from: new Date(fromMs).toISOString(),
      to: new Date(toMs).toISOString(),
      previousFrom: new Date(span.previousFromMs).toISOString(),
      names: summarise(period, days, agents).map(({ byAgent, ...n }) => ({
        ...n,
        byAgent: byAgent.map(({ agentId, ...a }) => ({ agent: agentId === null ? null : agentOf(r.names, agentId), ...a })),
      })),
    }
  }

  /**
   * A score a signed-in user gives a trace (or one of its spans) or a session from the dashboard:
   * `source: human`, the user its author, of the agent of the span (or of the first event). The
   * trace, session or span must be the user's (404 otherwise).
   */
  async annotate (r: DashboardReader, user: User, target: { traceId: string } | { sessionId: string }, body: Omit<IncomingScore, 'source' | 'traceId' | 'sessionId' | 'eventId' | 'agentId'>): Promise<ScoreAck> {
    const column = 'traceId' in target ? 'trace_id' : 'session_id'
    const events = await this.dashboard.eventsOf(r, column, 'traceId' in target ? target.traceId : target.sessionId)
    const scored: DashboardEvent | undefined = body.spanId === undefined ? events[0] : events.find((e) => e.spanId === body.spanId)
    if (!scored) throw events.length === 0 ? notFound() : new HttpError(404, 'not_found', { message: 'no span of this trace has that spanId' })
    return this.ingestion.ingestOne(
      { userId: user.id, agentId: scored.agentId, tier: user.tier, burstPerMinute: user.burstPerMinute, source: { kind: 'dashboard' } },
      { ...body, ...target, source: 'human' },
      user.id,
    )
  }

  private view (r: DashboardReader, s: StoredScore) {
    return scoreView(r.names, s)
  }
}

/** A stored score as the reads answer it: its agent named, the store's paging keys left out. */
export function scoreView (names: ReadonlyMap<string, string>, s: StoredScore) {
  const { rowId: _row, createdMs: _ms, agentId, ...rest } = s
  return { ...rest, agent: agentId === null ? null : agentOf(names, agentId) }
}
