import t from 'tap'
import { createServer, type IncomingMessage } from 'node:http'
import type { AddressInfo } from 'node:net'
import { createClient } from '@clickhouse/client'
import { EventsRepository, INSERT_COLUMNS } from '../../src/storage/events-repository.ts'

t.test('with a ClickHouse server, a block is sent as its bytes, under its deduplication token and insert settings', async (t) => {
  const requests: { url: string; body: Buffer }[] = []
  const server = createServer((req: IncomingMessage, res) => {
    const chunks: Buffer[] = []
    req.on('data', (c: Buffer) => chunks.push(c))
    req.on('end', () => {
      requests.push({ url: req.url ?? '', body: Buffer.concat(chunks) })
      res.writeHead(200, { 'content-type': 'text/plain' }).end()
    })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.teardown(() => new Promise((resolve) => server.close(resolve)))
  const client = createClient({ url: `http://127.0.0.1:${(server.address() as AddressInfo).port}` })
  t.teardown(() => client.close())

  const body = Buffer.from('["evt_1","u","a"]\n["evt_2","u","ä"]\n')
  await new EventsRepository(client).insertBlock(body, 'log1:5-6')
  t.equal(requests.length, 1)
  const query = new URL(requests[0]!.url, 'http://x').searchParams.get('query') ?? ''
  t.match(query, `INSERT INTO events (${INSERT_COLUMNS.join(', ')})`)
  t.match(query, "insert_deduplication_token = 'log1:5-6'")
  t.match(query, 'deduplicate_blocks_in_dependent_materialized_views = 1')
  t.match(query, 'input_format_json_compact_allow_variable_number_of_columns = 1')
  t.match(query, 'input_format_json_read_objects_as_strings = 1', 'objects in String columns are stored as their text')
  t.match(query, /FORMAT JSONCompactEachRow$/)
  t.same(requests[0]!.body, body, 'the body is the block, byte for byte')
  await t.rejects(new EventsRepository(client).insertBlock(body, "x' OR 1"), /invalid deduplication token/)
  t.equal(requests.length, 1, 'a token that is not one is never sent')
})
