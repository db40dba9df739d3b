export const apiKey = {
  $id: 'api-key.json',
  title: 'ApiKey',
  description: 'An API key as listed by GET /v1/me/keys; POST /v1/me/keys adds the secret once.',
  type: 'object',
  properties: {
    id: { type: 'string' },
    keyPrefix: { type: 'string' },
    label: { type: 'string' },
    agentId: { type: ['string', 'null'] },
    createdAt: { type: 'string' },
    lastUsedAt: { type: ['string', 'null'] },
    secret: { type: 'string', description: 'vk_ + 32 random bytes (base64url); only in the creation response' },
  },
} as const
