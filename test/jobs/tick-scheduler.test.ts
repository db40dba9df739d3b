import t from 'tap'
import { setTimeout as sleep } from 'node:timers/promises'
import { TICK_SCHEDULER_ID } from '../../src/jobs/anomaly.queue.ts'
import { NAMES_SCHEDULER_ID, RETENTION_SCHEDULER_ID } from '../../src/jobs/maintenance.queue.ts'
import { buildTestApp } from '../helpers/app.ts'
import { ownTestDatabase } from '../helpers/env.ts'

// A Postgres database of its own (ownTestDatabase): these ticks run every second.
const worker = await buildTestApp(t, { ROLES: 'api,worker', ANOMALY_EVERY_MS: '1000', NAMES_SYNC_EVERY_MS: '1000', DATABASE_URL: ownTestDatabase('ticks') })

async function until<T> (what: () => Promise<T | undefined | false>, ms: number): Promise<T | undefined> {
  const deadline = Date.now() + ms
  while (Date.now() < deadline) {
    const found = await what()
    if (found) return found
    await sleep(100)
  }
  return undefined
}

t.test('job schedulers are re-created after Redis loses them', async (t) => {
  t.ok(await worker.anomalyQueue.getJobScheduler(TICK_SCHEDULER_ID), 'upserted at start')

  // What a Redis restarted empty looks like to this deployment: none of its keys left, all deleted in
  // one command (the worker re-creates what is missing every second, so it could be back at once).
  const keys: string[] = []
  let cursor = '0'
  do {
    const [next, found] = await worker.redis.scan(cursor, 'MATCH', `${worker.redisPrefix}*`, 'COUNT', 1000)
    keys.push(...found)
    cursor = next
  } while (cursor !== '0')
  t.ok(keys.some((key) => key.endsWith(':repeat')), 'the schedulers are among the keys deleted')
  // Not necessarily every one: a job's lock may expire between the scan and the deletion.
  t.ok(await worker.redis.del(...keys) > 0, 'the deployment\'s keys deleted')
  const lostAt = Date.now()

  t.ok(await until(() => worker.anomalyQueue.getJobScheduler(TICK_SCHEDULER_ID), 5_000), 'back within a few seconds')
  const tick = await until(async () => {
    const done = await worker.anomalyQueue.getJobs(['completed'])
    return done.find((job) => job.name === 'tick' && (job.finishedOn ?? 0) > lostAt)
  }, 10_000)
  t.ok(tick, 'and ticks run again')
  // Every queue keeps its schedulers the same way, the hourly one included.
  t.ok(await until(() => worker.maintenance.queue.getJobScheduler(NAMES_SCHEDULER_ID), 5_000), 'the names scheduler is back too')
  t.ok(await until(() => worker.maintenance.queue.getJobScheduler(RETENTION_SCHEDULER_ID), 5_000), 'and the retention scheduler')
})
