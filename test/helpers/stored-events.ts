import type { ClickHouseClient } from '@clickhouse/client'
import { buildEventRow } from '../../src/domain/event-row.ts'
import { newEventId } from '../../src/domain/ids.ts'
import { eventLine } from '../../src/storage/events-repository.ts'

/** The ingest log's line of a fresh event of `userId` (with any fields of the event overridden). */
export function logLine (userId: string, extra: Record<string, unknown> = {}): string {
  const event = { agentId: 'a', model: 'gpt-4o', metadata: { sessionId: 'session-1', traceId: 'trace-1', tokensBreakdown: { output: 1000 } }, ...extra }
  return eventLine(buildEventRow(event as never, { eventId: newEventId(), userId, agentId: 'agent-1', receivedAt: Date.now() }))
}

/** What ClickHouse holds of `userId`: events, distinct ids, and the events the rollups counted. */
export async function storedCounts (client: ClickHouseClient, userId: string): Promise<{
  events: number; distinct: number; spendEvents: number; clusterEvents: number; errors: number
  hourlyEvents: number; dailyClusterEvents: number; sessionEvents: number; traceEvents: number; withSession: number; withTrace: number
}> {
  const q = async (sql: string) => Number((await (await client.query({ query: sql, query_params: { u: userId }, format: 'JSONEachRow' })).json<{ n: string }>())[0]?.n ?? 0)
  return {
    events: await q('SELECT count() AS n FROM events WHERE user_id = {u:String}'),
    distinct: await q('SELECT uniqExact(event_id) AS n FROM events WHERE user_id = {u:String}'),
    spendEvents: await q('SELECT sum(events) AS n FROM spend_daily WHERE user_id = {u:String}'),
    clusterEvents: await q('SELECT sum(events) AS n FROM error_clusters_hourly WHERE user_id = {u:String}'),
    errors: await q("SELECT countIf(error_fingerprint != '') AS n FROM events WHERE user_id = {u:String}"),
    hourlyEvents: await q('SELECT sum(events) AS n FROM agent_hourly WHERE user_id = {u:String}'),
    dailyClusterEvents: await q('SELECT sum(events) AS n FROM error_clusters_daily WHERE user_id = {u:String}'),
    sessionEvents: await q("SELECT sum(events) AS n FROM group_totals WHERE user_id = {u:String} AND kind = 'session'"),
    traceEvents: await q("SELECT sum(events) AS n FROM group_totals WHERE user_id = {u:String} AND kind = 'trace'"),
    withSession: await q("SELECT countIf(session_id != '') AS n FROM events WHERE user_id = {u:String}"),
    withTrace: await q("SELECT countIf(trace_id != '') AS n FROM events WHERE user_id = {u:String}"),
  }
}
