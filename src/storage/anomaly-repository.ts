import { TupleParam, type ClickHouseClient } from '@clickhouse/client'
import type { AgentAggregates } from '../domain/anomaly-rules.ts'
import { reopenedClusters } from './dashboard-repository.ts'

/** Windows of one anomaly evaluation, in minutes, from the user's thresholds. */
export interface AnomalyWindows { errorMinutes: number; latencyMinutes: number; silenceMinutes: number }

/**
 * A resolved cluster's figures, and whether an event dated after its resolution was also received
 * after it (reopenedClusters).
 */
export interface Regression { fingerprint: string; agentId: string; firstSeenMs: number; lastSeenMs: number; count: number; sample: string; reopened: boolean }

/** An error cluster whose first event is recent: a candidate for `error_cluster.created`. */
export interface NewCluster { userId: string; fingerprint: string; agentId: string; firstSeenMs: number; lastSeenMs: number; count: number; sample: string }

/** The ClickHouse reads of anomaly evaluation: per-agent aggregates over the last day or so. */
export class AnomalyRepository {
  constructor (private readonly ch: ClickHouseClient) {}

  /**
   * Per-agent aggregates at time `nowMs` (windows end at `nowMs`) for many users' agents in one
   * query: the pairs are (user id, agent id), the leading columns of the events sort key.
   */
  async aggregates (agents: { userId: string; agentId: string }[], nowMs: number, w: AnomalyWindows): Promise<(AgentAggregates & { userId: string })[]> {
    if (agents.length === 0) return []
    const rs = await this.ch.query({
      query: `/* svc:anomaly_aggregates */
        WITH fromUnixTimestamp64Milli({now:Int64}) AS now_,
             now_ - toIntervalMinute({err:UInt32}) AS err_from,
             now_ - toIntervalMinute({lat:UInt32}) AS lat_from,
             now_ - toIntervalMinute({sil:UInt32}) AS sil_from
        SELECT user_id, agent_id,
          countIf(ts >= err_from) AS recent_total,
          countIf(ts >= err_from AND error_fingerprint != '') AS recent_failed,
          toString(sumIf(cost_usd, ts >= now_ - INTERVAL 1 HOUR)) AS last_hour_cost,
          toString(sumIf(cost_usd, ts < now_ - INTERVAL 1 HOUR AND ts >= now_ - INTERVAL 25 HOUR)) AS trailing_cost,
          quantileExactIf(0.95)(assumeNotNull(duration_ms), ts >= lat_from AND duration_ms IS NOT NULL) AS recent_p95,
          countIf(ts >= lat_from AND duration_ms IS NOT NULL) AS recent_durations,
          quantileExactIf(0.95)(assumeNotNull(duration_ms), ts < lat_from AND ts >= lat_from - INTERVAL 24 HOUR AND duration_ms IS NOT NULL) AS baseline_p95,
          countIf(ts < lat_from AND ts >= lat_from - INTERVAL 24 HOUR AND duration_ms IS NOT NULL) AS baseline_durations,
          uniqExactIf(toStartOfHour(ts), ts < sil_from AND ts >= sil_from - INTERVAL 24 HOUR) AS active_hours,
          countIf(ts < sil_from AND ts >= sil_from - INTERVAL 24 HOUR) AS previous_events,
          countIf(ts >= sil_from) AS silence_events
        FROM events
        WHERE (user_id, agent_id) IN {pairs:Array(Tuple(String, String))}
          AND ts >= least(err_from, lat_from, sil_from) - INTERVAL 25 HOUR AND ts <= now_
        GROUP BY user_id, agent_id`,
      query_params: { pairs: agents.map((a) => new TupleParam([a.userId, a.agentId])), now: nowMs, err: w.errorMinutes, lat: w.latencyMinutes, sil: w.silenceMinutes },
      format: 'JSONEachRow',
    })
    const rows = await rs.json<Record<string, any>>()
    return rows.map((r) => ({
      userId: r.user_id,
      agentId: r.agent_id,
      recentTotal: Number(r.recent_total),
      recentFailed: Number(r.recent_failed),
      lastHourCost: Number(r.last_hour_cost),
      trailingDayCost: Number(r.trailing_cost),
      recentP95: Number(r.recent_durations) > 0 ? Number(r.recent_p95) : null,
      recentDurations: Number(r.recent_durations),
      baselineP95: Number(r.baseline_durations) > 0 ? Number(r.baseline_p95) : null,
      activeHours: Number(r.active_hours),
      previousEvents: Number(r.previous_events),
      silenceWindowEvents: Number(r.silence_events),
    }))
  }

  /**
   * Clusters of these (user, agent) pairs whose first event, over all time, is at or after
   * `sinceMs`. The rollup's sort key starts with (user, fingerprint), so looking up the whole
   * history of the few fingerprints seen recently is cheap.
   */
  async newClusters (agents: { userId: string; agentId: string }[], sinceMs: number): Promise<NewCluster[]> {
    if (agents.length === 0) return []
    const rs = await this.ch.query({
      query: `/* svc:anomaly_new_clusters */ SELECT user_id, error_fingerprint AS fp, argMax(agent_id, last_ts) AS agent,
          toUnixTimestamp64Milli(min(first_ts)) AS first_ms, toUnixTimestamp64Milli(max(last_ts)) AS last_ms,
          sum(events) AS n, argMaxMerge(sample) AS sample
        FROM error_clusters_hourly
        WHERE (user_id, error_fingerprint) IN (
          SELECT user_id, error_fingerprint FROM error_clusters_hourly
          WHERE (user_id, agent_id) IN {pairs:Array(Tuple(String, String))}
            AND hour >= toStartOfHour(fromUnixTimestamp64Milli({since:Int64})))
        GROUP BY user_id, fp
        HAVING min(first_ts) >= fromUnixTimestamp64Milli({since:Int64})`,
      query_params: { pairs: agents.map((a) => new TupleParam([a.userId, a.agentId])), since: sinceMs },
      format: 'JSONEachRow',
    })
    const rows = await rs.json<Record<string, any>>()
    return rows.map((r) => ({
      userId: r.user_id, fingerprint: r.fp, agentId: r.agent, firstSeenMs: Number(r.first_ms), lastSeenMs: Number(r.last_ms), count: Number(r.n), sample: r.sample,
    }))
  }

  /** The first and latest event times, count and sample of each of the given clusters (the service decides which regressed). */
  async clusterStates (userId: string, resolved: Map<string, number>, hidden: string[]): Promise<Regression[]> {
    if (resolved.size === 0) return []
    const rs = await this.ch.query({
      query: `/* svc:anomaly_regressions */ SELECT error_fingerprint AS fp, argMax(agent_id, last_ts) AS agent,
          toUnixTimestamp64Milli(min(first_ts)) AS first_ms, toUnixTimestamp64Milli(max(last_ts)) AS last_ms, sum(events) AS n, argMaxMerge(sample) AS sample
        FROM error_clusters_hourly
        WHERE user_id = {u:String} AND error_fingerprint IN {fps:Array(String)} AND agent_id NOT IN {hidden:Array(String)}
        GROUP BY fp`,
      query_params: { u: userId, fps: [...resolved.keys()], hidden },
      format: 'JSONEachRow',
    })
    const rows = await rs.json<Record<string, any>>()
    const states = rows.map((r) => ({ fingerprint: r.fp, agentId: r.agent, firstSeenMs: Number(r.first_ms), lastSeenMs: Number(r.last_ms), count: Number(r.n), sample: r.sample as string }))
    const reopened = await reopenedClusters(this.ch, { userId, hidden }, states, resolved)
    return states.map((s) => ({ ...s, reopened: reopened.has(s.fingerprint) }))
  }
}
