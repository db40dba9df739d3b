const tokenCount = { type: 'integer', minimum: 0, maximum: 10000000000 } as const

export const event = {
  $id: 'event.json',
  title: 'Event',
  description: 'One telemetry event as sent to POST /v1/events. Unknown top-level keys are rejected; unknown keys inside metadata are kept.',
  type: 'object',
  additionalProperties: false,
  properties: {
    agentId: {
      type: 'string',
      minLength: 1,
      maxLength: 120,
      description: 'A name-service domain, a cuid, or a free-form label. Required unless the API key is bound to an agent.',
    },
    timestamp: {
      description: 'an ISO 8601 date-time string (no zone means UTC) or a unix-milliseconds integer, an instant from 1970-01-01T00:00:00Z up to (not including) 2106-01-01T00:00:00Z',
      oneOf: [{ type: 'string', format: 'iso-date-time' }, { type: 'integer', minimum: 0, exclusiveMaximum: 4291747200000 }],
    },
    type: { enum: ['reasoning', 'tool', 'tx', 'decision', 'action', 'error'], default: 'decision' },
    input: { type: 'object', properties: { prompt: { type: 'string' }, context: { type: 'object' } } },
    reasoning: { type: 'string' },
    toolsConsidered: { type: 'array', items: { type: 'string' }, maxItems: 1000 },
    toolExecuted: { type: 'string', maxLength: 200 },
    transaction: { type: ['string', 'null'], maxLength: 200 },
    amount: {
      type: 'object',
      required: ['token', 'value'],
      properties: { token: { type: 'string', minLength: 1, maxLength: 100 }, value: { type: 'number' } },
    },
    outcome: { enum: ['pending', 'success', 'failed'] },
    durationMs: { type: 'integer', minimum: 0, maximum: 9007199254740991 },
    errorMessage: { type: 'string' },
    model: { type: 'string', maxLength: 200 },
    metadata: {
      type: 'object',
      properties: {
        tokensBreakdown: {
          type: 'object',
          properties: {
            inputBase: tokenCount,
            cacheCreation: tokenCount,
            cacheRead: tokenCount,
            output: tokenCount,
            reasoning: { ...tokenCount, description: 'reasoning tokens, a part of output' },
          },
        },
        traceId: { type: 'string', minLength: 1, maxLength: 200 },
        spanId: { type: 'string', minLength: 1, maxLength: 200, description: "this event's span in its trace" },
        parentSpanId: { type: 'string', minLength: 1, maxLength: 200, description: "the span this event's span is a child of" },
        provider: { type: 'string', minLength: 1, maxLength: 100, description: "the model's provider (openai, anthropic, aws.bedrock, ...), a hint for pricing" },
        sessionId: { type: 'string', minLength: 1, maxLength: 200 },
        cwd: { type: 'string' },
        git: { type: ['object', 'string'] },
        privacyLevel: { enum: ['minimal', 'standard', 'full'] },
        tool: { type: 'string', maxLength: 100 },
        dedupKey: { type: 'string' },
        denial: { description: 'a denial (of a tool call or a permission) as the client reports it; shown on the trace timeline' },
        wakeup: { description: 'what woke the agent up, as the client reports it; shown on the trace timeline' },
      },
    },
  },
} as const
