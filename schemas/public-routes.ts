/** Request and response schemas of the public routes (no authentication) and of /health. */
import { publicAgent } from './public-agent.ts'
import { errorResponses, freeObject, instant, matching, nullableInstant, nullableNumber, nullableString } from './common.ts'

const pub = { tags: ['public'] } as const
const { $id: _id, title: _title, ...listedAgent } = publicAgent

export const stats = {
  ...pub,
  summary: 'Registry and event counts',
  response: {
    200: {
      type: 'object',
      required: ['agents', 'events24h', 'lastUpdated'],
      properties: {
        agents: {
          type: 'object',
          required: ['total', 'identified', 'unknown'],
          description: 'public, not deleted agents; `identified` have `enriched.profiled` true',
          properties: { total: { type: 'integer' }, identified: { type: 'integer' }, unknown: { type: 'integer' } },
        },
        events24h: { type: 'integer', description: 'events of the last 24 h across the service' },
        lastUpdated: { ...instant, description: 'when the figures were computed (cached a few seconds)' },
      },
    },
    ...errorResponses(503),
  },
} as const

export const listPublicAgents = {
  ...pub,
  summary: 'Public agents, highest reputation first',
  querystring: {
    type: 'object',
    properties: {
      limit: { type: 'integer', minimum: 1, maximum: 100, default: 20 },
      offset: { type: 'integer', minimum: 0, maximum: 1_000_000, default: 0 },
      search: { type: 'string', maxLength: 100, description: 'case-insensitive substring of the display name, snsName, enriched name or description' },
      filter: { enum: ['all', 'identified', 'unknown'], default: 'all' },
    },
  },
  response: {
    200: {
      type: 'object',
      required: ['agents', 'total', 'offset'],
      properties: { agents: { type: 'array', items: listedAgent }, total: { type: 'integer' }, offset: { type: 'integer' } },
    },
    ...errorResponses(400, 503),
  },
} as const

export const getPublicAgent = {
  ...pub,
  summary: 'One public agent with public KPIs',
  params: { type: 'object', required: ['identifier'], properties: { identifier: { type: 'string', minLength: 1, maxLength: 200, description: 'cuid, snsName or registryId' } } },
  response: {
    200: {
      type: 'object',
      required: ['id', 'displayName', 'kpis'],
      properties: {
        ...listedAgent.properties,
        framework: nullableString,
        createdAt: instant,
        kpis: {
          type: 'object',
          required: ['eventCount', 'lastActivityAt', 'reputationScore'],
          properties: { eventCount: { type: 'integer' }, lastActivityAt: nullableInstant, reputationScore: nullableNumber },
        },
      },
    },
    ...errorResponses(400, 404, 414, 503),
  },
} as const

export const explorer = {
  ...pub,
  summary: 'The explorer page: top agents, collections, recent activity, payments',
  response: {
    200: {
      type: 'object',
      required: ['topAgents', 'collections', 'recentActivity', 'payments', 'lastUpdated'],
      properties: {
        topAgents: { type: 'array', items: listedAgent, description: '10 by reputation' },
        collections: {
          type: 'array',
          description: 'public agents by source',
          items: { type: 'object', required: ['source', 'agents', 'identified'], properties: { source: { type: 'string' }, agents: { type: 'integer' }, identified: { type: 'integer' } } },
        },
        recentActivity: {
          type: 'array',
          description: 'the last 25 events of public agents, no content',
          items: {
            type: 'object',
            required: ['agentId', 'displayName', 'type', 'at'],
            properties: { agentId: { type: 'string' }, displayName: nullableString, snsName: nullableString, type: { type: 'string' }, tool: { type: 'string' }, outcome: { type: 'string' }, at: instant },
          },
        },
        payments: {
          type: 'object',
          required: ['byToken', 'totals'],
          properties: {
            byToken: {
              type: 'array',
              items: {
                type: 'object',
                required: ['token', 'count24h', 'amount24h', 'count7d', 'amount7d'],
                properties: { token: { type: 'string' }, count24h: { type: 'integer' }, amount24h: { type: 'number' }, count7d: { type: 'integer' }, amount7d: { type: 'number' } },
              },
            },
            totals: { type: 'object', required: ['count24h', 'count7d'], properties: { count24h: { type: 'integer' }, count7d: { type: 'integer' } } },
          },
        },
        lastUpdated: instant,
      },
    },
    ...errorResponses(503),
  },
} as const

const chain = {
  type: 'object',
  required: ['status'],
  description: '`fresh` or `stale` (the last good copy, with its age) with the upstream\'s three parts, or `unavailable` with a reason',
  properties: {
    status: { enum: ['fresh', 'stale', 'unavailable'] },
    fetchedAt: instant,
    ageSeconds: { type: 'integer' },
    topSellers: { type: 'array', items: {} },
    recentTransfers: { type: 'array', items: {} },
    facilitator: freeObject,
    reason: { type: 'string' },
  },
} as const

export const x402 = {
  ...pub,
  summary: 'Payment data of the configured chains (proxied, cached)',
  response: {
    200: { type: 'object', required: ['chains'], properties: { chains: { type: 'object', additionalProperties: chain, description: 'by chain name (`base`, `solana`)' } } },
    ...errorResponses(502, 503),
  },
} as const

export const waitlist = {
  ...pub,
  summary: 'Join the waitlist (5 requests per hour per client address)',
  body: {
    type: 'object',
    additionalProperties: false,
    required: ['email'],
    properties: {
      email: { type: 'string', format: 'email', maxLength: 254, examples: ['ada@example.com'] },
      // No unpaired UTF-16 surrogates: Postgres would store them as U+FFFD.
      source: { type: 'string', maxLength: 100, ...matching('^\\P{Cs}*$', 'must be text without unpaired UTF-16 surrogates (U+D800 to U+DFFF alone)') },
      metadata: { type: 'object' },
    },
  },
  response: { 200: { type: 'object', required: ['ok'], properties: { ok: { const: true } } }, ...errorResponses(400, 413, 415, 429, 503) },
} as const

const stepFigures = {
  type: 'object',
  properties: { calls: { type: 'integer' }, events: { type: 'integer' }, totalMs: { type: 'number' }, usPerEvent: { type: 'number' } },
} as const

export const health = {
  tags: ['health'],
  summary: 'Liveness, version and ingest backlog (does not query the stores)',
  response: {
    200: {
      type: 'object',
      required: ['status', 'service', 'uptime', 'version', 'ingest'],
      properties: {
        status: { enum: ['ok', 'degraded', 'refusing'], description: '`refusing` while the ingest log refused an append in the last 10 s (full, or its disk cannot be written: events get 503); else `degraded` while the oldest event waiting in the ingest log is older than INGEST_DEGRADED_AFTER_MS; always a 200' },
        service: { type: 'string', examples: ['agent-telemetry'] },
        uptime: { type: 'number', description: 'seconds' },
        version: { type: 'string' },
        eventLoopDelayMs: {
          type: 'object',
          description: 'event-loop delay since the previous /health',
          properties: { p50: { type: 'number' }, p99: { type: 'number' }, max: { type: 'number' } },
        },
        ingest: {
          type: 'object',
          properties: {
            backlogRows: { type: 'integer', description: 'events acknowledged and not yet in ClickHouse' },
            backlogBytes: { type: 'integer', description: 'size of the ingest log entries still held' },
            oldestAgeMs: { type: ['integer', 'null'], description: 'age of the oldest event waiting, null when none' },
            quarantinedRows: { type: 'integer', description: 'rows ClickHouse refused, kept in the log\'s quarantine' },
            refusing: {
              type: ['object', 'null'],
              description: 'the last refusal of an append, while under 10 s old: `ingest_log_full` or `ingest_log_unavailable` (a disk that cannot be written), and how long ago',
              properties: { reason: { enum: ['ingest_log_full', 'ingest_log_unavailable'] }, agoMs: { type: 'integer' } },
            },
            insertsFailing: {
              type: ['object', 'null'],
              description: 'while ClickHouse inserts fail; the full error is in the log, not here (this route is public)',
              properties: { sinceMs: { type: 'integer' }, attempts: { type: 'integer' }, code: { type: 'string' } },
            },
            steps: { type: 'object', additionalProperties: stepFigures, description: 'time per pipeline step since start' },
          },
        },
      },
    },
    ...errorResponses(),
  },
} as const
