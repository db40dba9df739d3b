import type pg from 'pg'
import { isCuid, newCuid } from '../domain/ids.ts'
import { iso, isoOrNull } from './timestamps.ts'
import { ChangeListeners, type ChangeListener } from './change-listeners.ts'

/** Name and owner-wallet marker of the placeholder agent that test events go to. */
export const TEST_AGENT_NAME = 'test-agent'
const testWallet = (userId: string) => `test:${userId}`
/** How many names (`test-agent`, `test-agent-2`, …) the placeholder tries before giving up. */
const TEST_AGENT_NAMES_TRIED = 20

/** The few agent fields ingestion decides on. */
export interface AgentRef {
  id: string
  ownerId: string | null
  snsName: string | null
  displayName: string
  deleted: boolean
  framework: string | null
}

export type Resolution =
  | { kind: 'ok'; agent: AgentRef; created: boolean }
  | { kind: 'deleted'; agent: AgentRef }
  | { kind: 'forbidden'; reason: 'agent_not_owned' }

function toRef (r: Record<string, any>): AgentRef {
  return {
    id: r.id,
    ownerId: r.owner_id,
    snsName: r.sns_name,
    displayName: r.display_name,
    deleted: r.deleted_at !== null,
    framework: r.framework,
  }
}

/** An agent as its owner sees it in the dashboard. */
export type OwnedAgentProfile = {
  id: string
  displayName: string
  snsName: string | null
  registryId: string | null
  framework: string | null
  isPublic: boolean
  source: string
  lastSeenAt: string | null
  createdAt: string
}

const PROFILE_COLUMNS = 'id, display_name, sns_name, registry_id, framework, is_public, source, last_seen_at, created_at'

function toProfile (r: Record<string, any>): OwnedAgentProfile {
  return {
    id: r.id,
    displayName: r.display_name,
    snsName: r.sns_name,
    registryId: r.registry_id,
    framework: r.framework,
    isPublic: r.is_public,
    source: r.source,
    lastSeenAt: isoOrNull(r.last_seen_at),
    createdAt: iso(r.created_at),
  }
}

const REF_COLUMNS = 'id, owner_id, sns_name, display_name, deleted_at, framework'

/**
 * What a write changed of an owner's agent: the fields an update set (a rename, a listing change),
 * or that it was deleted.
 */
export type AgentChange =
  | { kind: 'updated'; ownerId: string; agentId: string; fields: ('displayName' | 'isPublic')[] }
  | { kind: 'deleted'; ownerId: string; agentId: string }

/**
 * Agents in Postgres. An update or delete by the owner is announced to `onChanged` listeners (the
 * caches of resolutions and public reads); creation by resolution and recorded activity are not, as
 * no cache holds them stale.
 */
export class AgentsRepository {
  private readonly changes = new ChangeListeners<AgentChange>()

  constructor (private readonly db: pg.Pool) {}

  /** Calls `listener` after each successful update or delete, before the write's call returns; returns the unsubscribe. */
  onChanged (listener: ChangeListener<AgentChange>): () => void {
    return this.changes.add(listener)
  }

  /**
   * Resolves an event's agentId for an owner, in the spec's order: cuid (primary key), then snsName,
   * then the owner's displayName, else a new agent named by it. A cuid or snsName of an agent the
   * owner does not own is forbidden. Concurrent first events naming one new agent create one row.
   */
  async resolve (ownerId: string, ref: string): Promise<Resolution> {
    const found = await this.findByRef(ownerId, ref)
    if (found) return judge(ownerId, found, false)
    const { rows } = await this.db.query(
      `/* svc:agent_create */ INSERT INTO agents (id, owner_id, display_name, source, owner_wallet)
       VALUES ($1, $2, $3, 'ingest', NULL)
       ON CONFLICT (owner_id, display_name) DO NOTHING RETURNING ${REF_COLUMNS}`,
      [newCuid(), ownerId, ref],
    )
    if (rows[0]) return { kind: 'ok', agent: toRef(rows[0]), created: true }
    // Lost the race to another request creating the same name: read the winner.
    const winner = await this.findByRef(ownerId, ref)
    if (!winner) throw new Error(`agent ${JSON.stringify(ref)} vanished during creation`)
    return judge(ownerId, winner, false)
  }

  private async findByRef (ownerId: string, ref: string): Promise<AgentRef | null> {
    const { rows } = await this.db.query(
      `/* svc:agent_resolve */ SELECT ${REF_COLUMNS},
         CASE WHEN id = $2 THEN 1 WHEN sns_name = $2 THEN 2 ELSE 3 END AS rank
       FROM agents
       WHERE (id = $2 AND $3) OR sns_name = $2 OR (owner_id = $1 AND display_name = $2)
       ORDER BY rank LIMIT 1`,
      [ownerId, ref, isCuid(ref)],
    )
    return rows[0] ? toRef(rows[0]) : null
  }

  /**
   * The dashboard's placeholder agent for synthetic test events: private, marked with an owner
   * wallet built from the user id, created on first use as `test-agent` (or `test-agent-2`, … when
   * the user has an agent of that name of their own, which is never taken over). Found again by its
   * mark, whatever it has been renamed to; a deleted one stays deleted (the caller answers 410).
   */
  async testAgent (ownerId: string): Promise<Resolution> {
    const wallet = testWallet(ownerId)
    const marked = async () => {
      const { rows } = await this.db.query(
        `/* svc:agent_test_find */ SELECT ${REF_COLUMNS} FROM agents WHERE owner_id = $1 AND owner_wallet = $2 ORDER BY created_at, id LIMIT 1`,
        [ownerId, wallet],
      )
      return rows[0] ? toRef(rows[0]) : null
    }
    for (let n = 1; n <= TEST_AGENT_NAMES_TRIED; n++) {
      const found = await marked()
      if (found) return judge(ownerId, found, false)
      const { rows } = await this.db.query(
        `/* svc:agent_test_create */ INSERT INTO agents (id, owner_id, display_name, source, owner_wallet, is_public)
         VALUES ($1, $2, $3, 'ingest', $4, false)
         ON CONFLICT (owner_id, display_name) DO NOTHING RETURNING ${REF_COLUMNS}`,
        [newCuid(), ownerId, n === 1 ? TEST_AGENT_NAME : `${TEST_AGENT_NAME}-${n}`, wallet],
      )
      if (rows[0]) return { kind: 'ok', agent: toRef(rows[0]), created: true }
      // The name is taken: by a placeholder another request just made (found next), or by an agent of the user's.
    }
    throw new Error(`no free name for the test agent after ${TEST_AGENT_NAMES_TRIED} tries`)
  }

  async getById (id: string): Promise<AgentRef | null> {
    const { rows } = await this.db.query(`/* svc:agent_get */ SELECT ${REF_COLUMNS} FROM agents WHERE id = $1`, [id])
    return rows[0] ? toRef(rows[0]) : null
  }

  /** The owner's live (not deleted) agent, or null. */
  async getOwned (ownerId: string, id: string): Promise<AgentRef | null> {
    const { rows } = await this.db.query(
      `/* svc:agent_get_owned */ SELECT ${REF_COLUMNS} FROM agents WHERE id = $1 AND owner_id = $2 AND deleted_at IS NULL`,
      [id, ownerId],
    )
    return rows[0] ? toRef(rows[0]) : null
  }

  /** The owner's live agents as the dashboard shows them, most recently seen first. */
  async listOwned (ownerId: string): Promise<OwnedAgentProfile[]> {
    const { rows } = await this.db.query(
      `/* svc:agents_owned */ SELECT ${PROFILE_COLUMNS} FROM agents WHERE owner_id = $1 AND deleted_at IS NULL
       ORDER BY last_seen_at DESC NULLS LAST, created_at DESC, id`,
      [ownerId],
    )
    return rows.map(toProfile)
  }

  /**
   * A page of the owner's live agents, newest first. The order is by creation, which never changes,
   * so a walk over pages hands out each agent once even while agents are seen or renamed.
   */
  async pageOwned (ownerId: string, limit: number, after: { ms: number; id: string } | null): Promise<OwnedAgentProfile[]> {
    const { rows } = await this.db.query(
      `/* svc:agents_owned_page */ SELECT ${PROFILE_COLUMNS} FROM agents WHERE owner_id = $1 AND deleted_at IS NULL
         AND ($3::bigint IS NULL OR (date_trunc('milliseconds', created_at), id) < ('epoch'::timestamptz + $3::bigint * interval '1 millisecond', $4::text))
       ORDER BY date_trunc('milliseconds', created_at) DESC, id DESC LIMIT $2`,
      [ownerId, limit, after?.ms ?? null, after?.id ?? ''],
    )
    return rows.map(toProfile)
  }

  async profileOwned (ownerId: string, id: string): Promise<OwnedAgentProfile | null> {
    const { rows } = await this.db.query(
      `/* svc:agent_profile */ SELECT ${PROFILE_COLUMNS} FROM agents WHERE id = $1 AND owner_id = $2 AND deleted_at IS NULL`,
      [id, ownerId],
    )
    return rows[0] ? toProfile(rows[0]) : null
  }

  /** Live agents seen since a time, by owner (the candidates of an anomaly tick). */
  async activeSince (sinceMs: number, ownerId?: string): Promise<Map<string, string[]>> {
    const { rows } = await this.db.query(
      `/* svc:agents_active */ SELECT owner_id, id FROM agents
       WHERE deleted_at IS NULL AND owner_id IS NOT NULL AND last_seen_at >= to_timestamp($1 / 1000.0)
         AND ($2::text IS NULL OR owner_id = $2)`,
      [sinceMs, ownerId ?? null],
    )
    const byOwner = new Map<string, string[]>()
    for (const r of rows) byOwner.set(r.owner_id, [...(byOwner.get(r.owner_id) ?? []), r.id])
    return byOwner
  }

  /** Ids of the owner's soft-deleted agents: their events are hidden from every read. */
  async hiddenIds (ownerId: string): Promise<string[]> {
    const { rows } = await this.db.query(
      '/* svc:agents_hidden */ SELECT id FROM agents WHERE owner_id = $1 AND deleted_at IS NOT NULL',
      [ownerId],
    )
    return rows.map((r) => r.id)
  }

  /** Every agent of the owner, deleted ones included, with its name: reads hide the deleted and name the rest. */
  async namesOf (ownerId: string): Promise<{ id: string; displayName: string; deleted: boolean }[]> {
    const { rows } = await this.db.query(
      '/* svc:agents_names */ SELECT id, display_name, deleted_at IS NOT NULL AS deleted FROM agents WHERE owner_id = $1',
      [ownerId],
    )
    return rows.map((r) => ({ id: r.id, displayName: r.display_name, deleted: r.deleted }))
  }

  /**
   * Renames, publishes or unpublishes the owner's live agent (fields left undefined keep their value);
   * null when there is none; 'taken' when the owner already has that name.
   */
  async update (ownerId: string, id: string, change: { displayName?: string | undefined; isPublic?: boolean | undefined }): Promise<OwnedAgentProfile | null | 'taken'> {
    let updated: OwnedAgentProfile | null
    try {
      const { rows } = await this.db.query(
        `/* svc:agent_update */ UPDATE agents SET display_name = COALESCE($3, display_name), is_public = COALESCE($4, is_public)
         WHERE id = $1 AND owner_id = $2 AND deleted_at IS NULL
         RETURNING ${PROFILE_COLUMNS}`,
        [id, ownerId, change.displayName ?? null, change.isPublic ?? null],
      )
      updated = rows[0] ? toProfile(rows[0]) : null
    } catch (err) {
      if ((err as { code?: string }).code === '23505') return 'taken'
      throw err
    }
    const fields = (['displayName', 'isPublic'] as const).filter((f) => change[f] !== undefined)
    if (updated && fields.length > 0) await this.changes.emit({ kind: 'updated', ownerId, agentId: id, fields })
    return updated
  }

  /** Soft-deletes the owner's agent; false when the owner has no such live agent. */
  async softDelete (ownerId: string, id: string): Promise<boolean> {
    const { rowCount } = await this.db.query(
      '/* svc:agent_delete */ UPDATE agents SET deleted_at = now() WHERE id = $1 AND owner_id = $2 AND deleted_at IS NULL',
      [id, ownerId],
    )
    if (rowCount !== 1) return false
    await this.changes.emit({ kind: 'deleted', ownerId, agentId: id })
    return true
  }

  /**
   * Applies coalesced activity in one statement: lastSeenAt moves forward only, and framework is
   * filled only where it is still null.
   */
  async recordActivity (activity: Map<string, { lastSeenAt: number; framework: string | null }>): Promise<void> {
    if (activity.size === 0) return
    const ids: string[] = []
    const seen: number[] = []
    const frameworks: (string | null)[] = []
    for (const [id, a] of activity) {
      ids.push(id)
      seen.push(a.lastSeenAt)
      frameworks.push(a.framework)
    }
    await this.db.query(
      `/* svc:agent_activity */ UPDATE agents a SET
         last_seen_at = GREATEST(a.last_seen_at, v.seen),
         framework = COALESCE(a.framework, v.framework)
       FROM (SELECT unnest($1::text[]) AS id, to_timestamp(unnest($2::float8[]) / 1000.0) AS seen,
                    unnest($3::text[]) AS framework) v
       WHERE a.id = v.id`,
      [ids, seen, frameworks],
    )
  }
}

function judge (ownerId: string, agent: AgentRef, created: boolean): Resolution {
  if (agent.ownerId !== ownerId) return { kind: 'forbidden', reason: 'agent_not_owned' }
  if (agent.deleted) return { kind: 'deleted', agent }
  return { kind: 'ok', agent, created }
}
