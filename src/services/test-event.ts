import { agentDeleted } from '../http-error.ts'
import { TEST_AGENT_NAME, type AgentsRepository } from '../storage/agents-repository.ts'
import type { User } from '../storage/users-repository.ts'
import type { EventAck, IngestionService } from '../ingest/ingestion-service.ts'

/**
 * The dashboard's synthetic event: through the same ingest path (validation, burst limit, ingest log)
 * to the placeholder agent `test-agent`, created on first use, private.
 */
export async function sendTestEvent (agents: AgentsRepository, ingestion: IngestionService, user: User): Promise<EventAck> {
  const resolution = await agents.testAgent(user.id)
  if (resolution.kind === 'deleted') throw agentDeleted()
  if (resolution.kind !== 'ok') throw new Error('test agent resolution failed')
  return ingestion.ingestOne(
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
}
