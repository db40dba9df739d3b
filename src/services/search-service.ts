import { agentOf } from '../domain/dashboard.ts'
import { clampInt, sinceBound } from '../domain/query-params.ts'
import { hasFilters, parseSearchFilters, type SearchFilters } from '../domain/search-filters.ts'
import { querystringInvalid } from '../http-error.ts'
import type { SearchRepository } from '../storage/search-repository.ts'
import { startOf, type DashboardReader, type DashboardService } from './dashboard-service.ts'

type Query = Record<string, unknown>

/** The intervals of GET /v1/me/events/histogram, in seconds. */
const HISTOGRAM_INTERVALS: Record<string, number> = { '1m': 60, '5m': 300, '15m': 900, '1h': 3600, '1d': 86_400 }
/**
 * The longest window, in intervals (a day of minutes). Intervals are aligned to the epoch, so an
 * answer holds one more when the window's ends fall inside intervals.
 */
export const HISTOGRAM_MAX_BUCKETS = 1440

/** The filtered reads the service composes (SearchRepository is the one implementation). */
export type EventSearch = Pick<SearchRepository, 'events' | 'sessions' | 'traces' | 'facets' | 'histogram'>

/**
 * The plain lists' own parameters. A repeated one never reaches here: the `/v1/me` hook gives a
 * repeated `limit` or `since` its default and refuses a repeated `cursor` (routes/v1/me/autohooks.ts).
 */
function plainOf (q: Query): { limit: string | undefined; since: string | undefined; cursor: string | undefined } {
  return { limit: q.limit as string | undefined, since: q.since as string | undefined, cursor: q.cursor as string | undefined }
}

function filtersOf (query: Query): SearchFilters {
  const parsed = parseSearchFilters(query)
  if (!parsed.ok) throw querystringInvalid(parsed.problems)
  return parsed.filters
}

/**
 * The dashboard lists under search filters (docs/api.md#search). A list asked without any filter is
 * answered by the plain list (DashboardService), unchanged; with one, by the search repository, in
 * the same shape and with the same cursors.
 */
export class SearchService {
  constructor (private readonly search: EventSearch, private readonly dashboard: DashboardService) {}

  /** limit 1..1000 (default 50); since 24h | 7d | 30d | all (default all); a repeated agentId is a filter. */
  async events (r: DashboardReader, q: Query) {
    const plain = plainOf(q)
    const agentIds = Array.isArray(q.agentId) ? q.agentId : q.agentId === undefined ? [] : [q.agentId]
    if (!hasFilters({ ...q, agentId: undefined }) && agentIds.length <= 1) return this.dashboard.events(r, { ...plain, agentId: agentIds[0] as string | undefined })
    const f = filtersOf(q)
    const start = startOf('events', plain.cursor, r.settledAt)
    const page = await this.search.events(r, { sinceMs: sinceBound(plain.since, start.asOf), asOf: start.asOf }, f, { limit: clampInt(plain.limit, 1, 1000, 50), start })
    return { events: page.items.map((e) => ({ ...e, agent: agentOf(r.names, e.agentId) })), nextCursor: page.nextCursor }
  }

  /** limit 1..100 (default 20); since (default all) and any filter. */
  async sessions (r: DashboardReader, q: Query) {
    const plain = plainOf(q)
    if (!hasFilters(q) && plain.since === undefined) return this.dashboard.sessions(r, plain)
    const f = filtersOf(q)
    const start = startOf('sessions', plain.cursor, r.settledAt)
    const page = await this.search.sessions(r, { sinceMs: sinceBound(plain.since, start.asOf), asOf: start.asOf }, f, { limit: clampInt(plain.limit, 1, 100, 20), start })
    return { sessions: page.items.map((s) => this.summary(r, s)), nextCursor: page.nextCursor }
  }

  /** limit 1..200 (default 50); since (default 7d, none when `from` is given) and any filter. */
  async traces (r: DashboardReader, q: Query) {
    const plain = plainOf(q)
    if (!hasFilters(q)) return this.dashboard.traces(r, plain)
    const f = filtersOf(q)
    const start = startOf('traces', plain.cursor, r.settledAt)
    const sinceMs = sinceBound(plain.since, start.asOf, f.fromMs === undefined ? '7d' : 'all')
    const page = await this.search.traces(r, { sinceMs, asOf: start.asOf }, f, { limit: clampInt(plain.limit, 1, 200, 50), start })
    return { traces: page.items.map((s) => this.summary(r, s)), nextCursor: page.nextCursor }
  }

  /**
   * The matching events per interval (`1m`, `5m`, `15m`, `1h`, `1d`; default `1h`) over since (default
   * 24h, none when `from` is given) and any filter: a window at most HISTOGRAM_MAX_BUCKETS intervals long.
   */
  async histogram (r: DashboardReader, q: Query) {
    const f = filtersOf(q)
    const interval = typeof q.interval === 'string' ? q.interval : '1h'
    const seconds = HISTOGRAM_INTERVALS[interval]
    if (seconds === undefined) throw querystringInvalid([{ path: ['interval'], message: `must be one of ${Object.keys(HISTOGRAM_INTERVALS).join(', ')}` }])
    const sinceMs = sinceBound(q.since as string | undefined, r.settledAt, f.fromMs === undefined ? '24h' : 'all')
    const from = Math.max(sinceMs, f.fromMs ?? 0)
    const to = Math.min(r.settledAt, f.toMs ?? r.settledAt)
    const length = Math.ceil(Math.max(0, to - from) / (seconds * 1000))
    if (length > HISTOGRAM_MAX_BUCKETS) {
      throw querystringInvalid([{ path: ['interval'], message: `the window is ${length} intervals of ${interval} long, over ${HISTOGRAM_MAX_BUCKETS}: choose a longer interval or a shorter window (from, to, since)` }])
    }
    const rows = await this.search.histogram(r, { sinceMs, asOf: r.settledAt }, f, seconds)
    return {
      interval,
      from: new Date(from).toISOString(),
      to: new Date(to).toISOString(),
      total: rows.reduce((sum, x) => sum + x.events, 0),
      buckets: rows.map((x) => ({ start: new Date(x.startMs).toISOString(), events: x.events })),
    }
  }

  /** Counts of the matching events per facet; since (default all) and any filter. */
  async facets (r: DashboardReader, q: Query) {
    const f = filtersOf(q)
    const facets = await this.search.facets(r, { sinceMs: sinceBound(q.since as string | undefined, r.settledAt), asOf: r.settledAt }, f)
    return {
      ...facets,
      facets: {
        ...facets.facets,
        agentId: facets.facets.agentId.map((x) => ({ ...x, displayName: x.value === null ? null : agentOf(r.names, x.value).displayName })),
      },
    }
  }

  private summary<S extends { events: number; agents: string[] }>(r: DashboardReader, s: S) {
    const { events, agents, ...rest } = s
    return { ...rest, eventCount: events, agents: agents.map((id) => agentOf(r.names, id)) }
  }
}
