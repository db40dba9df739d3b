import protobuf from 'protobufjs'
import { fileURLToPath } from 'node:url'

/**
 * OTLP/HTTP trace payloads: ExportTraceServiceRequest decoded from protobuf (with protobufjs and the
 * opentelemetry-proto definitions vendored under proto/, v1.11.0) or from OTLP JSON (lowerCamelCase
 * fields, hex trace and span ids, enums as integers or their names, 64-bit integers as strings or numbers), both into
 * one plain shape; responses and error statuses encoded back in the request's encoding.
 */

/** An attribute value with its OTLP wrapping removed. */
export type AttrValue = string | number | boolean | null | AttrValue[] | { [key: string]: AttrValue }
export type Attributes = Record<string, AttrValue>

interface OtlpSpanEvent { name: string; timeMs: number; attributes: Attributes }

/** One span with its resource and scope. Ids are lowercase hex, '' when absent or not well formed. */
export interface OtlpSpan {
  traceId: string
  spanId: string
  parentSpanId: string
  name: string
  /** SpanKind: 0 unspecified, 1 internal, 2 server, 3 client, 4 producer, 5 consumer. */
  kind: number
  startMs: number
  endMs: number
  attributes: Attributes
  events: OtlpSpanEvent[]
  /** StatusCode: 0 unset, 1 ok, 2 error. */
  status: { code: number; message: string }
  resource: Attributes
  scope: { name: string; version: string }
}

/** A body that is not an ExportTraceServiceRequest in its declared encoding (the request gets a 400). */
export class OtlpDecodeError extends Error {
  override name = 'OtlpDecodeError'
}

export type OtlpEncoding = 'protobuf' | 'json'

const PROTO_DIR = fileURLToPath(new URL('../../proto/', import.meta.url))
const root = new protobuf.Root()
root.resolvePath = (_origin, target) => PROTO_DIR + target
root.loadSync('opentelemetry/proto/collector/trace/v1/trace_service.proto')
const RequestType = root.lookupType('opentelemetry.proto.collector.trace.v1.ExportTraceServiceRequest')
const ResponseType = root.lookupType('opentelemetry.proto.collector.trace.v1.ExportTraceServiceResponse')
// google.rpc.Status, the body of every OTLP/HTTP error response (details are not used).
const StatusType = new protobuf.Type('Status')
  .add(new protobuf.Field('code', 1, 'int32'))
  .add(new protobuf.Field('message', 2, 'string'))
new protobuf.Root().define('google.rpc').add(StatusType)

/** Decodes a request body in its encoding into spans; throws OtlpDecodeError when it cannot be read. */
export function decodeTraces (body: Buffer, encoding: OtlpEncoding): OtlpSpan[] {
  let message: unknown
  if (encoding === 'protobuf') {
    try {
      message = RequestType.decode(body)
    } catch (err) {
      throw new OtlpDecodeError(`the body is not a protobuf ExportTraceServiceRequest: ${(err as Error).message}`)
    }
  } else {
    const text = body.toString('utf8')
    try {
      // An escaped unpaired surrogate ("\ud800") is valid JSON but not storable text: such strings and
      // keys are repaired (U+FFFD), as protobuf's UTF-8 decoding does. Only bodies with a surrogate
      // escape pay for the reviver.
      message = SURROGATE_ESCAPE.test(text) ? JSON.parse(text, repairText) : JSON.parse(text)
    } catch {
      throw new OtlpDecodeError('the body is not valid JSON')
    }
  }
  return flatten(message, encoding === 'json')
}

const SURROGATE_ESCAPE = /\\u[dD][89a-fA-F]/
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g

/** The string with each unpaired UTF-16 surrogate replaced by U+FFFD (String.prototype.toWellFormed). */
export function wellFormed (s: string): string {
  return s.replace(LONE_SURROGATE, '\uFFFD')
}

function repairText (_key: string, value: unknown): unknown {
  if (typeof value === 'string') return wellFormed(value)
  if (isObject(value) && Object.keys(value).some((k) => wellFormed(k) !== k)) {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [wellFormed(k), v]))
  }
  return value
}

function flatten (message: unknown, json: boolean): OtlpSpan[] {
  if (!isObject(message)) throw new OtlpDecodeError('the body is not an ExportTraceServiceRequest object')
  const spans: OtlpSpan[] = []
  // Where the walk is, for error messages only: the paths are built when one is thrown, by functions
  // made once per request (this loop runs once per span on the hot path).
  let i = 0
  let j = 0
  let k = 0
  let n = 0
  const resourcePath = () => `resourceSpans[${i}].resource`
  const scopePath = () => `resourceSpans[${i}].scopeSpans[${j}]`
  const spanPath = () => `${scopePath()}.spans[${k}]`
  const eventPath = () => `${spanPath()}.events[${n}]`
  const resourceSpans = list(message.resourceSpans, () => 'resourceSpans')
  for (i = 0; i < resourceSpans.length; i++) {
    const rs = resourceSpans[i]
    if (!isObject(rs)) throw new OtlpDecodeError(`resourceSpans[${i}] is not an object`)
    const resource = attributes(isObject(rs.resource) ? rs.resource.attributes : undefined, resourcePath)
    const scopeSpans = list(rs.scopeSpans, () => `resourceSpans[${i}].scopeSpans`)
    for (j = 0; j < scopeSpans.length; j++) {
      const ss = scopeSpans[j]
      if (!isObject(ss)) throw new OtlpDecodeError(`${scopePath()} is not an object`)
      const scope = isObject(ss.scope) ? { name: text(ss.scope.name), version: text(ss.scope.version) } : { name: '', version: '' }
      const list_ = list(ss.spans, scopePath, '.spans')
      for (k = 0; k < list_.length; k++) {
        const s = list_[k]
        if (!isObject(s)) throw new OtlpDecodeError(`${spanPath()} is not an object`)
        const status = isObject(s.status) ? s.status : {}
        const spanEvents = list(s.events, spanPath, '.events')
        const events: OtlpSpanEvent[] = []
        for (n = 0; n < spanEvents.length; n++) {
          const e = spanEvents[n]
          if (!isObject(e)) throw new OtlpDecodeError(`${eventPath()} is not an object`)
          events.push({ name: text(e.name), timeMs: nanosToMs(e.timeUnixNano), attributes: attributes(e.attributes, eventPath) })
        }
        spans.push({
          traceId: id(s.traceId, 16, json),
          spanId: id(s.spanId, 8, json),
          parentSpanId: id(s.parentSpanId, 8, json),
          name: text(s.name),
          kind: enumValue(s.kind, SPAN_KINDS),
          startMs: nanosToMs(s.startTimeUnixNano),
          endMs: nanosToMs(s.endTimeUnixNano),
          attributes: attributes(s.attributes, spanPath),
          events,
          status: { code: enumValue(status.code, STATUS_CODES), message: text(status.message) },
          resource,
          scope,
        })
      }
    }
  }
  return spans
}

function isObject (v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v)
}

/** An array, or none; `path() + suffix` names it in the error when it is something else. */
function list (v: unknown, path: () => string, suffix = ''): unknown[] {
  if (v === undefined || v === null) return []
  if (!Array.isArray(v)) throw new OtlpDecodeError(`${path()}${suffix} is not an array`)
  return v
}

function text (v: unknown): string {
  return typeof v === 'string' ? v : ''
}

const SPAN_KINDS = root.lookupEnum('opentelemetry.proto.trace.v1.Span.SpanKind').values
const STATUS_CODES = root.lookupEnum('opentelemetry.proto.trace.v1.Status.StatusCode').values

/**
 * An enum value: a protobuf or JSON number, or in JSON the value's name (`STATUS_CODE_ERROR`), which
 * the protobuf JSON mapping allows and some exporters send although OTLP asks for integers. Anything
 * else is the enum's zero (unspecified, unset).
 */
function enumValue (v: unknown, names: Record<string, number>): number {
  if (typeof v === 'number') return Number.isInteger(v) ? v : 0
  return typeof v === 'string' && Object.hasOwn(names, v) ? names[v]! : 0
}

const TWO_32 = 4_294_967_296

/** A protobufjs Long as a number (exact below 2^53, as every value we keep as a number is). */
function longToNumber (v: Record<string, unknown>): number | null {
  if (typeof v.low !== 'number' || typeof v.high !== 'number') return null
  if (v.unsigned !== true && v.high < 0) return -((~v.high >>> 0) * TWO_32 + (~v.low >>> 0) + 1)
  return (v.high >>> 0) * TWO_32 + (v.low >>> 0)
}

/**
 * A 64-bit integer attribute: a protobufjs Long, a JSON string of digits or a JSON number. One past
 * 2^53, which a JSON number cannot hold exactly, is kept as its decimal digits in a string.
 */
function int64 (v: unknown): number | string | null {
  if (typeof v === 'number') return Number.isFinite(v) ? Math.trunc(v) : null
  if (typeof v === 'string') {
    if (!/^-?\d{1,20}$/.test(v)) return null
    const n = Number(v)
    return Number.isSafeInteger(n) ? n : BigInt(v).toString()
  }
  if (!isObject(v)) return null
  const n = longToNumber(v)
  if (n === null || Number.isSafeInteger(n)) return n
  const bits = (BigInt(v.high as number >>> 0) << 32n) | BigInt(v.low as number >>> 0)
  return (v.unsigned === true ? bits : BigInt.asIntN(64, bits)).toString()
}

/**
 * Unix nanoseconds (fixed64) as whole milliseconds, exactly, without BigInt: n = high·2^32 + low
 * = high·4294·10^6 + (high·967296 + low), and the second term is an exact double (< 2^53).
 */
function nanosToMs (v: unknown): number {
  if (typeof v === 'string') {
    if (!/^\d{1,20}$/.test(v)) return 0
    return v.length > 6 ? Number(v.slice(0, -6)) : 0
  }
  if (typeof v === 'number') return Number.isFinite(v) && v > 0 ? Math.floor(v / 1e6) : 0
  if (!isObject(v) || typeof v.low !== 'number' || typeof v.high !== 'number') return 0
  if (v.unsigned !== true && v.high < 0) return 0
  const high = v.high >>> 0
  const rest = high * 967_296 + (v.low >>> 0)
  return high * 4294 + (rest - (rest % 1e6)) / 1e6
}

/** A trace (16 bytes) or span (8 bytes) id as lowercase hex; '' when absent, all zero or malformed. */
function id (v: unknown, bytes: number, json: boolean): string {
  if (json) {
    if (typeof v !== 'string' || v.length !== bytes * 2 || !/^[0-9a-fA-F]+$/.test(v) || /^0+$/.test(v)) return ''
    return v.toLowerCase()
  }
  if (!(v instanceof Uint8Array) || v.length !== bytes) return ''
  let zero = true
  for (let i = 0; i < bytes; i++) if (v[i] !== 0) { zero = false; break }
  return zero ? '' : Buffer.from(v.buffer, v.byteOffset, v.byteLength).toString('hex')
}

function attributes (v: unknown, path: () => string): Attributes {
  const out: Attributes = {}
  for (const kv of list(v, path, '.attributes')) {
    if (!isObject(kv) || typeof kv.key !== 'string') throw new OtlpDecodeError(`${path()}.attributes has an entry without a key`)
    // Set as a property, `__proto__` would replace the map's prototype: its keys would be read as the
    // span's attributes without being stored with it. It is left out (docs/api.md).
    if (kv.key !== '__proto__') out[kv.key] = anyValue(kv.value, 0)
  }
  return out
}

// Values nested deeper than this are cut (null): an attribute is never a reason to refuse a request.
const MAX_VALUE_DEPTH = 16

const ANY_VALUE_KEYS = ['stringValue', 'boolValue', 'intValue', 'doubleValue', 'arrayValue', 'kvlistValue', 'bytesValue'] as const

function anyValue (v: unknown, depth: number): AttrValue {
  if (!isObject(v) || depth > MAX_VALUE_DEPTH) return null
  // A decoded protobufjs message holds its set oneof member as its one own key (the others read as
  // defaults from its prototype), as a JSON value does: that key first, without the `value` getter,
  // which walks the oneof's members. Otherwise a protobufjs message names its set member in `value`;
  // JSON has only the set key.
  const own = Object.keys(v)
  const kind = own.length === 1 && own[0] !== 'value'
    ? own[0]
    : typeof v.value === 'string' ? v.value : ANY_VALUE_KEYS.find((k) => v[k] !== undefined && v[k] !== null)
  const x = kind === undefined ? undefined : v[kind]
  switch (kind) {
    case 'stringValue': return typeof x === 'string' ? x : null
    case 'boolValue': return typeof x === 'boolean' ? x : null
    case 'intValue': return int64(x)
    // NaN and infinities cannot be stored as JSON numbers.
    case 'doubleValue': return typeof x === 'number' && Number.isFinite(x) ? x : null
    case 'arrayValue': return isObject(x) && Array.isArray(x.values) ? x.values.map((e) => anyValue(e, depth + 1)) : []
    case 'kvlistValue': {
      const out: Record<string, AttrValue> = {}
      for (const kv of isObject(x) && Array.isArray(x.values) ? x.values : []) {
        if (isObject(kv) && typeof kv.key === 'string' && kv.key !== '__proto__') out[kv.key] = anyValue(kv.value, depth + 1)
      }
      return out
    }
    case 'bytesValue': return x instanceof Uint8Array ? Buffer.from(x).toString('base64') : typeof x === 'string' ? x : null
    default: return null
  }
}

/**
 * The ExportTraceServiceResponse: empty on full success, with partial_success when spans were
 * refused, or as a warning (0 rejected spans, as the OTLP specification allows) when every span was
 * accepted but something else was not (an evaluation result refused as a score).
 */
export function encodeResponse (encoding: OtlpEncoding, rejectedSpans: number, errorMessage: string): Buffer | string {
  const partialSuccess = rejectedSpans > 0 || errorMessage !== '' ? { rejectedSpans, errorMessage } : undefined
  if (encoding === 'json') {
    return JSON.stringify(partialSuccess ? { partialSuccess: { rejectedSpans: String(rejectedSpans), errorMessage } } : {})
  }
  return Buffer.from(ResponseType.encode(ResponseType.create(partialSuccess ? { partialSuccess } : {})).finish())
}

/** A google.rpc.Status, the body of an OTLP/HTTP error response, in the request's encoding. */
export function encodeStatus (encoding: OtlpEncoding, code: number, message: string): Buffer | string {
  if (encoding === 'json') return JSON.stringify({ code, message })
  return Buffer.from(StatusType.encode(StatusType.create({ code, message })).finish())
}

/** Encodes an ExportTraceServiceRequest given as a plain object (for tests and benchmarks). */
export function encodeRequest (request: Record<string, unknown>): Buffer {
  return Buffer.from(RequestType.encode(RequestType.fromObject(request)).finish())
}

/** Decodes a protobuf google.rpc.Status (for tests and clients). */
export function decodeStatus (body: Uint8Array): { code: number; message: string } {
  const s = StatusType.toObject(StatusType.decode(body), { defaults: true }) as { code: number; message: string }
  return { code: s.code, message: s.message }
}

/** Decodes a protobuf ExportTraceServiceResponse (for tests and clients). */
export function decodeResponse (body: Uint8Array): { rejectedSpans: number; errorMessage: string } | null {
  const r = ResponseType.toObject(ResponseType.decode(body), { longs: Number }) as { partialSuccess?: { rejectedSpans?: number; errorMessage?: string } }
  return r.partialSuccess ? { rejectedSpans: r.partialSuccess.rejectedSpans ?? 0, errorMessage: r.partialSuccess.errorMessage ?? '' } : null
}
