import fp from 'fastify-plugin'
import { loadSecretsKey, type SecretsKeySettings } from '../auth/secrets-key.ts'
import type { SecretBox } from '../domain/secret-box.ts'

declare module 'fastify' {
  interface FastifyInstance {
    /** Seals and opens the secrets stored in Postgres (notification channels' URLs, keys and signing secrets). */
    secrets: SecretBox
  }
}

/** The keyring of stored secrets (SECRETS_KEY, SECRETS_PREVIOUS_KEYS, or a key generated under DATA_DIR). */
export default fp(async function secrets (app, opts: SecretsKeySettings) {
  const { box, file } = loadSecretsKey(opts)
  // The key id (not the key) lets an operator check that a rotation is complete (docs/operations.md#secrets-at-rest).
  app.log.info({ keyId: box.currentKeyId, previousKeyIds: box.previousKeyIds, ...(file ? { file } : {}) }, `stored secrets are encrypted with key ${box.currentKeyId}`)
  app.decorate('secrets', box)
}, { name: 'secrets' })
