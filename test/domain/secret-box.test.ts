import t from 'tap'
import { mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { randomBytes } from 'node:crypto'
import { SecretBox, UnreadableSecret, keyId, newKeyText, parseKey, sealedKeyId } from '../../src/domain/secret-box.ts'
import { loadSecretsKey, secretsKeyFile } from '../../src/auth/secrets-key.ts'

const key = () => randomBytes(32)
const PLACE = 'notification_channels.url:c1'

t.test('a sealed value opens with its place and key, and names its key', async (t) => {
  const k = key()
  const box = new SecretBox(k)
  const sealed = box.seal('https://hooks.slack.com/services/T0/B0/XYZ', PLACE)
  t.match(sealed, new RegExp(`^enc:v1:${keyId(k)}:[A-Za-z0-9_-]{16}:[A-Za-z0-9_-]+$`))
  t.notMatch(sealed, /hooks\.slack\.com/, 'the plaintext is not in the stored value')
  t.equal(sealedKeyId(sealed), keyId(k))
  t.equal(box.open(sealed, PLACE), 'https://hooks.slack.com/services/T0/B0/XYZ')
  t.not(box.seal('same', PLACE), box.seal('same', PLACE), 'a random nonce per value')
  t.equal(box.open('whsec_legacyvalue', PLACE), 'whsec_legacyvalue', 'a value stored in clear reads as it is')
})

t.test('a value does not open in another row or column, altered, or without its key', async (t) => {
  const box = new SecretBox(key())
  const sealed = box.seal('secret', PLACE)
  t.throws(() => box.open(sealed, 'notification_channels.url:c2'), UnreadableSecret, 'another row')
  t.throws(() => box.open(sealed, 'notification_channels.routing_key:c1'), UnreadableSecret, 'another column')
  const parts = sealed.split(':')
  const body = Buffer.from(parts[4]!, 'base64url')
  body[0] = body[0]! ^ 1
  t.throws(() => box.open([...parts.slice(0, 4), body.toString('base64url')].join(':'), PLACE), { message: /does not decrypt with key/ }, 'altered')
  const other = new SecretBox(key())
  t.throws(() => other.open(sealed, PLACE), { name: 'UnreadableSecret', message: /encrypted with key [0-9a-f]{12}, which is neither SECRETS_KEY nor in SECRETS_PREVIOUS_KEYS/ })
  t.throws(() => box.open('enc:v1:abc', PLACE), { message: 'the stored value is not a sealed value' })
})

t.test('previous keys open, never seal; values under them need sealing again', async (t) => {
  const old = key()
  const current = key()
  const before = new SecretBox(old).seal('secret', PLACE)
  const rotated = new SecretBox(current, [old])
  t.equal(rotated.open(before, PLACE), 'secret')
  t.ok(rotated.needsSealing(before))
  t.ok(rotated.needsSealing('in clear'))
  const after = rotated.seal('secret', PLACE)
  t.equal(sealedKeyId(after), keyId(current), 'sealed with the current key')
  t.notOk(rotated.needsSealing(after))
  t.same(rotated.previousKeyIds, [keyId(old)])
})

t.test('keys are 32 bytes of base64', async (t) => {
  t.equal(parseKey(newKeyText(), 'SECRETS_KEY').length, 32)
  t.throws(() => parseKey(Buffer.alloc(16).toString('base64'), 'SECRETS_KEY'), { message: /^SECRETS_KEY must be 32 random bytes in base64 \(make one with: openssl rand -base64 32\)$/ })
  t.throws(() => parseKey('not base64 at all!', 'SECRETS_KEY'))
})

t.test('the key of an embedded instance is generated once under DATA_DIR, mode 0600', async (t) => {
  const dataDir = mkdtempSync(join(tmpdir(), 'secrets-key-'))
  t.teardown(() => rmSync(dataDir, { recursive: true, force: true }))
  const first = loadSecretsKey({ dataDir, key: undefined, previousKeys: [], required: false })
  t.equal(first.file, secretsKeyFile(dataDir))
  t.equal(statSync(first.file!).mode & 0o777, 0o600)
  const again = loadSecretsKey({ dataDir, key: undefined, previousKeys: [], required: false })
  t.equal(again.box.currentKeyId, first.box.currentKeyId, 'read back on the next start')
  t.equal(again.box.open(first.box.seal('x', PLACE), PLACE), 'x')
  const configured = newKeyText()
  const set = loadSecretsKey({ dataDir, key: configured, previousKeys: [readFileSync(first.file!, 'utf8').trim()], required: true })
  t.equal(set.file, undefined)
  t.equal(set.box.currentKeyId, keyId(Buffer.from(configured, 'base64')), 'SECRETS_KEY when set')
  t.equal(set.box.open(first.box.seal('y', PLACE), PLACE), 'y', 'the generated key as a previous key still opens')
})

t.test('with CLICKHOUSE_URL (instances sharing Postgres) a missing SECRETS_KEY stops the start, naming it', async (t) => {
  const dataDir = mkdtempSync(join(tmpdir(), 'secrets-key-'))
  t.teardown(() => rmSync(dataDir, { recursive: true, force: true }))
  t.throws(() => loadSecretsKey({ dataDir, key: undefined, previousKeys: [], required: true }), {
    name: 'StartupError',
    message: /^SECRETS_KEY is required when CLICKHOUSE_URL is set .*openssl rand -base64 32/,
  })
  t.throws(() => statSync(secretsKeyFile(dataDir)), 'no key was generated')
  t.throws(() => loadSecretsKey({ dataDir, key: undefined, previousKeys: ['short'], required: false }), { name: 'StartupError', message: /^SECRETS_PREVIOUS_KEYS \(key 1\) must be 32 random bytes/ })
})
