/**
 * Sets a user's ingestion tier and optional burst override (events per minute).
 *   npm run user:tier -- <user> <free|pro|enterprise> [--burst N]
 * <user> is the identity-provider subject (the name given to `npm run token` locally). The user must
 * exist (users are created by their first request to the service): an unknown one is an error naming
 * it and the database, exit code 1, and so is a database the service has not created and migrated;
 * nothing is created. On success it prints the change and the database it was made in. The user's
 * cached keys are invalidated in Redis and on every running instance, so the change holds at once (at
 * the latest within SHARED_CACHE_TTL_SECONDS if Redis cannot be reached).
 */
import { cliArgs, usageError } from './args.ts'
import { openCaches } from './caches.ts'
import { describePostgres } from '../storage/postgres.ts'
import { openExistingStores } from './existing-stores.ts'
import { UsersRepository, type Tier } from '../storage/users-repository.ts'

const USAGE = 'usage: npm run user:tier -- <user> <free|pro|enterprise> [--burst events-per-minute]'

const { positionals, values } = cliArgs({ allowPositionals: true, options: { burst: { type: 'string' } } }, {
  usage: USAGE,
  about: 'Sets an existing user\'s ingestion tier and optional burst override (events per minute); running instances see it at once.',
})
const [subject, tier] = positionals
const burst = values.burst === undefined ? null : Number(values.burst)
if (!subject) usageError(USAGE, 'name the user')
if (!['free', 'pro', 'enterprise'].includes(tier ?? '')) usageError(USAGE, `the tier must be free, pro or enterprise (got ${tier === undefined ? 'none' : JSON.stringify(tier)})`)
if (burst !== null && !(Number.isInteger(burst) && burst > 0)) usageError(USAGE, '--burst must be a whole number of events per minute above 0')
const { config, pool } = await openExistingStores('user:tier')
// openExistingPostgres has checked the URL.
const where = describePostgres(config.databaseUrl)
const user = await new UsersRepository(pool).updateTier(subject, tier as Tier, burst)
if (!user) {
  await pool.end()
  console.error(`user:tier: no user "${subject}" in ${where}; users are created by their first request to the service (check the name, and that DATABASE_URL is the service's)`)
  process.exit(1)
}
const caches = await openCaches(config, pool)
try {
  console.log(`${subject}: tier ${user.tier}${user.burstPerMinute === null ? '' : `, burst ${user.burstPerMinute}/min`} (${where})`)
  // A key's cached identity carries its user's tier and burst override.
  if (!(await caches.keys.forgetUser(user.id))) caches.warnUntold()
  else await caches.warnIfUnheard()
} finally {
  caches.close()
  await pool.end()
}
