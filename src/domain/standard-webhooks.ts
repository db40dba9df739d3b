import { createHmac, randomBytes } from 'node:crypto'

/**
 * Signing by the Standard Webhooks specification (standardwebhooks.com): the secret is `whsec_` +
 * base64 of random bytes; each attempt carries `webhook-id` (the same on every retry),
 * `webhook-timestamp` (Unix seconds of the attempt) and `webhook-signature` (`v1,` + base64 of
 * HMAC-SHA256 over `id.timestamp.body`, keyed with the secret's decoded bytes). Receivers verify it
 * with any of the specification's libraries.
 */

const SECRET_PREFIX = 'whsec_'

/** A new signing secret: `whsec_` + 32 random bytes in base64. */
export function newSigningSecret (): string {
  return SECRET_PREFIX + randomBytes(32).toString('base64')
}

export interface SignedHeaders {
  'webhook-id': string
  'webhook-timestamp': string
  'webhook-signature': string
}

/**
 * The three headers of one attempt to deliver `body` as message `id` at `timestampSeconds`, signed
 * with each of `secrets`: while a rotated-out secret still signs, `webhook-signature` holds one
 * signature per secret, space-separated (`v1,… v1,…`), and a receiver holding either verifies.
 */
export function signedHeaders (secrets: string | readonly string[], id: string, timestampSeconds: number, body: string): SignedHeaders {
  const timestamp = String(timestampSeconds)
  const signatures = (typeof secrets === 'string' ? [secrets] : secrets).map((secret) => {
    const key = Buffer.from(secret.slice(SECRET_PREFIX.length), 'base64')
    return `v1,${createHmac('sha256', key).update(`${id}.${timestamp}.${body}`).digest('base64')}`
  })
  return { 'webhook-id': id, 'webhook-timestamp': timestamp, 'webhook-signature': signatures.join(' ') }
}
