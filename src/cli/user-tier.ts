/**
 * Sets a user's ingestion tier and optional burst override (events per minute).
 *   npm run user:tier -- <user> <free|pro|enterprise> [--burst N]
 * <user> is the identity-provider subject (the name given to `npm run token` locally); the user is
 * created if new. The user's cached keys are invalidated in Redis and on every running instance, so
 * the change holds at once (at the latest within SHARED_CACHE_TTL_SECONDS if Redis cannot be reached).
 */
import { parseArgs } from 'node:util'
import { loadConfig } from '../config.ts'
import { openCaches } from './caches.ts'
import { openPostgres } from '../storage/postgres.ts'
import { UsersRepository, type Tier } from '../storage/users-repository.ts'

function parse () {
  try {
    return parseArgs({ allowPositionals: true, options: { burst: { type: 'string' } } })
  } catch (err) {
    console.error(`${(err as Error).message}\nusage: npm run user:tier -- <user> <free|pro|enterprise> [--burst events-per-minute]`)
    process.exit(2)
  }
}
const { positionals, values } = parse()
const [subject, tier] = positionals
const burst = values.burst === undefined ? null : Number(values.burst)
if (!subject || !['free', 'pro', 'enterprise'].includes(tier ?? '') || (burst !== null && !(Number.isInteger(burst) && burst > 0))) {
  console.error('usage: npm run user:tier -- <user> <free|pro|enterprise> [--burst events-per-minute]')
  process.exit(2)
}
const config = loadConfig()
const pool = await openPostgres(config.databaseUrl)
const caches = await openCaches(config, pool)
try {
  const user = await new UsersRepository(pool).setTier(subject, tier as Tier, burst)
  console.log(JSON.stringify({ id: user.id, privyId: user.privyId, tier: user.tier, burstPerMinute: user.burstPerMinute }))
  // A key's cached identity carries its user's tier and burst override.
  if (!(await caches.keys.forgetUser(user.id))) caches.warnUntold()
} finally {
  caches.close()
  await pool.end()
}
