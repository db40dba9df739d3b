import type { ClickHouseClient } from '@clickhouse/client'
import type { EventRow } from '../domain/event-row.ts'

/** Events in ClickHouse. */
export class EventsRepository {
  constructor(private readonly ch: ClickHouseClient) {}

  /** Inserts rows in one statement; resolves when ClickHouse has committed them. */
  async insert(rows: EventRow[]): Promise<void> {
    await this.ch.insert({ table: 'events', values: rows, format: 'JSONEachRow' })
  }

  /** Which of these event ids are stored (for durability checks). */
  async existingIds(eventIds: string[]): Promise<Set<string>> {
    if (eventIds.length === 0) return new Set()
    const rs = await this.ch.query({
      query: '/* svc:events_exist */ SELECT event_id FROM events WHERE event_id IN {ids:Array(String)}',
      query_params: { ids: eventIds },
      format: 'JSONEachRow',
    })
    return new Set((await rs.json<{ event_id: string }>()).map((r) => r.event_id))
  }

  /** A stored event by id, scoped to its owner, as stored (for tests and support). */
  async getRow(userId: string, eventId: string): Promise<Record<string, unknown> | null> {
    const rs = await this.ch.query({
      query: `/* svc:event_row */ SELECT *, toUnixTimestamp64Milli(ts) AS ts_ms, toUnixTimestamp64Milli(received_at) AS received_ms
              FROM events WHERE user_id = {user:String} AND event_id = {id:String} LIMIT 1`,
      query_params: { user: userId, id: eventId },
      format: 'JSONEachRow',
    })
    const rows = await rs.json<Record<string, unknown>>()
    return rows[0] ?? null
  }

  /** Accepted events of a user in the calendar month (UTC) holding `at`. Advisory: not enforced. */
  async monthlyUsage(userId: string, at = new Date()): Promise<number> {
    const month = `${at.getUTCFullYear()}-${String(at.getUTCMonth() + 1).padStart(2, '0')}-01`
    const rs = await this.ch.query({
      query: `/* svc:usage_monthly */ SELECT sum(events) AS events FROM usage_monthly
              WHERE user_id = {user:String} AND month = {month:Date}`,
      query_params: { user: userId, month },
      format: 'JSONEachRow',
    })
    const rows = await rs.json<{ events: string | number }>()
    return Number(rows[0]?.events ?? 0)
  }
}
