import fjsCompiler from '@fastify/fast-json-stringify-compiler'

const eager = fjsCompiler.SerializerSelector()

/**
 * Fastify's response serializers (fast-json-stringify), each compiled when its route first answers
 * with that status instead of when the route is added. Compiling all of them took about 1.5 s of CPU
 * at every start (some 60 routes, several statuses each), most of it for answers a process never
 * gives; the first answer of each kind now pays a few milliseconds instead. What a serializer writes
 * is unchanged: the same compiler, the same shared schemas, the same options. The contract test
 * (test/plugins/openapi.test.ts) compiles every route's answers, so a schema that does not compile
 * still fails the suite.
 */
export function lazySerializers (externalSchemas?: unknown, options?: fjsCompiler.Options): fjsCompiler.SerializerCompiler {
  const compile = eager(externalSchemas, options)
  return (route) => {
    let serialize: fjsCompiler.Serializer | undefined
    return (doc) => (serialize ??= compile(route))(doc)
  }
}
