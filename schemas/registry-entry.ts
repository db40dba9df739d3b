export const registryEntry = {
  $id: 'registry-entry.json',
  title: 'RegistryEntry',
  description: 'One public agent in a registry import file (npm run registry:import -- file.json). The file is a JSON array of these, or { "agents": [ ... ] }.',
  type: 'object',
  additionalProperties: false,
  required: ['registryId'],
  properties: {
    registryId: { type: 'string', minLength: 1, maxLength: 100, description: 'on-chain asset public key; the key of the upsert' },
    snsName: { type: ['string', 'null'], minLength: 1, maxLength: 120 },
    displayName: {
      type: 'string',
      minLength: 1,
      maxLength: 120,
      description: 'defaults to enriched.name, else snsName, else registryId',
    },
    reputationScore: { type: ['number', 'null'] },
    source: { type: 'string', minLength: 1, maxLength: 50, description: 'defaults to registry' },
    isPublic: { type: 'boolean', description: 'defaults to true' },
    metadata: { type: 'object', properties: { agentUri: { type: 'string' }, feedback_count: { type: 'integer', minimum: 0 } } },
    enriched: {
      type: 'object',
      properties: {
        name: { type: 'string' },
        description: { type: 'string' },
        image: { type: 'string' },
        capabilities: { type: 'array', items: { type: 'string' } },
        profiled: { type: 'boolean' },
      },
    },
  },
} as const
