import fp from 'fastify-plugin'
import type { FastifyRequest } from 'fastify'
import { DashboardService, type DashboardReader } from '../services/dashboard-service.ts'
import { AlertsService } from '../services/alerts-service.ts'

declare module 'fastify' {
  interface FastifyInstance {
    dashboardService: DashboardService
    alertsService: AlertsService
    /** The caller as a reader: their id, the agents whose events reads must hide, and their agents' names. */
    readerOf: (request: FastifyRequest) => Promise<DashboardReader>
  }
}

/** What the /v1/me dashboard reads: one service over the ClickHouse aggregates and the Postgres state. */
export default fp(async function dashboardData (app) {
  const service = new DashboardService(app.dashboard, app.agents, app.errorClusters, app.alerts, app.scores)
  app.decorate('dashboardService', service)
  app.decorate('alertsService', new AlertsService(app.alerts))
  app.decorate('readerOf', (request: FastifyRequest) => service.readerOf(request.user.id, request.settledAt))
}, { name: 'dashboard-data', dependencies: ['repositories'] })
