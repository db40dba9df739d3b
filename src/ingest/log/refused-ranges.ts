import type { PositionRange } from './entry-codec.ts'

// Positions of refused commits that may be on disk all the same: a synced write can fail after its
// bytes reached the file, and cutting them off can fail too. Their rows must never ship (the
// clients were told 503 and will send them again), so reads skip these ranges (collectSpans' `skip`)
// until everything below them has shipped. The log holds them as a list in position order.

/** Adds a refused range, after every range in `ranges`. */
export function addRefused (ranges: PositionRange[], range: PositionRange): void {
  // Commits refused one after another (a disk that stays full) make one range, not one each.
  const last = ranges[ranges.length - 1]
  if (last && last.to + 1 === range.from) last.to = range.to
  else ranges.push(range)
}

/** The ranges still to skip once every position up to `shipped` has shipped. */
export function stillRefused (ranges: PositionRange[], shipped: number): PositionRange[] {
  return ranges.length > 0 ? ranges.filter((r) => r.to > shipped) : ranges
}
