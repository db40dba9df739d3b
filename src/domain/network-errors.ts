/**
 * Socket errors that say a server cannot be reached (or was lost), not that a request was wrong:
 * those of NETWORK_ERROR_WORDS, and a write to a connection already closed (EPIPE).
 */
export const NETWORK_ERROR_CODES: ReadonlySet<string> = new Set([
  'ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE', 'ENOTFOUND', 'EHOSTUNREACH', 'ENETUNREACH', 'EAI_AGAIN',
])

/**
 * Whether an error is @clickhouse/client's own request timeout (`request_timeout` passed with no
 * answer: a server that took the connection and stalled), which carries no code, only this message.
 */
export function isClickHouseRequestTimeout (err: unknown): boolean {
  const message = (err as { message?: unknown } | null)?.message
  return typeof message === 'string' && /^Timeout error\.$/.test(message)
}

/** Socket errors of a first connection to a store, in words for a log line or a tool's message. */
export const NETWORK_ERROR_WORDS: Readonly<Record<string, string>> = {
  ECONNREFUSED: 'connection refused',
  ENOTFOUND: 'unknown host',
  EAI_AGAIN: 'host name lookup failed',
  ETIMEDOUT: 'timed out',
  EHOSTUNREACH: 'host unreachable',
  ENETUNREACH: 'network unreachable',
  ECONNRESET: 'connection reset',
}
