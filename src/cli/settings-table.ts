import type { Setting } from '../config.ts'

const START = '<!-- settings:start -->'
const END = '<!-- settings:end -->'

/** A table cell: a `|` would end the cell early, even inside code. */
function cell (text: string): string {
  return text.replaceAll('|', '\\|')
}

function code (value: unknown): string {
  return `\`${String(value)}\``
}

/** The values a setting accepts, from its schema's type and bounds. */
function accepted (schema: Setting['schema']): string {
  if (Array.isArray(schema.enum)) return schema.enum.map(code).join(', ')
  if (schema.type === 'boolean') return '`true`, `false`'
  if (schema.type === 'integer') {
    const { minimum: min, maximum: max } = schema
    if (min !== undefined && max !== undefined) return `${code(min)} .. ${code(max)}`
    if (min !== undefined) return `≥ ${code(min)}`
    if (max !== undefined) return `≤ ${code(max)}`
    return 'an integer'
  }
  if (typeof schema.pattern === 'string') return `matching ${code(schema.pattern)}`
  if (typeof schema.minLength === 'number' && schema.minLength > 1) return `≥ ${schema.minLength} characters`
  return 'text'
}

/** The Markdown table of docs/operations.md: one row a setting, in the schema's order. */
export function settingsTable (settings: readonly Setting[]): string {
  const rows = settings.map(({ name, schema }) => {
    const fallback = schema.default === undefined ? 'unset' : code(schema.default)
    return `| ${[code(name), fallback, accepted(schema), schema.description ?? ''].map(cell).join(' | ')} |`
  })
  return ['| name | default | values | meaning |', '|---|---|---|---|', ...rows].join('\n') + '\n'
}

/** doc with the text between its settings markers replaced by table; throws without the markers. */
export function withSettingsTable (doc: string, table: string): string {
  const start = doc.indexOf(START)
  const end = doc.indexOf(END)
  if (start < 0 || end < start) throw new Error(`no ${START} … ${END} markers`)
  return `${doc.slice(0, start + START.length)}\n${table}${doc.slice(end)}`
}
