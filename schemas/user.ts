export const user = {
  $id: 'user.json',
  title: 'User',
  description: 'The caller, as GET /v1/me and PATCH /v1/me return it.',
  type: 'object',
  properties: {
    id: { type: 'string' },
    privyId: { type: 'string' },
    email: { type: ['string', 'null'] },
    wallet: { type: ['string', 'null'] },
    handle: { type: ['string', 'null'] },
    tier: { type: 'string' },
    createdAt: { type: 'string' },
    usage: { type: 'object', properties: { month: { type: 'string' }, events: { type: 'integer' } }, description: 'this month\'s accepted events' },
  },
  required: ['id', 'privyId', 'email', 'wallet', 'handle', 'tier', 'createdAt', 'usage'],
} as const
