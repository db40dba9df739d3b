import type { ErrorDetail } from '../validation.ts'

/**
 * The `score.dropped` rule of one score name (set on its score config): over the last
 * `windowMinutes`, an agent's mean score of the name is below `below`, or has fallen by at least
 * `dropShare` (a share, 0.2 = 20 %) against its mean over the `baselineDays` before the window. The
 * window needs `minScores` scores (and the baseline as many, for a drop) before the rule judges.
 */
export interface ScoreAlertRule {
  windowMinutes: number
  baselineDays: number
  minScores: number
  below: number | null
  dropShare: number | null
}

export const SCORE_ALERT_DEFAULTS = { windowMinutes: 60, baselineDays: 7, minScores: 5 } as const

/** The rule's name on an alert: one open alert per agent and score name. */
export const SCORE_DROPPED = 'score.dropped:'
export const scoreAlertRule = (name: string) => `${SCORE_DROPPED}${name}`

/** The rule as kept, defaults filled in, from what was sent. */
export function scoreAlertRuleOf (sent: Partial<ScoreAlertRule>): ScoreAlertRule {
  return {
    windowMinutes: sent.windowMinutes ?? SCORE_ALERT_DEFAULTS.windowMinutes,
    baselineDays: sent.baselineDays ?? SCORE_ALERT_DEFAULTS.baselineDays,
    minScores: sent.minScores ?? SCORE_ALERT_DEFAULTS.minScores,
    below: sent.below ?? null,
    dropShare: sent.dropShare ?? null,
  }
}

/** What is wrong with a rule as sent, for a config of `dataType` (paths under `alert`). */
export function scoreAlertProblems (rule: Partial<ScoreAlertRule>, dataType: string): ErrorDetail[] {
  if (dataType === 'categorical') return [{ path: ['alert'], message: 'is allowed only for numeric and boolean configs (a mean needs numbers)' }]
  if (rule.below == null && rule.dropShare == null) return [{ path: ['alert', 'below'], message: 'or alert.dropShare is required' }]
  return []
}

/** An agent's figures of one name: the window's mean and count, and the baseline's before it. */
export interface ScoreWindow {
  agentId: string
  name: string
  windowMean: number
  windowCount: number
  baselineMean: number
  baselineCount: number
}

export interface ScoreDropFinding { rule: string; severity: 'warning' | 'critical'; message: string; figures: Record<string, number | string | null> }

const round = (n: number) => Math.round(n * 1e4) / 1e4

/**
 * The finding of the rule over an agent's figures, or null when it does not fire. Below the
 * threshold and a drop both fire one alert (its message says which, both when both hold); a drop of
 * twice `dropShare` or more is critical.
 */
export function scoreDropped (w: ScoreWindow, rule: ScoreAlertRule): ScoreDropFinding | null {
  if (w.windowCount < rule.minScores) return null
  const reasons: string[] = []
  let severity: 'warning' | 'critical' = 'warning'
  if (rule.below !== null && w.windowMean < rule.below) reasons.push(`below ${rule.below}`)
  let drop: number | null = null
  if (rule.dropShare !== null && w.baselineCount >= rule.minScores && w.baselineMean > 0) {
    drop = (w.baselineMean - w.windowMean) / w.baselineMean
    if (drop >= rule.dropShare) {
      reasons.push(`down ${Math.round(drop * 100)} % from ${round(w.baselineMean)} over the previous ${rule.baselineDays} days`)
      if (drop >= 2 * rule.dropShare) severity = 'critical'
    }
  }
  if (reasons.length === 0) return null
  return {
    rule: scoreAlertRule(w.name),
    severity,
    message: `mean ${w.name} ${round(w.windowMean)} over the last ${rule.windowMinutes} min (${w.windowCount} scores): ${reasons.join(', ')}`,
    figures: {
      name: w.name,
      mean: round(w.windowMean),
      scores: w.windowCount,
      // No baseline scores: no mean (null), not a mean of 0.
      baselineMean: w.baselineCount > 0 ? round(w.baselineMean) : null,
      baselineScores: w.baselineCount,
      ...(drop !== null ? { drop: round(drop) } : {}),
      ...(rule.below !== null ? { below: rule.below } : {}),
      ...(rule.dropShare !== null ? { dropShare: rule.dropShare } : {}),
      windowMinutes: rule.windowMinutes,
    },
  }
}
