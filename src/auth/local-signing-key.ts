import { exportJWK, generateKeyPair, importJWK, SignJWT, type JWK } from 'jose'
import { readFileSync, writeFileSync, existsSync } from 'node:fs'
import { join } from 'node:path'
import { makeDirs } from '../data-dir.ts'

/** Issuer and audience of tokens signed with the local key; a configured provider never accepts them. */
export const LOCAL_ISSUER = 'agent-telemetry-local'
export const LOCAL_AUDIENCE = 'agent-telemetry-dashboard'
/** The one algorithm of the local key; tokens naming any other are refused. */
export const LOCAL_ALG = 'ES256'

type Key = Awaited<ReturnType<typeof importJWK>>

export interface LocalSigningKey {
  privateKey: Key
  publicKey: Key
}

/** Where the local key of a DATA_DIR is kept. */
export function localSigningKeyPath (dataDir: string): string {
  return join(dataDir, 'auth', 'local-signing-key.json')
}

/**
 * The local ES256 key pair under DATA_DIR/auth, created on first use with file mode 0600. It is used
 * only when no identity provider is configured, and its public half is never served.
 */
export async function loadLocalSigningKey (dataDir: string): Promise<LocalSigningKey> {
  const path = localSigningKeyPath(dataDir)
  if (!existsSync(path)) {
    const { privateKey } = await generateKeyPair(LOCAL_ALG, { extractable: true })
    const jwk = await exportJWK(privateKey)
    makeDirs(join(dataDir, 'auth'), 0o700)
    try {
      writeFileSync(path, JSON.stringify({ ...jwk, alg: LOCAL_ALG }), { mode: 0o600, flag: 'wx' })
    } catch (err) {
      // Another process wrote it first: use theirs.
      if ((err as { code?: string }).code !== 'EEXIST') throw err
    }
  }
  const jwk = JSON.parse(readFileSync(path, 'utf8')) as JWK
  const { d: _d, ...publicJwk } = jwk
  return {
    privateKey: await importJWK(jwk, LOCAL_ALG),
    publicKey: await importJWK(publicJwk, LOCAL_ALG),
  }
}

/** Signs a dashboard token for a subject with the local key (what `npm run token` prints). */
export async function signLocalToken (key: LocalSigningKey, subject: string, ttlSeconds = 3600): Promise<string> {
  return new SignJWT({})
    .setProtectedHeader({ alg: LOCAL_ALG })
    .setSubject(subject)
    .setIssuer(LOCAL_ISSUER)
    .setAudience(LOCAL_AUDIENCE)
    .setIssuedAt()
    .setExpirationTime(`${ttlSeconds}s`)
    .sign(key.privateKey)
}
