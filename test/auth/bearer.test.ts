import t from 'tap'
import { bearerToken } from '../../src/auth/bearer.ts'
import { HttpError } from '../../src/http-error.ts'

t.test('the token of a Bearer header, whatever the case of the scheme and the spaces around the token', async (t) => {
  t.equal(bearerToken('Bearer vk_abc'), 'vk_abc')
  t.equal(bearerToken('bearer vk_abc'), 'vk_abc')
  t.equal(bearerToken('BEARER vk_abc'), 'vk_abc')
  t.equal(bearerToken('Bearer \t  eyJ.a.b  '), 'eyJ.a.b')
})

t.test('no token is 401 missing_bearer', async (t) => {
  const headers = [undefined, '', 'Bearer', 'Bearer ', 'Bearer   ', 'Basic dXNlcjpwYXNz', 'Bearervk_abc', 'Bearer a b', ' Bearer vk_abc', 'Token vk_abc']
  for (const header of headers) {
    const err = t.throws(() => bearerToken(header), JSON.stringify(header)) as HttpError
    t.ok(err instanceof HttpError)
    t.equal(err.statusCode, 401)
    t.strictSame(err.body(), { error: 'unauthorized', reason: 'missing_bearer' })
  }
})
