/**
 * Prints a dashboard token for a named user, signed with the local key under DATA_DIR, on stdout
 * (so `TOKEN=$(npm run -s token -- alice)` works), and on stderr the web UI URL that signs in with it
 * (`http://127.0.0.1:3000/#token=…`; a URL fragment never reaches the server or its logs).
 *   npm run token -- alice [--ttl SECONDS]
 * Refuses when AUTH_JWKS_URL is set: with an identity provider, tokens come from the provider.
 * It changes no database: the user is created by the token's first request, as any new user is. When
 * DATA_DIR holds no key yet it creates one (the service, started on that DATA_DIR, uses it) and says
 * so on stderr, naming the file: a service running on another DATA_DIR would refuse the token.
 */
import { existsSync } from 'node:fs'
import { cliArgs, usageError } from './args.ts'
import { loadConfig } from '../config.ts'
import { loadLocalSigningKey, localSigningKeyPath, signLocalToken } from '../auth/local-signing-key.ts'

const USAGE = 'usage: npm run token -- <user-name> [--ttl seconds]'
const { positionals, values } = cliArgs({ allowPositionals: true, options: { ttl: { type: 'string', default: '3600' } } }, {
  usage: USAGE,
  about: 'Prints a dashboard token for a named user, signed with the local key under DATA_DIR, and the web UI address that signs in with it.',
})
const subject = positionals[0]
const ttl = Number(values.ttl)
if (!subject) usageError(USAGE, 'name the user')
if (!Number.isInteger(ttl) || ttl <= 0) usageError(USAGE, '--ttl must be a whole number of seconds above 0')
const config = loadConfig()
if ('jwksUrl' in config.auth) {
  console.error('AUTH_JWKS_URL is set: dashboard tokens come from the identity provider, and this service would refuse a local one.')
  process.exit(2)
}
const keyFile = localSigningKeyPath(config.dataDir)
const newKey = !existsSync(keyFile)
const token = await signLocalToken(await loadLocalSigningKey(config.dataDir), subject, ttl)
if (newKey) process.stderr.write(`created a new signing key ${keyFile}: only a service running with DATA_DIR=${config.dataDir} accepts this token\n`)
process.stdout.write(token + '\n')
process.stderr.write(`open the dashboard: ${dashboardUrl(config.host, config.port)}#token=${token}\n`)

/** Where a browser on this machine reaches the service (a wildcard listen address is reached on loopback). */
function dashboardUrl (host: string, port: number): string {
  const reachable = host === '0.0.0.0' || host === '' ? '127.0.0.1' : host === '::' ? '::1' : host
  return `http://${reachable.includes(':') ? `[${reachable}]` : reachable}:${port}/`
}
