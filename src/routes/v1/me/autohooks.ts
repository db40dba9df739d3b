import type { FastifyInstance, FastifyRequest } from 'fastify'
import { LENIENT } from '../../../../schemas/common.ts'
import { repeatedParams } from '../../../domain/query-params.ts'
import { querystringInvalid, writesNotYetReadable } from '../../../http-error.ts'
import { LogThrottle } from '../../../log-lines.ts'
import { rateLimitHook } from '../../../plugins/rate-limit.ts'
import type { DashboardReader } from '../../../services/dashboard-service.ts'

/** How often at most the 503 of reads not yet able to read their writes is logged. */
const WARN_EVERY_MS = 10_000

declare module 'fastify' {
  interface FastifyRequest {
    /** For `/v1/me` reads: every event this instance received at or before it is readable (see IngestionService.settledBefore). */
    settledAt: number
    /**
     * The caller as a reader of the dashboard (their id, the agents reads hide, their agents' names, the
     * request's `settledAt`): looked up on first use, once per request. Only under `/v1/me`.
     */
    reader: Promise<DashboardReader>
  }
}

/**
 * The hooks of every route under /v1/me, this folder and the folders below it: the caller is
 * authenticated (401 before anything else runs), counted against the per-user rate limit, and reads
 * what this instance acknowledged to them. A query parameter given more than once follows one rule
 * on every route (repeatedParams).
 */
export default async function meHooks (app: FastifyInstance) {
  const { meLimits, readYourWritesTimeoutMs } = app.routeSettings
  const readers = new WeakMap<FastifyRequest, Promise<DashboardReader>>()
  app.decorateRequest('settledAt', 0)
  app.decorateRequest('reader', {
    getter (this: FastifyRequest) {
      let reader = readers.get(this)
      if (!reader) {
        reader = app.dashboardService.readerOf(this.user.id, this.settledAt)
        readers.set(this, reader)
      }
      return reader
    },
  })

  app.addHook('onRequest', app.authenticateUser)
  // Per user and route: ME_READS_PER_MINUTE for GET, ME_WRITES_PER_MINUTE for the rest.
  app.addHook('onRequest', rateLimitHook(() => app.rateLimiter, {
    bucket: (request) => `me:${request.user.id}:${request.method} ${request.routeOptions.url ?? request.url}`,
    limit: (request) => (request.method === 'GET' || request.method === 'HEAD' ? meLimits.readsPerMinute : meLimits.writesPerMinute),
  }))
  // Read-your-writes: what this instance acknowledged to the caller is in ClickHouse before the request runs
  // (waiting at most READ_YOUR_WRITES_TIMEOUT_MS). A read that would still miss some of it is a 503
  // (Retry-After: 1), never an answer without them; a write goes on (it reads no events).
  // The snapshot instant of paged reads is taken first, so that every row it covers is waited for.
  // One line per WARN_EVERY_MS: while a backlog ships, every read of its users would say it again.
  const notReadableLines = new LogThrottle(WARN_EVERY_MS)
  app.addHook('onRequest', async (request) => {
    request.settledAt = app.ingestion.settledBefore()
    if (await app.shipper.waitForUser(request.user.id, readYourWritesTimeoutMs)) return
    if (request.method !== 'GET' && request.method !== 'HEAD') return
    if (notReadableLines.pass() !== null) {
      request.log.warn({ userId: request.user.id, timeoutMs: readYourWritesTimeoutMs },
        'reads answered 503: events acknowledged to their users are not yet in ClickHouse after READ_YOUR_WRITES_TIMEOUT_MS (is ClickHouse slow or down? /health shows the backlog)')
    }
    throw writesNotYetReadable(readYourWritesTimeoutMs)
  })
  // Before the schema, whose words for it would be about types (`must be string`): a lenient
  // parameter given more than once takes its default, any other single-valued one is a 400 naming it.
  app.addHook('preValidation', async (request) => {
    const properties = (request.routeOptions.schema?.querystring as { properties?: Record<string, unknown> } | undefined)?.properties
    const query = request.query as Record<string, unknown> | undefined
    if (properties === undefined || query == null) return
    const { defaulted, problems } = repeatedParams(properties, query, (schema) => schema[LENIENT] === true)
    if (problems.length > 0) throw querystringInvalid(problems)
    for (const name of defaulted) delete query[name]
  })
}
