import fp from 'fastify-plugin'

/**
 * Who changed it tells the caches: each cache of what a repository wrote subscribes here to the
 * repository's `onChanged`, so no route or service has to remember which cache a write makes stale.
 * Every drop reaches this instance, Redis and every other instance (over the invalidation bus), and
 * completes before the write's caller answers.
 */
export default fp(async function cacheInvalidation (app) {
  // Ingestion resolves a renamed or deleted agent afresh at once on every instance; publishing,
  // hiding, renaming or deleting one shows in the public reads at once (a private agent's rename or
  // deletion drops them too: rare, and cheaper than asking whether it was public).
  app.agents.onChanged(async (change) => {
    const renamed = change.kind === 'updated' && change.fields.includes('displayName')
    if (change.kind === 'deleted' || renamed) await app.forgetAgents(change.ownerId)
    if (change.kind === 'deleted' || renamed || change.fields.includes('isPublic')) await app.publicService.registryChanged()
  })
  // A revoked key is refused at once on every instance.
  app.keys.onChanged((change) => app.forgetKey(change.secretHash))
  // The user as /v1/me sees it (handle, tier) is read afresh on every instance.
  app.users.onChanged((change) => app.bus.publish('user', change.subject))
  // Events ingested after a price change are priced by it.
  app.modelPrices.onChanged((change) => app.forgetModelPrices(change.userId))
}, { name: 'cache-invalidation', dependencies: ['repositories', 'redis', 'ingestion', 'api-key-auth', 'user-auth', 'services'] })
