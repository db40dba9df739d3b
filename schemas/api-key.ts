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
    kind: { enum: ['secret', 'publishable'], description: '`publishable`: may be held by a web page; only sends scores with `source: human`, from `allowedOrigins`' },
    allowedOrigins: { type: ['array', 'null'], items: { type: 'string' }, description: 'publishable keys: the browser origins allowed to use it; null for secret keys' },
    createdAt: { type: 'string' },
    lastUsedAt: { type: ['string', 'null'] },
    secret: { type: 'string', description: 'vk_ + 32 random bytes (base64url); only in the creation response' },
  },
  required: ['id', 'keyPrefix', 'label', 'agentId', 'kind', 'allowedOrigins', 'createdAt', 'lastUsedAt'],
} as const

/** The answer of POST /v1/me/keys: the key and, this once, its secret. */
export const createdApiKey = {
  ...apiKey,
  $id: 'created-api-key.json',
  title: 'CreatedApiKey',
  description: 'The key just created (POST /v1/me/keys), with its secret: shown this once, stored only as a hash.',
  required: [...apiKey.required, 'secret'],
} as const
