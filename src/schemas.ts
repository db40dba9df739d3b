import { Ajv, type ErrorObject, type ValidateFunction } from 'ajv'
import addFormats from 'ajv-formats'
import { event } from '../schemas/event.ts'
import { eventBatch } from '../schemas/event-batch.ts'
import { eventAck } from '../schemas/event-ack.ts'
import { errorBody } from '../schemas/common.ts'
import { registryEntry } from '../schemas/registry-entry.ts'
import { publicAgent } from '../schemas/public-agent.ts'
import { apiKey, createdApiKey } from '../schemas/api-key.ts'
import { user } from '../schemas/user.ts'

export const sharedSchemas = [event, eventBatch, eventAck, errorBody, registryEntry, publicAgent, apiKey, createdApiKey, user]

const ISO_DATE_TIME = /^(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2})(?::(\d{2})(?:\.\d{1,9})?)?(?:[Zz]|[+-]\d{2}:?\d{2})?$/

/** Event instants must lie in [1970-01-01T00:00:00Z, 2300-01-01T00:00:00Z): the range of the store's DateTime64 and of reads. */
export const MIN_EVENT_TIME_MS = 0
export const END_EVENT_TIME_MS = Date.UTC(2300, 0, 1)

/**
 * Parses an ISO 8601 date-time to unix milliseconds. A missing zone means UTC. Returns NaN for
 * anything that is not a real date, or whose instant (after its offset) is outside
 * [MIN_EVENT_TIME_MS, END_EVENT_TIME_MS).
 */
export function parseIsoDateTime (value: string): number {
  const m = ISO_DATE_TIME.exec(value)
  if (!m) return NaN
  let text = value.replace(' ', 'T')
  if (!/(?:[Zz]|[+-]\d{2}:?\d{2})$/.test(text)) text += 'Z'
  text = text.replace(/([+-]\d{2})(\d{2})$/, '$1:$2')
  const ms = Date.parse(text)
  if (Number.isNaN(ms) || ms < MIN_EVENT_TIME_MS || ms >= END_EVENT_TIME_MS || Number(m[3]) > 31 || Number(m[2]) > 12) return NaN
  // Date.parse rolls 2026-02-30 over to March; compare the day back to refuse it.
  const check = new Date(Date.UTC(Number(m[1]), Number(m[2]) - 1, Number(m[3])))
  if (check.getUTCDate() !== Number(m[3])) return NaN
  return ms
}

function newAjv (coerce: boolean): Ajv {
  const ajv = new Ajv({
    allErrors: true,
    coerceTypes: coerce ? 'array' : false,
    useDefaults: coerce,
    removeAdditional: false,
    verbose: true,
    strict: false,
  })
  addFormats.default(ajv)
  ajv.addFormat('iso-date-time', { type: 'string', validate: (s: string) => !Number.isNaN(parseIsoDateTime(s)) })
  for (const s of sharedSchemas) ajv.addSchema(s)
  return ajv
}

/** Bodies are validated as sent: no type coercion, no defaults, no keys removed. */
export const bodyAjv = newAjv(false)
/** Query strings and path parameters arrive as text, so they are coerced to the declared types. */
export const queryAjv = newAjv(true)

export const validateEvent = bodyAjv.getSchema('event.json') as ValidateFunction

export interface ErrorDetail { path: (string | number)[]; message: string }

function pathOf (instancePath: string): (string | number)[] {
  if (!instancePath) return []
  return instancePath.slice(1).split('/').map((seg) => {
    const key = seg.replace(/~1/g, '/').replace(/~0/g, '~')
    return /^(0|[1-9]\d*)$/.test(key) ? Number(key) : key
  })
}

/**
 * Turns Ajv errors into the spec's `details`: `path` is an array of keys and indices down to the
 * offending value (the missing or unknown key included), `message` says what is wrong. Alternatives
 * (oneOf) are reported once, by the description of the schema that offered them.
 */
export function toDetails (errors: ErrorObject[] | null | undefined, prefix: (string | number)[] = []): ErrorDetail[] {
  const all = errors ?? []
  const oneOfPaths = new Set(all.filter((e) => e.keyword === 'oneOf').map((e) => e.instancePath))
  const details: ErrorDetail[] = []
  const seen = new Set<string>()
  for (const e of all) {
    if (oneOfPaths.has(e.instancePath) && e.keyword !== 'oneOf') continue
    const path = [...prefix, ...pathOf(e.instancePath)]
    let message = e.message ?? 'is invalid'
    if (e.keyword === 'required') {
      path.push((e.params as { missingProperty: string }).missingProperty)
      message = 'is required'
    } else if (e.keyword === 'additionalProperties') {
      path.push((e.params as { additionalProperty: string }).additionalProperty)
      message = 'is not an allowed key'
    } else if (e.keyword === 'oneOf') {
      const description = (e.parentSchema as { description?: string } | undefined)?.description
      message = description ? `must be ${description}` : 'does not match any allowed form'
    } else if (e.keyword === 'enum') {
      message = `must be one of ${(e.params as { allowedValues: unknown[] }).allowedValues.map((v) => JSON.stringify(v)).join(', ')}`
    }
    const key = JSON.stringify(path) + message
    if (!seen.has(key)) {
      seen.add(key)
      details.push({ path, message })
    }
  }
  return details
}
