import type { ErrorDetail } from '../validation.ts'
import { dataTypeOf, type IncomingScore, type ScoreDataType } from './score-row.ts'
import { scoreAlertProblems, type ScoreAlertRule } from './score-alerts.ts'

/** How scores of one name must look (postgres/010, `/v1/me/score-configs/:name`). */
export interface ScoreConfig {
  name: string
  dataType: ScoreDataType
  min: number | null
  max: number | null
  labels: string[] | null
  description: string | null
  /** The `score.dropped` alert rule of the name, or null for none. */
  alert: ScoreAlertRule | null
  updatedAt: string
}

export type ScoreConfigInput = Pick<ScoreConfig, 'dataType'> & {
  min?: number | null; max?: number | null; labels?: string[]; description?: string; alert?: Partial<ScoreAlertRule> | null
}

/** What is wrong with a config as sent (the schema checked its types), as the details of a 400. */
export function configProblems (c: ScoreConfigInput): ErrorDetail[] {
  const problems: ErrorDetail[] = []
  const numeric = c.dataType === 'numeric'
  if (!numeric && (c.min != null || c.max != null)) problems.push({ path: [c.min != null ? 'min' : 'max'], message: 'is allowed only for a numeric config' })
  if (numeric && c.min != null && c.max != null && c.min > c.max) problems.push({ path: ['min'], message: 'must not be greater than max' })
  if (c.dataType === 'categorical' && c.labels === undefined) problems.push({ path: ['labels'], message: 'is required for a categorical config' })
  if (c.dataType !== 'categorical' && c.labels !== undefined) problems.push({ path: ['labels'], message: 'is allowed only for a categorical config' })
  if (c.alert != null) problems.push(...scoreAlertProblems(c.alert, c.dataType))
  return problems
}

/** Why a score breaks its name's config (a detail of the 400 `score_config_mismatch`), or null when it fits. */
export function configMismatch (score: Pick<IncomingScore, 'value' | 'label' | 'boolean'>, config: ScoreConfig): ErrorDetail | null {
  const type = dataTypeOf(score)
  if (type !== config.dataType) {
    const wanted = config.dataType === 'numeric' ? 'value' : config.dataType === 'categorical' ? 'label' : 'boolean'
    return { path: [wanted], message: `is required: the score config of "${config.name}" is ${config.dataType}` }
  }
  if (type === 'numeric') {
    const v = score.value!
    if (config.min !== null && v < config.min) return { path: ['value'], message: `must be at least ${config.min} (score config of "${config.name}")` }
    if (config.max !== null && v > config.max) return { path: ['value'], message: `must be at most ${config.max} (score config of "${config.name}")` }
  }
  if (type === 'categorical' && config.labels && !config.labels.includes(score.label!)) {
    return { path: ['label'], message: `must be one of ${config.labels.map((l) => JSON.stringify(l)).join(', ')} (score config of "${config.name}")` }
  }
  return null
}
