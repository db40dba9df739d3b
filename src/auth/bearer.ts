import { unauthorized } from '../http-error.ts'

const BEARER = /^Bearer\s+(\S+)\s*$/i

/**
 * The token of an `Authorization: Bearer <token>` header: the scheme in any case (RFC 7235), one or
 * more spaces before the token, trailing spaces ignored. Throws 401 `missing_bearer` when the header
 * is absent, empty, of another scheme or holds no single token.
 */
export function bearerToken (header: string | undefined): string {
  const match = header ? BEARER.exec(header) : null
  if (!match) throw unauthorized('missing_bearer')
  return match[1]!
}
