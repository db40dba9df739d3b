import { createCipheriv, createDecipheriv, createHash, randomBytes } from 'node:crypto'

/**
 * Secrets the service must read back (webhook signing secrets, Slack and webhook URLs, PagerDuty
 * routing keys), sealed for storage with AES-256-GCM: a random 96-bit nonce per value, and the
 * place the value belongs to (table, column and row id) as associated data, so a sealed value copied
 * to another row or column does not open. A sealed value reads
 *
 *   enc:v1:<key id>:<nonce, base64url>:<ciphertext and 16-byte tag, base64url>
 *
 * where the key id is derived from the key itself (the first 12 hex digits of a SHA-256 over it), so
 * the keyring finds the key that opens a value, and values under a previous key can be found and
 * sealed again under the current one. Anything else is a value stored before sealing (in clear): it
 * reads as it is until it is sealed. No I/O.
 */

export const SEALED_PREFIX = 'enc:v1:'
const KEY_BYTES = 32
const NONCE_BYTES = 12
const TAG_BYTES = 16

/** Why a stored value cannot be read: the key is not in the keyring, or the value does not open with it. */
export class UnreadableSecret extends Error {
  override name = 'UnreadableSecret'
}

/** The id of a key as sealed values name it. */
export function keyId (key: Buffer): string {
  return createHash('sha256').update('agent-telemetry secrets key\u0000').update(key).digest('hex').slice(0, 12)
}

/** A key from its base64 (or base64url) text; throws unless it is 32 bytes. */
export function parseKey (text: string, name: string): Buffer {
  const key = Buffer.from(text.trim(), 'base64')
  if (key.length !== KEY_BYTES || !/^[A-Za-z0-9+/_-]+={0,2}$/.test(text.trim())) {
    throw new Error(`${name} must be 32 random bytes in base64 (make one with: openssl rand -base64 32)`)
  }
  return key
}

/** A new random key, as base64 (what SECRETS_KEY holds). */
export function newKeyText (): string {
  return randomBytes(KEY_BYTES).toString('base64')
}

/** True when the stored value is sealed (rather than a value stored in clear before sealing). */
export function isSealed (stored: string): boolean {
  return stored.startsWith(SEALED_PREFIX)
}

/** The key id a sealed value names; null for a value in clear. */
export function sealedKeyId (stored: string): string | null {
  return isSealed(stored) ? (stored.slice(SEALED_PREFIX.length).split(':')[0] ?? '') : null
}

/**
 * Seals and opens stored secrets with a keyring: the current key seals; it and the previous keys
 * open. `place` is the associated data: what the value is and where it lives (e.g.
 * `notification_channels.url:<id>`), the same when sealing and opening.
 */
export class SecretBox {
  private readonly keys = new Map<string, Buffer>()
  /** The id of the key that seals. */
  readonly currentKeyId: string
  /** The ids of the keys that only open. */
  readonly previousKeyIds: string[]

  constructor (current: Buffer, previous: Buffer[] = []) {
    if (current.length !== KEY_BYTES) throw new Error('the secrets key must be 32 bytes')
    this.currentKeyId = keyId(current)
    this.keys.set(this.currentKeyId, current)
    this.previousKeyIds = []
    for (const key of previous) {
      if (key.length !== KEY_BYTES) throw new Error('a previous secrets key must be 32 bytes')
      const id = keyId(key)
      if (this.keys.has(id)) continue
      this.keys.set(id, key)
      this.previousKeyIds.push(id)
    }
  }

  seal (plaintext: string, place: string): string {
    const nonce = randomBytes(NONCE_BYTES)
    const cipher = createCipheriv('aes-256-gcm', this.keys.get(this.currentKeyId)!, nonce)
    cipher.setAAD(Buffer.from(place, 'utf8'))
    const body = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final(), cipher.getAuthTag()])
    return `${SEALED_PREFIX}${this.currentKeyId}:${nonce.toString('base64url')}:${body.toString('base64url')}`
  }

  /** The plaintext of a stored value (a value in clear as it is); throws UnreadableSecret saying why it cannot. */
  open (stored: string, place: string): string {
    if (!isSealed(stored)) return stored
    const [id, nonceText, bodyText, ...rest] = stored.slice(SEALED_PREFIX.length).split(':')
    if (!id || nonceText === undefined || bodyText === undefined || rest.length > 0) throw new UnreadableSecret('the stored value is not a sealed value')
    const key = this.keys.get(id)
    if (!key) throw new UnreadableSecret(`it was encrypted with key ${id}, which is neither SECRETS_KEY nor in SECRETS_PREVIOUS_KEYS`)
    const nonce = Buffer.from(nonceText, 'base64url')
    const body = Buffer.from(bodyText, 'base64url')
    if (nonce.length !== NONCE_BYTES || body.length < TAG_BYTES) throw new UnreadableSecret('the stored value is not a sealed value')
    try {
      const decipher = createDecipheriv('aes-256-gcm', key, nonce)
      decipher.setAAD(Buffer.from(place, 'utf8'))
      decipher.setAuthTag(body.subarray(body.length - TAG_BYTES))
      return Buffer.concat([decipher.update(body.subarray(0, body.length - TAG_BYTES)), decipher.final()]).toString('utf8')
    } catch {
      throw new UnreadableSecret(`it does not decrypt with key ${id} (altered, or moved from another row)`)
    }
  }

  /** True when the stored value should be sealed again: it is in clear, or sealed under a previous key. */
  needsSealing (stored: string): boolean {
    const id = sealedKeyId(stored)
    return id === null || id !== this.currentKeyId
  }
}
