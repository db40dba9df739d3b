import type { FastifyBaseLogger } from 'fastify'
import { SingleFlight } from '../cache/single-flight.ts'
import { HttpError } from '../http-error.ts'
import type { ResponseCache } from '../cache/response-cache.ts'

/** What an upstream must answer: third-party payment data for one chain. */
export type ChainData = {
  topSellers: unknown[]
  recentTransfers: unknown[]
  facilitator: Record<string, unknown>
}

export type ChainResult =
  | ({ status: 'fresh' | 'stale'; fetchedAt: string; ageSeconds: number } & ChainData)
  | { status: 'unavailable'; reason: string }

/** Stale copies are kept this long, to be served while an upstream is down. */
const STALE_KEEP_SECONDS = 24 * 3600

function parseChainData (body: unknown): ChainData | null {
  if (!body || typeof body !== 'object') return null
  const b = body as Record<string, unknown>
  if (!Array.isArray(b.topSellers) || !Array.isArray(b.recentTransfers) || !b.facilitator || typeof b.facilitator !== 'object' || Array.isArray(b.facilitator)) return null
  return { topSellers: b.topSellers, recentTransfers: b.recentTransfers, facilitator: b.facilitator as Record<string, unknown> }
}

/**
 * The /v1/x402 proxy: each chain's upstream is fetched with a timeout at most once per freshness
 * window (shared through Redis); when it fails, the last good copy is served with its age.
 */
export class X402Service {
  private readonly flights = new SingleFlight<ChainResult>()

  constructor (
    private readonly upstreams: Record<string, string>,
    private readonly cache: ResponseCache,
    private readonly opts: { timeoutMs: number; freshSeconds: number },
    private readonly log: FastifyBaseLogger,
  ) {}

  get configured (): boolean {
    return Object.keys(this.upstreams).length > 0
  }

  /**
   * Every configured chain; throws 503 x402_not_configured without upstreams, and 502
   * upstream_unavailable (with a detail per chain) when no chain has data.
   */
  async available (): Promise<Record<string, ChainResult>> {
    if (!this.configured) throw new HttpError(503, 'x402_not_configured', { message: 'no x402 upstream is configured (X402_BASE_URL, X402_SOLANA_URL)' })
    const chains = await this.all()
    if (Object.values(chains).every((c) => c.status === 'unavailable')) {
      throw new HttpError(502, 'upstream_unavailable', {
        message: 'no x402 upstream answered and nothing is cached',
        details: Object.entries(chains).map(([name, c]) => ({ path: ['chains', name], message: c.status === 'unavailable' ? c.reason : c.status })),
      })
    }
    return chains
  }

  async all (): Promise<Record<string, ChainResult>> {
    const entries = await Promise.all(Object.keys(this.upstreams).map(async (chain) => [chain, await this.chain(chain)] as const))
    return Object.fromEntries(entries)
  }

  private chain (chain: string): Promise<ChainResult> {
    return this.flights.run(chain, () => this.load(chain))
  }

  private async load (chain: string): Promise<ChainResult> {
    const cacheName = `x402:${chain}`
    const raw = await this.cache.getRaw(cacheName)
    const cached = raw ? (JSON.parse(raw) as { fetchedAt: number; data: ChainData }) : null
    const now = Date.now()
    if (cached && now - cached.fetchedAt < this.opts.freshSeconds * 1000) return this.present('fresh', cached.fetchedAt, cached.data, now)
    let reason: string
    try {
      // Loaded on the first upstream call: a process that never serves /v1/x402 never loads it.
      const { request } = await import('undici')
      const res = await request(this.upstreams[chain]!, {
        headersTimeout: this.opts.timeoutMs,
        bodyTimeout: this.opts.timeoutMs,
        signal: AbortSignal.timeout(this.opts.timeoutMs),
        headers: { accept: 'application/json' },
      })
      if (res.statusCode !== 200) {
        await res.body.dump()
        reason = `upstream answered ${res.statusCode}`
      } else {
        const data = parseChainData(await res.body.json().catch(() => null))
        if (data) {
          await this.cache.setRaw(cacheName, JSON.stringify({ fetchedAt: now, data }), STALE_KEEP_SECONDS)
          return this.present('fresh', now, data, now)
        }
        reason = 'upstream answered malformed data'
      }
    } catch (err) {
      const code = (err as { code?: string }).code ?? ''
      reason = (err as Error).name === 'TimeoutError' || code.includes('TIMEOUT') ? 'upstream timed out' : 'upstream unreachable'
    }
    this.log.warn({ chain, reason, stale: cached !== null }, 'x402 upstream failed')
    if (cached) return this.present('stale', cached.fetchedAt, cached.data, now)
    return { status: 'unavailable', reason }
  }

  private present (status: 'fresh' | 'stale', fetchedAt: number, data: ChainData, now: number): ChainResult {
    return { status, fetchedAt: new Date(fetchedAt).toISOString(), ageSeconds: Math.floor((now - fetchedAt) / 1000), ...data }
  }
}
