// One-shot hash (crypto.hash): a third of createHash().update().digest()'s cost for short inputs.
import { hash } from 'node:crypto'

/** An object's keys in the order Object.keys gives them, the same keys sorted, and each sorted key as JSON with its colon. */
interface Shape { keys: string[]; sorted: string[]; quoted: string[] }

// Events of one client have the same few shapes (the same keys in the same order): each shape's
// sorted keys are kept rather than sorted and quoted again for every object. Found by the first key,
// then compared key by key; at most 8 shapes per first key. What is kept is bounded whatever the
// bodies: only shapes of up to 64 keys, and all are dropped once they would hold more than about
// 2 million characters of keys.
const shapes = new Map<string, Shape[]>()
const MAX_SHAPE_KEYS = 64
const MAX_KEPT_CHARS = 2_000_000
let keptChars = 0

function shapeOf (keys: string[]): Shape {
  const first = keys[0]!
  const known = shapes.get(first)
  if (known) for (const shape of known) if (sameKeys(shape.keys, keys)) return shape
  const sorted = [...keys].sort()
  const shape = { keys, sorted, quoted: sorted.map((key) => JSON.stringify(key) + ':') }
  if (keys.length > MAX_SHAPE_KEYS || (known && known.length >= 8)) return shape
  // Each key is kept twice as it is and once quoted, with a few words of array and string overhead.
  let chars = 0
  for (const key of keys) chars += 3 * key.length + 48
  if (keptChars + chars > MAX_KEPT_CHARS) {
    shapes.clear()
    keptChars = 0
  }
  keptChars += chars
  const list = shapes.get(first)
  if (list) list.push(shape)
  else shapes.set(first, [shape])
  return shape
}

/** How many shapes are kept, and the characters counted for them (for tests). */
export function keptShapes (): { shapes: number; chars: number } {
  let n = 0
  for (const list of shapes.values()) n += list.length
  return { shapes: n, chars: keptChars }
}

/** The same keys in the same order (the first already known to be the same). */
function sameKeys (a: string[], b: string[]): boolean {
  if (a.length !== b.length) return false
  for (let i = 1; i < a.length; i++) if (a[i] !== b[i]) return false
  return true
}

// A string JSON writes as it is, between quotes: no quote, backslash, control character or surrogate
// (JSON.stringify escapes lone surrogates; strings with any surrogate take its path).
// eslint-disable-next-line no-control-regex -- control characters are exactly what JSON escapes
const PLAIN_STRING = /^[^"\\\u0000-\u001f\ud800-\udfff]*$/

/** A string, number, boolean, null or undefined as JSON.stringify writes it ('null' for undefined). */
function scalarJson (value: unknown): string {
  switch (typeof value) {
    case 'string': return PLAIN_STRING.test(value) ? '"' + value + '"' : JSON.stringify(value)
    case 'number': return Number.isFinite(value) ? String(value) : 'null'
    case 'boolean': return value ? 'true' : 'false'
    default: return JSON.stringify(value) ?? 'null'
  }
}

/**
 * Canonical JSON (RFC 8785 style): object keys sorted by UTF-16 code units, no whitespace, numbers
 * and strings as JSON.stringify writes them. Equal payloads give byte-identical output whatever the
 * key order they were sent in. (Recursion is safe: bodies are refused past 32 levels before this runs.)
 */
export function canonicalJson (value: unknown): string {
  if (value === null || typeof value !== 'object') return scalarJson(value)
  if (Array.isArray(value)) {
    let out = '['
    for (let i = 0; i < value.length; i++) {
      if (i > 0) out += ','
      const v: unknown = value[i]
      out += v === undefined ? 'null' : canonicalJson(v)
    }
    return out + ']'
  }
  const obj = value as Record<string, unknown>
  const keys = Object.keys(obj)
  if (keys.length === 0) return '{}'
  const { sorted, quoted } = shapeOf(keys)
  let out = '{'
  for (let i = 0; i < sorted.length; i++) {
    const v = obj[sorted[i]!]
    if (v === undefined) continue
    if (out.length > 1) out += ','
    out += quoted[i]! + canonicalJson(v)
  }
  return out + '}'
}

/** The event's contentHash: SHA-256 (hex) of the canonical JSON of the accepted payload. */
export function contentHash (payload: unknown): string {
  return hash('sha256', canonicalJson(payload), 'hex')
}
