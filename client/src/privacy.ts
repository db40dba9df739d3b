/**
 * The spec's privacy levels, applied to an event before it leaves the process (docs/client.md lists
 * exactly what each removes):
 * - `full`: sent as is.
 * - `standard`: every string of the event, object keys included, is scrubbed of credentials and
 *   personal data (SCRUBBERS below) except the fields that are identifiers or names the service reads (IDENTIFIER_FIELDS);
 *   numbers are never touched, so token counts and cost inputs are kept.
 * - `minimal`: only what describes the event, never its content: the allowlisted fields
 *   (MINIMAL_FIELDS, MINIMAL_METADATA); no prompt, context, reasoning, file path, working directory,
 *   git context or free-form metadata. The error message is kept, scrubbed as in `standard` and with
 *   file paths replaced, because the service's error clusters are built from it; tool names
 *   (`toolExecuted`, `toolsConsidered`) and span names (`metadata.spanName`) likewise, as some
 *   agents put a command line there.
 */
export type PrivacyLevel = 'minimal' | 'standard' | 'full'

export const PRIVACY_LEVELS: readonly PrivacyLevel[] = ['minimal', 'standard', 'full']

/**
 * One scrubbing rule: the label of its replacement `[redacted:<label>]`, what it finds, a cheap gate
 * (a string or pattern any match contains, tested first, as gitleaks' keywords are) and an optional
 * check of a match (a card number's checksum).
 */
interface Scrubber {
  label: string
  pattern: string
  gate: string | readonly string[] | RegExp
  /** Whether the match is one (true), or how many of its first characters are (0: none). */
  check?: (match: string) => boolean | number
}

/** Luhn's checksum over the digits of `text`; card numbers have 13 to 19 digits. */
export function luhn (text: string): boolean {
  const digits = text.replace(/[^0-9]/g, '')
  if (digits.length < 13 || digits.length > 19) return false
  let sum = 0
  for (let i = 0; i < digits.length; i++) {
    let d = digits.charCodeAt(digits.length - 1 - i) - 48
    if (i % 2 === 1) { d *= 2; if (d > 9) d -= 9 }
    sum += d
  }
  return sum % 10 === 0
}

/**
 * How many first characters of a run of digit groups are a card number: the longest run of whole
 * groups with 13 to 19 digits that passes Luhn's check (`4111 1111 1111 1111 12/27` is a card and
 * its expiry month), or 0. Cards are printed in groups of 3 to 6 digits (or none), so a run holding
 * a shorter group (`1 2 3 …`) is none. A card after other digits (`ref 12 4111 …`) is found from a
 * later start.
 */
export function cardPrefix (match: string): number {
  let digits = ''
  let group = 0
  let longest = 0
  for (let i = 0; i < match.length; i++) {
    const c = match[i]!
    if (c < '0' || c > '9') continue
    digits += c
    group++
    const groupEnds = i + 1 === match.length || match[i + 1] === ' ' || match[i + 1] === '-' || match[i + 1] === '.'
    if (!groupEnds) continue
    if (group < 3) break
    group = 0
    if (digits.length >= 13 && digits.length <= 19 && issued(digits) && luhn(digits)) longest = i + 1
  }
  return longest
}

/**
 * Whether digits start as a payment card's do (its major industry identifier): 3 (American Express,
 * JCB, Diners), 4 (Visa), 5 (Mastercard, Maestro), 6 (Discover, UnionPay, Maestro), or Mastercard's
 * 2221-2720. Ids that pass Luhn's check by chance (one in ten) mostly start otherwise: epoch
 * milliseconds and Slack timestamps with 1, snowflake ids with 1 for years yet.
 */
function issued (digits: string): boolean {
  const first = digits.charCodeAt(0) - 48
  if (first >= 3 && first <= 6) return true
  const four = Number(digits.slice(0, 4))
  return four >= 2221 && four <= 2720
}

/**
 * How many first characters of a match are an IBAN: the longest run of its groups whose ISO 7064
 * mod-97 checksum holds (`DE89 3704 0044 0532 0130 00`), or 0.
 */
export function ibanPrefix (match: string): number {
  let longest = 0
  let compact = ''
  for (let i = 0; i < match.length; i++) {
    if (match[i] === ' ') continue
    compact += match[i]
    const groupEnds = i + 1 === match.length || match[i + 1] === ' '
    if (groupEnds && compact.length >= 15 && compact.length <= 34 && ibanChecks(compact)) longest = i + 1
  }
  return longest
}

function ibanChecks (iban: string): boolean {
  const moved = iban.slice(4) + iban.slice(0, 4)
  let rest = 0
  for (const c of moved) {
    const v = c >= 'A' ? c.charCodeAt(0) - 55 : c.charCodeAt(0) - 48
    rest = v >= 10 ? (rest * 100 + v) % 97 : (rest * 10 + v) % 97
  }
  return rest === 1
}

/** Words that follow "Bearer " in prose rather than a token. */
const PROSE_AFTER_SCHEME = '(?:tokens?|auth\\w*|scheme|header|of|and|or|the|an?|is|in|to|for|with)\\b'

/** Whether `match` (`Basic <base64>`) decodes to `user:password`. */
function isBasicCredentials (match: string): boolean {
  try {
    return atob(match.slice(6)).includes(':')
  } catch {
    return false
  }
}

/**
 * What `standard` removes, in the order tried at each position. Every quantifier is bounded, so no
 * rule backtracks more than linearly on long text (no catastrophic patterns on the hot path). A
 * private key's body stops at the next `-----`, so text of many `BEGIN` lines and no `END` is read
 * once, not 20,000 characters again from each.
 */
export const SCRUBBERS: readonly Scrubber[] = [
  { label: 'private_key', gate: 'PRIVATE KEY', pattern: '-----BEGIN [A-Z ]{0,40}PRIVATE KEY-----(?:[^-]|-(?!----)){0,20000}?-----END [A-Z ]{0,40}PRIVATE KEY-----' },
  { label: 'jwt', gate: 'eyJ', pattern: '\\beyJ[A-Za-z0-9_-]{8,4096}\\.eyJ[A-Za-z0-9_-]{8,16384}\\.[A-Za-z0-9_-]{0,1024}' },
  { label: 'anthropic_key', gate: 'sk-ant-', pattern: '\\bsk-ant-[A-Za-z0-9_-]{20,256}' },
  { label: 'openai_key', gate: 'sk-', pattern: '\\bsk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,256}' },
  { label: 'aws_access_key', gate: ['AKIA', 'ASIA', 'ABIA', 'ACCA', 'A3T'], pattern: '\\b(?:A3T[A-Z0-9]|AKIA|ASIA|ABIA|ACCA)[A-Z2-7]{16}\\b' },
  { label: 'github_token', gate: ['ghp_', 'gho_', 'ghu_', 'ghs_', 'ghr_', 'github_pat_'], pattern: '\\b(?:gh[pousr]_[A-Za-z0-9]{36,255}|github_pat_[A-Za-z0-9_]{22,255})' },
  { label: 'slack_token', gate: 'xox', pattern: '\\bxox[abprse]-[A-Za-z0-9-]{10,255}' },
  { label: 'stripe_key', gate: ['_test_', '_live_'], pattern: '\\b(?:sk|rk|pk)_(?:test|live)_[A-Za-z0-9]{16,255}' },
  { label: 'google_api_key', gate: 'AIza', pattern: '\\bAIza[0-9A-Za-z_-]{35}' },
  { label: 'huggingface_token', gate: 'hf_', pattern: '\\bhf_[A-Za-z0-9]{30,255}' },
  { label: 'groq_key', gate: 'gsk_', pattern: '\\bgsk_[A-Za-z0-9]{20,255}' },
  { label: 'xai_key', gate: 'xai-', pattern: '\\bxai-[A-Za-z0-9]{20,255}' },
  { label: 'agent_telemetry_key', gate: 'vk_', pattern: '\\bvk_[A-Za-z0-9_-]{16,255}' },
  { label: 'npm_token', gate: 'npm_', pattern: '\\bnpm_[A-Za-z0-9]{36}\\b' },
  { label: 'gitlab_token', gate: 'glpat-', pattern: '\\bglpat-[A-Za-z0-9_-]{20,255}' },
  // A Slack incoming webhook's URL is its credential: whoever holds it posts to the channel.
  { label: 'slack_webhook', gate: 'hooks.slack.com/', pattern: 'https?://hooks\\.slack\\.com/(?:services|workflows|triggers)/[A-Za-z0-9/_-]{8,512}' },
  // Any token after `Bearer ` (or `bearer ` in an Authorization header), however short, except the
  // words prose puts there ("a Bearer token"); a lower-case `bearer ` elsewhere only before 16+ characters.
  { label: 'bearer_token', gate: 'earer ', pattern: `(?:\\bBearer|(?<=[Aa]uthori[sz]ation:[ \\t]{0,8})bearer) (?!${PROSE_AFTER_SCHEME})[A-Za-z0-9._~+/-]{1,4096}=*|\\bbearer [A-Za-z0-9._~+/-]{16,4096}=*` },
  // `Basic ` and base64 that decodes to `user:password`, the scheme's own form.
  { label: 'basic_auth', gate: 'asic ', pattern: '\\b[Bb]asic [A-Za-z0-9+/]{4,4096}={0,2}', check: isBasicCredentials },
  { label: 'url_credentials', gate: '://', pattern: '(?<=://)[^\\s:/?#@]{1,256}:[^\\s/?#@]{1,256}(?=@)' },
  // Documents the rule; scrubEmails (below) applies it, in any script.
  { label: 'email', gate: '@', pattern: '[A-Za-z0-9._%+-]{1,64}@(?:[A-Za-z0-9-]{1,63}\\.){1,8}[A-Za-z]{2,24}\\b' },
  { label: 'card_number', gate: /\d(?:[ .-]?\d){12}/, pattern: '\\b\\d(?:[ .-]?\\d){12,18}\\b', check: cardPrefix },
  // A US social security number as written (area 001-899 but 666, group and serial not zero).
  { label: 'ssn', gate: /\d{3}-\d{2}-\d{4}/, pattern: '\\b(?!000|666|9\\d\\d)\\d{3}-(?!00)\\d{2}-(?!0000)\\d{4}\\b' },
  { label: 'iban', gate: /[A-Z]{2}\d{2}/, pattern: '\\b[A-Z]{2}\\d{2}(?: ?[A-Z0-9]{4}){2,7}(?: ?[A-Z0-9]{1,3})?\\b', check: ibanPrefix },
  { label: 'phone', gate: /\+\d|\(\d|\d{3}[.-]\d{3}/, pattern: '(?:\\+[1-9]\\d{0,2}[ .-]?(?:\\(\\d{1,4}\\)[ .-]?)?\\d{2,4}(?:[ .-]?\\d{2,4}){1,4}|\\(\\d{3}\\)[ .-]?\\d{3}[ .-]\\d{4}|\\b\\d{3}[.-]\\d{3}[.-]\\d{4})\\b' },
]

const EMAIL_BIT = 1 << SCRUBBERS.findIndex((s) => s.label === 'email')
// Addresses in any script (RFC 6531): letters, digits and marks of every alphabet, and `localhost`,
// the one dotless domain (`name@host` is too often a package's version, `react@latest`).
const LOCAL_PART = /[\p{L}\p{N}\p{M}._%+-]/u
const DOMAIN = /(?:(?:[\p{L}\p{N}\p{M}-]{1,63}\.){1,8}[\p{L}\p{M}]{2,24}|localhost)(?![\p{L}\p{N}\p{M}])/uy

/**
 * The email rule, found from each `@` rather than by the regular expression: an e-mail's pattern
 * cannot start with a literal, so a regular expression tries up to 64 characters at every position
 * of the text (2 ms for 10 KB); from the `@` it is a few characters per address. Matched in `text`,
 * replaced in `source` (the same text before folding, of the same length).
 */
function scrubEmails (text: string, source: string, count: { n: number }): string {
  let out = ''
  let done = 0
  for (let at = text.indexOf('@'); at !== -1; at = text.indexOf('@', at + 1)) {
    let start = at
    while (start > done && at - start < 64 && LOCAL_PART.test(text[start - 1]!)) start--
    if (start === at) continue
    DOMAIN.lastIndex = at + 1
    if (!DOMAIN.test(text)) continue
    out += source.slice(done, start) + '[redacted:email]'
    done = DOMAIN.lastIndex
    at = done - 1
    count.n++
  }
  return done === 0 ? source : out + source.slice(done)
}

// One combined pattern per set of rules whose gates pass, built on first use: most text passes no
// gate and costs a few indexOf calls; the rest runs one regular expression over the text, once.
const combined = new Map<number, RegExp>()
function combinedFor (mask: number): RegExp {
  let re = combined.get(mask)
  if (!re) {
    re = new RegExp(SCRUBBERS.map((s, i) => (mask & (1 << i) ? `(${s.pattern})` : '((?!))')).join('|'), 'g')
    combined.set(mask, re)
  }
  return re
}

function passes (gate: Scrubber['gate'], text: string): boolean {
  if (typeof gate === 'string') return text.includes(gate)
  if (gate instanceof RegExp) return gate.test(text)
  for (const literal of gate) if (text.includes(literal)) return true
  return false
}

// Characters NFKC maps to ASCII one for one that could hide a match: fullwidth forms (`＠`, `４`),
// small forms (`﹫`) and the ideographic space. Text is folded only when it holds a fullwidth digit
// or at sign (FOLD_TRIGGER): fullwidth punctuation alone is everyday CJK text, and folding 10 KB of
// it costs ~0.3 ms. Any other text is matched as it is.
const FOLD_TRIGGER = /[\uFF10-\uFF19\uFF20\uFE6B]/
const FOLDABLE_ALL = /[\u3000\uFE50-\uFE6B\uFF01-\uFF5E]/g

// Their NFKC forms, computed once: `normalize` per character costs ~0.5 µs each.
const FOLDED = new Map<string, string>()
for (const [from, to] of [[0x3000, 0x3000], [0xfe50, 0xfe6b], [0xff01, 0xff5e]] as const) {
  for (let c = from; c <= to; c++) {
    const ch = String.fromCharCode(c)
    const n = ch.normalize('NFKC')
    FOLDED.set(ch, n.length === 1 ? n : ch)
  }
}

/** `text` with its fullwidth and small forms in their NFKC form, of the same length (so offsets carry over). */
function fold (text: string): string {
  if (!FOLD_TRIGGER.test(text)) return text
  return text.replace(FOLDABLE_ALL, (c) => FOLDED.get(c)!)
}

/**
 * Names of settings, headers and fields whose value is a secret whatever it looks like: `password=…`,
 * `DB_PASSWORD=…`, `"apiKey": "…"`, `x-api-key: …`, `Authorization: Token …`, `AccountKey=…;`. Not
 * a bare `token` (a tokenizer's output, `max_token`, is not one).
 */
const SECRET_NAME = '(?:password|passwd|pwd|passphrase|secret|client[_-]?secret|secret[_-]?access[_-]?key|api[_-]?key|access[_-]?key|private[_-]?key|account[_-]?key|signing[_-]?key|(?:auth|access|refresh|api|id|session|bearer|csrf|x[_-]auth)[_-]?token|authori[sz]ation|cookie)'
const SECRET_GATE = /pass|pwd|secret|key|token|authori[sz]ation|cookie/i
/** Such a name right before a `:` or `=` (and a closing quote). */
const SECRET_BEFORE = new RegExp(`${SECRET_NAME}["']?[ \\t]{0,4}$`, 'i')
/** What follows the `:` or `=`: the value, after an opening quote and a scheme (`Token `), which stay. */
const SECRET_VALUE = /[ \t]{0,4}["']?(?:(?:token|bearer|basic|digest|apikey|key|jwt)[ \t]{1,4})?(?!\[redacted:)([^\s"',;&<>]{1,4096})/iy
/** A field whose name ends with such a name holds a secret as a whole (`{ dbPassword: '…' }`). */
const SECRET_FIELD = new RegExp(`${SECRET_NAME}$`, 'i')
const SEPARATOR = /[:=]/g

/**
 * Values after a secret's name and `:` or `=`. Found from each `:` and `=` (few in prose), looking
 * back at most 48 characters for the name: a pattern tried at every position of the text cost twice
 * the other rules together on 10 KB of prose.
 */
function scrubAssignments (source: string, count: { n: number }): string {
  if (!SECRET_GATE.test(source)) return source
  let out = ''
  let done = 0
  SEPARATOR.lastIndex = 0
  for (let m = SEPARATOR.exec(source); m !== null; m = SEPARATOR.exec(source)) {
    const at = m.index
    if (!SECRET_BEFORE.test(source.slice(Math.max(done, at - 48), at))) continue
    SECRET_VALUE.lastIndex = at + 1
    const value = SECRET_VALUE.exec(source)
    if (!value) continue
    const end = SECRET_VALUE.lastIndex
    out += source.slice(done, end - value[1]!.length) + '[redacted:secret]'
    done = end
    SEPARATOR.lastIndex = end
    count.n++
  }
  return done === 0 ? source : out + source.slice(done)
}

/**
 * `source` with every credential and personal datum of SCRUBBERS replaced; `count` counts the
 * replacements. Rules match the text with fullwidth and small forms folded to ASCII by NFKC
 * (`jane＠example.com`, `４１１１ １１１１ …`); what is not replaced is sent as it was written.
 */
export function scrubText (source: string, count: { n: number } = { n: 0 }): string {
  if (source.length < 6) return source
  let text = fold(source)
  let mask = 0
  for (let i = 0; i < SCRUBBERS.length; i++) {
    if (passes(SCRUBBERS[i]!.gate, text)) mask |= 1 << i
  }
  // E-mail addresses last, so a rule that starts earlier in the text (a URL's credentials) wins, as in one pass.
  const emails = (mask & EMAIL_BIT) !== 0
  mask &= ~EMAIL_BIT
  if (mask !== 0) {
    const replaced = replaceRules(text, source, mask, count)
    if (replaced !== source) {
      source = replaced
      text = fold(source)
    }
  }
  const assigned = scrubAssignments(source, count)
  if (assigned !== source) {
    source = assigned
    text = fold(source)
  }
  return emails ? scrubEmails(text, source, count) : source
}

/** The rules of `mask` matched in `text` and replaced in `source` (the same text before folding). */
function replaceRules (text: string, source: string, mask: number, count: { n: number }): string {
  const re = combinedFor(mask)
  re.lastIndex = 0
  let out = ''
  let done = 0
  for (let m = re.exec(text); m !== null; m = re.exec(text)) {
    if (m[0] === '') {
      re.lastIndex++
      continue
    }
    for (let i = 0; i < SCRUBBERS.length; i++) {
      if (m[i + 1] === undefined) continue
      const scrubber = SCRUBBERS[i]!
      const verdict = scrubber.check ? scrubber.check(m[0]) : true
      if (verdict === false || verdict === 0) {
        // Not one as a whole; one may start inside it (`basic Basic dXNl…`, `ref 12 4111 …`).
        re.lastIndex = m.index + 1
        break
      }
      count.n++
      out += source.slice(done, m.index) + `[redacted:${scrubber.label}]`
      done = m.index + (verdict === true ? m[0].length : verdict)
      re.lastIndex = done
      break
    }
  }
  return done === 0 ? source : out + source.slice(done)
}

// File paths, for the error message kept by `minimal`: absolute and home-relative ones (POSIX and
// Windows), a Windows path with spaces in its folders (`C:\Users\Jane Doe\key.pem`), and a relative
// one with a folder and a file's extension after a space, quote, `=`, `(` or `:` (`'config/secret.env'`;
// not `I/O`, `read/write` or `application/json`).
const FILE_PATH = /\b[A-Za-z]:\\(?:[^\\\r\n"'<>|*?:]{1,255}\\){1,64}[^\\\s"'<>|*?:]{0,255}|(?:~|\b[A-Za-z]:)?(?:[\\/][\w.@-]{1,255}){2,64}[\\/]?|(?<=[\s"'=(:])(?:\.{1,2}[\\/])?[\w@-][\w.@-]{0,254}(?:[\\/][\w.@-]{1,255}){0,63}[\\/][\w@-][\w.@-]{0,250}\.[A-Za-z0-9]{1,10}\b/g

/** `text` with file paths replaced by `[redacted:path]`, then scrubbed as `standard` does. */
export function scrubMessage (text: string, count: { n: number }): string {
  const noPaths = text.replace(FILE_PATH, (match) => { count.n++; return '[redacted:path]' })
  return scrubText(noPaths, count)
}

/**
 * File paths inside a tool's name or command line (`read /home/bob/secret`, `cat ~/.ssh/id_rsa`,
 * `open ./notes/x.md`, `edit src/app.ts`), for `minimal`. Stricter about where a path starts than
 * FILE_PATH, so a namespaced tool name (`github/create_issue`, `/review`) is kept: an absolute path
 * needs two segments, and a relative one (`src/app.ts`) counts only after a space, quote, `=`, `(`,
 * `:` or `,` (an argument), never as the name itself.
 */
const TOOL_PATH = /(?<![^\s"'=(:,])(?:(?:~|\.{1,2}|\b[A-Za-z]:)(?:[\\/][\w.@-]{1,255}){1,64}|(?:[\\/][\w.@-]{1,255}){2,64}|(?<=[\s"'=(:,])[\w.@-]{1,255}(?:[\\/][\w.@-]{1,255}){1,64})[\\/]?/g

/** The longest `toolExecuted` the service takes (schemas/event.ts). */
const TOOL_NAME_MAX = 200

/** A tool's name at `minimal`: file paths replaced, then scrubbed as `standard`, cut to what the service takes. */
export function scrubToolName (text: string, count: { n: number }): string {
  return scrubNameText(text.replace(TOOL_PATH, () => { count.n++; return '[redacted:path]' }), count, text.length)
}

/**
 * A model's name at `minimal`: a file path in it (a local model, `/home/bob/models/llama.gguf`) is
 * replaced by its file's name, which still tells models apart, then scrubbed as `standard`.
 */
export function scrubModelName (text: string, count: { n: number }): string {
  return scrubNameText(text.replace(TOOL_PATH, (path) => {
    count.n++
    return path.replace(/[\\/]+$/, '').split(/[\\/]/).pop() || '[redacted:path]'
  }), count, text.length)
}

/** A name scrubbed as text (`standard`), cut to what the service takes when the replacements made it longer than it was. */
function scrubNameText (text: string, count: { n: number }, given = text.length): string {
  const out = scrubText(text, count)
  // A name the replacements made too long is cut; one too long as given is left for the schema check.
  if (out.length <= TOOL_NAME_MAX || given > TOOL_NAME_MAX) return out
  const cut = out.slice(0, TOOL_NAME_MAX)
  return /[\uD800-\uDBFF]$/.test(cut) ? cut.slice(0, -1) : cut
}

/**
 * Fields `standard` leaves as they are: identifiers, names and enums the service reads, which are
 * not free text (scrubbing them would break traces and joins; a card-like span id is not a card).
 */
export const IDENTIFIER_FIELDS: ReadonlySet<string> = new Set(['agentId', 'timestamp', 'type', 'outcome', 'model', 'toolExecuted', 'toolsConsidered', 'transaction', 'durationMs', 'amount'])
export const IDENTIFIER_METADATA: ReadonlySet<string> = new Set(['tokensBreakdown', 'traceId', 'spanId', 'parentSpanId', 'sessionId', 'provider', 'privacyLevel', 'tool', 'dedupKey', 'spanName', 'redactions'])

/** The fields `minimal` keeps; everything else is removed. */
export const MINIMAL_FIELDS: ReadonlySet<string> = new Set([...IDENTIFIER_FIELDS, 'metadata', 'errorMessage'])
export const MINIMAL_METADATA: ReadonlySet<string> = IDENTIFIER_METADATA

/**
 * An object's key as `standard` sends it: scrubbed as its values are (an agent's map keyed by e-mail
 * address); a key that becomes one already in `out` gets a `#2`, `#3`… so no value overwrites another.
 */
function scrubKey (key: string, out: Record<string, unknown>, count: { n: number }): string {
  const scrubbed = scrubText(key, count)
  if (scrubbed === key) return key
  let unique = scrubbed
  for (let i = 2; Object.prototype.hasOwnProperty.call(out, unique); i++) unique = `${scrubbed}#${i}`
  return unique
}

/** A deep copy of a JSON value with every string, keys included, scrubbed. */
function scrubDeep (value: unknown, count: { n: number }): unknown {
  if (typeof value === 'string') return scrubText(value, count)
  if (Array.isArray(value)) return value.map((v) => scrubDeep(v, count))
  if (value !== null && typeof value === 'object') {
    const out: Record<string, unknown> = {}
    for (const [k, v] of Object.entries(value)) out[scrubKey(k, out, count)] = scrubField(k, v, count)
    return out
  }
  return value
}

/** The value of field `key`, scrubbed; a non-empty string under a secret's name (SECRET_FIELD) is replaced whole. */
function scrubField (key: string, value: unknown, count: { n: number }): unknown {
  if (typeof value === 'string' && value !== '' && !value.startsWith('[redacted:') && SECRET_FIELD.test(key)) {
    count.n++
    return '[redacted:secret]'
  }
  return scrubDeep(value, count)
}

/**
 * The event as `level` lets it leave the process. `event` is a plain JSON object (the client's own
 * copy, see json.ts), which this may change in place. Returns how many values were replaced; the
 * client records it in `metadata.redactions` when it is not 0.
 */
export function applyPrivacy (event: Record<string, unknown>, level: PrivacyLevel): number {
  const count = { n: 0 }
  if (level === 'full') return 0
  const metadata = isObject(event.metadata) ? event.metadata : undefined
  if (level === 'minimal') {
    for (const key of Object.keys(event)) if (!MINIMAL_FIELDS.has(key)) delete event[key]
    if (metadata) for (const key of Object.keys(metadata)) if (!MINIMAL_METADATA.has(key)) delete metadata[key]
    if (typeof event.errorMessage === 'string') event.errorMessage = scrubMessage(event.errorMessage, count)
    if (typeof event.toolExecuted === 'string') event.toolExecuted = scrubToolName(event.toolExecuted, count)
    if (Array.isArray(event.toolsConsidered)) event.toolsConsidered = event.toolsConsidered.map((v: unknown) => typeof v === 'string' ? scrubToolName(v, count) : v)
    // A span is often named after the tool call or command it wraps: its name is a tool name here.
    if (metadata && typeof metadata.spanName === 'string') metadata.spanName = scrubToolName(metadata.spanName, count)
    if (metadata && typeof metadata.tool === 'string') metadata.tool = scrubToolName(metadata.tool, count)
    // Names that may hold a path or an address (a local model's file, a transaction's description):
    // no path leaves at this level. The ids (traceId, sessionId, dedupKey…) go as they are.
    if (typeof event.model === 'string') event.model = scrubModelName(event.model, count)
    if (typeof event.transaction === 'string') event.transaction = scrubToolName(event.transaction, count)
    if (isObject(event.amount) && typeof event.amount.token === 'string') event.amount.token = scrubToolName(event.amount.token, count)
    if (metadata && typeof metadata.provider === 'string') metadata.provider = scrubToolName(metadata.provider, count)
    return count.n
  }
  for (const key of Object.keys(event)) {
    if (IDENTIFIER_FIELDS.has(key) || key === 'metadata') continue
    event[key] = scrubField(key, event[key], count)
  }
  // Names written by people (a tool's, a span's) often hold what they act on: credentials and
  // personal data leave them, as from text; paths stay, as everywhere at this level.
  const name = (v: unknown) => typeof v === 'string' ? scrubNameText(v, count) : v
  if (typeof event.toolExecuted === 'string') event.toolExecuted = name(event.toolExecuted)
  if (Array.isArray(event.toolsConsidered)) event.toolsConsidered = event.toolsConsidered.map(name)
  for (const key of ['tool', 'spanName']) if (metadata && typeof metadata[key] === 'string') metadata[key] = name(metadata[key])
  if (metadata) {
    for (const key of Object.keys(metadata)) {
      if (IDENTIFIER_METADATA.has(key)) continue
      const value = scrubField(key, metadata[key], count)
      if (scrubText(key, { n: 0 }) === key) {
        metadata[key] = value
        continue
      }
      // The key itself held data: the value goes under the scrubbed key, after the other keys.
      delete metadata[key]
      metadata[scrubKey(key, metadata, count)] = value
    }
  }
  return count.n
}

function isObject (value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === 'object' && !Array.isArray(value)
}
