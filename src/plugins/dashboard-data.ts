import fp from 'fastify-plugin'
import type { FastifyRequest } from 'fastify'
import { DashboardRepository, type Reader } from '../storage/dashboard-repository.ts'
import { ErrorClustersRepository } from '../storage/error-clusters-repository.ts'

declare module 'fastify' {
  interface FastifyInstance {
    dashboard: DashboardRepository
    errorClusters: ErrorClustersRepository
    /** The caller as a reader: their id and the agents whose events reads must hide. */
    readerOf: (request: FastifyRequest) => Promise<Reader>
  }
}

/** What the /v1/me dashboard reads: ClickHouse aggregates and cluster state in Postgres. */
export default fp(async function dashboardData(app) {
  app.decorate('dashboard', new DashboardRepository(app.clickhouse))
  app.decorate('errorClusters', new ErrorClustersRepository(app.db))
  app.decorate('readerOf', async (request: FastifyRequest) => ({
    userId: request.user.id,
    hidden: await app.agents.hiddenIds(request.user.id),
  }))
}, { name: 'dashboard-data', dependencies: ['postgres', 'clickhouse'] })
