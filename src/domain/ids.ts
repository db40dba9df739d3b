import { randomBytes, randomFillSync } from 'node:crypto'
import { monotonicFactory } from 'ulid'

/** The spec's cuid shape: `c` followed by 24 lowercase letters or digits. */
const CUID_PATTERN = /^c[a-z0-9]{24}$/

const ALPHABET = 'abcdefghijklmnopqrstuvwxyz0123456789'

/** A new record id matching CUID_PATTERN (24 random base-36 characters after the `c`). */
export function newCuid (): string {
  const bytes = randomBytes(24)
  let id = 'c'
  // 252 = 7 * 36: rejecting bytes above it keeps every character equally likely.
  for (let i = 0; i < bytes.length; i++) {
    let b = bytes[i]!
    while (b >= 252) b = randomBytes(1)[0]!
    id += ALPHABET[b % 36]
  }
  return id
}

export function isCuid (value: string): boolean {
  return CUID_PATTERN.test(value)
}

// ULID's randomness from a pooled buffer: the library asks for one random number per character, and
// one randomFillSync per character cost about 5 % of the ingestion thread.
const pool = Buffer.alloc(4096)
let poolAt = pool.length
function pooledRandom (): number {
  if (poolAt >= pool.length) {
    randomFillSync(pool)
    poolAt = 0
  }
  // A byte over 256 maps evenly onto ULID's 32 symbols (256 = 8 × 32).
  return pool[poolAt++]! / 256
}

const ulid = monotonicFactory(pooledRandom)

/** A new event id: `evt_` + a ULID, so ids sort by creation time (monotonic within one process). */
export function newEventId (now = Date.now()): string {
  return 'evt_' + ulid(now)
}
