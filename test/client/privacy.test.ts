import t from 'tap'
import { applyPrivacy, luhn, scrubText, SCRUBBERS } from '../../client/src/privacy.ts'

// What each privacy level lets leave the process (docs/client.md lists the same).

const scrub = (s: string) => scrubText(s, { n: 0 })

// Test credentials built at run time, so no scanner mistakes this file for a leak.
const OPENAI = 'sk-proj-' + 'A1b2C3d4'.repeat(6)
const ANTHROPIC = 'sk-ant-api03-' + 'Zz9_'.repeat(20) + 'AA'
const AWS = 'AKIA' + 'IOSFODNN7ABCDEFG'
const GITHUB = 'ghp_' + 'a1B2'.repeat(9)
const SLACK = 'xoxb-' + '1234567890-1234567890-' + 'abcdEFGH'.repeat(3)
const STRIPE = 'sk_live_' + 'x9Y8'.repeat(6)
const GOOGLE = 'AIza' + 'SyA1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6q'
const JWT = 'eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U'
const OURS = 'vk_' + 'live_0123456789abcdef'
const NPM = 'npm_' + 'a1B2c3D4e5'.repeat(3) + 'F6g7H8'
const GITLAB = 'glpat-' + 'x1Y2z3'.repeat(4)
const SLACK_HOOK = 'https://hooks.slack.com/services/' + 'T0000/B0000/' + 'XXXXxxxx'.repeat(3)

t.test('standard: each credential and personal datum of the documented list is replaced', async (t) => {
  const cases: [string, string][] = [
    [`key ${OPENAI} here`, 'openai_key'], [`key=${ANTHROPIC}`, 'anthropic_key'], [`aws ${AWS}`, 'aws_access_key'], [`token ${GITHUB}.`, 'github_token'],
    [`slack ${SLACK}`, 'slack_token'], [`stripe ${STRIPE}`, 'stripe_key'], [`google ${GOOGLE}`, 'google_api_key'], [`auth ${JWT}`, 'jwt'],
    [`our key ${OURS}`, 'agent_telemetry_key'], ['hf_' + 'abcdefghij'.repeat(3) + 'XY', 'huggingface_token'],
    ['groq gsk_' + 'Abc123'.repeat(5), 'groq_key'], ['xai xai-' + 'Abc123'.repeat(5), 'xai_key'],
    ['Authorization: Bearer abcdefghijklmnop.qrstuvwx', 'bearer_token'], ['Authorization: Basic ' + btoa('admin:hunter2'), 'basic_auth'], ['postgres://app:s3cret@db.internal:5432/x', 'url_credentials'],
    ['mail alice.smith+tag@example.co.uk now', 'email'], ['card 4111 1111 1111 1111 exp', 'card_number'], ['card 4111-1111-1111-1111', 'card_number'],
    ['amex 378282246310005', 'card_number'], ['call +44 20 7946 0958', 'phone'], ['call (415) 555-2671', 'phone'], ['call 415-555-2671', 'phone'],
    ['-----BEGIN RSA PRIVATE KEY-----\nMIIEow\n-----END RSA PRIVATE KEY-----', 'private_key'],
    [`npm ${NPM}`, 'npm_token'], [`gitlab ${GITLAB}`, 'gitlab_token'], [`post to ${SLACK_HOOK} now`, 'slack_webhook'],
    ['ssn 123-45-6789', 'ssn'], ['pay to DE89 3704 0044 0532 0130 00 today', 'iban'], ['iban GB82WEST12345698765432', 'iban'],
    ['card 4111.1111.1111.1111', 'card_number'],
  ]
  for (const [text, label] of cases) t.match(scrub(text), `[redacted:${label}]`, `${label}: ${text.slice(0, 30)}`)
  t.equal(new Set(cases.map(([, l]) => l)).size, SCRUBBERS.length, 'every rule has a case')
})

t.test('standard: short bearer tokens, addresses in any script or at localhost, fullwidth forms', async (t) => {
  const cases: [string, string][] = [
    ['Authorization: Bearer abc.def-ghi_jkl', 'Authorization: [redacted:bearer_token]'], ['Bearer x1', '[redacted:bearer_token]'],
    ['authorization: bearer abc', 'authorization: [redacted:bearer_token]'], ['-H "Authorization: Basic dXNlcjpwYXNz"', '-H "Authorization: [redacted:basic_auth]"'],
    ['mail 张伟@例子.中国 now', 'mail [redacted:email] now'], ['jose@café.fr', '[redacted:email]'], ['üser@exämple.de.', '[redacted:email].'],
    ['ssh jane@localhost', 'ssh [redacted:email]'], ['write to jane＠example.com…', 'write to [redacted:email]…'],
    ['card ４１１１ １１１１ １１１１ １１１１ — ok', 'card [redacted:card_number] — ok'], ['jane﹫example.org', '[redacted:email]'],
    // A card beside other digits: its expiry and code, a reference before it; Basic after a word of its own.
    ['Card: 4111 1111 1111 1111 12/27 123', 'Card: [redacted:card_number] 12/27 123'], ['4111 1111 1111 1111 123', '[redacted:card_number] 123'],
    ['ref 12 4111 1111 1111 1111', 'ref 12 [redacted:card_number]'], ['order 1234 4111-1111-1111-1111', 'order 1234 [redacted:card_number]'],
    ['basic Basic dXNlcjpwYXNzd29yZA==', 'basic [redacted:basic_auth]'],
  ]
  for (const [text, expected] of cases) t.equal(scrub(text), expected, text)
  for (const text of ['use a Bearer token here', 'the bearer of bad news', 'Basic setup is easy', 'npm i react@latest', 'pkg@1.2.3', 'naïve café （注） text', '４１１１ １１１１ １１１１ １１１２']) {
    t.equal(scrub(text), text, `kept: ${text}`)
  }
})

t.test('standard: a value named as a secret is replaced whatever it looks like, in text and in fields', async (t) => {
  const cases: [string, string][] = [
    ['login with password=hunter2 now', 'login with password=[redacted:secret] now'],
    ['Server=db;Database=x;User Id=sa;Password=Pa55w0rd!;', 'Server=db;Database=x;User Id=sa;Password=[redacted:secret];'],
    ['export DB_PASSWORD=correct-horse', 'export DB_PASSWORD=[redacted:secret]'],
    ['Authorization: Token 0123456789abcdef', 'Authorization: Token [redacted:secret]'],
    ['-H "x-api-key: 9f8e7d6c5b4a"', '-H "x-api-key: [redacted:secret]"'],
    ['{"authorization": "bearer abc123def"}', '{"authorization": "bearer [redacted:secret]"}'],
    ['{"password": "hunter2", "user": "bob"}', '{"password": "[redacted:secret]", "user": "bob"}'],
    ['DefaultEndpointsProtocol=https;AccountName=acct;AccountKey=c2VjcmV0a2V5PT0=;', 'DefaultEndpointsProtocol=https;AccountName=acct;AccountKey=[redacted:secret];'],
    ['aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY', 'aws_secret_access_key = [redacted:secret]'],
    ['client_secret: s3cr3t-value', 'client_secret: [redacted:secret]'],
  ]
  for (const [text, expected] of cases) t.equal(scrub(text), expected, text)
  for (const text of ['max_tokens=100', 'tokens: 1500', 'the secretary: Jane', 'press the key: enter', 'token_count=5', 'passes: 3', 'a keyboard: qwerty']) {
    t.equal(scrub(text), text, `kept: ${text}`)
  }
  const e: Record<string, unknown> = {
    input: { dbPassword: 'hunter2', apiKey: 'abc', nested: [{ accessToken: 'xyz', token: 'Hello', logprob: -0.1 }], password: '' },
    metadata: { client_secret: 'shh', note: 'fine', sessionId: 's1' },
  }
  t.equal(applyPrivacy(e, 'standard'), 4)
  t.same(e, {
    input: { dbPassword: '[redacted:secret]', apiKey: '[redacted:secret]', nested: [{ accessToken: '[redacted:secret]', token: 'Hello', logprob: -0.1 }], password: '' },
    metadata: { client_secret: '[redacted:secret]', note: 'fine', sessionId: 's1' },
  }, 'fields named as secrets lose their value; a tokenizer\'s `token` is content, kept')
})

t.test('standard: keys are scrubbed as values are, and never overwrite one another', async (t) => {
  const e: Record<string, unknown> = {
    input: { context: { 'jane@example.com': { plan: 'pro' }, 'bob@example.com': 2, ok: 3 } },
    metadata: { 'jane@example.com': 'x', 'ann@example.com': 'y', keep: 'z', traceId: 't' },
  }
  t.equal(applyPrivacy(e, 'standard'), 4)
  t.same(e, {
    input: { context: { '[redacted:email]': { plan: 'pro' }, '[redacted:email]#2': 2, ok: 3 } },
    metadata: { keep: 'z', traceId: 't', '[redacted:email]': 'x', '[redacted:email]#2': 'y' },
  })
})

t.test('standard leaves look-alikes that are not data', async (t) => {
  for (const text of ['card 4111 1111 1111 1112 (checksum fails)', 'version 1.2.3.4', 'at 2026-05-01T10:00:00+05:30', 'took 1234567 ms',
    'order 12345', 'sk-short', '1 2 3 4 5 6 7 8 9 1 2 3 4 5 6 7 8 9 0', '1 2 3 4 5 6 7 8 9 1 2 3 4 5 6 7 8 9 4', 'see https://example.com/a/b', 'id 550e8400-e29b-41d4-a716-446655440000', 'ts 1714557600000']) {
    t.equal(scrub(text), text, text)
  }
  t.ok(luhn('4111111111111111'))
  t.notOk(luhn('4111111111111112'))
})

const rich = () => ({
  agentId: 'support-bot', type: 'tool', toolExecuted: 'send_email', toolsConsidered: ['search'], model: 'gpt-4o', outcome: 'failed', durationMs: 120,
  input: { prompt: 'Email alice@example.com my card 4111111111111111', context: { file: '/home/alice/notes.txt', key: OPENAI } },
  reasoning: 'The user alice@example.com asked…', errorMessage: `ENOENT: /home/alice/project/secrets.env with ${OPENAI}`,
  metadata: {
    traceId: '4111111111111111', spanId: 's1', sessionId: 'alice@example.com', privacyLevel: 'standard', tokensBreakdown: { inputBase: 1200, output: 300 },
    provider: 'openai', cwd: '/home/alice/project', git: { branch: 'main', remote: 'https://alice:hunter22@git.example.com/x' }, custom: { phone: '+1 415 555 2671' }, tool: 'claude-code',
  },
})

t.test('full: sent as is', async (t) => {
  const e = rich()
  t.equal(applyPrivacy(e, 'full'), 0)
  t.same(e, rich())
})

t.test('standard: free text scrubbed everywhere, identifiers, numbers, tokens and cost inputs kept', async (t) => {
  const e = rich()
  const n = applyPrivacy(e, 'standard')
  t.equal(e.input.prompt, 'Email [redacted:email] my card [redacted:card_number]')
  t.equal(e.input.context.key, '[redacted:openai_key]')
  t.equal(e.input.context.file, '/home/alice/notes.txt', 'paths are content at this level, kept')
  t.equal(e.reasoning, 'The user [redacted:email] asked…')
  t.match(e.errorMessage, '[redacted:openai_key]')
  t.same(e.metadata.git, { branch: 'main', remote: 'https://[redacted:url_credentials]@git.example.com/x' })
  t.same(e.metadata.custom, { phone: '[redacted:phone]' })
  t.same(e.metadata.tokensBreakdown, { inputBase: 1200, output: 300 })
  t.equal(e.metadata.traceId, '4111111111111111', 'ids are never scrubbed, even card-like ones')
  t.equal(e.metadata.sessionId, 'alice@example.com', 'nor is the session id the agent chose')
  t.match(e, { agentId: 'support-bot', model: 'gpt-4o', toolExecuted: 'send_email', durationMs: 120, metadata: { provider: 'openai', tool: 'claude-code' } })
  t.equal(n, 7)
})

t.test('minimal: no prompt, context, reasoning, paths, working directory, git or free-form metadata', async (t) => {
  const e: Record<string, unknown> & ReturnType<typeof rich> = rich()
  applyPrivacy(e, 'minimal')
  t.notOk('input' in e)
  t.notOk('reasoning' in e)
  t.same(Object.keys(e.metadata).sort(), ['privacyLevel', 'provider', 'sessionId', 'spanId', 'tokensBreakdown', 'tool', 'traceId'])
  t.equal(e.errorMessage, 'ENOENT: [redacted:path] with [redacted:openai_key]', 'the error message stays for error clusters, without paths or secrets')
  t.match(e, { agentId: 'support-bot', type: 'tool', toolExecuted: 'send_email', model: 'gpt-4o', outcome: 'failed', durationMs: 120, metadata: { tokensBreakdown: { inputBase: 1200, output: 300 } } })
})

t.test('minimal: relative paths with a file\'s name, and Windows paths with spaces, leave the error message', async (t) => {
  const cases: [string, string][] = [
    ["ENOENT: open 'config/secret.env'", "ENOENT: open '[redacted:path]'"],
    ['cannot read C:\\Users\\Jane Doe\\key.pem', 'cannot read [redacted:path]'],
    ['failed at ./src/app.ts:12', 'failed at [redacted:path]:12'],
    ['stat /var/lib/app/data.db failed', 'stat [redacted:path] failed'],
  ]
  for (const [message, expected] of cases) {
    const e: Record<string, unknown> = { errorMessage: message }
    applyPrivacy(e, 'minimal')
    t.equal(e.errorMessage, expected, message)
  }
  for (const message of ['I/O error', 'expected application/json', 'read/write failed', 'timeout after 1.5s', 'HTTP/1.1 503', 'v1.2.3 broke', 'and/or retry.later']) {
    const e: Record<string, unknown> = { errorMessage: message }
    applyPrivacy(e, 'minimal')
    t.equal(e.errorMessage, message, `kept: ${message}`)
  }
})

t.test('minimal: file paths leave no tool name either; a namespaced name is kept', async (t) => {
  const paths: [string, string][] = [
    ['read /home/bob/secret', 'read [redacted:path]'], ['cat ~/.ssh/id_rsa', 'cat [redacted:path]'], ['open ./notes/x.md', 'open [redacted:path]'],
    ['edit src/app.ts', 'edit [redacted:path]'], ['type C:\\Users\\bob\\x.txt', 'type [redacted:path]'], ['bash -c "cat /etc/passwd"', 'bash -c "cat [redacted:path]"'],
    [`curl -H "x-key: ${OPENAI}"`, 'curl -H "x-key: [redacted:openai_key]"'],
  ]
  for (const [name, expected] of paths) {
    const e: Record<string, unknown> = { toolExecuted: name, toolsConsidered: ['search', name], metadata: {} }
    t.ok(applyPrivacy(e, 'minimal') >= 2, name)
    t.same(e, { toolExecuted: expected, toolsConsidered: ['search', expected], metadata: {} }, name)
  }
  for (const name of ['Read', 'mcp__github__create_issue', 'github/create_issue', 'ns/group/tool', '/review', 'web_search']) {
    const e = { toolExecuted: name, toolsConsidered: [name] }
    t.equal(applyPrivacy(e, 'minimal'), 0, name)
    t.same(e, { toolExecuted: name, toolsConsidered: [name] }, name)
  }
  const long = { toolExecuted: 'read ' + '/a/b '.repeat(39) }
  applyPrivacy(long, 'minimal')
  t.equal(long.toolExecuted.length, 200, 'cut to what the service takes when the replacements made it longer')
  const std = { toolExecuted: 'read /home/bob/secret' }
  applyPrivacy(std, 'standard')
  t.equal(std.toolExecuted, 'read /home/bob/secret', 'standard keeps paths, as everywhere')
})

t.test('standard: names people write (tools, spans) lose credentials and personal data, as text does; never more than minimal sends', async (t) => {
  const e: Record<string, unknown> = {
    toolExecuted: 'email jane@example.com', toolsConsidered: ['search', `curl -H "x-key: ${OPENAI}"`],
    metadata: { spanName: 'summarise /home/bob/a.pdf for jane@example.com', tool: 'Bearer abcdefghijklmnop', traceId: 'jane@example.com' },
  }
  t.equal(applyPrivacy(e, 'standard'), 4)
  t.same(e, {
    toolExecuted: 'email [redacted:email]', toolsConsidered: ['search', 'curl -H "x-key: [redacted:openai_key]"'],
    metadata: { spanName: 'summarise /home/bob/a.pdf for [redacted:email]', tool: '[redacted:bearer_token]', traceId: 'jane@example.com' },
  }, 'paths stay at standard; identifiers (traceId) are never scrubbed')
  for (const name of ['Read', 'mcp__github__create_issue', 'github/create_issue', 'web_search']) {
    const plain = { toolExecuted: name }
    t.equal(applyPrivacy(plain, 'standard'), 0, `${name} is left as it is`)
  }
  const minimal: Record<string, unknown> = { metadata: { tool: 'Bearer abcdefghijklmnop /home/bob/x' } }
  applyPrivacy(minimal, 'minimal')
  t.same(minimal, { metadata: { tool: '[redacted:bearer_token] [redacted:path]' } }, 'minimal scrubs metadata.tool as a tool name')
})

t.test('scrubbing stays linear on long hostile text', async (t) => {
  // Each of these would take seconds with an unbounded pattern; the test fails by its timeout.
  for (const text of ['a'.repeat(200_000) + '@', '1 '.repeat(100_000), 'sk-' + '-'.repeat(200_000), 'eyJ' + 'a'.repeat(200_000) + '.', '+1' + ' 12'.repeat(70_000),
    'Bearer ' + 'a'.repeat(200_000), 'Authorization:' + ' '.repeat(200_000) + 'bearer x', 'Basic ' + 'QQ'.repeat(100_000), '＠４'.repeat(100_000), 'é'.repeat(200_000) + '@x']) {
    t.type(scrub(text), 'string')
  }
})
