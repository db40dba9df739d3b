import { open, type Database } from 'lmdb'
import type { LogRow } from './entry-codec.ts'

export interface QuarantinedRow { position: number; line: string; reason: string; at: string }

/** The name of the quarantine's database in the log's LMDB environment. */
const QUARANTINE_DB = 'quarantine'

/**
 * Rows the log cannot ship, kept with the reason so an operator can inspect or replay them: rows the
 * engine refused, and damaged log entries (as base64). Keyed by position, in the log's environment.
 */
export class QuarantineStore {
  private count: number

  constructor (private readonly db: Database<QuarantinedRow, number>) {
    this.count = db.getCount()
  }

  /** Opens the quarantine of an open LMDB environment. */
  static in (env: { openDB: (name: string, options: { encoding: 'msgpack' }) => Database<QuarantinedRow, number> }): QuarantineStore {
    return new QuarantineStore(env.openDB(QUARANTINE_DB, { encoding: 'msgpack' }))
  }

  /**
   * The quarantine of a log directory, read without taking the log (LMDB allows readers beside its
   * owner), for an operator: `npm run ingest:quarantine`.
   */
  static read (dir: string, limit: number): QuarantinedRow[] {
    const env = open({ path: dir, readOnly: true, maxDbs: 4 })
    try {
      return list(env.openDB<QuarantinedRow, number>(QUARANTINE_DB, { encoding: 'msgpack' }), limit)
    } finally {
      void env.close()
    }
  }

  /** How many rows it holds. */
  get size (): number { return this.count }

  /** Keeps `rows` with `reason`, in one transaction (a position quarantined again is replaced, counted once). */
  async put (rows: LogRow[], reason: string): Promise<void> {
    const at = new Date().toISOString()
    let added = 0
    await this.db.transaction(() => {
      for (const row of rows) {
        if (this.db.get(row.position) === undefined) added++
        this.db.putSync(row.position, { position: row.position, line: row.line, reason, at })
      }
    })
    this.count += added
  }

  /** The first `limit` rows, by position. */
  list (limit: number): QuarantinedRow[] {
    return list(this.db, limit)
  }
}

function list (db: Database<QuarantinedRow, number>, limit: number): QuarantinedRow[] {
  return [...db.getRange({ limit }).map(({ value }) => value)]
}
