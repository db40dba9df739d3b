import type pg from 'pg'
import { newCuid } from '../domain/ids.ts'
import { iso, isoOrNull } from './timestamps.ts'

/** An agent as the public surface shows it: the spec's listing fields and nothing else. */
export type PublicAgent = {
  id: string
  snsName: string | null
  displayName: string
  registryId: string | null
  reputationScore: number | null
  source: string
  metadata: { agentUri: string | null; feedback_count: number | null }
  enriched: { name: string | null; description: string | null; image: string | null; capabilities: string[]; profiled: boolean }
  lastSeenAt: string | null
}

export type ListFilter = 'all' | 'identified' | 'unknown'

export interface ListQuery { limit: number; offset: number; search?: string | undefined; filter: ListFilter }

const str = (v: unknown) => (typeof v === 'string' ? v : null)

/** Only whitelisted keys leave: the registry's metadata and enrichment may hold anything. */
function toPublicAgent (r: Record<string, any>): PublicAgent {
  const m = r.metadata ?? {}
  const e = r.enriched ?? {}
  return {
    id: r.id,
    snsName: r.sns_name,
    displayName: r.display_name,
    registryId: r.registry_id,
    reputationScore: r.reputation_score,
    source: r.source,
    metadata: { agentUri: str(m.agentUri), feedback_count: typeof m.feedback_count === 'number' ? m.feedback_count : null },
    enriched: {
      name: str(e.name),
      description: str(e.description),
      image: str(e.image),
      capabilities: Array.isArray(e.capabilities) ? e.capabilities.filter((c: unknown) => typeof c === 'string') : [],
      profiled: e.profiled === true,
    },
    lastSeenAt: isoOrNull(r.last_seen_at),
  }
}

const PUBLIC = 'is_public AND deleted_at IS NULL'
const COLUMNS = 'id, sns_name, display_name, registry_id, reputation_score, source, metadata, enriched, last_seen_at, owner_id, created_at, framework'
const FILTERS: Record<ListFilter, string> = {
  all: '',
  identified: ' AND (enriched ->> \'profiled\') = \'true\'',
  unknown: ' AND (enriched ->> \'profiled\') IS DISTINCT FROM \'true\'',
}

/** One entry of a registry import file (see README: "Registry import"). */
export interface RegistryEntry {
  registryId: string
  snsName?: string | null
  displayName?: string
  reputationScore?: number | null
  source?: string
  isPublic?: boolean
  enriched?: Record<string, unknown>
  metadata?: Record<string, unknown>
}

/** The public registry of agents, read from Postgres. Only public, live agents are ever returned. */
export class RegistryRepository {
  constructor (private readonly db: pg.Pool) {}

  /**
   * A page of the listing and the total. The page and the count are two queries run together: a
   * window count over the page query would make Postgres rank every public agent to return twenty.
   */
  async list (q: ListQuery): Promise<{ agents: PublicAgent[]; total: number }> {
    const params: unknown[] = []
    let where = PUBLIC + FILTERS[q.filter]
    if (q.search) {
      params.push(`%${q.search.toLowerCase().replace(/[\\%_]/g, (c) => '\\' + c)}%`)
      where += ` AND agent_search_text(display_name, sns_name, enriched) LIKE $${params.length}`
    }
    const [page, count] = await Promise.all([
      this.db.query(
        `/* svc:registry_list */ SELECT ${COLUMNS} FROM agents WHERE ${where}
         ORDER BY reputation_score DESC NULLS LAST, id LIMIT $${params.length + 1} OFFSET $${params.length + 2}`,
        [...params, q.limit, q.offset],
      ),
      this.db.query(`/* svc:registry_count */ SELECT count(*)::int AS n FROM agents WHERE ${where}`, params),
    ])
    return { agents: page.rows.map(toPublicAgent), total: count.rows[0].n }
  }

  /** A public, live agent by cuid, snsName or registryId; with its owner id for KPI queries (never shown). */
  async find (identifier: string): Promise<{ agent: PublicAgent; ownerId: string | null; createdAt: string; framework: string | null } | null> {
    const { rows } = await this.db.query(
      `/* svc:registry_find */ SELECT ${COLUMNS} FROM agents
       WHERE ${PUBLIC} AND (id = $1 OR sns_name = $1 OR registry_id = $1) LIMIT 1`,
      [identifier],
    )
    const r = rows[0]
    return r ? { agent: toPublicAgent(r), ownerId: r.owner_id, createdAt: iso(r.created_at), framework: r.framework } : null
  }

  async counts (): Promise<{ total: number; identified: number }> {
    const { rows } = await this.db.query(
      `/* svc:registry_counts */ SELECT count(*)::int AS total, count(*) FILTER (WHERE (enriched ->> 'profiled') = 'true')::int AS identified
       FROM agents WHERE ${PUBLIC}`,
    )
    return rows[0]
  }

  async top (limit: number): Promise<PublicAgent[]> {
    const { rows } = await this.db.query(
      `/* svc:registry_top */ SELECT ${COLUMNS} FROM agents WHERE ${PUBLIC} ORDER BY reputation_score DESC NULLS LAST, id LIMIT $1`,
      [limit],
    )
    return rows.map(toPublicAgent)
  }

  /** Public agents grouped by source, largest first. */
  async collections (limit: number): Promise<{ source: string; agents: number; identified: number }[]> {
    const { rows } = await this.db.query(
      `/* svc:registry_collections */ SELECT source, count(*)::int AS agents,
         count(*) FILTER (WHERE (enriched ->> 'profiled') = 'true')::int AS identified
       FROM agents WHERE ${PUBLIC} GROUP BY source ORDER BY agents DESC, source LIMIT $1`,
      [limit],
    )
    return rows
  }

  /** Public agents that have an owner (only those have events), most recently seen first. */
  async activeOwned (limit: number): Promise<{ id: string; ownerId: string; displayName: string; snsName: string | null }[]> {
    const { rows } = await this.db.query(
      `/* svc:registry_active */ SELECT id, owner_id, display_name, sns_name FROM agents
       WHERE ${PUBLIC} AND owner_id IS NOT NULL ORDER BY last_seen_at DESC NULLS LAST LIMIT $1`,
      [limit],
    )
    return rows.map((r) => ({ id: r.id, ownerId: r.owner_id, displayName: r.display_name, snsName: r.sns_name }))
  }

  /** Ids of soft-deleted agents (their events are hidden from public aggregates). */
  async deletedIds (): Promise<string[]> {
    const { rows } = await this.db.query('/* svc:agents_deleted */ SELECT id FROM agents WHERE deleted_at IS NOT NULL')
    return rows.map((r) => r.id)
  }

  /** Inserts or updates one registry agent, keyed by registryId. */
  async upsert (e: RegistryEntry): Promise<'inserted' | 'updated'> {
    const displayName = e.displayName ?? (typeof e.enriched?.name === 'string' ? e.enriched.name : null) ?? e.snsName ?? e.registryId
    const { rows } = await this.db.query(
      `/* svc:registry_upsert */ INSERT INTO agents (id, owner_id, sns_name, display_name, registry_id, reputation_score, source, metadata, enriched, is_public)
       VALUES ($1, NULL, $2, $3, $4, $5, $6, $7, $8, $9)
       ON CONFLICT (registry_id) WHERE registry_id IS NOT NULL DO UPDATE SET
         sns_name = EXCLUDED.sns_name, display_name = EXCLUDED.display_name, reputation_score = EXCLUDED.reputation_score,
         source = EXCLUDED.source, metadata = EXCLUDED.metadata, enriched = EXCLUDED.enriched, is_public = EXCLUDED.is_public
       RETURNING (xmax = 0) AS inserted`,
      [newCuid(), e.snsName ?? null, displayName, e.registryId, e.reputationScore ?? null, e.source ?? 'registry',
        e.metadata ?? {}, e.enriched ?? {}, e.isPublic ?? true],
    )
    return rows[0].inserted ? 'inserted' : 'updated'
  }

  /** Records a waitlist address; the same address (any case) twice keeps one row. */
  async joinWaitlist (email: string, source: string | null, metadata: Record<string, unknown>): Promise<void> {
    await this.db.query(
      `/* svc:waitlist_join */ INSERT INTO waitlist (email, source, metadata) VALUES ($1, $2, $3)
       ON CONFLICT ((lower(email))) DO NOTHING`,
      [email, source, metadata],
    )
  }
}
