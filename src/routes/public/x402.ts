import type { FastifyPluginAsync } from 'fastify'
import { HttpError } from '../../errors.ts'

/** GET /v1/x402: third-party payment data for the configured chains, with stale fallback. */
const x402: FastifyPluginAsync = async (app) => {
  app.get('/v1/x402', async () => {
    if (!app.x402.configured) throw new HttpError(503, 'x402_not_configured', { message: 'no x402 upstream is configured (X402_BASE_URL, X402_SOLANA_URL)' })
    const chains = await app.x402.all()
    if (Object.values(chains).every((c) => c.status === 'unavailable')) {
      throw new HttpError(502, 'upstream_unavailable', {
        chains: Object.fromEntries(Object.entries(chains).map(([name, c]) => [name, c.status === 'unavailable' ? c.reason : c.status])),
      })
    }
    return { chains }
  })
}

export default x402
