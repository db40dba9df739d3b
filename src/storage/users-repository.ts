import type pg from 'pg'
import { newCuid } from '../domain/ids.ts'
import { iso } from './timestamps.ts'
import { ChangeListeners, type ChangeListener } from './change-listeners.ts'

export type Tier = 'free' | 'pro' | 'enterprise'

export interface User {
  id: string
  privyId: string
  email: string | null
  wallet: string | null
  handle: string | null
  tier: Tier
  burstPerMinute: number | null
  createdAt: string
}

/** The first day (UTC) of the month holding a time, as `YYYY-MM-01`. */
export function monthOf (ms: number): string {
  const d = new Date(ms)
  return `${d.getUTCFullYear()}-${String(d.getUTCMonth() + 1).padStart(2, '0')}-01`
}

const COLUMNS = 'id, privy_id, email, wallet, handle, tier, burst_per_minute, created_at'

function toUser (r: Record<string, any>): User {
  return {
    id: r.id,
    privyId: r.privy_id,
    email: r.email,
    wallet: r.wallet,
    handle: r.handle,
    tier: r.tier,
    burstPerMinute: r.burst_per_minute,
    createdAt: iso(r.created_at),
  }
}

/** What a write changed of a user (`subject` is the identity provider's, what user caches are keyed by). */
export type UserChange = { userId: string; subject: string; fields: ('handle' | 'tier')[] }

/**
 * Users in Postgres, keyed by the identity provider's subject. A change of a handle or tier is
 * announced to `onChanged` listeners (the caches of users and of their keys); a first sight of a
 * subject and usage counts are not, as no cache holds them stale.
 */
export class UsersRepository {
  private readonly changes = new ChangeListeners<UserChange>()

  constructor (private readonly db: pg.Pool) {}

  /** Calls `listener` after each successful change of a handle or tier, before the write's call returns; returns the unsubscribe. */
  onChanged (listener: ChangeListener<UserChange>): () => void {
    return this.changes.add(listener)
  }

  /** The user for a subject, created on first sight (race-safe: one row per subject). */
  async upsertBySubject (subject: string, claims: { email?: string | undefined } = {}): Promise<User> {
    const { rows } = await this.db.query(
      `/* svc:user_upsert */ INSERT INTO users (id, privy_id, email) VALUES ($1, $2, $3)
       ON CONFLICT (privy_id) DO UPDATE SET email = COALESCE(users.email, EXCLUDED.email)
       RETURNING ${COLUMNS}`,
      [newCuid(), subject, claims.email ?? null],
    )
    return toUser(rows[0])
  }

  /** Sets the handle; 'taken' when another user holds it (case-insensitively). */
  async updateHandle (userId: string, handle: string): Promise<User | 'taken'> {
    let user: User
    try {
      const { rows } = await this.db.query(
        `/* svc:user_handle */ UPDATE users SET handle = $2 WHERE id = $1 RETURNING ${COLUMNS}`,
        [userId, handle],
      )
      user = toUser(rows[0])
    } catch (err) {
      if ((err as { code?: string }).code === '23505') return 'taken'
      throw err
    }
    await this.changes.emit({ userId: user.id, subject: user.privyId, fields: ['handle'] })
    return user
  }

  /** Adds accepted-event counts, keyed `userId` → month (`YYYY-MM-01`) → count, in one statement. */
  async addUsage (counts: Map<string, Map<string, number>>): Promise<void> {
    const users: string[] = []
    const months: string[] = []
    const events: number[] = []
    for (const [userId, byMonth] of counts) {
      for (const [month, n] of byMonth) {
        users.push(userId)
        months.push(month)
        events.push(n)
      }
    }
    if (users.length === 0) return
    await this.db.query(
      `/* svc:usage_add */ INSERT INTO usage_monthly (user_id, month, events)
       SELECT * FROM unnest($1::text[], $2::date[], $3::bigint[])
       ON CONFLICT (user_id, month) DO UPDATE SET events = usage_monthly.events + EXCLUDED.events`,
      [users, months, events],
    )
  }

  /** Accepted events of a user in the calendar month (UTC) holding `at`. Advisory: not enforced. */
  async monthlyUsage (userId: string, at = new Date()): Promise<{ month: string; events: number }> {
    const month = monthOf(at.getTime())
    const { rows } = await this.db.query(
      '/* svc:usage_get */ SELECT events FROM usage_monthly WHERE user_id = $1 AND month = $2',
      [userId, month],
    )
    return { month, events: Number(rows[0]?.events ?? 0) }
  }

  /** Sets the tier and burst override of an existing user; null when no user has this subject (nothing is created). */
  async updateTier (subject: string, tier: Tier, burstPerMinute: number | null): Promise<User | null> {
    const { rows } = await this.db.query(
      `/* svc:user_tier_existing */ UPDATE users SET tier = $2, burst_per_minute = $3 WHERE privy_id = $1 RETURNING ${COLUMNS}`,
      [subject, tier, burstPerMinute],
    )
    if (!rows[0]) return null
    const user = toUser(rows[0])
    await this.changes.emit({ userId: user.id, subject: user.privyId, fields: ['tier'] })
    return user
  }

  /** Sets a user's tier and burst override, creating the user if the subject is new (the seed's user). */
  async setTier (subject: string, tier: Tier, burstPerMinute: number | null): Promise<User> {
    const user = await this.upsertBySubject(subject)
    const { rows } = await this.db.query(
      `/* svc:user_tier */ UPDATE users SET tier = $2, burst_per_minute = $3 WHERE id = $1 RETURNING ${COLUMNS}`,
      [user.id, tier, burstPerMinute],
    )
    const updated = toUser(rows[0])
    await this.changes.emit({ userId: updated.id, subject: updated.privyId, fields: ['tier'] })
    return updated
  }
}
