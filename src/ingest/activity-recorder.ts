import type { FastifyBaseLogger } from 'fastify'
import type { AgentsRepository } from '../storage/agents-repository.ts'
import type { KeysRepository } from '../storage/keys-repository.ts'
import { monthOf, type UsersRepository } from '../storage/users-repository.ts'
import { LogThrottle } from '../log-lines.ts'

/**
 * Coalesces per-event side effects (a key's lastUsedAt, an agent's lastSeenAt and framework
 * back-fill, the user's monthly event count) in memory and writes them in three statements per
 * flush, instead of one write per event. They are derived or advisory values: the events themselves
 * are already committed when these are recorded, and a crash loses at most one interval of them.
 */
export class ActivityRecorder {
  private keys = new Map<string, number>()
  private agents = new Map<string, { lastSeenAt: number; framework: string | null }>()
  private usage = new Map<string, Map<string, number>>()
  private timer: NodeJS.Timeout | undefined
  private flushing: Promise<void> = Promise.resolve()
  private readonly failureLines = new LogThrottle(60_000)
  private failing = false

  constructor (
    private readonly keysRepo: KeysRepository,
    private readonly agentsRepo: AgentsRepository,
    private readonly usersRepo: UsersRepository,
    private readonly log: FastifyBaseLogger,
    private readonly intervalMs = 1000,
  ) {}

  start (): void {
    this.timer = setInterval(() => void this.flush(), this.intervalMs)
    this.timer.unref()
  }

  keyUsed (keyId: string, at: number): void {
    const prev = this.keys.get(keyId)
    if (prev === undefined || at > prev) this.keys.set(keyId, at)
  }

  agentSeen (agentId: string, at: number, framework: string | null): void {
    const prev = this.agents.get(agentId)
    if (!prev) this.agents.set(agentId, { lastSeenAt: at, framework })
    else {
      if (at > prev.lastSeenAt) prev.lastSeenAt = at
      if (prev.framework === null) prev.framework = framework
    }
  }

  eventsAccepted (userId: string, at: number, n: number): void {
    const month = monthOf(at)
    const byMonth = this.usage.get(userId) ?? new Map<string, number>()
    byMonth.set(month, (byMonth.get(month) ?? 0) + n)
    this.usage.set(userId, byMonth)
  }

  /** Writes what has gathered; concurrent calls queue behind each other. */
  flush (): Promise<void> {
    this.flushing = this.flushing.then(async () => {
      const keys = this.keys
      const agents = this.agents
      const usage = this.usage
      this.keys = new Map()
      this.agents = new Map()
      this.usage = new Map()
      // Each write is retried on its own next time, so one failing never repeats another's increments.
      const results = await Promise.allSettled([
        this.keysRepo.touch(keys),
        this.agentsRepo.recordActivity(agents),
        this.usersRepo.addUsage(usage),
      ])
      const [k, a, u] = results
      if (k.status === 'rejected') for (const [id, at] of keys) this.keyUsed(id, at)
      if (a.status === 'rejected') for (const [id, x] of agents) this.agentSeen(id, x.lastSeenAt, x.framework)
      if (u.status === 'rejected') {
        for (const [userId, byMonth] of usage) {
          for (const [month, n] of byMonth) this.eventsAccepted(userId, Date.parse(month), n)
        }
      }
      const failed = results.filter((r) => r.status === 'rejected') as PromiseRejectedResult[]
      // An outage fails every flush: its first failure is told, then one line a minute, and its end.
      if (failed.length) {
        const held = this.failureLines.pass()
        if (held !== null) this.log.warn({ err: failed[0]!.reason, failed: failed.length, alsoFailed: held }, 'could not record activity; will retry at the next flush (this line at most once a minute)')
        this.failing = true
      } else if (this.failing) {
        this.failing = false
        this.log.info('activity recorded again after failed flushes')
      }
    })
    return this.flushing
  }

  async close (): Promise<void> {
    clearInterval(this.timer)
    await this.flush()
  }
}
