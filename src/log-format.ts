import { Writable } from 'node:stream'

const LEVELS: Record<number, string> = { 10: 'TRACE', 20: 'DEBUG', 30: 'INFO ', 40: 'WARN ', 50: 'ERROR', 60: 'FATAL' }
const OMIT = new Set(['level', 'time', 'pid', 'hostname', 'msg', 'err'])

function show (value: unknown): string {
  if (typeof value === 'string') return /[\s"=]/.test(value) ? JSON.stringify(value) : value
  return JSON.stringify(value)
}

/** One JSON log line as `HH:MM:SS.mmm LEVEL message key=value …`, with an error's stack below it. */
export function prettyLine (json: string): string {
  let entry: Record<string, unknown>
  try {
    entry = JSON.parse(json) as Record<string, unknown>
  } catch {
    return json
  }
  const time = new Date(Number(entry.time)).toISOString().slice(11, 23)
  const fields = Object.entries(entry).filter(([k]) => !OMIT.has(k)).map(([k, v]) => `${k}=${show(v)}`)
  const err = entry.err as { message?: string; stack?: string } | undefined
  const errText = err ? ` error=${show(err.message ?? '')}${err.stack ? `\n    ${err.stack.split('\n').slice(1).join('\n    ').trim()}` : ''}` : ''
  return `${time} ${LEVELS[Number(entry.level)] ?? entry.level} ${entry.msg ?? ''}${fields.length ? ` ${fields.join(' ')}` : ''}${errText}`
}

/**
 * A destination for the logger that prints human-readable lines (LOG_FORMAT=pretty, for local runs);
 * the default stays one JSON object per line for log collectors.
 */
export function prettyStream (out: NodeJS.WritableStream = process.stdout): Writable {
  let pending = ''
  return new Writable({
    write (chunk: Buffer, _encoding, done) {
      pending += chunk.toString('utf8')
      const lines = pending.split('\n')
      pending = lines.pop() ?? ''
      for (const line of lines) if (line) out.write(`${prettyLine(line)}\n`)
      done()
    },
  })
}
