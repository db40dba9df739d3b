// One-shot hash (crypto.hash): a third of createHash().update().digest()'s cost for short inputs.
import { hash } from 'node:crypto'

// Object keys repeat from event to event: their JSON form is kept rather than written every time.
const quotedKeys = new Map<string, string>()

function quoteKey (key: string): string {
  let quoted = quotedKeys.get(key)
  if (quoted === undefined) {
    quoted = JSON.stringify(key)
    if (quotedKeys.size >= 10_000) quotedKeys.clear()
    quotedKeys.set(key, quoted)
  }
  return quoted
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
  const keys = Object.keys(obj).sort()
  let out = '{'
  for (const key of keys) {
    const v = obj[key]
    if (v === undefined) continue
    if (out.length > 1) out += ','
    out += quoteKey(key) + ':' + canonicalJson(v)
  }
  return out + '}'
}

/** The event's contentHash: SHA-256 (hex) of the canonical JSON of the accepted payload. */
export function contentHash (payload: unknown): string {
  return hash('sha256', canonicalJson(payload), 'hex')
}
