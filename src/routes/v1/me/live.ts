import type { FastifyPluginAsyncJsonSchemaToTs } from '@fastify/type-provider-json-schema-to-ts'
import { streamEvents } from '../../../../schemas/live-routes.ts'
import { parseLiveId } from '../../../domain/live-events.ts'
import { filterQueryProblems, parseSearchFilters, SCORE_PREFIX } from '../../../domain/search-filters.ts'
import { HttpError, querystringInvalid } from '../../../http-error.ts'
import type { DashboardReader } from '../../../services/dashboard-service.ts'

/** The longest Last-Event-ID read (an id the stream gives is at most 40 characters). */
const MAX_LAST_EVENT_ID = 64

/** The caller's live tail (docs/api.md#live-tail). */
const live: FastifyPluginAsyncJsonSchemaToTs = async (app) => {
  // Before the schema: its messages would name neither the header nor the repeated parameter.
  app.addHook('preValidation', async (request) => {
    const id = request.headers['last-event-id']
    if (typeof id === 'string' && id.length > MAX_LAST_EVENT_ID) {
      throw new HttpError(400, 'validation_failed', { message: 'the Last-Event-ID header is not valid', details: [{ path: ['Last-Event-ID'], message: `must be at most ${MAX_LAST_EVENT_ID} characters` }] })
    }
    // An id the stream never gave would resume from nowhere, silently: refused. Empty is no id (what
    // EventSource sends after an event whose id was empty).
    if (typeof id === 'string' && id.trim() !== '' && parseLiveId(id) === null) {
      throw new HttpError(400, 'validation_failed', { message: 'the Last-Event-ID header is not valid', details: [{ path: ['Last-Event-ID'], message: 'must be an id this stream gave, like 1764250000000-0:3' }] })
    }
    const problems = filterQueryProblems(request.url)
    if (problems.length > 0) throw querystringInvalid(problems)
  })
  app.get('/events/stream', { schema: streamEvents }, async (request, reply) => {
    const parsed = parseSearchFilters(request.query as Record<string, unknown>)
    if (!parsed.ok) throw querystringInvalid(parsed.problems)
    // A score mostly arrives after its event (evaluators run later): a tail cannot know it yet.
    if (parsed.filters.scores.length > 0) {
      const details = parsed.filters.scores.map((s) => ({ path: [`${SCORE_PREFIX}${s.name}`], message: 'score filters are not available on the live tail (a score arrives after its event): search GET /v1/me/events' }))
      throw querystringInvalid(details)
    }
    // HEAD (answered for every GET route) says what a GET would open, without holding a stream.
    if (request.method === 'HEAD') return reply.code(200).type('text/event-stream; charset=utf-8').send('')
    const agentsOf = (r: DashboardReader) => ({ names: r.names, hidden: new Set(r.hidden) })
    const reader = await request.reader
    await app.liveTail.serve(reply, {
      userId: request.user.id,
      filters: parsed.filters,
      lastEventId: request.headers['last-event-id'],
      agents: agentsOf(reader),
      agentsOf: async () => agentsOf(await app.dashboardService.readerOf(request.user.id, Date.now())),
      expiresAt: request.tokenExpiresAt,
    })
  })
}

export default live
