import type { FastifyPluginAsync } from 'fastify'
import { TEST_AGENT_NAME } from '../../storage/agents-repository.ts'
import { agentDeleted } from '../../errors.ts'

/** POST /v1/me/test-event: the dashboard's synthetic event. */
const testEvent: FastifyPluginAsync = async (app) => {
  /** A synthetic event through the same ingest path, to the private placeholder agent. */
  app.post('/v1/me/test-event', async (request, reply) => {
    const user = request.user
    const resolution = await app.agents.testAgent(user.id)
    if (resolution.kind === 'deleted') throw agentDeleted()
    if (resolution.kind !== 'ok') throw new Error('test agent resolution failed')
    const ack = await app.ingestion.ingestOne(
      { userId: user.id, agentId: resolution.agent.id, tier: user.tier, burstPerMinute: user.burstPerMinute, source: { kind: 'dashboard_test' } },
      {
        type: 'decision',
        reasoning: 'Synthetic test event sent from the dashboard',
        toolExecuted: 'test',
        outcome: 'success',
        durationMs: 42,
        model: 'claude-sonnet-4-5',
        metadata: {
          sessionId: `test-session-${new Date().toISOString().slice(0, 10)}`,
          traceId: `test-trace-${Date.now()}`,
          privacyLevel: 'full',
          tool: 'dashboard',
          tokensBreakdown: { inputBase: 100, cacheCreation: 0, cacheRead: 0, output: 20 },
          source: TEST_AGENT_NAME,
        },
      },
    )
    return reply.code(202).send(ack)
  })
}

export default testEvent
