import type pg from 'pg'
import { newCuid } from '../domain/ids.ts'
import { SEALED_PREFIX, UnreadableSecret, type SecretBox } from '../domain/secret-box.ts'
import type { ChannelKind, EventType, NotificationEvent, TEST_EVENT } from '../domain/notifications.ts'
import { underUserLock } from './postgres.ts'
import { iso, isoOrNull } from './timestamps.ts'

/**
 * A notification channel, its credentials decrypted (routes mask them). A credential that cannot be
 * decrypted (its key is not in the keyring, or the stored value was altered) reads as null, and
 * `unreadable` says which and why.
 */
export type Channel = {
  id: string
  userId: string
  kind: ChannelKind
  label: string
  url: string | null
  routingKey: string | null
  signingSecret: string | null
  /** The signing secret a rotation replaced, while it still signs (until `previousSecretUntil`); else null. */
  previousSigningSecret: string | null
  previousSecretUntil: string | null
  /** Why a stored credential of the channel cannot be read; null when all can. */
  unreadable: string | null
  events: EventType[]
  enabled: boolean
  disabledReason: string | null
  disabledAt: string | null
  lastSuccessAt: string | null
  createdAt: string
  updatedAt: string
}

export type DeliveryStatus = 'pending' | 'retrying' | 'delivered' | 'failed' | 'skipped'

/** One event to one channel, and how its attempts went. */
export type Delivery = {
  id: string
  channelId: string
  event: EventType | typeof TEST_EVENT
  status: DeliveryStatus
  attempts: number
  maxAttempts: number
  lastStatusCode: number | null
  lastError: string | null
  lastResponse: string | null
  createdAt: string
  firstAttemptAt: string | null
  lastAttemptAt: string | null
  nextAttemptAt: string | null
  finishedAt: string | null
}

export interface NewChannel {
  kind: ChannelKind
  label: string
  url: string | null
  routingKey: string | null
  signingSecret: string | null
  events: EventType[]
}

export interface ChannelChange {
  label?: string | undefined
  url?: string | undefined
  routingKey?: string | undefined
  events?: EventType[] | undefined
  enabled?: boolean | undefined
}

/** What an attempt left behind, and the delivery's status after it. */
export interface AttemptRecord {
  status: 'delivered' | 'retrying' | 'failed'
  statusCode: number | null
  error: string | null
  response: string | null
  /** When the delivery is retrying: how long after this attempt the next one is due. */
  retryInMs: number | null
}

/** The columns that hold credentials, sealed at rest, and their names in the API. */
const SECRET_COLUMNS = { url: 'url', routing_key: 'routingKey', signing_secret: 'signingSecret', previous_signing_secret: 'previousSigningSecret' } as const
type SecretColumn = keyof typeof SECRET_COLUMNS
const WORDS: Record<SecretColumn, string> = { url: 'URL', routing_key: 'routing key', signing_secret: 'signing secret', previous_signing_secret: 'previous signing secret' }

/** The associated data of a sealed credential: its column and row, so it opens only where it was sealed. */
const placeOf = (column: SecretColumn, id: string) => `notification_channels.${column}:${id}`

/** A row's credentials that need sealing (in clear, or under a previous key): SQL over the stored text, $1 the previous key ids. */
const NEEDS_SEALING = Object.keys(SECRET_COLUMNS)
  .map((c) => `(${c} IS NOT NULL AND (${c} NOT LIKE '${SEALED_PREFIX}%' OR split_part(${c}, ':', 3) = ANY($1::text[])))`)
  .join(' OR ')

/** What sealing the stored credentials at start did. */
export interface SealingReport {
  /** Channels whose credentials were encrypted now (stored in clear before, or under a previous key). */
  sealed: number
  /** Channels with a credential that no key in the keyring opens: left as they are. */
  unreadable: { id: string; reason: string }[]
}

function toDelivery (r: Record<string, any>): Delivery {
  return {
    id: r.id,
    channelId: r.channel_id,
    event: r.event,
    status: r.status,
    attempts: r.attempts,
    maxAttempts: r.max_attempts,
    lastStatusCode: r.last_status_code,
    lastError: r.last_error,
    lastResponse: r.last_response,
    createdAt: iso(r.created_at),
    firstAttemptAt: isoOrNull(r.first_attempt_at),
    lastAttemptAt: isoOrNull(r.last_attempt_at),
    nextAttemptAt: isoOrNull(r.next_attempt_at),
    finishedAt: isoOrNull(r.finished_at),
  }
}

const DELIVERY_COLUMNS = `id, channel_id, event, status, attempts, max_attempts, last_status_code, last_error, last_response,
  created_at, first_attempt_at, last_attempt_at, next_attempt_at, finished_at`

/** Notification channels and their delivery log in Postgres. Methods taking a user id are scoped to that user. */
export class ChannelsRepository {
  constructor (private readonly db: pg.Pool, private readonly secrets: SecretBox) {}

  private toChannel (r: Record<string, any>): Channel {
    const problems: string[] = []
    const open = (column: SecretColumn): string | null => {
      const stored = r[column] as string | null
      if (stored === null) return null
      try {
        return this.secrets.open(stored, placeOf(column, r.id))
      } catch (err) {
        if (!(err instanceof UnreadableSecret)) throw err
        problems.push(`its ${WORDS[column]} cannot be decrypted: ${err.message}`)
        return null
      }
    }
    return {
      id: r.id,
      userId: r.user_id,
      kind: r.kind,
      label: r.label,
      url: open('url'),
      routingKey: open('routing_key'),
      signingSecret: open('signing_secret'),
      // A replaced secret past its time is not read (nor decrypted): it signs nothing any more.
      ...(r.previous_secret_until != null && new Date(r.previous_secret_until).getTime() > Date.now()
        ? { previousSigningSecret: open('previous_signing_secret'), previousSecretUntil: iso(r.previous_secret_until) }
        : { previousSigningSecret: null, previousSecretUntil: null }),
      unreadable: problems.length > 0 ? problems.join('; ') : null,
      events: r.events,
      enabled: r.enabled,
      disabledReason: r.disabled_reason,
      disabledAt: isoOrNull(r.disabled_at),
      lastSuccessAt: isoOrNull(r.last_success_at),
      createdAt: iso(r.created_at),
      updatedAt: iso(r.updated_at),
    }
  }

  private seal (column: SecretColumn, id: string, value: string | null | undefined): string | null {
    return value == null ? null : this.secrets.seal(value, placeOf(column, id))
  }

  /**
   * A new channel of the user; null when the user already has `max`: the count and the insert run
   * under a lock of the user's row, so concurrent requests cannot pass the limit together.
   */
  async create (userId: string, c: NewChannel, max: number): Promise<Channel | null> {
    const id = newCuid()
    const rows = await underUserLock(this.db, userId, async (client) => (await client.query(
      `/* svc:channel_create */ INSERT INTO notification_channels (id, user_id, kind, label, url, routing_key, signing_secret, events)
       SELECT $1, $2, $3, $4, $5, $6, $7, $8
       WHERE (SELECT count(*) FROM notification_channels WHERE user_id = $2) < $9
       RETURNING *`,
      [id, userId, c.kind, c.label, this.seal('url', id, c.url), this.seal('routing_key', id, c.routingKey), this.seal('signing_secret', id, c.signingSecret), c.events, max],
    )).rows)
    return rows[0] ? this.toChannel(rows[0]) : null
  }

  /** The user's channels, newest first. */
  async list (userId: string): Promise<Channel[]> {
    const { rows } = await this.db.query('/* svc:channel_list */ SELECT * FROM notification_channels WHERE user_id = $1 ORDER BY created_at DESC, id DESC', [userId])
    return rows.map((r) => this.toChannel(r))
  }

  async get (userId: string, id: string): Promise<Channel | null> {
    const row = await this.storedRow(userId, id)
    return row ? this.toChannel(row) : null
  }

  /** The user's channel as stored (its credentials sealed), or undefined. */
  private async storedRow (userId: string, id: string): Promise<Record<string, any> | undefined> {
    const { rows } = await this.db.query('/* svc:channel_get */ SELECT * FROM notification_channels WHERE id = $1 AND user_id = $2', [id, userId])
    return rows[0]
  }

  /** Applies the fields given; enabling a channel clears why it was disabled. Null when it is not the user's. */
  async update (userId: string, id: string, change: ChannelChange): Promise<Channel | null> {
    const { rows } = await this.db.query(
      `/* svc:channel_update */ UPDATE notification_channels SET
         label = coalesce($3, label), url = coalesce($4, url), routing_key = coalesce($5, routing_key),
         events = coalesce($6, events), enabled = coalesce($7, enabled),
         disabled_reason = CASE WHEN $7 IS NULL THEN disabled_reason END,
         disabled_at = CASE WHEN $7 IS NULL THEN disabled_at END,
         updated_at = now()
       WHERE id = $1 AND user_id = $2 RETURNING *`,
      [id, userId, change.label ?? null, this.seal('url', id, change.url), this.seal('routing_key', id, change.routingKey), change.events ?? null, change.enabled ?? null],
    )
    return rows[0] ? this.toChannel(rows[0]) : null
  }

  /**
   * Gives the user's webhook channel a new signing secret; the one it had keeps signing beside it
   * until `previousUntilMs` (unix ms; now or earlier: at once no more). Only if the channel still has
   * the secret `replaced` (a rotation meanwhile wins; null then), so a secret is never lost unseen.
   */
  async rotateSecret (userId: string, id: string, replaced: string, secret: string, previousUntilMs: number): Promise<Channel | null> {
    const found = await this.storedRow(userId, id)
    if (!found || this.toChannel(found).signingSecret !== replaced) return null
    const { rows } = await this.db.query(
      `/* svc:channel_rotate_secret */ UPDATE notification_channels SET signing_secret = $4, previous_signing_secret = $5,
         previous_secret_until = to_timestamp($6::float8 / 1000), updated_at = now()
       WHERE id = $1 AND user_id = $2 AND kind = 'webhook' AND signing_secret = $3 RETURNING *`,
      [id, userId, found.signing_secret, this.seal('signing_secret', id, secret), this.seal('previous_signing_secret', id, replaced), previousUntilMs],
    )
    return rows[0] ? this.toChannel(rows[0]) : null
  }

  /** Deletes the channel and its delivery log; false when it is not the user's. */
  async delete (userId: string, id: string): Promise<boolean> {
    const res = await this.db.query('/* svc:channel_delete */ DELETE FROM notification_channels WHERE id = $1 AND user_id = $2', [id, userId])
    return (res.rowCount ?? 0) > 0
  }

  /** The user's enabled channels that take this event type. */
  async subscribed (userId: string, eventType: string): Promise<Channel[]> {
    const { rows } = await this.db.query(
      '/* svc:channel_subscribed */ SELECT * FROM notification_channels WHERE user_id = $1 AND enabled AND $2 = ANY(events)',
      [userId, eventType],
    )
    return rows.map((r) => this.toChannel(r))
  }

  /**
   * Records a delivery of `event` to the channel, unless one with the same key exists (then null):
   * the unique (channel, key) is what delivers a state change at most once, however often it is published.
   */
  async addDelivery (channelId: string, d: { id: string; eventKey: string; event: NotificationEvent; maxAttempts: number }): Promise<Delivery | null> {
    const { rows } = await this.db.query(
      `/* svc:delivery_add */ INSERT INTO notification_deliveries (id, channel_id, event, event_key, payload, max_attempts)
       VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (channel_id, event_key) DO NOTHING RETURNING ${DELIVERY_COLUMNS}`,
      [d.id, channelId, d.event.type, d.eventKey, d.event, d.maxAttempts],
    )
    return rows[0] ? toDelivery(rows[0]) : null
  }

  /** A page of the channel's deliveries, newest first (by creation, then id). */
  async deliveries (channelId: string, limit: number, after: { ms: number; id: string } | null): Promise<Delivery[]> {
    const { rows } = await this.db.query(
      `/* svc:delivery_list */ SELECT ${DELIVERY_COLUMNS} FROM notification_deliveries
       WHERE channel_id = $1
         AND ($3::bigint IS NULL OR (date_trunc('milliseconds', created_at), id) < ('epoch'::timestamptz + $3::bigint * interval '1 millisecond', $4::text))
       ORDER BY date_trunc('milliseconds', created_at) DESC, id DESC LIMIT $2`,
      [channelId, limit, after?.ms ?? null, after?.id ?? ''],
    )
    return rows.map(toDelivery)
  }

  /** A delivery with its event and its channel, for an attempt; null when either is gone. */
  async forAttempt (deliveryId: string): Promise<{ delivery: Delivery; event: NotificationEvent; channel: Channel } | null> {
    const { rows } = await this.db.query(
      `/* svc:delivery_for_attempt */ SELECT to_jsonb(d) AS d, to_jsonb(c) AS c FROM notification_deliveries d
       JOIN notification_channels c ON c.id = d.channel_id WHERE d.id = $1`,
      [deliveryId],
    )
    if (!rows[0]) return null
    return { delivery: toDelivery(rows[0].d), event: rows[0].d.payload, channel: this.toChannel(rows[0].c) }
  }

  /** Records one attempt and the status it leaves the delivery in. */
  async recordAttempt (deliveryId: string, a: AttemptRecord): Promise<Delivery> {
    const { rows } = await this.db.query(
      `/* svc:delivery_attempt */ UPDATE notification_deliveries SET
         attempts = attempts + 1, status = $2, last_status_code = $3, last_error = $4, last_response = $5,
         first_attempt_at = coalesce(first_attempt_at, now()), last_attempt_at = now(),
         next_attempt_at = now() + make_interval(secs => $6::float8 / 1000),
         finished_at = CASE WHEN $2 = 'retrying' THEN NULL ELSE now() END
       WHERE id = $1 RETURNING ${DELIVERY_COLUMNS}`,
      [deliveryId, a.status, a.statusCode, a.error, a.response, a.retryInMs],
    )
    return toDelivery(rows[0])
  }

  /** Ends a delivery without sending it (its channel was disabled meanwhile). */
  async skip (deliveryId: string, reason: string): Promise<void> {
    await this.db.query(
      `/* svc:delivery_skip */ UPDATE notification_deliveries SET status = 'skipped', last_error = $2, next_attempt_at = NULL, finished_at = now()
       WHERE id = $1 AND status IN ('pending', 'retrying')`,
      [deliveryId, reason],
    )
  }

  async markSucceeded (channelId: string): Promise<void> {
    await this.db.query('/* svc:channel_success */ UPDATE notification_channels SET last_success_at = now() WHERE id = $1', [channelId])
  }

  /**
   * Disables the channel with the reason, unless a delivery to it succeeded since `failingSince`
   * (then the failures were not a run). True when it was disabled now.
   */
  async disableAfterRun (channelId: string, failingSince: string, reason: string): Promise<boolean> {
    const res = await this.db.query(
      `/* svc:channel_disable */ UPDATE notification_channels SET enabled = false, disabled_reason = $3, disabled_at = now(), updated_at = now()
       WHERE id = $1 AND enabled AND (last_success_at IS NULL OR last_success_at < $2)`,
      [channelId, failingSince, reason],
    )
    return (res.rowCount ?? 0) > 0
  }

  /** Deliveries still to be attempted whose next attempt is overdue by `graceMs` (their job may be lost). */
  async overdue (graceMs: number, limit: number): Promise<string[]> {
    const { rows } = await this.db.query(
      `/* svc:delivery_overdue */ SELECT id FROM notification_deliveries
       WHERE status IN ('pending', 'retrying') AND coalesce(next_attempt_at, created_at) < now() - make_interval(secs => $1::float8 / 1000)
       ORDER BY created_at LIMIT $2`,
      [graceMs, limit],
    )
    return rows.map((r) => r.id)
  }

  /**
   * Encrypts with the current key every stored credential that is in clear (stored before
   * encryption) or under a previous key, a page of channels at a time. Each channel is one UPDATE of
   * all its credentials, made only if the row still holds what was read (a change meanwhile is left
   * for the next run), so no row is ever half done. A channel with a credential no key opens is left
   * as it is and reported. Run under a lock: see NotificationChannels.sealStoredSecrets.
   */
  async sealPending (pageSize = 500): Promise<SealingReport> {
    const report: SealingReport = { sealed: 0, unreadable: [] }
    let after = ''
    for (;;) {
      const { rows } = await this.db.query(
        `/* svc:channel_secrets_pending */ SELECT id, ${Object.keys(SECRET_COLUMNS).join(', ')} FROM notification_channels
         WHERE id > $2 AND (${NEEDS_SEALING}) ORDER BY id LIMIT $3`,
        [this.secrets.previousKeyIds, after, pageSize],
      )
      for (const r of rows) {
        const columns = Object.keys(SECRET_COLUMNS) as SecretColumn[]
        let next: (string | null)[]
        try {
          next = columns.map((c) => {
            const stored = r[c] as string | null
            if (stored === null || !this.secrets.needsSealing(stored)) return stored
            return this.secrets.seal(this.secrets.open(stored, placeOf(c, r.id)), placeOf(c, r.id))
          })
        } catch (err) {
          if (!(err instanceof UnreadableSecret)) throw err
          report.unreadable.push({ id: r.id, reason: err.message })
          continue
        }
        const n = columns.length
        const res = await this.db.query(
          `/* svc:channel_secrets_seal */ UPDATE notification_channels SET ${columns.map((c, i) => `${c} = $${n + 2 + i}`).join(', ')}
           WHERE id = $1 AND ${columns.map((c, i) => `${c} IS NOT DISTINCT FROM $${2 + i}`).join(' AND ')}`,
          [r.id, ...columns.map((c) => r[c] as string | null), ...next],
        )
        report.sealed += res.rowCount ?? 0
      }
      if (rows.length < pageSize) return report
      after = rows.at(-1)!.id
    }
  }
}
