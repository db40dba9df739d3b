/**
 * Exit 0 while BullMQ workers of the anomaly and maintenance queues are connected to Redis, else 1
 * (the worker container's healthcheck; the worker role has no HTTP port).
 *   node --import ./src/ts-loader.mjs src/cli/worker-health.ts
 */
import { Queue } from 'bullmq'
import { Redis } from 'ioredis'
import { loadConfig } from '../config.ts'
import { cliArgs } from './args.ts'
import { ANOMALY_QUEUE } from '../jobs/anomaly.queue.ts'
import { MAINTENANCE_QUEUE } from '../jobs/maintenance.queue.ts'

cliArgs({ options: {} }, {
  usage: 'usage: node --import ./src/ts-loader.mjs src/cli/worker-health.ts',
  about: 'Exits 0 while workers of the anomaly and maintenance queues are connected to Redis, else 1 (the worker container\'s healthcheck).',
})
const config = loadConfig()
const connection = new Redis(config.redisUrl, { maxRetriesPerRequest: 1, connectTimeout: 3000 })
connection.on('error', () => {})
let healthy = false
try {
  const counts = await Promise.all([ANOMALY_QUEUE, MAINTENANCE_QUEUE].map(async (name) => {
    const queue = new Queue(name, { connection, prefix: `${config.redisPrefix}bull` })
    try {
      return await queue.getWorkersCount()
    } finally {
      await queue.close()
    }
  }))
  healthy = counts.every((n) => n > 0)
  console.log(JSON.stringify({ healthy, workers: { [ANOMALY_QUEUE]: counts[0], [MAINTENANCE_QUEUE]: counts[1] } }))
} catch (err) {
  console.log(JSON.stringify({ healthy, error: (err as Error).message }))
} finally {
  connection.disconnect()
}
process.exit(healthy ? 0 : 1)
