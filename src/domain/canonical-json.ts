import { createHash } from 'node:crypto'

/**
 * Canonical JSON (RFC 8785 style): object keys sorted by UTF-16 code units, no whitespace, numbers
 * and strings as JSON.stringify writes them. Equal payloads give byte-identical output whatever the
 * key order they were sent in.
 */
export function canonicalJson(value: unknown): string {
  if (value === null || typeof value !== 'object') return JSON.stringify(value) ?? 'null'
  if (Array.isArray(value)) return '[' + value.map((v) => canonicalJson(v === undefined ? null : v)).join(',') + ']'
  const obj = value as Record<string, unknown>
  const keys = Object.keys(obj).filter((k) => obj[k] !== undefined).sort()
  return '{' + keys.map((k) => JSON.stringify(k) + ':' + canonicalJson(obj[k])).join(',') + '}'
}

/** The event's contentHash: SHA-256 (hex) of the canonical JSON of the accepted payload. */
export function contentHash(payload: unknown): string {
  return createHash('sha256').update(canonicalJson(payload)).digest('hex')
}
