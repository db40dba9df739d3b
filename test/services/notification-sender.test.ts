import t from 'tap'
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { NotificationSender } from '../../src/services/notification-sender.ts'

// The sender against a real local receiver (private addresses allowed, as for local use).
const server = createServer((req, res) => {
  req.resume()
  req.on('end', () => {
    if (req.url === '/moved') res.writeHead(301, { location: 'https://hooks.example.com/moved' }).end()
    else if (req.url === '/bare') res.writeHead(302).end()
    else res.writeHead(200).end('ok')
  })
})
await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
t.teardown(() => new Promise((resolve) => server.close(resolve)))
const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
const sender = new NotificationSender({ allowPrivateNetworks: true })
t.teardown(() => sender.close())
const send = (path: string) => sender.send({ url: `${base}${path}`, headers: {}, body: '{}' })

t.test('a redirect is a failure that says where it points, so the channel can be given that address', async (t) => {
  t.match(await send('/moved'), { ok: false, statusCode: 301, error: 'HTTP 301 to https://hooks.example.com/moved (redirects are not followed: use that address)' })
  t.match(await send('/bare'), { ok: false, statusCode: 302, error: 'HTTP 302' }, 'without a Location, the status alone')
  t.match(await send('/ok'), { ok: true, statusCode: 200, error: null })
})
