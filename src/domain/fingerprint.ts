// One-shot hash (crypto.hash): a third of createHash().update().digest()'s cost for short inputs.
import { hash } from 'node:crypto'

/**
 * Normalises an error message so that occurrences of one failure group together: identifiers,
 * numbers, quoted values, addresses and paths become placeholders; case and spacing are folded.
 */
export function normaliseErrorMessage (message: string): string {
  return message
    .toLowerCase()
    .replace(/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/g, '<uuid>')
    .replace(/https?:\/\/\S+/g, '<url>')
    .replace(/(?:[a-z]:)?(?:[\\/][\w.-]+){2,}/g, '<path>')
    .replace(/"[^"]*"|'[^']*'|`[^`]*`/g, '<str>')
    .replace(/\b0x[0-9a-f]+\b/g, '<hex>')
    .replace(/\b[0-9a-f]{16,}\b/g, '<hex>')
    .replace(/\b[1-9a-hj-np-z]{32,88}\b/gi, '<b58>')
    // Other generated ids (cuids, ULIDs, `evt_01…`, `req_8f3kdq2xlm9p`): 8 or more letters and digits,
    // after an optional `word_` prefix, where digits stand between letters and letters between
    // digits. Not a number with its unit (`120000ms`), `base64url`, or words joined by underscores
    // (`status_code_500`, `claude_3_5_sonnet_20241022`).
    .replace(/\b(?:[a-z]{1,12}_)?(?=[a-z0-9]*[a-z]\d+[a-z])(?=[a-z0-9]*\d[a-z]+\d)[a-z0-9]{8,}\b/g, '<id>')
    .replace(/\d+(\.\d+)?/g, '<n>')
    .replace(/\s+/g, ' ')
    .trim()
    .slice(0, 500)
}

export interface FingerprintInput {
  type: string
  outcome: string | undefined
  errorMessage: string | undefined
  agentId: string
  tool: string | undefined
}

/**
 * The error-cluster fingerprint of an event, or '' when the event is not an error. An event is an
 * error when its type is `error` or its outcome is `failed`; the fingerprint is the first 16 hex
 * characters of SHA-256 over agent, tool and normalised message.
 */
export function errorFingerprint (e: FingerprintInput): string {
  if (e.type !== 'error' && e.outcome !== 'failed') return ''
  const normalised = normaliseErrorMessage(e.errorMessage ?? '')
  return hash('sha256', `${e.agentId}\n${e.tool ?? ''}\n${normalised}`, 'hex').slice(0, 16)
}
