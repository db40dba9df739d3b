export const publicAgent = {
  $id: 'public-agent.json',
  title: 'PublicAgent',
  description: 'An agent as the public surface shows it (GET /v1/agents, /v1/explorer topAgents). Response serialization drops any other field.',
  type: 'object',
  properties: {
    id: { type: 'string', description: 'cuid' },
    snsName: { type: ['string', 'null'] },
    displayName: { type: 'string' },
    registryId: { type: ['string', 'null'] },
    reputationScore: { type: ['number', 'null'] },
    source: { type: 'string' },
    metadata: {
      type: 'object',
      properties: { agentUri: { type: ['string', 'null'] }, feedback_count: { type: ['number', 'null'] } },
    },
    enriched: {
      type: 'object',
      properties: {
        name: { type: ['string', 'null'] },
        description: { type: ['string', 'null'] },
        image: { type: ['string', 'null'] },
        capabilities: { type: 'array', items: { type: 'string' } },
        profiled: { type: 'boolean' },
      },
    },
    lastSeenAt: { type: ['string', 'null'] },
  },
} as const
