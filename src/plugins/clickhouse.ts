import fp from 'fastify-plugin'
import type { ClickHouseClient } from '@clickhouse/client'
import { createClient } from '@clickhouse/client'
import { migrateClickHouse, openClickHouse } from '../storage/clickhouse-client.ts'
import { EventsRepository } from '../storage/events-repository.ts'
import { EventWriter } from '../storage/event-writer.ts'

declare module 'fastify' {
  interface FastifyInstance {
    clickhouse: ClickHouseClient
    events: EventsRepository
    eventWriter: EventWriter
  }
}

export interface ClickHouseOptions {
  url: string | undefined
  dataDir: string
  writerMaxRows: number
  writerMaxBytes: number
}

/** Creates the database named in a server URL when missing (the embedded engine uses `default`). */
async function ensureServerDatabase(url: string): Promise<void> {
  const parsed = new URL(url)
  const database = parsed.pathname.slice(1)
  if (!database) return
  parsed.pathname = '/'
  const admin = createClient({ url: parsed.toString() })
  try {
    await admin.command({ query: `CREATE DATABASE IF NOT EXISTS \`${database.replace(/`/g, '')}\`` })
  } finally {
    await admin.close()
  }
}

/**
 * ClickHouse: the embedded engine or a server, migrated at start, with the group-commit writer.
 * On close the writer drains first, so every accepted request gets its answer before the client goes.
 */
export default fp(async function clickhouse(app, opts: ClickHouseOptions) {
  if (opts.url) await ensureServerDatabase(opts.url)
  const handle = openClickHouse({ url: opts.url, dataDir: opts.dataDir })
  try {
    const applied = await migrateClickHouse(handle.client)
    if (applied.length) app.log.info({ applied }, 'ClickHouse migrations applied')
  } catch (err) {
    await handle.release()
    throw err
  }
  const events = new EventsRepository(handle.client)
  const writer = new EventWriter((rows) => events.insert(rows), { maxRows: opts.writerMaxRows, maxBytes: opts.writerMaxBytes }, app.log)
  app.decorate('clickhouse', handle.client)
  app.decorate('events', events)
  app.decorate('eventWriter', writer)
  app.addHook('onClose', async () => {
    await writer.close()
    await handle.release()
  })
}, { name: 'clickhouse' })
