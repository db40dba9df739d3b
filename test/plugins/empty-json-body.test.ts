import t from 'tap'
import { buildTestApp, newUser, randomId, sendEvent, shipped } from '../helpers/app.ts'

const app = await buildTestApp(t)
const json = { 'content-type': 'application/json' }

t.test('an empty JSON body on a route without a body schema is no body, not a 400', async (t) => {
  const user = await newUser(app)
  const key = await user.createKey()
  await sendEvent(app, key.secret, { agentId: randomId('empty-body-'), outcome: 'failed', toolExecuted: 'http', errorMessage: 'upstream 502' })
  await shipped(app)
  const [cluster] = (await app.inject({ url: '/v1/me/errors', headers: user.auth })).json().clusters
  const post = (url: string) => app.inject({ method: 'POST', url, headers: { ...user.auth, ...json }, payload: '' })

  const resolved = await post(`/v1/me/errors/${cluster.fingerprint}/resolve`)
  t.equal(resolved.statusCode, 200, resolved.body)
  t.match(resolved.json(), { fingerprint: cluster.fingerprint, status: 'resolved' })
  for (const action of ['acknowledge', 'snooze', 'unacknowledge']) {
    const res = await post(`/v1/me/alerts/${randomId('alert-')}/${action}`)
    t.equal(res.statusCode, 404, `${action}: the body is accepted and the alert looked up`)
  }
})

t.test('an empty JSON body on a route whose body may be left out is no body, not a 400', async (t) => {
  const user = await newUser(app)
  const created = await app.inject({ method: 'POST', url: '/v1/me/channels', headers: user.auth, payload: { kind: 'webhook', url: 'https://hooks.example.com/rotate' } })
  t.equal(created.statusCode, 201, created.body)
  const res = await app.inject({ method: 'POST', url: `/v1/me/channels/${created.json().id}/rotate-secret`, headers: { ...user.auth, ...json }, payload: '' })
  t.equal(res.statusCode, 200, res.body)
  t.match(res.json().secret, /^whsec_/, 'a new secret, the replaced one signing for the default 24 h')
})

t.test('an empty JSON body is still a 400 on a route that needs a body', async (t) => {
  const user = await newUser(app)
  const res = await app.inject({ method: 'POST', url: '/v1/me/keys', headers: { ...user.auth, ...json }, payload: '' })
  t.equal(res.statusCode, 400)
  t.match(res.json(), { error: String })
  const events = await app.inject({ method: 'POST', url: '/v1/events', headers: { authorization: 'Bearer x', ...json }, payload: '' })
  t.equal(events.statusCode >= 400 && events.statusCode < 500, true, 'ingestion still refuses an empty body')
})
