export const eventBatch = {
  $id: 'event-batch.json',
  title: 'EventBatch',
  description: 'Body of POST /v1/events/batch: up to 500 events, each validated on its own against event.json.',
  type: 'object',
  additionalProperties: false,
  required: ['events'],
  properties: { events: { type: 'array', minItems: 1, maxItems: 500, items: { type: 'object' } } },
} as const
