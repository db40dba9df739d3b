import fp from 'fastify-plugin'
import swagger from '@fastify/swagger'
import swaggerUi from '@fastify/swagger-ui'
import pkg from '../../package.json' with { type: 'json' }

const DESCRIPTION = `Observability for AI agents and LLM applications. Agents send events to \`POST /v1/events\`
with an API key; dashboards read \`/v1/me/*\` with the identity provider's token; \`/v1/stats\`, \`/v1/agents\`,
\`/v1/explorer\`, \`/v1/x402\`, \`/v1/waitlist\` and \`/health\` need no authentication.

Every error has the body \`{ error, reason?, message?, details?, requestId? }\`. Lists of events, sessions,
traces, alerts, agents and channel deliveries are paged with an opaque \`cursor\` (the previous page's \`nextCursor\`).
Names in snake case (\`by_agent\`, \`by_model\`, \`by_day\`) and \`total\` are fixed by the service specification.`

/**
 * The API's OpenAPI 3.1 document, generated from the routes' schemas (every route declares them, from
 * schemas/), served at GET /openapi.json, and a browsable reference at /docs (Swagger UI, its assets
 * served from this process: no CDN). Both are public, like the API's shape itself. Registered before
 * the routes, so that it sees each of them.
 */
export default fp(async function openapi (app) {
  await app.register(swagger, {
    openapi: {
      openapi: '3.1.0',
      info: { title: 'Agent telemetry API', version: pkg.version, description: DESCRIPTION },
      tags: [
        { name: 'ingestion', description: 'Events in, with an API key (`Authorization: Bearer vk_…`)' },
        { name: 'dashboard', description: 'The caller\'s data, with a dashboard token (`Authorization: Bearer <JWT>`)' },
        { name: 'public', description: 'No authentication; nothing private or event content' },
        { name: 'health', description: 'Liveness' },
      ],
      components: {
        securitySchemes: {
          apiKey: { type: 'http', scheme: 'bearer', description: 'An API key: `vk_` + 43 characters, from POST /v1/me/keys' },
          dashboardToken: { type: 'http', scheme: 'bearer', bearerFormat: 'JWT', description: 'A token of the identity provider (ES256 or RS256), about 1 h' },
        },
      },
    },
    // A success response without a description of its own is described by its status.
    transformObject: (documentObject) => {
      if (!('openapiObject' in documentObject)) return documentObject.swaggerObject
      const openapiObject = documentObject.openapiObject
      const texts: Record<string, string> = { 200: 'OK', 201: 'Created', 202: 'Accepted', 204: 'No content', 207: 'One result per event' }
      for (const ops of Object.values(openapiObject.paths ?? {})) {
        for (const op of Object.values(ops ?? {}) as { responses?: Record<string, { description?: string }> }[]) {
          for (const [status, response] of Object.entries(op?.responses ?? {})) {
            if (response.description === 'Default Response' && texts[status]) response.description = texts[status]
          }
        }
      }
      return openapiObject
    },
    // Shared schemas (added with an $id) become components named by their title.
    refResolver: { buildLocalReference: (json, _baseUri, _fragment, i) => (typeof json.title === 'string' ? json.title : `def-${i}`) },
  })
  await app.register(swaggerUi, {
    routePrefix: '/docs',
    staticCSP: true,
    // Everything the page loads comes from here: no validator badge, no upgrade of a plain-HTTP local service.
    // Fonts and styles from this origin only (the package's default also allows any https origin).
    transformStaticCSP: (header) => header.replace(' validator.swagger.io', '').replace(' upgrade-insecure-requests;', '').replace(/ https:/g, ''),
    uiConfig: { deepLinking: true, docExpansion: 'list', validatorUrl: null },
  })
  app.get('/openapi.json', {
    schema: { hide: true, response: { 200: { type: 'object', additionalProperties: true } } },
  }, async () => app.swagger())
}, { name: 'openapi' })
