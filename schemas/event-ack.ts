export const eventAck = {
  $id: 'event-ack.json',
  title: 'EventAck',
  type: 'object',
  required: ['id', 'accepted', 'agentId', 'eventId'],
  properties: {
    id: { type: 'string', description: 'The event id (same as eventId)' },
    accepted: { type: 'boolean' },
    agentId: { type: 'string', description: 'The resolved agent cuid' },
    eventId: { type: 'string', pattern: '^evt_' },
  },
} as const
