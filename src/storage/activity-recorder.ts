import type { FastifyBaseLogger } from 'fastify'
import type { AgentsRepository } from './agents-repository.ts'
import type { KeysRepository } from './keys-repository.ts'

/**
 * Coalesces per-event side effects (a key's lastUsedAt, an agent's lastSeenAt and framework
 * back-fill) in memory and writes them in two statements per flush, instead of one UPDATE per event.
 * They are derived values: the events themselves are already committed when these are recorded.
 */
export class ActivityRecorder {
  private keys = new Map<string, number>()
  private agents = new Map<string, { lastSeenAt: number; framework: string | null }>()
  private timer: NodeJS.Timeout | undefined
  private flushing: Promise<void> = Promise.resolve()

  constructor(
    private readonly keysRepo: KeysRepository,
    private readonly agentsRepo: AgentsRepository,
    private readonly log: FastifyBaseLogger,
    private readonly intervalMs = 1000,
  ) {}

  start(): void {
    this.timer = setInterval(() => void this.flush(), this.intervalMs)
    this.timer.unref()
  }

  keyUsed(keyId: string, at: number): void {
    const prev = this.keys.get(keyId)
    if (prev === undefined || at > prev) this.keys.set(keyId, at)
  }

  agentSeen(agentId: string, at: number, framework: string | null): void {
    const prev = this.agents.get(agentId)
    if (!prev) this.agents.set(agentId, { lastSeenAt: at, framework })
    else {
      if (at > prev.lastSeenAt) prev.lastSeenAt = at
      if (prev.framework === null) prev.framework = framework
    }
  }

  /** Writes what has gathered; concurrent calls queue behind each other. */
  flush(): Promise<void> {
    this.flushing = this.flushing.then(async () => {
      const keys = this.keys
      const agents = this.agents
      this.keys = new Map()
      this.agents = new Map()
      try {
        await Promise.all([this.keysRepo.touch(keys), this.agentsRepo.recordActivity(agents)])
      } catch (err) {
        this.log.warn({ err, keys: keys.size, agents: agents.size }, 'could not record key and agent activity; will retry')
        for (const [id, at] of keys) this.keyUsed(id, at)
        for (const [id, a] of agents) this.agentSeen(id, a.lastSeenAt, a.framework)
      }
    })
    return this.flushing
  }

  async close(): Promise<void> {
    clearInterval(this.timer)
    await this.flush()
  }
}
