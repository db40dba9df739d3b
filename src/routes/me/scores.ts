import type { FastifyPluginAsyncJsonSchemaToTs } from '@fastify/type-provider-json-schema-to-ts'
import { ScoreService } from '../../services/score-service.ts'
import {
  annotateSession, annotateTrace, deleteScoreConfig, getScoreConfig, listScoreConfigs, listScores, putScoreConfig, scoresSummary, sessionScores, traceScores,
} from '../../../schemas/score.ts'

/** The caller's score configs, their scores (list, summary) and the scores they give from the dashboard. */
const scores: FastifyPluginAsyncJsonSchemaToTs = async (app) => {
  const service = new ScoreService(app.scores, app.scoreConfigs, app.dashboard, app.scoreIngestion)

  app.get('/v1/me/score-configs', { schema: listScoreConfigs }, async (request) => ({ configs: await service.listConfigs(request.user.id) }))

  app.get('/v1/me/score-configs/:name', { schema: getScoreConfig }, async (request) => service.config(request.user.id, request.params.name))

  app.put('/v1/me/score-configs/:name', { schema: putScoreConfig }, async (request) => service.putConfig(request.user.id, request.params.name, request.body))

  app.delete('/v1/me/score-configs/:name', { schema: deleteScoreConfig }, async (request, reply) => {
    await service.removeConfig(request.user.id, request.params.name)
    return reply.code(204).send(null)
  })

  app.get('/v1/me/scores', { schema: listScores }, async (request) => service.list(await app.readerOf(request), request.query))

  app.get('/v1/me/scores/summary', { schema: scoresSummary }, async (request) => service.summary(await app.readerOf(request), request.query))

  app.get('/v1/me/traces/:id/scores', { schema: traceScores }, async (request) =>
    ({ scores: await service.of(await app.readerOf(request), { traceId: request.params.id }) }))

  app.get('/v1/me/sessions/:id/scores', { schema: sessionScores }, async (request) =>
    ({ scores: await service.of(await app.readerOf(request), { sessionId: request.params.id }) }))

  app.post('/v1/me/traces/:id/scores', { schema: annotateTrace }, async (request, reply) =>
    reply.code(202).send(await service.annotate(await app.readerOf(request), request.user, { traceId: request.params.id }, request.body)))

  app.post('/v1/me/sessions/:id/scores', { schema: annotateSession }, async (request, reply) =>
    reply.code(202).send(await service.annotate(await app.readerOf(request), request.user, { sessionId: request.params.id }, request.body)))
}

export default scores
