import type { ErrorDetail } from '../validation.ts'

/** `scheme://host[:port]`, as the key's schema lets through (schemas/me-routes.ts). */
const ORIGIN = /^([A-Za-z]+):\/\/([^:/]+)(?::([0-9]+))?$/

/**
 * A publishable key's allowed origins as a browser sends them in `Origin` (RFC 6454: scheme and host
 * in lower case, no default port), so that a key is never created that no page could use:
 * `https://Shop.Example.COM:443` becomes `https://shop.example.com`. A port that no origin can
 * carry (0, above 65535, or written with a leading zero, which a browser never sends) is refused.
 * Answers the origins (duplicates after normalising dropped) or the problems, naming `allowedOrigins`.
 */
export function normalizeAllowedOrigins (origins: readonly string[]): { origins: string[] } | { problems: ErrorDetail[] } {
  const problems: ErrorDetail[] = []
  const normalized = new Set<string>()
  origins.forEach((origin, i) => {
    const problem = originProblem(origin)
    if (problem !== null) problems.push({ path: ['allowedOrigins', i], message: `${problem} (${JSON.stringify(origin)})` })
    else normalized.add(new URL(origin).origin)
  })
  return problems.length > 0 ? { problems } : { origins: [...normalized] }
}

function originProblem (origin: string): string | null {
  const parts = ORIGIN.exec(origin)
  if (parts === null) return 'must be an origin, scheme://host[:port]'
  const port = parts[3]
  if (port !== undefined && (/^0./.test(port) || Number(port) < 1 || Number(port) > 65535)) {
    return 'has a port a browser never sends: 1 to 65535, without leading zeros'
  }
  let url: URL
  try {
    url = new URL(origin)
  } catch {
    return 'is not a valid origin'
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') return 'must be an http or https origin'
  return null
}
