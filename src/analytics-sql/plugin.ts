import fp from 'fastify-plugin'
import type { Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { join } from 'node:path'
import { AnalyticsEngine, type AnalyticsCaps } from './engine.ts'
import { ANALYST_USER, loadAnalystPassword } from './password.ts'
import { createAnalyticsHttpServer } from './http-interface.ts'

/** The analysts' SQL port of this instance; null when it does not run (a ClickHouse server, or ANALYTICS_PORT=off). */
interface AnalyticsSqlPort {
  /** Starts listening (main.ts calls it after the API listens); resolves with the port bound. */
  listen(): Promise<number>
  /** The address listened on once listening (ANALYTICS_HOST: loopback unless set). */
  address(): AddressInfo | null
  /** Where the password is kept when generated (undefined when ANALYST_PASSWORD is set). */
  passwordFile: string | undefined
  /** Analyst queries running now (each counts from its arrival; at most ANALYTICS_MAX_CONCURRENT_QUERIES). */
  running(): number
}

declare module 'fastify' {
  interface FastifyInstance {
    analyticsSql: AnalyticsSqlPort | null
  }
}

interface AnalyticsSqlOptions {
  /** False with a ClickHouse server (analysts connect to it) or with ANALYTICS_PORT=off. */
  enabled: boolean
  port: number
  /** ANALYTICS_HOST, independent of the API's HOST. */
  host: string
  dataDir: string
  password: string | undefined
  caps: AnalyticsCaps
}

/**
 * Read-only SQL for analysts on the embedded engine over ClickHouse's HTTP interface, on its own
 * port. Registered after the clickhouse plugin, so it closes first: running analyst queries finish
 * before the engine's last connection goes.
 */
export default fp(async function analyticsSql (app, opts: AnalyticsSqlOptions) {
  if (!opts.enabled) {
    app.decorate('analyticsSql', null)
    return
  }
  const { password, file } = loadAnalystPassword(opts.dataDir, opts.password)
  const engine = await AnalyticsEngine.open(join(opts.dataDir, 'clickhouse'), { writable: false, caps: opts.caps })
  let server: Server | undefined
  app.decorate('analyticsSql', {
    passwordFile: file,
    running: () => engine.running,
    address: () => (server?.address() as AddressInfo | null | undefined) ?? null,
    async listen () {
      server = createAnalyticsHttpServer({ engine, credentials: { user: ANALYST_USER, password }, log: app.log })
      const s = server
      await new Promise<void>((resolve, reject) => {
        s.once('error', reject)
        s.listen(opts.port, opts.host, () => {
          s.off('error', reject)
          resolve()
        })
      })
      const port = (s.address() as AddressInfo).port
      app.log.info({ url: `http://${opts.host.includes(':') ? `[${opts.host}]` : opts.host}:${port}`, user: ANALYST_USER, password: file ? `in ${file}` : 'ANALYST_PASSWORD' },
        'analytics SQL (read-only, ClickHouse HTTP interface) listening')
      return port
    },
  })
  app.addHook('onClose', async () => {
    server?.close()
    await engine.close()
    server?.closeAllConnections()
  })
}, { name: 'analytics-sql', dependencies: ['clickhouse'] })
