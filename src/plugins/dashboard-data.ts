import fp from 'fastify-plugin'
import { DashboardService } from '../services/dashboard-service.ts'
import { AlertsService } from '../services/alerts-service.ts'

declare module 'fastify' {
  interface FastifyInstance {
    dashboardService: DashboardService
    alertsService: AlertsService
  }
}

/** What the /v1/me dashboard reads: one service over the ClickHouse aggregates and the Postgres state. */
export default fp(async function dashboardData (app) {
  app.decorate('dashboardService', new DashboardService(app.dashboard, app.agents, app.errorClusters, app.alerts))
  app.decorate('alertsService', new AlertsService(app.alerts))
}, { name: 'dashboard-data', dependencies: ['repositories'] })
