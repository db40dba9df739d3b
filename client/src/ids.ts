// Random ids from the Web Crypto API, which Node 20+, browsers, Deno, Bun and edge runtimes all have.

function hex (bytes: number): string {
  const buf = new Uint8Array(bytes)
  globalThis.crypto.getRandomValues(buf)
  let out = ''
  for (let i = 0; i < buf.length; i++) out += buf[i]!.toString(16).padStart(2, '0')
  return out
}

/** A trace id: 32 hex characters, as OpenTelemetry writes them. */
export const newTraceId = (): string => hex(16)

/** A span id: 16 hex characters. */
export const newSpanId = (): string => hex(8)

/** A fresh Idempotency-Key: a random UUID. */
export function newIdempotencyKey (): string {
  const c = globalThis.crypto as Crypto & { randomUUID?: () => string }
  if (typeof c.randomUUID === 'function') return c.randomUUID()
  const h = hex(16)
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-4${h.slice(13, 16)}-${((parseInt(h[16]!, 16) & 3) | 8).toString(16)}${h.slice(17, 20)}-${h.slice(20)}`
}
