import { Ajv, type ErrorObject, type ValidateFunction } from 'ajv'
import addFormats from 'ajv-formats'
import { event } from '../schemas/event.ts'
import { eventBatch } from '../schemas/event-batch.ts'
import { eventAck } from '../schemas/event-ack.ts'
import { errorBody, PATTERN_MESSAGE } from '../schemas/common.ts'
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
  // An annotation: the rule of the schema's `pattern` in words, read by toDetails.
  ajv.addKeyword({ keyword: PATTERN_MESSAGE, schemaType: 'string' })
  ajv.addFormat('iso-date-time', { type: 'string', validate: (s: string) => !Number.isNaN(parseIsoDateTime(s)) })
  // Text in composed Unicode form, so that a name typed decomposed does not pass for another.
  ajv.addFormat('nfc', { type: 'string', validate: (s: string) => s === s.normalize('NFC') })
  for (const s of sharedSchemas) ajv.addSchema(s)
  return ajv
}

/** Bodies are validated as sent: no type coercion, no defaults, no keys removed. */
export const bodyAjv = newAjv(false)
/** Query strings and path parameters arrive as text, so they are coerced to the declared types. */
export const queryAjv = newAjv(true)

export const validateEvent = bodyAjv.getSchema('event.json') as ValidateFunction

/**
 * Who checks each body, decided here and nowhere else. Every route declares its body schema (the
 * OpenAPI document and the handler's types come from it), and by default the route checks the body
 * with it, before any handler or preHandler runs. A body schema marked `x-validated-by` names the
 * one other place that checks that body instead; the route compiles no validator for it, so the body
 * is checked once:
 *
 * - `ingestion-pipeline`: the event body of POST /v1/events, checked against event.json by the
 *   pipeline's `schema` step (src/ingest/steps/schema.ts, with validateEvent), as each event of a
 *   batch is. Checking it in the route as well would change answers, so the route does not: the
 *   Idempotency-Key (a preHandler) is looked up before the body is checked, so a retry with its key
 *   and another body gets 422 idempotency_key_reused, not 400; and the check is timed as the
 *   `schema` step, after the key and before the burst limit, as for a batch.
 * - `otlp-decoder`: POST /v1/traces takes protobuf or OTLP JSON as bytes; the OTLP decoder checks it.
 */
export const BODY_VALIDATED_BY = ['ingestion-pipeline', 'otlp-decoder'] as const

/**
 * The validator compiler of every route (registered by the error handler plugin, which answers its
 * failures): bodies as sent (bodyAjv), unless validated elsewhere (BODY_VALIDATED_BY); query strings,
 * parameters and headers coerced (queryAjv).
 */
export function compileRouteValidator ({ schema, httpPart }: { schema: unknown; httpPart?: string }): (data: unknown) => boolean {
  if (httpPart !== 'body') return onFirstUse(() => queryAjv.compile(schema as object))
  const owner = (schema as Record<string, unknown>)['x-validated-by']
  if (owner === undefined) return onFirstUse(() => bodyAjv.compile(schema as object))
  if (!(BODY_VALIDATED_BY as readonly unknown[]).includes(owner)) throw new Error(`x-validated-by names no known validator: ${String(owner)}`)
  return () => true
}

/**
 * A validator compiled when its route first takes a request, not when the route is added: compiling
 * every route's schemas took about a second of CPU at every start, mostly for routes a process never
 * serves. It answers as Ajv's own does, with the last call's `errors` on the function, where Fastify
 * reads them. The contract test (test/plugins/openapi.test.ts) calls every route, so a schema that
 * does not compile still fails the suite.
 */
function onFirstUse (compile: () => ValidateFunction): ((data: unknown) => boolean) & { errors?: ErrorObject[] | null } {
  let compiled: ValidateFunction | undefined
  const validate = (data: unknown): boolean => {
    compiled ??= compile()
    const valid = compiled(data) as boolean
    validate.errors = compiled.errors
    return valid
  }
  validate.errors = null as ErrorObject[] | null | undefined
  return validate
}

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
 * (oneOf) are reported once, by the description of the schema that offered them; a failed `pattern`
 * by its rule in words (PATTERN_MESSAGE beside it), never by the regex. With `depth`, a path is
 * cut to its first `depth` keys (the same path and message then told once).
 */
export function toDetails (errors: ErrorObject[] | null | undefined, prefix: (string | number)[] = [], depth = Infinity): ErrorDetail[] {
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
    } else if (e.keyword === 'pattern' || e.keyword === 'format') {
      const words = (e.parentSchema as Record<string, unknown> | undefined)?.[PATTERN_MESSAGE]
      if (typeof words === 'string') message = words
    } else if (e.keyword === 'enum') {
      message = `must be one of ${(e.params as { allowedValues: unknown[] }).allowedValues.map((v) => JSON.stringify(v)).join(', ')}`
    }
    const named = path.slice(0, depth)
    const key = JSON.stringify(named) + message
    if (!seen.has(key)) {
      seen.add(key)
      details.push({ path: named, message })
    }
  }
  return details
}
