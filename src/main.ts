import { buildApp } from './app.ts'
import { ConfigError, loadConfig } from './config.ts'

/** Starts the service: reads settings, builds the app, listens, and closes with grace on a signal. */
async function main(): Promise<void> {
  let config
  try {
    config = loadConfig()
  } catch (err) {
    if (err instanceof ConfigError) {
      console.error(err.message)
      process.exit(2)
    }
    throw err
  }
  const app = await buildApp(config)
  const roles = Object.entries(config.roles).filter(([, on]) => on).map(([role]) => role)
  app.log.info({
    roles,
    clickhouse: config.clickhouseUrl ? 'server' : `embedded (${config.dataDir})`,
    auth: 'jwksUrl' in config.auth ? 'identity provider' : 'local signing key',
    corsOrigins: config.corsOrigins,
  }, 'agent-telemetry starting')
  if (!config.clickhouseUrl && roles.length < 2) {
    app.log.warn({ roles }, 'the embedded engine belongs to one process: run the other role in this process too, or set CLICKHOUSE_URL')
  }
  let closing = false
  const shutdown = async (signal: string) => {
    if (closing) return
    closing = true
    app.log.info({ signal }, 'shutting down: refusing new requests, finishing in-flight batches')
    const force = setTimeout(() => {
      app.log.error('shutdown took over 30 s; exiting')
      process.exit(1)
    }, 30_000)
    force.unref()
    await app.close()
    app.log.info('shut down cleanly')
    process.exit(0)
  }
  // A stray rejection (e.g. from a store's client after an I/O error) is logged, not fatal: every
  // request path handles its own errors, and the ingest log keeps what was acknowledged either way.
  process.on('unhandledRejection', (err) => app.log.error({ err }, 'unhandled rejection'))
  process.on('SIGTERM', () => void shutdown('SIGTERM'))
  process.on('SIGINT', () => void shutdown('SIGINT'))
  if (config.roles.api) {
    await app.listen({ port: config.port, host: config.host })
  } else {
    await app.ready()
    app.log.info('running without the api role: not listening')
  }
  if (app.analyticsSql) await app.analyticsSql.listen()
}

main().catch((err) => {
  console.error('failed to start:', err)
  process.exit(1)
})
