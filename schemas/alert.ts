import { agentRef, freeObject, instant, nullableInstant } from './common.ts'

export const alertStatus = { enum: ['active', 'acknowledged', 'snoozed'] } as const

export const alert = {
  type: 'object',
  description: 'An alert raised by an anomaly rule for one agent.',
  required: ['id', 'agentId', 'agent', 'agentDeleted', 'rule', 'severity', 'message', 'figures', 'status', 'snoozedUntil', 'triggerCount',
    'createdAt', 'updatedAt', 'lastTriggeredAt', 'lastSeenFiringAt', 'acknowledgedAt', 'clearedAt'],
  properties: {
    id: { type: 'string' },
    agentId: { type: 'string', description: 'cuid (kept for compatibility; also in `agent`)' },
    agent: agentRef,
    agentDeleted: { type: 'boolean', description: 'alerts of deleted agents stay listed so they can be acknowledged' },
    rule: { type: 'string', description: '`error_rate`, `spend_spike`, `latency_spike`, `silence` or `regression:<fingerprint>`', examples: ['error_rate'] },
    severity: { enum: ['warning', 'critical'] },
    message: { type: 'string' },
    figures: { ...freeObject, description: 'the numbers the rule compared' },
    status: alertStatus,
    snoozedUntil: nullableInstant,
    triggerCount: {
      type: 'integer',
      minimum: 1,
      description: 'times the condition became true: the opening (1), plus each time it held again after an evaluation found it over; not the number of evaluations that saw it',
    },
    createdAt: instant,
    updatedAt: instant,
    lastTriggeredAt: { ...instant, description: 'when the condition last became true (the opening, or the last re-trigger)' },
    lastSeenFiringAt: { ...instant, description: 'the last evaluation that found the condition true (moves while the alert keeps firing)' },
    acknowledgedAt: nullableInstant,
    clearedAt: nullableInstant,
  },
} as const

const rule = { type: 'object', additionalProperties: { type: ['number', 'boolean'] } } as const

export const alertSettings = {
  type: 'object',
  required: ['thresholds', 'overrides'],
  properties: {
    thresholds: { type: 'object', additionalProperties: rule, description: 'effective thresholds per rule (defaults merged with overrides)' },
    overrides: { type: 'object', additionalProperties: rule, description: 'the caller\'s overrides per rule' },
  },
  examples: [{ thresholds: { error_rate: { enabled: true, windowMinutes: 15, minFailed: 10, minRate: 0.5 } }, overrides: {} }],
} as const

const enabled = { type: 'boolean' } as const
const minutes = { type: 'integer', minimum: 1, maximum: 1440 } as const
const count = { type: 'integer', minimum: 1, maximum: 1_000_000 } as const
const positive = { type: 'number', exclusiveMinimum: 0, maximum: 1_000_000 } as const

/** PUT /v1/me/alert-settings: a partial override of each rule's thresholds (the same fields as the defaults). */
export const alertSettingsBody = {
  type: 'object',
  additionalProperties: false,
  description: 'Overrides per rule; every field optional. Replaces the previous overrides.',
  properties: {
    error_rate: {
      type: 'object',
      additionalProperties: false,
      properties: { enabled, windowMinutes: minutes, minFailed: count, minRate: { type: 'number', exclusiveMinimum: 0, maximum: 1 } },
    },
    spend_spike: { type: 'object', additionalProperties: false, properties: { enabled, multiplier: positive, floorUsd: positive } },
    latency_spike: {
      type: 'object',
      additionalProperties: false,
      properties: { enabled, windowMinutes: minutes, multiplier: positive, minP95Ms: positive, minEvents: count },
    },
    silence: {
      type: 'object',
      additionalProperties: false,
      properties: { enabled, silenceMinutes: minutes, minActiveHours: count, minEvents: count },
    },
  },
  examples: [{ error_rate: { minRate: 0.3 }, silence: { enabled: false } }],
} as const
