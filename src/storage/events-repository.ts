import { TupleParam, type ClickHouseClient } from '@clickhouse/client'
import { Readable } from 'node:stream'
import { randomUUID } from 'node:crypto'
import type { EventRow } from '../domain/event-row.ts'
import { eventLine, INSERT_COLUMNS } from '../domain/event-line.ts'
import { BY_SKIP_INDEX, embeddedRawInsert } from './clickhouse-client.ts'

// The row format lives in the domain, so that the row thread builds rows without loading this client.
export { eventLine, INSERT_COLUMNS } from '../domain/event-line.ts'

/** One insertBlock call as its listeners see it, once it has settled. */
interface InsertOutcome {
  /** From the call to its end, successful or not. */
  durationMs: number
  /** Rows in the block: the caller's count, else the block's lines. */
  rows: number
  /** Why the insert failed; undefined when the block was stored. */
  error?: unknown
}

export type InsertListener = (outcome: InsertOutcome) => void

/** The lines of a block (the number of '\n' in it), counted without decoding a Buffer to a string. */
function lineCount (body: Buffer | string): number {
  let n = 0
  for (let i = body.indexOf('\n'); i !== -1; i = body.indexOf('\n', i + 1)) n++
  return n
}

/** Events in ClickHouse. */
export class EventsRepository {
  private readonly insertListeners: InsertListener[] = []

  constructor (private readonly ch: ClickHouseClient) {}

  /**
   * Calls `listener` after every insertBlock (and so every insert) has settled, with its duration,
   * rows and error: how metrics measure inserts. A listener must not throw.
   */
  onInsert (listener: InsertListener): void {
    this.insertListeners.push(listener)
  }

  /**
   * Inserts a block of rows already serialised by `eventLine`, under a deduplication token: a block
   * sent again with the same token is dropped by ClickHouse, in `events` and in every rollup its
   * views feed (clickhouse/005). The settings travel in the statement, never as session settings.
   * `rows`, the block's row count when the caller knows it, is reported to the insert listeners.
   */
  async insertBlock (body: Buffer | string, token: string, rows?: number): Promise<void> {
    if (this.insertListeners.length === 0) return this.sendBlock(body, token)
    const started = performance.now()
    let error: unknown
    try {
      await this.sendBlock(body, token)
    } catch (err) {
      error = err
      throw err
    } finally {
      const outcome: InsertOutcome = { durationMs: performance.now() - started, rows: rows ?? lineCount(body), error }
      for (const listener of this.insertListeners) listener(outcome)
    }
  }

  private async sendBlock (body: Buffer | string, token: string): Promise<void> {
    if (!/^[\w:.-]+$/.test(token)) throw new Error(`invalid deduplication token ${token}`)
    const settings = {
      insert_deduplication_token: token,
      deduplicate_blocks_in_dependent_materialized_views: 1,
      input_format_json_compact_allow_variable_number_of_columns: 1,
      // An object in a String column's place is stored as its JSON text (EventRow's JsonText).
      input_format_json_read_objects_as_strings: 1,
    }
    const raw = embeddedRawInsert(this.ch)
    if (raw) {
      await raw({ table: 'events', columns: INSERT_COLUMNS, format: 'JSONCompactEachRow', values: Buffer.isBuffer(body) ? body : Buffer.from(body), settings })
      return
    }
    const result = await this.ch.exec({
      query: `INSERT INTO events (${INSERT_COLUMNS.join(', ')}) SETTINGS ` +
        Object.entries(settings).map(([name, value]) => `${name} = ${typeof value === 'string' ? `'${value}'` : value}`).join(', ') +
        ' FORMAT JSONCompactEachRow',
      values: Readable.from([body]),
    })
    result.stream.resume()
  }

  /** Inserts rows straight into the store, bypassing any ingest log (seeding and tests). */
  async insert (rows: EventRow[]): Promise<void> {
    await this.insertBlock(rows.map(eventLine).join('\n') + '\n', `direct:${randomUUID()}`)
  }

  /** Which of these event ids are stored (for durability checks). */
  async existingIds (eventIds: string[]): Promise<Set<string>> {
    if (eventIds.length === 0) return new Set()
    const rs = await this.ch.query({
      query: `/* svc:events_exist */ SELECT event_id FROM events WHERE event_id IN {ids:Array(String)} ${BY_SKIP_INDEX}`,
      query_params: { ids: eventIds },
      format: 'JSONEachRow',
    })
    return new Set((await rs.json<{ event_id: string }>()).map((r) => r.event_id))
  }

  /** A stored event by id, scoped to its owner, as stored (for tests and support). */
  async getRow (userId: string, eventId: string): Promise<Record<string, unknown> | null> {
    const rs = await this.ch.query({
      query: `/* svc:event_row */ SELECT *, toUnixTimestamp64Milli(ts) AS ts_ms, toUnixTimestamp64Milli(received_at) AS received_ms
              FROM events WHERE user_id = {user:String} AND event_id = {id:String} LIMIT 1 ${BY_SKIP_INDEX}`,
      query_params: { user: userId, id: eventId },
      format: 'JSONEachRow',
    })
    const rows = await rs.json<Record<string, unknown>>()
    return rows[0] ?? null
  }
}

/** An owner and agent pair: the events table is sorted by both, so public reads name both. */
export interface OwnedAgent { ownerId: string; id: string }

export type PublicActivity = { agentId: string; type: string; tool: string; outcome: string; at: string }

export type PaymentStat = { token: string; count24h: number; amount24h: number; count7d: number; amount7d: number }

const pairs = (agents: OwnedAgent[]) => agents.map((a) => new TupleParam([a.ownerId, a.id]))

/** Public aggregates: counts and metadata only, never event content. */
export class PublicEventsRepository {
  constructor (private readonly ch: ClickHouseClient) {}

  async countSince (sinceMs: number, excludeAgents: string[]): Promise<number> {
    const rs = await this.ch.query({
      query: `/* svc:public_events_since */ SELECT count() AS n FROM events
              WHERE ts >= fromUnixTimestamp64Milli({since:Int64}) AND agent_id NOT IN {excluded:Array(String)}`,
      query_params: { since: sinceMs, excluded: excludeAgents },
      format: 'JSONEachRow',
    })
    return Number((await rs.json<{ n: string }>())[0]?.n ?? 0)
  }

  async agentKpis (agent: OwnedAgent): Promise<{ eventCount: number; lastEventAt: string | null }> {
    const rs = await this.ch.query({
      query: `/* svc:public_agent_kpis */ SELECT count() AS n, toUnixTimestamp64Milli(max(ts)) AS last FROM events
              WHERE user_id = {owner:String} AND agent_id = {agent:String}`,
      query_params: { owner: agent.ownerId, agent: agent.id },
      format: 'JSONEachRow',
    })
    const row = (await rs.json<{ n: string; last: string }>())[0]
    const n = Number(row?.n ?? 0)
    return { eventCount: n, lastEventAt: n > 0 ? new Date(Number(row!.last)).toISOString() : null }
  }

  async recentActivity (agents: OwnedAgent[], limit: number): Promise<PublicActivity[]> {
    if (agents.length === 0) return []
    const rs = await this.ch.query({
      query: `/* svc:public_recent_activity */ SELECT agent_id, type, tool_executed, outcome, toUnixTimestamp64Milli(ts) AS at
              FROM events WHERE (user_id, agent_id) IN {pairs:Array(Tuple(String, String))}
              ORDER BY ts DESC LIMIT {limit:UInt32}`,
      query_params: { pairs: pairs(agents), limit },
      format: 'JSONEachRow',
    })
    return (await rs.json<{ agent_id: string; type: string; tool_executed: string; outcome: string; at: string }>()).map((r) => ({
      agentId: r.agent_id, type: r.type, tool: r.tool_executed, outcome: r.outcome, at: new Date(Number(r.at)).toISOString(),
    }))
  }

  async paymentStats (agents: OwnedAgent[], nowMs: number): Promise<PaymentStat[]> {
    if (agents.length === 0) return []
    const rs = await this.ch.query({
      query: `/* svc:public_payments */ SELECT amount_token AS token,
                countIf(ts >= fromUnixTimestamp64Milli({d1:Int64})) AS count24h,
                sumIf(amount_value, ts >= fromUnixTimestamp64Milli({d1:Int64})) AS amount24h,
                count() AS count7d, sum(amount_value) AS amount7d
              FROM events
              WHERE (user_id, agent_id) IN {pairs:Array(Tuple(String, String))}
                AND type = 'tx' AND amount_token != '' AND ts >= fromUnixTimestamp64Milli({d7:Int64})
              GROUP BY token ORDER BY count7d DESC, token`,
      query_params: { pairs: pairs(agents), d1: nowMs - 86_400_000, d7: nowMs - 7 * 86_400_000 },
      format: 'JSONEachRow',
    })
    return (await rs.json<Record<string, string | number>>()).map((r) => ({
      token: String(r.token), count24h: Number(r.count24h), amount24h: Number(r.amount24h), count7d: Number(r.count7d), amount7d: Number(r.amount7d),
    }))
  }
}
