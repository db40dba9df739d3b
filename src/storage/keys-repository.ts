import type pg from 'pg'
import { hash, randomBytes } from 'node:crypto'
import { newCuid } from '../domain/ids.ts'
import { iso, isoOrNull } from './timestamps.ts'
import type { Tier } from './users-repository.ts'
import { ChangeListeners, type ChangeListener } from './change-listeners.ts'

const KEY_PREFIX_LENGTH = 12

/** SHA-256 (hex) of a key secret: the only form in which a secret is stored or cached. */
export function hashSecret (secret: string): string {
  return hash('sha256', secret, 'hex')
}

/** A new secret: `vk_` + 32 random bytes in base64url (43 characters); `vk_pk_` + the same for a publishable key. */
function newSecret (kind: KeyKind = 'secret'): string {
  return (kind === 'publishable' ? 'vk_pk_' : 'vk_') + randomBytes(32).toString('base64url')
}

/** A secret key sends anything; a publishable one (held in the open by a web page) only human scores from its origins. */
export type KeyKind = 'secret' | 'publishable'

export type ApiKeyListing = {
  id: string
  keyPrefix: string
  label: string
  agentId: string | null
  kind: KeyKind
  allowedOrigins: string[] | null
  createdAt: string
  lastUsedAt: string | null
}

export type CreatedApiKey = ApiKeyListing & {
  secret: string
}

/** What ingestion needs to know about a presented key. */
export interface KeyIdentity {
  keyId: string
  userId: string
  agentId: string | null
  revoked: boolean
  tier: Tier
  burstPerMinute: number | null
  /** Absent in identities cached before kinds existed: a secret key. */
  kind?: KeyKind
  allowedOrigins?: string[] | null
}

function toListing (r: Record<string, any>): ApiKeyListing {
  return {
    id: r.id,
    keyPrefix: r.key_prefix,
    label: r.label,
    agentId: r.agent_id,
    kind: r.kind,
    allowedOrigins: r.allowed_origins,
    createdAt: iso(r.created_at),
    lastUsedAt: isoOrNull(r.last_used_at),
  }
}

/** A revoked key: whose, which, and the hash of its secret (what the key caches are keyed by). */
export type KeyChange = { kind: 'revoked'; userId: string; keyId: string; secretHash: string }

/**
 * API keys in Postgres. Secrets never touch this table; only their hashes do. A revocation is
 * announced to `onChanged` listeners (the key caches); a new key is not, as no cache can hold it
 * stale, nor is its last use.
 */
export class KeysRepository {
  private readonly changes = new ChangeListeners<KeyChange>()

  constructor (private readonly db: pg.Pool) {}

  /** Calls `listener` after each successful revocation, before `revoke` returns; returns the unsubscribe. */
  onChanged (listener: ChangeListener<KeyChange>): () => void {
    return this.changes.add(listener)
  }

  async create (userId: string, label: string, agentId: string | null, publishable: { allowedOrigins: string[] } | null = null): Promise<CreatedApiKey> {
    const secret = newSecret(publishable ? 'publishable' : 'secret')
    const { rows } = await this.db.query(
      `/* svc:key_create */ INSERT INTO api_keys (id, user_id, agent_id, label, key_prefix, secret_sha256, kind, allowed_origins)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8) RETURNING *`,
      [newCuid(), userId, agentId, label, secret.slice(0, KEY_PREFIX_LENGTH), hashSecret(secret), publishable ? 'publishable' : 'secret', publishable?.allowedOrigins ?? null],
    )
    return { ...toListing(rows[0]), secret }
  }

  /** The caller's keys that are not revoked, newest first. */
  async list (userId: string): Promise<ApiKeyListing[]> {
    const { rows } = await this.db.query(
      '/* svc:key_list */ SELECT * FROM api_keys WHERE user_id = $1 AND revoked_at IS NULL ORDER BY created_at DESC, id',
      [userId],
    )
    return rows.map(toListing)
  }

  /** Revokes the caller's key; returns its hash, or null when the caller has no such live key. */
  async revoke (userId: string, keyId: string): Promise<string | null> {
    const { rows } = await this.db.query(
      `/* svc:key_revoke */ UPDATE api_keys SET revoked_at = now()
       WHERE id = $1 AND user_id = $2 AND revoked_at IS NULL RETURNING secret_sha256`,
      [keyId, userId],
    )
    const secretHash: string | undefined = rows[0]?.secret_sha256
    if (secretHash === undefined) return null
    await this.changes.emit({ kind: 'revoked', userId, keyId, secretHash })
    return secretHash
  }

  async findByHash (secretHash: string): Promise<KeyIdentity | null> {
    const { rows } = await this.db.query(
      `/* svc:key_lookup */ SELECT k.id, k.user_id, k.agent_id, k.revoked_at, k.kind, k.allowed_origins, u.tier, u.burst_per_minute
       FROM api_keys k JOIN users u ON u.id = k.user_id WHERE k.secret_sha256 = $1`,
      [secretHash],
    )
    const r = rows[0]
    if (!r) return null
    return {
      keyId: r.id,
      userId: r.user_id,
      agentId: r.agent_id,
      revoked: r.revoked_at !== null,
      tier: r.tier,
      burstPerMinute: r.burst_per_minute,
      kind: r.kind,
      allowedOrigins: r.allowed_origins,
    }
  }

  /** Secret hashes of the user's live keys. */
  async liveHashesOf (userId: string): Promise<string[]> {
    const { rows } = await this.db.query(
      '/* svc:key_hashes_of_user */ SELECT secret_sha256 FROM api_keys WHERE user_id = $1 AND revoked_at IS NULL',
      [userId],
    )
    return rows.map((r) => r.secret_sha256)
  }

  /** Records last use for many keys in one statement (times only move forward). */
  async touch (lastUsed: Map<string, number>): Promise<void> {
    if (lastUsed.size === 0) return
    await this.db.query(
      `/* svc:key_touch */ UPDATE api_keys k SET last_used_at = GREATEST(k.last_used_at, v.t)
       FROM (SELECT unnest($1::text[]) AS id, to_timestamp(unnest($2::float8[]) / 1000.0) AS t) v
       WHERE k.id = v.id`,
      [[...lastUsed.keys()], [...lastUsed.values()]],
    )
  }
}
