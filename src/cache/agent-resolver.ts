import type { AgentsRepository, Resolution } from '../storage/agents-repository.ts'
import { invalidationTopic, SharedCache, type SharedCacheOptions } from './shared-cache.ts'

/** The agent cache's name, whose invalidations (an owner's scope, or `*`) tell of a renamed or deleted agent. */
const AGENT_CACHE = 'agent'
/** Where every instance hears that an owner's agents changed (a rename, a deletion). */
export const AGENTS_CHANGED_TOPIC = invalidationTopic(AGENT_CACHE)

/**
 * Agent resolution for ingestion, cached per owner and reference in this process and in Redis
 * (see SharedCache). A rename or delete invalidates the owner's entries; a change that can affect
 * other owners' answers (an snsName set by the registry) invalidates them all.
 */
export class AgentResolver {
  private readonly cache: SharedCache<Resolution>

  constructor (private readonly agents: Pick<AgentsRepository, 'resolve'>, cache: Omit<SharedCacheOptions, 'name'>) {
    this.cache = new SharedCache({ ...cache, name: AGENT_CACHE })
  }

  /** `AgentsRepository.resolve` through the cache. */
  async resolve (ownerId: string, ref: string): Promise<Resolution> {
    // The repository never answers null (an unknown reference creates an agent).
    return (await this.cache.get([ownerId, ref], () => this.agents.resolve(ownerId, ref)))!
  }

  /** The resolution if this process holds it, else undefined (then `resolve`). */
  peek (ownerId: string, ref: string): Resolution | undefined {
    return this.cache.peek([ownerId, ref], () => this.agents.resolve(ownerId, ref)) ?? undefined
  }

  /**
   * Forgets one owner's resolutions, on every instance: what a rename or delete of one of its agents
   * needs, since only the owner's own references resolve by display name, and other owners'
   * references to it by cuid or snsName stay forbidden either way.
   */
  forgetOwner (ownerId: string): Promise<boolean> {
    return this.cache.invalidate(ownerId)
  }

  /** Forgets every resolution, on every instance. */
  forgetAll (): Promise<boolean> {
    return this.cache.invalidateAll()
  }
}
