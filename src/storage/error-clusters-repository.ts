import type pg from 'pg'
import type { NewCluster } from './anomaly-repository.ts'

export type ClustersAnnouncedListener = (clusters: NewCluster[]) => Promise<void>

/** Resolution state of a user's error clusters, and which new clusters were announced, in Postgres. */
export class ErrorClustersRepository {
  private readonly listeners: ClustersAnnouncedListener[] = []

  constructor (private readonly db: pg.Pool) {}

  /** Calls `listener` with the clusters each `announce` records for the first time, and waits for it. A listener must not throw. */
  onAnnounced (listener: ClustersAnnouncedListener): void {
    this.listeners.push(listener)
  }

  /**
   * Records clusters seen for the first time, each once whatever the number of evaluations that
   * find it (a cluster that already has a row, as one resolved by hand, is not announced), and tells
   * the listeners about those recorded now.
   */
  async announce (clusters: NewCluster[]): Promise<NewCluster[]> {
    if (clusters.length === 0) return []
    const { rows } = await this.db.query(
      `/* svc:clusters_announce */ INSERT INTO error_clusters (user_id, fingerprint, announced_at, updated_at)
       SELECT u, f, now(), now() FROM unnest($1::text[], $2::text[]) AS n(u, f)
       ON CONFLICT (user_id, fingerprint) DO NOTHING RETURNING user_id, fingerprint`,
      [clusters.map((c) => c.userId), clusters.map((c) => c.fingerprint)],
    )
    const recorded = new Set(rows.map((r) => `${r.user_id}\u0000${r.fingerprint}`))
    const fresh = clusters.filter((c) => recorded.has(`${c.userId}\u0000${c.fingerprint}`))
    if (fresh.length > 0) for (const listener of this.listeners) await listener(fresh)
    return fresh
  }

  /** resolvedAt (ms) per fingerprint, for the fingerprints asked about. */
  async resolvedAt (userId: string, fingerprints: string[]): Promise<Map<string, number>> {
    if (fingerprints.length === 0) return new Map()
    const { rows } = await this.db.query(
      `/* svc:clusters_state */ SELECT fingerprint, resolved_at FROM error_clusters
       WHERE user_id = $1 AND fingerprint = ANY($2) AND resolved_at IS NOT NULL`,
      [userId, fingerprints],
    )
    return new Map(rows.map((r) => [r.fingerprint, new Date(r.resolved_at).getTime()]))
  }

  /** Every resolved cluster of the user: fingerprint → resolvedAt (ms). */
  async allResolved (userId: string): Promise<Map<string, number>> {
    const { rows } = await this.db.query(
      '/* svc:clusters_resolved */ SELECT fingerprint, resolved_at FROM error_clusters WHERE user_id = $1 AND resolved_at IS NOT NULL',
      [userId],
    )
    return new Map(rows.map((r) => [r.fingerprint, new Date(r.resolved_at).getTime()]))
  }

  /** Users that have at least one resolved cluster (candidates for regression checks). */
  async usersWithResolved (): Promise<string[]> {
    const { rows } = await this.db.query('/* svc:clusters_users */ SELECT DISTINCT user_id FROM error_clusters WHERE resolved_at IS NOT NULL')
    return rows.map((r) => r.user_id)
  }

  async setResolved (userId: string, fingerprint: string, resolved: boolean): Promise<number | null> {
    const { rows } = await this.db.query(
      `/* svc:clusters_set */ INSERT INTO error_clusters (user_id, fingerprint, resolved_at, updated_at)
       VALUES ($1, $2, CASE WHEN $3 THEN now() END, now())
       ON CONFLICT (user_id, fingerprint) DO UPDATE SET resolved_at = EXCLUDED.resolved_at, updated_at = now()
       RETURNING resolved_at`,
      [userId, fingerprint, resolved],
    )
    return rows[0].resolved_at ? new Date(rows[0].resolved_at).getTime() : null
  }
}
