import type { FastifyPluginAsyncJsonSchemaToTs } from '@fastify/type-provider-json-schema-to-ts'
import type { FastifyRequest } from 'fastify'
import {
  annotateSession, annotateTrace, deleteScoreConfig, getScoreConfig, listScoreConfigs, listScores, putScoreConfig, scoresSummary, sessionScores, traceScores,
  SCORE_LIST_FILTERS, SCORE_SINGLE_FILTERS, SCORE_SUMMARY_FILTERS,
} from '../../../../schemas/score.ts'
import { scoreNameProblem } from '../../../domain/score-row.ts'
import { filterQueryProblems } from '../../../domain/search-filters.ts'
import { querystringInvalid } from '../../../http-error.ts'

/**
 * Before the schema, as the search lists check theirs (src/routes/v1/me/events.ts): a single-valued
 * filter given twice, or a filter whose percent-encoding is not UTF-8 (which would otherwise match
 * nothing), is a 400 naming it; so is a `name` no score can have, in words (the schema would quote
 * its pattern).
 */
function filterQuery (names: readonly string[]) {
  const params = { isFilter: (name: string) => names.includes(name), single: SCORE_SINGLE_FILTERS }
  return async (request: FastifyRequest) => {
    const problems = filterQueryProblems(request.url, params)
    const { name } = request.query as Record<string, unknown>
    const nameProblem = typeof name === 'string' && !problems.some((p) => p.path[0] === 'name') ? scoreNameProblem(name) : null
    if (nameProblem) problems.push({ path: ['name'], message: nameProblem })
    if (problems.length > 0) throw querystringInvalid(problems)
  }
}

/** The caller's score configs, their scores (list, summary) and the scores they give from the dashboard. */
const scores: FastifyPluginAsyncJsonSchemaToTs = async (app) => {
  const service = app.scoreService

  app.get('/score-configs', { schema: listScoreConfigs }, async (request) => ({ configs: await service.listConfigs(request.user.id) }))

  app.get('/score-configs/:name', { schema: getScoreConfig }, async (request) => service.config(request.user.id, request.params.name))

  app.put('/score-configs/:name', { schema: putScoreConfig }, async (request) => service.putConfig(request.user.id, request.params.name, request.body))

  app.delete('/score-configs/:name', { schema: deleteScoreConfig }, async (request, reply) => {
    await service.removeConfig(request.user.id, request.params.name)
    return reply.code(204).send(null)
  })

  app.get('/scores', { schema: listScores, preValidation: filterQuery(SCORE_LIST_FILTERS) }, async (request) => service.list(await request.reader, request.query))

  app.get('/scores/summary', { schema: scoresSummary, preValidation: filterQuery(SCORE_SUMMARY_FILTERS) }, async (request) => service.summary(await request.reader, request.query))

  app.get('/traces/:id/scores', { schema: traceScores }, async (request) =>
    ({ scores: await service.of(await request.reader, { traceId: request.params.id }) }))

  app.get('/sessions/:id/scores', { schema: sessionScores }, async (request) =>
    ({ scores: await service.of(await request.reader, { sessionId: request.params.id }) }))

  app.post('/traces/:id/scores', { schema: annotateTrace }, async (request, reply) =>
    reply.code(202).send(await service.annotate(await request.reader, request.user, { traceId: request.params.id }, request.body)))

  app.post('/sessions/:id/scores', { schema: annotateSession }, async (request, reply) =>
    reply.code(202).send(await service.annotate(await request.reader, request.user, { sessionId: request.params.id }, request.body)))
}

export default scores
