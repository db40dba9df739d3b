import type { KeyIdentity, KeysRepository } from '../storage/keys-repository.ts'
import { SharedCache, type SharedCacheOptions } from './shared-cache.ts'

/**
 * API-key identities by secret hash, cached in this process and in Redis (see SharedCache).
 * Unknown hashes are cached too, so a flood of one bad key does not reach Postgres.
 */
export class KeyResolver {
  private readonly cache: SharedCache<KeyIdentity>

  constructor (private readonly keys: Pick<KeysRepository, 'findByHash' | 'liveHashesOf'>, cache: Omit<SharedCacheOptions, 'name'>) {
    this.cache = new SharedCache({ ...cache, name: 'key' })
  }

  /** The identity of a key by the hash of its secret; null when no key has that hash. */
  find (secretHash: string): Promise<KeyIdentity | null> {
    return this.cache.get(secretHash, () => this.keys.findByHash(secretHash))
  }

  /** The identity if this process holds it (null: no such key), undefined when `find` must ask further. */
  peek (secretHash: string): KeyIdentity | null | undefined {
    return this.cache.peek(secretHash, () => this.keys.findByHash(secretHash))
  }

  /** Forgets one key on every instance (after a revocation). False when Redis could not be told. */
  forget (secretHash: string): Promise<boolean> {
    return this.cache.invalidate(secretHash)
  }

  /**
   * Forgets every live key of a user on every instance: a key's identity carries its user's tier and
   * burst override. False when Redis could not be told about some of them.
   */
  async forgetUser (userId: string): Promise<boolean> {
    const hashes = await this.keys.liveHashesOf(userId)
    const told = await Promise.all(hashes.map((hash) => this.cache.invalidate(hash)))
    return told.every(Boolean)
  }
}
