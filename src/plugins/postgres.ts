import fp from 'fastify-plugin'
import type pg from 'pg'
import { errorSummary } from '../log-lines.ts'
import { openPostgres, type PostgresTimeouts } from '../storage/postgres.ts'

declare module 'fastify' {
  interface FastifyInstance {
    db: pg.Pool
    /** Queries sent to Postgres through `db.query` since start (a counter for benchmarks). */
    readonly pgQueries: number
  }
}

/** Postgres: creates the database if missing and migrates it; the repositories are built in plugins/repositories.ts. */
export default fp(async function postgres (app, opts: { databaseUrl: string; timeouts: PostgresTimeouts }) {
  const pool = await openPostgres(opts.databaseUrl, opts.timeouts, (applied) => {
    if (applied.length) app.log.info({ applied }, 'Postgres migrations applied')
  })
  // The error alone, not what node-postgres hangs on it (the client, with its connection's
  // parameters, process id and cancel key): a line an operator reads, with nothing secret in it.
  pool.on('error', (err) => app.log.error({ error: errorSummary(err) }, 'idle Postgres connection failed; the pool opens another when one is needed'))
  app.decorate('db', pool)
  app.decorate('pgQueries', { getter: () => pool.queriesSent })
  app.addHook('onClose', async () => {
    await pool.end()
  })
}, { name: 'postgres' })
