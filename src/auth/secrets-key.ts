import { readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { SecretBox, newKeyText, parseKey } from '../domain/secret-box.ts'
import { StartupError } from '../startup-failure.ts'
import { makeDirs } from '../data-dir.ts'

export interface SecretsKeySettings {
  /** DATA_DIR: where a generated key lives. */
  dataDir: string
  /** SECRETS_KEY, base64 of 32 bytes; unset: generated, or refused when `required`. */
  key: string | undefined
  /** SECRETS_PREVIOUS_KEYS: keys that still open values, never seal. */
  previousKeys: string[]
  /** Several instances may share Postgres (CLICKHOUSE_URL is set): each must be given the same key. */
  required: boolean
}

export interface LoadedSecretsKey {
  box: SecretBox
  /** The file holding a generated key; undefined when SECRETS_KEY is set. */
  file: string | undefined
}

/** Where the generated key of an embedded instance lives. */
export const secretsKeyFile = (dataDir: string) => join(dataDir, 'secrets-key')

/**
 * The keyring that seals stored secrets: SECRETS_KEY when set; otherwise, on the embedded engine (one
 * instance per DATA_DIR), a key generated on first start into DATA_DIR/secrets-key (mode 0600) and read
 * back on every later start. When CLICKHOUSE_URL is set, instances share Postgres and a key generated
 * by one would not open what another sealed: SECRETS_KEY is then required.
 */
export function loadSecretsKey (s: SecretsKeySettings): LoadedSecretsKey {
  const previous = s.previousKeys.map((k, i) => parseOrRefuse(k, `SECRETS_PREVIOUS_KEYS (key ${i + 1})`))
  if (s.key) return { box: new SecretBox(parseOrRefuse(s.key, 'SECRETS_KEY'), previous), file: undefined }
  if (s.required) {
    throw new StartupError('SECRETS_KEY is required when CLICKHOUSE_URL is set (instances sharing Postgres must seal notification secrets with one key): ' +
      'make one with `openssl rand -base64 32` and give every instance the same value; see docs/operations.md#secrets-at-rest.')
  }
  const file = secretsKeyFile(s.dataDir)
  makeDirs(s.dataDir)
  try {
    writeFileSync(file, `${newKeyText()}\n`, { mode: 0o600, flag: 'wx' })
  } catch (err) {
    // Written on an earlier start (or by another process just now): use it.
    if ((err as { code?: string }).code !== 'EEXIST') throw err
  }
  return { box: new SecretBox(parseOrRefuse(readFileSync(file, 'utf8'), `the key in ${file}`), previous), file }
}

function parseOrRefuse (text: string, name: string): Buffer {
  try {
    return parseKey(text, name)
  } catch (err) {
    throw new StartupError((err as Error).message)
  }
}
