import { randomUUID } from 'node:crypto'
import { existsSync, readFileSync, writeFileSync } from 'node:fs'
import { hostname } from 'node:os'
import { join } from 'node:path'
import type pg from 'pg'

/** How often a running instance says its embedded store is live, and how long one stays live without. */
export const HEARTBEAT_MS = 20_000
const LIVE_FOR_SECONDS = 60

/** Another instance's embedded store, live on the same Postgres database. */
export interface OtherStore { host: string; dataDir: string; pid: number }

/** The id of the embedded store under `dataDir`, made on first use: a copied DATA_DIR is the same store. */
export function embeddedStoreId (dataDir: string): string {
  const file = join(dataDir, 'store-id')
  if (existsSync(file)) return readFileSync(file, 'utf8').trim()
  const id = randomUUID()
  writeFileSync(file, `${id}\n`, { flag: 'wx' })
  return id
}

/**
 * Says, in Postgres, that this instance's embedded store is live (every HEARTBEAT_MS until `stop`),
 * and answers the other stores live on the same database: events sent through them are in their
 * stores, not this one. The heartbeat's queries go through a client of their own, outside the
 * pool's query count.
 */
export async function registerEmbeddedStore (db: pg.Pool, dataDir: string, onError: (err: unknown) => void): Promise<{ others: OtherStore[]; stop: () => Promise<void> }> {
  const storeId = embeddedStoreId(dataDir)
  const beat = async (): Promise<OtherStore[]> => {
    const client = await db.connect()
    try {
      await client.query(
        `/* svc:embedded_store_beat */ INSERT INTO embedded_stores (store_id, host, data_dir, pid, last_seen) VALUES ($1, $2, $3, $4, now())
         ON CONFLICT (store_id) DO UPDATE SET host = EXCLUDED.host, data_dir = EXCLUDED.data_dir, pid = EXCLUDED.pid, last_seen = now()`,
        [storeId, hostname(), dataDir, process.pid])
      const { rows } = await client.query(
        `/* svc:embedded_store_others */ SELECT host, data_dir, pid FROM embedded_stores
         WHERE store_id <> $1 AND last_seen > now() - make_interval(secs => $2) ORDER BY last_seen DESC`, [storeId, LIVE_FOR_SECONDS])
      return rows.map((r) => ({ host: r.host, dataDir: r.data_dir, pid: r.pid }))
    } finally {
      client.release()
    }
  }
  const others = await beat()
  const timer = setInterval(() => { beat().catch(onError) }, HEARTBEAT_MS)
  timer.unref()
  return {
    others,
    stop: async () => {
      clearInterval(timer)
      await db.query('/* svc:embedded_store_gone */ DELETE FROM embedded_stores WHERE store_id = $1', [storeId]).catch(onError)
    },
  }
}
