import { ConfigError, loadConfig, type Config } from './config.ts'
import { prettyStream } from './log-format.ts'
import { checkDataDirFree, checkPortFree, describeStartupFailure } from './startup-failure.ts'

/** Starts the service: reads settings, builds the app, listens, and closes with grace on a signal. */
async function main (config: Config): Promise<void> {
  if (!config.clickhouseUrl) checkDataDirFree(config.dataDir)
  // A port in use is told before the start's work (migrations, the engine), not after it.
  if (config.roles.api) await checkPortFree(config.port, config.host)
  if (!config.clickhouseUrl && config.analytics.port !== null) await checkPortFree(config.analytics.port, config.analytics.host)
  // The app's modules are loaded once the settings are known to be good and the data directory free:
  // a start refused for either answers at once, without loading them.
  const { buildApp } = await import('./app.ts')
  const app = await buildApp(config, config.logFormat === 'pretty' ? { logger: { level: config.logLevel, stream: prettyStream() } } : {})
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
    if (closing) {
      app.log.info({ signal }, 'already shutting down (at most 30 s); every acknowledged event is in the ingest log, so SIGKILL stops at once without losing any')
      return
    }
    closing = true
    app.log.info({ signal }, 'shutting down: refusing new requests, finishing in-flight batches')
    const force = setTimeout(() => {
      app.log.error('shutdown took over 30 s; stopping at once (SIGKILL): what was acknowledged waits in the ingest log for the next start')
      // Not process.exit: the exit waits for the embedded engine's threads, and one busy in a call
      // the engine cannot interrupt would hold the process for good.
      process.kill(process.pid, 'SIGKILL')
    }, 30_000)
    force.unref()
    await app.close()
    app.log.info('shut down cleanly: every acknowledged event was shipped or waits in the ingest log for the next start')
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

let config: Config
try {
  config = loadConfig()
} catch (err) {
  if (err instanceof ConfigError) {
    console.error(err.message)
    process.exit(2)
  }
  throw err
}
// One line naming the setting to look at; the stack only when asked for.
main(config).catch((err) => {
  console.error(`agent-telemetry could not start: ${describeStartupFailure(err, config)}`)
  if (config.logLevel === 'debug' || config.logLevel === 'trace') console.error(err)
  process.exit(1)
})
