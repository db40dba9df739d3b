import { eventSchema } from './event-schema.js'

/** One problem with an event: the keys and indices down to the offending value, and what is wrong. */
export interface Problem { path: (string | number)[]; message: string }

/**
 * A small interpreter of the JSON Schema keywords the service's event schema uses (type, enum,
 * properties, additionalProperties, required, oneOf, items, min/maxItems, min/maxLength, minimum,
 * maximum, exclusiveMaximum, format iso-date-time), run over the service's own schema
 * (event-schema.ts, a generated copy of schemas/event.ts). A client cannot ship Ajv; an interpreter
 * of ~100 lines over the same schema object keeps one source of truth, and a keyword it does not know
 * fails the client's tests (test/client/validate.test.ts compares it with the service's Ajv).
 */
interface Schema {
  type?: string | readonly string[]
  enum?: readonly unknown[]
  properties?: Readonly<Record<string, Schema>>
  additionalProperties?: boolean
  required?: readonly string[]
  oneOf?: readonly Schema[]
  items?: Schema
  minItems?: number
  maxItems?: number
  minLength?: number
  maxLength?: number
  minimum?: number
  maximum?: number
  exclusiveMaximum?: number
  format?: string
  description?: string
}

/** The keywords above plus annotations; any other keyword in the schema is a build-time mismatch. */
export const KNOWN_KEYWORDS = new Set(['type', 'enum', 'properties', 'additionalProperties', 'required', 'oneOf', 'items', 'minItems', 'maxItems',
  'minLength', 'maxLength', 'minimum', 'maximum', 'exclusiveMaximum', 'format', 'description', 'default', '$id', 'title'])

function typeOf (value: unknown): string {
  if (value === null) return 'null'
  if (Array.isArray(value)) return 'array'
  return typeof value
}

function hasType (value: unknown, type: string): boolean {
  switch (type) {
    case 'integer': return typeof value === 'number' && Number.isInteger(value)
    case 'number': return typeof value === 'number' && Number.isFinite(value)
    case 'object': return typeOf(value) === 'object'
    default: return typeOf(value) === type
  }
}

// Ajv counts characters as code points, not UTF-16 units.
function codePoints (s: string): number {
  let n = s.length
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i)
    if (c >= 0xd800 && c <= 0xdbff && i + 1 < s.length) {
      const d = s.charCodeAt(i + 1)
      if (d >= 0xdc00 && d <= 0xdfff) { n--; i++ }
    }
  }
  return n
}

/** A path as a chain of parents, turned into an array only for a problem (most events have none). */
export interface PathNode { parent: PathNode | undefined; key: string | number }

export function pathArray (node: PathNode | undefined): (string | number)[] {
  const out: (string | number)[] = []
  for (let n = node; n !== undefined; n = n.parent) out.push(n.key)
  return out.reverse()
}

/**
 * A schema node with every keyword present, in one order: every node has the same shape, so V8's
 * property lookups in `check` stay monomorphic (the schema's own literals have a shape each, and
 * reading them was two thirds of the check's time).
 */
interface Node {
  types: readonly string[] | undefined
  enum: readonly unknown[] | undefined
  properties: Map<string, Node> | undefined
  additionalProperties: boolean
  required: readonly string[]
  oneOf: readonly Node[] | undefined
  items: Node | undefined
  minItems: number | undefined
  maxItems: number | undefined
  minLength: number | undefined
  maxLength: number | undefined
  minimum: number | undefined
  maximum: number | undefined
  exclusiveMaximum: number | undefined
  isoDateTime: boolean
  description: string | undefined
}

function compile (s: Schema): Node {
  return {
    types: s.type === undefined ? undefined : typeof s.type === 'string' ? [s.type] : s.type,
    enum: s.enum,
    properties: s.properties ? new Map(Object.entries(s.properties).map(([k, v]) => [k, compile(v)])) : undefined,
    additionalProperties: s.additionalProperties !== false,
    required: s.required ?? [],
    oneOf: s.oneOf?.map(compile),
    items: s.items ? compile(s.items) : undefined,
    minItems: s.minItems,
    maxItems: s.maxItems,
    minLength: s.minLength,
    maxLength: s.maxLength,
    minimum: s.minimum,
    maximum: s.maximum,
    exclusiveMaximum: s.exclusiveMaximum,
    isoDateTime: s.format === 'iso-date-time',
    description: s.description,
  }
}

const root = compile(eventSchema as Schema)

function check (value: unknown, schema: Node, at: PathNode | undefined, out: Problem[]): void {
  if (schema.oneOf) {
    let matches = 0
    for (const alternative of schema.oneOf) {
      const p: Problem[] = []
      check(value, alternative, at, p)
      if (p.length === 0) matches++
    }
    if (matches !== 1) out.push({ path: pathArray(at), message: schema.description ? `must be ${schema.description}` : 'does not match any allowed form' })
    return
  }
  const types = schema.types
  if (types !== undefined) {
    let ok = false
    for (let i = 0; i < types.length && !ok; i++) ok = hasType(value, types[i]!)
    if (!ok) {
      out.push({ path: pathArray(at), message: `must be ${types.join(',')}` })
      return
    }
  }
  if (schema.enum && !schema.enum.includes(value)) {
    out.push({ path: pathArray(at), message: `must be one of ${schema.enum.map((v) => JSON.stringify(v)).join(', ')}` })
    return
  }
  if (typeof value === 'string') {
    // Code points lie between half the UTF-16 length and the length: count them only when that matters.
    const n = (schema.maxLength !== undefined && value.length > schema.maxLength) || (schema.minLength !== undefined && value.length < 2 * schema.minLength) ? codePoints(value) : value.length
    if (schema.minLength !== undefined && n < schema.minLength) out.push({ path: pathArray(at), message: `must NOT have fewer than ${schema.minLength} characters` })
    if (schema.maxLength !== undefined && n > schema.maxLength) out.push({ path: pathArray(at), message: `must NOT have more than ${schema.maxLength} characters` })
    if (schema.isoDateTime && Number.isNaN(parseIsoDateTime(value))) out.push({ path: pathArray(at), message: 'must match format "iso-date-time"' })
  } else if (typeof value === 'number') {
    if (schema.minimum !== undefined && value < schema.minimum) out.push({ path: pathArray(at), message: `must be >= ${schema.minimum}` })
    if (schema.maximum !== undefined && value > schema.maximum) out.push({ path: pathArray(at), message: `must be <= ${schema.maximum}` })
    if (schema.exclusiveMaximum !== undefined && value >= schema.exclusiveMaximum) out.push({ path: pathArray(at), message: `must be < ${schema.exclusiveMaximum}` })
  } else if (Array.isArray(value)) {
    if (schema.minItems !== undefined && value.length < schema.minItems) out.push({ path: pathArray(at), message: `must NOT have fewer than ${schema.minItems} items` })
    if (schema.maxItems !== undefined && value.length > schema.maxItems) out.push({ path: pathArray(at), message: `must NOT have more than ${schema.maxItems} items` })
    if (schema.items) for (let i = 0; i < value.length; i++) check(value[i], schema.items, { parent: at, key: i }, out)
  } else if (value !== null && typeof value === 'object') {
    const record = value as Record<string, unknown>
    for (const key of schema.required) if (!(key in record)) out.push({ path: [...pathArray(at), key], message: 'is required' })
    for (const key of Object.keys(record)) {
      const sub = schema.properties?.get(key)
      if (sub) check(record[key], sub, { parent: at, key }, out)
      else if (!schema.additionalProperties) out.push({ path: [...pathArray(at), key], message: 'is not an allowed key' })
    }
  }
}

/** The problems of `event` (a plain JSON value) against the service's event schema; empty when valid. */
export function validateEvent (event: unknown): Problem[] {
  const out: Problem[] = []
  check(event, root, undefined, out)
  return out
}

const ISO_DATE_TIME = /^(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2})(?::(\d{2})(?:\.\d{1,9})?)?(?:[Zz]|[+-]\d{2}:?\d{2})?$/
const END_EVENT_TIME_MS = Date.UTC(2106, 0, 1)

/**
 * The service's reading of an ISO 8601 date-time (src/domain/date-time.ts): unix milliseconds, or NaN
 * for anything that is not a real date in [1970, 2106). A missing zone means UTC.
 */
export function parseIsoDateTime (value: string): number {
  const m = ISO_DATE_TIME.exec(value)
  if (!m) return NaN
  let text = value.replace(' ', 'T')
  if (!/(?:[Zz]|[+-]\d{2}:?\d{2})$/.test(text)) text += 'Z'
  text = text.replace(/([+-]\d{2})(\d{2})$/, '$1:$2')
  const ms = Date.parse(text)
  if (Number.isNaN(ms) || ms < 0 || ms >= END_EVENT_TIME_MS || Number(m[3]) > 31 || Number(m[2]) > 12) return NaN
  const check = new Date(Date.UTC(Number(m[1]), Number(m[2]) - 1, Number(m[3])))
  if (check.getUTCDate() !== Number(m[3])) return NaN
  return ms
}
