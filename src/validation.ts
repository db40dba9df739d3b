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
import { parseIsoDateTime } from './domain/date-time.ts'

export const sharedSchemas = [event, eventBatch, eventAck, errorBody, registryEntry, publicAgent, apiKey, createdApiKey, user]

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
