import type { ScoreDataType } from './score-row.ts'

/** The figures of one group of a name's scores, as the store answers them. */
export interface FigureRow {
  name: string
  /** The group: 'current' | 'previous' for a period, a UTC day (YYYY-MM-DD), or an agent id ('' for none). */
  key: string
  /** Of the latest score of the group. */
  dataType: ScoreDataType
  count: number
  /** How many of the group have a value (numeric and boolean scores). */
  numericCount: number
  mean: number
  p50: number
  p90: number
  labels: Record<string, number>
}

export type Figures = {
  count: number
  numeric: { mean: number; p50: number; p90: number } | null
  labels: Record<string, number> | null
}

const NONE: Figures = { count: 0, numeric: null, labels: null }

/** The answer's figures of a group: numbers only where there were values, labels only where there were labels. */
export function figuresOf (row: FigureRow | undefined): Figures {
  if (!row) return NONE
  return {
    count: row.count,
    numeric: row.numericCount > 0 ? { mean: row.mean, p50: row.p50, p90: row.p90 } : null,
    labels: Object.keys(row.labels).length > 0 ? row.labels : null,
  }
}

export type NameSummary = Figures & {
  name: string
  dataType: ScoreDataType
  previous: Figures
  change: { count: number; mean: number | null }
  byDay: (Figures & { day: string })[]
  byAgent: (Figures & { agentId: string | null })[]
}

/**
 * The summary per name from the store's groups: the period against the previous one (a name with
 * scores only in the previous period is listed with a count of 0), per day and per agent.
 */
export function summarise (period: FigureRow[], days: FigureRow[], agents: FigureRow[]): NameSummary[] {
  const names = [...new Set(period.map((r) => r.name))].sort()
  return names.map((name) => {
    const current = period.find((r) => r.name === name && r.key === 'current')
    const previous = period.find((r) => r.name === name && r.key === 'previous')
    const now = figuresOf(current)
    const before = figuresOf(previous)
    return {
      name,
      dataType: (current ?? previous)!.dataType,
      ...now,
      previous: before,
      change: { count: now.count - before.count, mean: now.numeric && before.numeric ? now.numeric.mean - before.numeric.mean : null },
      byDay: days.filter((r) => r.name === name).map((r) => ({ day: r.key, ...figuresOf(r) })),
      byAgent: agents.filter((r) => r.name === name).map((r) => ({ agentId: r.key === '' ? null : r.key, ...figuresOf(r) })),
    }
  })
}
