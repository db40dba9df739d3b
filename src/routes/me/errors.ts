import type { FastifyPluginAsync } from 'fastify'
import { sinceBound } from '../../domain/query-params.ts'
import { notFound } from '../../errors.ts'
import type { ClusterAggregate } from '../../storage/dashboard-repository.ts'

const fpParams = { type: 'object', properties: { fingerprint: { type: 'string', pattern: '^[0-9a-f]{16}$' } } }

/**
 * Error clusters. Status is derived when read: resolved only while no event of the cluster is later
 * than resolvedAt, so a regression shows as open on the very next read.
 */
const errors: FastifyPluginAsync = async (app) => {
  function present(c: ClusterAggregate, resolvedAt: number | undefined) {
    const resolved = resolvedAt !== undefined && c.lastSeenMs <= resolvedAt
    const { lastSeenMs: _ms, ...rest } = c
    return { ...rest, status: resolved ? 'resolved' : 'open', resolvedAt: resolvedAt === undefined ? null : new Date(resolvedAt).toISOString() }
  }

  /** since: 24h | 7d | 30d | all (default 7d; anything else is dropped). Up to 500 clusters, latest first. */
  app.get<{ Querystring: Record<string, string | undefined> }>('/v1/me/errors', async (request) => {
    const reader = await app.readerOf(request)
    const clusters = await app.dashboard.clusters(reader, { sinceMs: sinceBound(request.query.since, Date.now(), '7d'), limit: 500 })
    const resolved = await app.errorClusters.resolvedAt(reader.userId, clusters.map((c) => c.fingerprint))
    return { clusters: clusters.map((c) => present(c, resolved.get(c.fingerprint))) }
  })

  for (const [method, resolve] of [['POST', true], ['DELETE', false]] as const) {
    app.route<{ Params: { fingerprint: string } }>({
      method,
      url: '/v1/me/errors/:fingerprint/resolve',
      schema: { params: fpParams },
      handler: async (request) => {
        const reader = await app.readerOf(request)
        const [cluster] = await app.dashboard.clusters(reader, { sinceMs: 0, fingerprint: request.params.fingerprint, limit: 1 })
        if (!cluster) throw notFound()
        const at = await app.errorClusters.setResolved(reader.userId, cluster.fingerprint, resolve)
        // A handled regression alert is closed, so the cluster's next regression opens a new one.
        await app.alerts.clearRegression(reader.userId, cluster.fingerprint)
        return present(cluster, at ?? undefined)
      },
    })
  }
}

export default errors
