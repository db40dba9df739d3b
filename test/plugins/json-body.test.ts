import t from 'tap'
import Fastify from 'fastify'
import { gzipSync } from 'node:zlib'
import errors from '../../src/plugins/error-handler.ts'
import jsonBody from '../../src/plugins/json-body.ts'

/** A bare app with the service's JSON body parser and one route whose body has independent items. */
async function appWith (options: { onProtoPoisoning?: 'error' | 'remove' | 'ignore' } = {}) {
  const app = Fastify({ logger: false, ...options })
  await app.register(errors)
  await app.register(jsonBody)
  app.post('/items', { config: { jsonItems: 'events' } }, async (request) => ({ text: request.jsonItemsText }))
  app.post('/plain', async (request) => ({ text: request.jsonItemsText }))
  return app
}

t.test('the body text is kept for a route with items, exactly as sent, and only there', async (t) => {
  const app = await appWith()
  t.teardown(() => app.close())
  const body = '\ufeff{"events": [ {"a": 1}, {"b": "\\u00e9"} ]}'
  const items = await app.inject({ method: 'POST', url: '/items', headers: { 'content-type': 'application/json' }, payload: body })
  t.equal(items.statusCode, 200, items.body)
  t.same(items.json().text, { text: body, key: 'events' }, 'byte for byte, whitespace and byte order mark included, with the items\' key')
  const plain = await app.inject({ method: 'POST', url: '/plain', headers: { 'content-type': 'application/json' }, payload: body })
  t.equal(plain.json().text, null, 'not for other routes')
})

t.test('no text is kept when the parser removes poisoned keys: the body is then not what JSON.parse makes of it', async (t) => {
  const app = await appWith({ onProtoPoisoning: 'remove' })
  t.teardown(() => app.close())
  const res = await app.inject({ method: 'POST', url: '/items', headers: { 'content-type': 'application/json' }, payload: '{"events": [{"__proto__": {"x": 1}, "a": 1}]}' })
  t.equal(res.statusCode, 200, res.body)
  t.equal(res.json().text, null)
})

t.test('a body with a Content-Encoding is a 415 saying so, not invalid JSON nor taken as plain', async (t) => {
  const app = await appWith()
  t.teardown(() => app.close())
  const json = '{"events": []}'
  for (const [encoding, payload] of [['gzip', gzipSync(json)], ['br', json], ['GZIP ', gzipSync(json)]] as const) {
    const res = await app.inject({ method: 'POST', url: '/plain', headers: { 'content-type': 'application/json', 'content-encoding': encoding }, payload })
    t.equal(res.statusCode, 415, encoding)
    t.same(res.json(), { error: 'unsupported_media_type', message: `send the JSON body without Content-Encoding (${encoding.trim().toLowerCase()} is not taken here)` })
  }
  const identity = await app.inject({ method: 'POST', url: '/plain', headers: { 'content-type': 'application/json', 'content-encoding': 'identity' }, payload: json })
  t.equal(identity.statusCode, 200, 'identity is no encoding')
})

t.test('a JSON body declared in a charset other than UTF-8 is a 415 naming it, not text read wrongly', async (t) => {
  const app = await appWith()
  t.teardown(() => app.close())
  const latin1 = Buffer.from('{"events": ["caf\u00e9"]}', 'latin1')
  for (const [type, charset] of [['application/json; charset=latin1', 'latin1'], ['application/json;charset="ISO-8859-1"', 'iso-8859-1'], ['application/json; Charset = windows-1252; x=1', 'windows-1252']] as const) {
    const res = await app.inject({ method: 'POST', url: '/plain', headers: { 'content-type': type }, payload: latin1 })
    t.equal(res.statusCode, 415, type)
    t.same(res.json(), { error: 'unsupported_media_type', message: `send the JSON body as UTF-8 (charset=${charset} is not taken here)` })
  }
  for (const type of ['application/json; charset=utf-8', 'application/json; charset="UTF-8"', 'application/json;charset=utf8', 'application/json; boundary=x',
    'application/json; charset=', 'application/json; charset=""', 'application/json; charset=US-ASCII', "application/json; charset='utf-8'", 'application/json; x="a;charset=latin1"']) {
    const res = await app.inject({ method: 'POST', url: '/plain', headers: { 'content-type': type }, payload: '{"events": ["caf\u00e9"]}' })
    t.equal(res.statusCode, 200, type)
  }
  const quotedOther = await app.inject({ method: 'POST', url: '/plain', headers: { 'content-type': 'application/json; x="a;b"; charset="latin1"' }, payload: latin1 })
  t.same(quotedOther.json().message, 'send the JSON body as UTF-8 (charset=latin1 is not taken here)', 'a charset after a quoted parameter is found, named without its quotes')
  const empty = await app.inject({ method: 'POST', url: '/plain', headers: { 'content-type': 'application/json; charset=latin1' }, payload: '' })
  t.equal(empty.statusCode, 200, 'no body: nothing to read in the wrong charset')
})
