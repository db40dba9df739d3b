/**
 * Public registry listing at 100,000 public agents: npm run bench:registry [-- --clean]
 * Fills the database agent_telemetry_search_bench once (100k public agents with names, sns names and
 * descriptions), then times GET /v1/agents' queries (page + total) with and without search.
 */
import { openPostgres } from '../src/storage/postgres.ts'
import { RegistryRepository } from '../src/storage/registry-repository.ts'
import { benchDatabaseUrl, dropDatabase } from './bench-support.ts'
// On DATABASE_URL's server; kept between runs (filling it takes a while) unless --clean.
const databaseUrl = benchDatabaseUrl('agent_telemetry_search_bench')
const pool = await openPostgres(databaseUrl)
const repo = new RegistryRepository(pool)
const { rows } = await pool.query('SELECT count(*)::int AS n FROM agents WHERE is_public')
if (rows[0].n < 100000) {
  console.error('filling 100,000 public agents (once)…')
  const words = ['swap', 'trader', 'oracle', 'arbitrage', 'lending', 'nft', 'sniper', 'yield', 'bridge', 'market', 'maker', 'liquidity']
  await pool.query(`INSERT INTO agents (id, sns_name, display_name, registry_id, reputation_score, source, enriched, is_public)
    SELECT 'c' || substr(md5(g::text), 1, 24), 'agent' || g || '.sol', 'Agent ' || g, 'reg' || g, random() * 100, 'registry',
      jsonb_build_object('name', 'Agent ' || g, 'description', ($1::text[])[1 + (g % 12)] || ' ' || ($1::text[])[1 + (g * 7 % 12)] || ' bot number ' || g, 'profiled', g % 3 = 0), true
    FROM generate_series(1, 100000) g ON CONFLICT DO NOTHING`, [words])
  await pool.query('ANALYZE agents')
}
async function time (label: string, q: Parameters<RegistryRepository['list']>[0]) {
  await repo.list(q); const ts: number[] = []
  for (let i = 0; i < 30; i++) { const t = performance.now(); await repo.list(q); ts.push(performance.now() - t) }
  ts.sort((a, b) => a - b)
  console.log(label.padEnd(45), 'p50', ts[14]!.toFixed(1), 'ms  p95', ts[28]!.toFixed(1), 'ms')
}
await time('list, no search (limit 20)', { limit: 20, offset: 0, filter: 'all' })
await time('search "arbitrage" (~17k matches)', { limit: 20, offset: 0, filter: 'all', search: 'arbitrage' })
await time('search "agent12345" (1 match)', { limit: 20, offset: 0, filter: 'all', search: 'agent12345.sol' })
await time('search "nomatchxyz"', { limit: 20, offset: 0, filter: 'all', search: 'nomatchxyz' })
await time('search "yield" + identified + offset 100', { limit: 20, offset: 100, filter: 'identified', search: 'yield' })
const plan = await pool.query('EXPLAIN SELECT id FROM agents WHERE is_public AND deleted_at IS NULL AND agent_search_text(display_name, sns_name, enriched) LIKE \'%nomatchxyz%\'')
console.log('\nplan of a search:\n' + plan.rows.map((r) => r['QUERY PLAN']).join('\n'))
await pool.end()
if (process.argv.includes('--clean')) await dropDatabase(databaseUrl)
