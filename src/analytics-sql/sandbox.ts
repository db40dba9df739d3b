/**
 * What a query on the analysts' port may name, as exact allowlists, and what `npm run clickhouse:serve`
 * refuses too. The embedded engine does not hold paths in settings, formats and functions to a user
 * files directory as a ClickHouse server does: `format_template_row=/abs/path` reads any file the
 * process can read, `output_format_schema=/abs/path` writes one, `file('/abs/path')` reads one, and
 * pointing `user_files_path` or `format_schema_path` elsewhere does not stop an absolute path. So
 * nothing that names a file, a directory, a URL or a schema is accepted, and every rule here is a list
 * of exact names: a name not listed is refused, whatever new setting or format the engine grows.
 *
 * The checks read the engine's own `EXPLAIN AST` of the engine's own formatting of the query (the text
 * that runs), so what was checked is what runs (docs/analysts.md#what-analysts-can-set).
 */

/**
 * Settings an analyst's client may send as URL parameters (applied before `readonly = 1`). Chosen for
 * what the official clients, clickhouse-connect, Grafana's and DBeaver's drivers send, and for the
 * shape of the output; none names a file, a directory, a URL or a schema.
 */
export const ANALYST_SETTINGS: ReadonlySet<string> = new Set([
  // Output shape (JSON, text, Arrow/Parquet/ORC, Native/RowBinary).
  'output_format_json_quote_64bit_integers', 'output_format_json_quote_64bit_floats', 'output_format_json_quote_denormals',
  'output_format_json_quote_decimals', 'output_format_json_escape_forward_slashes', 'output_format_json_named_tuples_as_objects',
  'output_format_json_array_of_rows', 'output_format_json_validate_utf8', 'output_format_json_pretty_print',
  'output_format_json_map_as_array_of_tuples', 'output_format_write_statistics', 'output_format_decimal_trailing_zeros',
  'output_format_pretty_max_rows', 'output_format_pretty_max_column_pad_width', 'output_format_pretty_max_value_width',
  'output_format_pretty_color', 'output_format_pretty_grid_charset', 'output_format_pretty_row_numbers',
  'output_format_csv_crlf_end_of_line', 'output_format_tsv_crlf_end_of_line', 'output_format_markdown_escape_special_characters',
  'output_format_arrow_string_as_string', 'output_format_arrow_low_cardinality_as_dictionary',
  'output_format_arrow_fixed_string_as_fixed_byte_array', 'output_format_parquet_string_as_string', 'output_format_orc_string_as_string',
  'output_format_native_encode_types_in_binary_format', 'output_format_native_write_json_as_string',
  'output_format_binary_encode_types_in_binary_format', 'output_format_binary_write_json_as_string',
  'format_csv_delimiter', 'format_csv_allow_single_quotes', 'format_csv_allow_double_quotes', 'format_csv_null_representation',
  'format_tsv_null_representation', 'date_time_output_format', 'interval_output_format', 'bool_true_representation', 'bool_false_representation',
  // Sent by clients with every request (inserts are refused anyway, so they change nothing).
  'date_time_input_format', 'input_format_null_as_default', 'input_format_skip_unknown_fields',
  // Query behaviour.
  // Not `enable_analyzer` / `allow_experimental_analyzer`: the old analyzer rewrites calls by settings
  // (`count(DISTINCT x)` became a call of whatever `count_distinct_implementation` named, `file` too).
  'session_timezone', 'use_client_time_zone', 'join_use_nulls', 'extremes',
  'max_block_size', 'max_rows_to_read', 'max_bytes_to_read', 'max_rows_to_group_by', 'max_rows_to_sort', 'max_rows_in_set',
  'prefer_column_name_to_alias', 'cast_keep_nullable', 'aggregate_functions_null_for_empty', 'transform_null_in', 'use_query_cache',
  'optimize_read_in_order', 'optimize_aggregation_in_order', 'optimize_move_to_prewhere', 'optimize_use_projections',
  'result_overflow_mode', 'count_distinct_implementation', 'union_default_mode', 'joined_subquery_requires_alias',
  'log_comment',
])

/**
 * Output formats analysts may ask for (FORMAT clause, `default_format`, `X-ClickHouse-Format`), by
 * their lower-case name (the engine reads format names in any case). Not listed, so refused: those
 * that load a schema or template from a file or a registry (Template, Protobuf*, CapnProto, Avro,
 * AvroConfluent, CustomSeparated*), the wire and driver formats, and the input-only ones.
 */
export const ANALYST_FORMATS: ReadonlyMap<string, string> = new Map([
  'TabSeparated', 'TabSeparatedRaw', 'TabSeparatedWithNames', 'TabSeparatedWithNamesAndTypes', 'TabSeparatedRawWithNames',
  'TabSeparatedRawWithNamesAndTypes', 'TSV', 'TSVRaw', 'TSVWithNames', 'TSVWithNamesAndTypes', 'TSVRawWithNames', 'TSVRawWithNamesAndTypes',
  'CSV', 'CSVWithNames', 'CSVWithNamesAndTypes',
  'JSON', 'JSONStrings', 'JSONCompact', 'JSONCompactStrings', 'JSONColumns', 'JSONColumnsWithMetadata', 'JSONCompactColumns',
  'JSONEachRow', 'JSONLines', 'NDJSON', 'JSONL', 'JSONStringsEachRow', 'JSONCompactEachRow', 'JSONCompactEachRowWithNames',
  'JSONCompactEachRowWithNamesAndTypes', 'JSONCompactStringsEachRow', 'JSONCompactStringsEachRowWithNames',
  'JSONCompactStringsEachRowWithNamesAndTypes', 'JSONEachRowWithProgress', 'JSONStringsEachRowWithProgress', 'JSONObjectEachRow',
  'PrettyJSONEachRow', 'PrettyJSONLines', 'PrettyNDJSON',
  'Pretty', 'PrettyCompact', 'PrettyCompactMonoBlock', 'PrettyNoEscapes', 'PrettyCompactNoEscapes', 'PrettySpace', 'PrettySpaceNoEscapes',
  'PrettyMonoBlock', 'PrettyNoEscapesMonoBlock', 'PrettyCompactNoEscapesMonoBlock', 'PrettySpaceMonoBlock', 'PrettySpaceNoEscapesMonoBlock',
  'Vertical', 'Markdown', 'MD', 'XML', 'Values', 'SQLInsert', 'TSKV', 'Null', 'RawBLOB',
  'RowBinary', 'RowBinaryWithNames', 'RowBinaryWithNamesAndTypes', 'Native', 'Parquet', 'Arrow', 'ArrowStream', 'ORC', 'MsgPack', 'BSONEachRow',
].map((name) => [name.toLowerCase(), name]))

/**
 * Formats `npm run clickhouse:serve` refuses: those that load a schema, a template or a registry's
 * answer (a file, a URL). Everything else a server's client sends works there.
 */
const FILE_FORMATS = new Set(['template', 'templateignorespaces', 'protobuf', 'protobufsingle', 'protobuflist', 'capnproto', 'avro', 'avroconfluent', 'regexp'])

/**
 * Settings `npm run clickhouse:serve` refuses: those that name a file, a directory, a URL or a schema
 * (in any format). Matched exactly; the service's own code sets none of them.
 */
export const FILE_SETTINGS: ReadonlySet<string> = new Set([
  'format_schema', 'format_schema_source', 'format_schema_message_name', 'output_format_schema', 'format_template_resultset',
  'format_template_row', 'format_template_rows_between_delimiter', 'format_template_resultset_format', 'format_template_row_format',
  'format_avro_schema_registry_url', 'input_format_protobuf_flatten_google_wrappers', 'format_protobuf_use_autogenerated_schema',
  'format_capn_proto_use_autogenerated_schema', 'format_regexp', 'format_custom_result_before_delimiter', 'format_custom_result_after_delimiter',
  'output_format_avro_string_column_pattern', 'schema_inference_use_cache_for_file', 'schema_inference_use_cache_for_url',
  'schema_inference_use_cache_for_s3', 'schema_inference_use_cache_for_hdfs', 'schema_inference_use_cache_for_azure',
  'engine_file_allow_create_multiple_files', 'engine_file_truncate_on_insert', 'engine_file_empty_if_not_exists', 'engine_file_skip_empty_files',
  'engine_url_skip_empty_files', 'storage_file_read_method', 'into_outfile_create_parent_directories', 'allow_experimental_database_materialized_postgresql',
  'input_format_parquet_use_native_reader_v3', 'format_display_secrets_in_show_and_select',
])

/** Table functions that only generate or reshape data inside the engine: all analysts may call. */
const ANALYST_TABLE_FUNCTIONS = new Set([
  'numbers', 'numbers_mt', 'zeros', 'zeros_mt', 'generate_series', 'generateseries', 'primes', 'values', 'view', 'generaterandom',
])
/** What `npm run clickhouse:serve` adds for the service's own statements and tests (inserts' input, projections' parts). */
const SERVE_TABLE_FUNCTIONS = new Set([
  ...ANALYST_TABLE_FUNCTIONS, 'input', 'format', 'merge', 'mergetreeindex', 'mergetreeprojection', 'mergetreeanalyzeindexes', 'null',
])
/**
 * Table functions that read one of their arguments as a structure (`name Type, …`), and which: the
 * first of `values` (when a string and not its only argument), `generateRandom`, `input` and `null`,
 * the second of `format` (when it has three). A structure may declare a column with an expression
 * (`b String ALIAS file('/etc/passwd')`, DEFAULT, MATERIALIZED, EPHEMERAL), which the engine runs when
 * the column is read, under `readonly` too; `EXPLAIN AST` shows the structure as a string literal, so
 * the function checks never see that expression. A structure is therefore taken only as a literal
 * declaring names and types: any clause that could hold an expression is refused (STRUCTURE_CLAUSE),
 * and so is an expression in place of the literal (`concat('… AL', 'IAS …')`), which the engine would
 * compute into a structure first.
 */
const STRUCTURE_ARGUMENT: ReadonlyMap<string, (args: number) => number | null> = new Map<string, (args: number) => number | null>([
  ['values', (args: number) => (args > 1 ? 0 : null)],
  ['generaterandom', () => 0],
  ['input', () => 0],
  ['null', () => 0],
  ['format', (args: number) => (args === 3 ? 1 : null)],
])
/** A column declaration's clauses beyond its name and type (any case, as the engine's parser takes keywords). */
const STRUCTURE_CLAUSE = /\b(DEFAULT|MATERIALIZED|ALIAS|EPHEMERAL|TTL|CODEC|STATISTICS?|SETTINGS|COMMENT)\b/i

/** The arguments of a function's node in an `EXPLAIN AST` listing (the children of its ExpressionList). */
function argumentsOf (nodes: AstNode[], fn: AstNode): AstNode[] {
  const list = nodes.find((n) => n.parent === fn && n.node.startsWith('ExpressionList'))
  return list ? nodes.filter((n) => n.parent === list) : []
}

/** The escapes `EXPLAIN AST` writes a string literal's characters with, and what each stands for. */
const LITERAL_ESCAPES: Readonly<Record<string, string>> = { b: '\b', f: '\f', n: '\n', r: '\r', t: '\t', 0: '\0', a: '\x07', v: '\v' }

/**
 * The value of a string literal as `EXPLAIN AST` prints it (`Literal 'a\nb'`), its escapes decoded:
 * the listing writes a line break before a word as `\n`, which would hide the word's start from a
 * pattern (`String\nALIAS`), where the engine reads the break as a space. Another node as it is.
 */
export function literalValue (node: string): string {
  const m = /^Literal '(.*)'$/s.exec(node)
  if (!m) return node
  return m[1]!.replace(/\\(x[0-9A-Fa-f]{2}|.)/gs, (_, e: string) => (e.length === 3 ? String.fromCharCode(parseInt(e.slice(1), 16)) : LITERAL_ESCAPES[e] ?? e))
}

/** Refuses a structure argument (STRUCTURE_ARGUMENT) that is not a literal of names and types only. */
function refuseStructureExpressions (nodes: AstNode[], fn: AstNode, name: string, shown: string): void {
  const at = STRUCTURE_ARGUMENT.get(name)
  if (!at) return
  const args = argumentsOf(nodes, fn)
  const i = at(args.length)
  // `generateRandom`'s other arguments (seed, lengths) are computed too: literals only, as the structure.
  const checked = name === 'generaterandom' ? args : i === null || args[i] === undefined ? [] : [args[i]]
  for (const arg of checked) {
    // A name (a WITH alias of a string) is read as the structure it stands for; a row, a number or
    // an expression computing a string (`concat(…)`) is read as a row, never as a structure.
    if (name === 'values' && /^Identifier /.test(arg.node)) throw new SandboxRefusal(`The structure of ${shown} must be written out as a string literal, not named (${arg.node.slice('Identifier '.length)})`)
    if (name === 'values' && !/^Literal '/.test(arg.node)) continue
    if (!/^Literal /.test(arg.node)) throw new SandboxRefusal(`The arguments of ${shown} must be written out as literals (a structure as a string such as 'a UInt8, b String'), not computed`)
    const clause = STRUCTURE_CLAUSE.exec(literalValue(arg.node))
    if (clause) throw new SandboxRefusal(`The structure of ${shown} may only name columns and their types: ${clause[1]!.toUpperCase()} is not allowed in it`)
  }
}

/**
 * Functions that read the machine's files, load models or a format's schema, or show certificates;
 * and those that read SQL from a string: a structure (`structureTo…Schema('a String DEFAULT file(…)')`),
 * whose columns' expressions the engine computes (STRUCTURE_ARGUMENT), or an aggregate function with
 * its parameters. `EXPLAIN AST` shows such a string as a literal, so the checks cannot see into it.
 */
const REFUSED_FUNCTIONS = new Set([
  'file', 'catboostevaluate', 'naivebayesclassifier', 'showcertificate', 'modelevaluate', 'formatrow', 'formatrownonewline',
  'getserversetting', 'structuretocapnprotoschema', 'structuretoprotobufschema',
  // An aggregate function named by a string, `arrayReduce('groupArrayInsertAt(file(…), 2)', …)`:
  // the engine computes the parameters written in it (scalar subqueries included), unseen by the checks.
  'arrayreduce', 'arrayreduceinranges', 'initializeaggregation',
  // formatRow's aggregate form, with the formats formatRow is refused for.
  'groupformat',
])
/**
 * Functions analysts may not call besides: those that read a table or a dictionary named by a string
 * (which the table checks cannot see: `hasColumnInTable('system', 'disks', …)` also reaches other
 * servers, `joinGet('system.x', …)`, `dictGet*`) and the configuration's macros. The service keeps
 * no Join tables and no dictionaries, so analysts lose nothing.
 */
const ANALYST_REFUSED_FUNCTIONS = new Set(['hascolumnintable', 'joinget', 'joingetornull', 'getmacro', 'naivebayesclassifierwithprob', 'naivebayesclassifierwithallprobs'])
/** `dictGet`, `dictHas`, `dictIsIn`, `dictGetHierarchy` …: every function reading a dictionary starts so. */
const DICTIONARY_FUNCTION = /^dict/

/**
 * Aggregate function combinators, longest first: a refused aggregate function stays refused under
 * any of them (`groupFormatIf('Avro')(…)` is `groupFormat`).
 */
const COMBINATORS = ['mergestate', 'simplestate', 'ordefault', 'resample', 'distinct', 'foreach', 'ornull', 'argmin', 'argmax', 'state', 'merge', 'array', 'map', 'if']

/** A function's lower-case name and the names it is built on by combinators (`groupformatifarray`: itself, `groupformatif`, `groupformat`). */
export function functionStems (name: string): string[] {
  const stems = [name]
  for (let stem = name; ;) {
    const suffix = COMBINATORS.find((c) => stem.length > c.length && stem.endsWith(c))
    if (!suffix) return stems
    stem = stem.slice(0, -suffix.length)
    stems.push(stem)
  }
}

/**
 * Refuses a query parameter whose value holds a control character (as it is, or escaped: the values
 * travel in ClickHouse's escaped text form) unless every placeholder of it is a string (`String`, or
 * an array, nullable or low-cardinality one). `EXPLAIN AST` prints an `Identifier` parameter's value
 * as it is, so a line break in one would add lines of the caller's choosing to the listing the checks
 * read; a string is printed escaped.
 */
export function refuseControlCharactersInParameters (sql: string, params: Readonly<Record<string, string>>): void {
  const types = new Map<string, string[]>()
  for (const m of sql.matchAll(/\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*:\s*([^{}]*?)\s*\}/g)) types.set(m[1]!, [...(types.get(m[1]!) ?? []), m[2]!])
  for (const [name, value] of Object.entries(params)) {
    // eslint-disable-next-line no-control-regex -- control characters are what is looked for
    if (!/[\u0000-\u001f\u007f]/.test(value) && !/\\[nrtbfav0x]/i.test(value)) continue
    if ((types.get(name) ?? []).every((type) => /^(?:(?:Array|Nullable|LowCardinality)\(\s*)*String(?:\s*\))*$/i.test(type))) continue
    throw new SandboxRefusal(`Query parameter ${name} holds a control character (a line break, a tab …): only a String parameter may`)
  }
}

/**
 * Functions whose argument may be a bare table name, read by the engine: `x IN system.disks` is
 * `in(x, system.disks)`; the identifier is the argument at that position (0-based).
 */
const TABLE_ARGUMENT: ReadonlyMap<string, number> = new Map([
  ...['in', 'notin', 'globalin', 'globalnotin', 'nullin', 'notnullin', 'globalnullin', 'globalnotnullin'].map((n) => [n, 1] as const),
  ['joinget', 0], ['joingetornull', 0],
])

/** A plain name of a database or a table: nothing that can be a path to a file. */
const PLAIN_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/

/** Statements (the first node of `EXPLAIN AST`) analysts may run. */
const ANALYST_STATEMENTS = new Set([
  'SelectWithUnionQuery', 'SelectIntersectExceptQuery', 'Explain', 'DescribeQuery', 'ShowTables', 'ShowFunctions',
  'ShowEngineQuery', 'ShowSetting', 'ShowProcesslistQuery', 'ShowCreateTableQuery', 'ShowCreateViewQuery', 'ShowCreateDictionaryQuery',
  'ShowCreateDatabaseQuery', 'ExistsTableQuery', 'ExistsDatabaseQuery', 'ExistsDictionaryQuery', 'ExistsViewQuery',
])

/**
 * Tables of the `system` database analysts may read: what clients' schema browsers and autocompletion
 * read. Not listed, so refused: those that show the machine's paths and configuration
 * (server_settings, disks, storage_policies, user_directories, build_options, macros), secrets or
 * certificates (named_collections, certificates), the engine's internals (stack_trace, symbols, the
 * caches and the access entities).
 */
const SYSTEM_TABLES = new Set([
  'one', 'numbers', 'numbers_mt', 'zeros', 'zeros_mt', 'primes', 'databases', 'tables', 'columns', 'functions', 'table_functions',
  'aggregate_function_combinators', 'data_type_families', 'table_engines', 'database_engines', 'formats', 'settings', 'settings_changes',
  'merge_tree_settings', 'parts', 'parts_columns', 'projections', 'projection_parts', 'data_skipping_indices', 'dictionaries', 'processes',
  'mutations', 'merges', 'time_zones', 'collations', 'keywords', 'contributors', 'licenses', 'errors', 'events', 'metrics',
  'asynchronous_metrics', 'completions', 'codecs', 'documentation',
])
/** Databases analysts may read: the service's tables, the allowed system tables, and the standard views over them. */
const ANALYST_DATABASES = new Set(['default', 'system', 'information_schema', 'INFORMATION_SCHEMA'])

/**
 * The engine's table functions that are not also ordinary functions (lower case): wherever one of
 * them appears in a statement (`EXPLAIN TABLE OVERRIDE mysql(…)`, an `IN` operand …), it is a table
 * function, checked as one. Read from the engine, so a table function a new release adds is covered.
 */
export interface TableFunctionNames {
  tableOnly: ReadonlySet<string>
}
const NO_NAMES: TableFunctionNames = { tableOnly: new Set() }

/** Why a query is refused: ClickHouse's READONLY code (164), as a server answers a read-only user. */
export class SandboxRefusal extends Error {}

export interface AstNode {
  depth: number
  node: string
  /** The node that holds this one, null for the statement. */
  parent: AstNode | null
}

/**
 * Column transformers whose expressions `EXPLAIN AST` lists as nodes of their own, so that the checks
 * see them: `* EXCEPT (…)` and `* REPLACE (expr AS c)`. Any other (`* APPLY (f)`, `APPLY (x -> f(x))`)
 * is listed as a bare line that hides the function it calls, and is refused.
 */
const LISTED_TRANSFORMERS = new Set(['ColumnsTransformerList', 'ColumnsExceptTransformer', 'ColumnsReplaceTransformer', 'ColumnsReplaceTransformer::Replacement'])

function refuseHiddenFunctions (nodes: AstNode[]): void {
  for (const { node } of nodes) {
    const kind = node.split(/\s/, 1)[0]!
    if (/Transformer/.test(kind) && !LISTED_TRANSFORMERS.has(kind)) {
      throw new SandboxRefusal(kind === 'ColumnsApplyTransformer' ? 'APPLY column transformers are not allowed: call the function on the columns by name' : `${kind} is not allowed`)
    }
  }
}

/**
 * Refuses a name (identifier or alias) holding a control character: `EXPLAIN AST` prints names as
 * they are, so a line break in one would add lines of the caller's choosing to the listing the checks
 * read. The engine's formatting writes such a name quoted, with the character escaped or as it is.
 */
export function refuseControlCharactersInNames (formatted: string): void {
  let i = 0
  while (i < formatted.length) {
    const c = formatted[i]!
    if (c === "'" || c === '`' || c === '"') {
      let j = i + 1
      let name = ''
      while (j < formatted.length && formatted[j] !== c) {
        if (formatted[j] === '\\' && j + 1 < formatted.length) { name += formatted.slice(j, j + 2); j += 2 } else name += formatted[j++]
      }
      // eslint-disable-next-line no-control-regex -- control characters are what is looked for
      if (c !== "'" && (/[\u0000-\u001f\u007f]/.test(name) || /\\[nrtbfav0x]/.test(name))) {
        throw new SandboxRefusal('Names with control characters (line breaks, tabs …) are not allowed')
      }
      i = j + 1
      continue
    }
    i++
  }
}

/** The nodes of an `EXPLAIN AST` listing, each with its depth and parent. */
export function astNodes (ast: string): AstNode[] {
  const nodes: AstNode[] = []
  const stack: AstNode[] = []
  for (const line of ast.split('\n')) {
    if (!line.trim()) continue
    const depth = line.length - line.trimStart().length
    while (stack.length && stack[stack.length - 1]!.depth >= depth) stack.pop()
    const node: AstNode = { depth, node: line.trim(), parent: stack[stack.length - 1] ?? null }
    nodes.push(node)
    stack.push(node)
  }
  return nodes
}

/** The functions and table functions named in an `EXPLAIN AST` listing: `[name, isTableFunction]`. */
export function functionsInAst (ast: string): Array<[string, boolean]> {
  const found: Array<[string, boolean]> = []
  for (const { node, parent } of astNodes(ast)) {
    const fn = /^Function (\S+)/.exec(node)
    if (fn) found.push([fn[1]!.toLowerCase(), parent?.node.startsWith('TableExpression') ?? false])
  }
  return found
}

/** The setting names of the first `SETTINGS` clause of a formatted statement (for the refusal's message). */
function settingsNamed (formatted: string): string[] {
  const clause = /^\s*SETTINGS (.*)$/m.exec(formatted)
  if (!clause) return []
  return [...clause[1]!.matchAll(/(?:^|,\s*)`?([A-Za-z_][A-Za-z0-9_]*)`?\s*=/g)].map((m) => m[1]!)
}

/**
 * The database `SHOW TABLES FROM db` (or `IN db`) lists, from the statement's formatting: the first
 * of the statement's own identifiers then names it, not a format.
 */
function showsDatabase (formatted: string | undefined): boolean {
  return formatted !== undefined && /^SHOW\b[^\n]*? (?:FROM|IN) /.test(formatted)
}

/**
 * The output format named in an `EXPLAIN AST` listing: the statement's own `Identifier` child (after
 * the database of `SHOW TABLES FROM db`, told by the statement's `formatted` text).
 */
export function formatInAst (ast: string, formatted?: string): string | null {
  const nodes = astNodes(ast)
  const statement = nodes[0]
  if (!statement) return null
  const own = nodes.filter((n) => n.parent === statement && /^Identifier \S+$/.test(n.node))
  if (statement.node.startsWith('ShowTables') && showsDatabase(formatted)) own.shift()
  // A statement's own identifiers: a SELECT's or EXPLAIN's is its FORMAT; DESCRIBE and SHOW name tables in theirs.
  if (!/^(SelectWithUnionQuery|SelectIntersectExceptQuery|Explain|DescribeQuery|ShowTables|ShowColumns|ShowFunctions|ShowEngineQuery|ShowSetting|ShowProcesslistQuery)\b/.test(statement.node)) return null
  const last = own[own.length - 1]
  return last ? last.node.slice('Identifier '.length) : null
}

function refuseFileSyntax (formatted: string): void {
  // A string literal's line breaks are escaped in the engine's formatting: a clause starts a line.
  if (/^\s*INTO OUTFILE\b/m.test(formatted) || /\bINTO OUTFILE '/.test(formatted)) throw new SandboxRefusal('INTO OUTFILE is not allowed')
  if (/\bFROM INFILE '/.test(formatted)) throw new SandboxRefusal('FROM INFILE is not allowed')
}

/** The canonical name of an output format analysts may use; refuses any other. */
export function analystFormat (name: string): string {
  const canonical = ANALYST_FORMATS.get(name.toLowerCase())
  if (!canonical) throw new SandboxRefusal(`Format ${name} is not allowed on the analysts' port (see docs/analysts.md for the formats allowed)`)
  return canonical
}

/**
 * The table names of an `EXPLAIN AST` listing: `TableIdentifier`s, bare identifiers where a function
 * reads a table (the right of `IN` …), and the tables a statement names itself (`EXISTS t`,
 * `SHOW CREATE TABLE db.t`, `INSERT INTO t`). Each as `table` or `database.table`, as the engine prints it.
 */
export function tablesInAst (ast: string): string[] {
  const nodes = astNodes(ast)
  const found: string[] = []
  const statement = nodes[0]
  for (const node of nodes) {
    const table = /^TableIdentifier (.+?)(?: \(alias [^)]*\))?$/.exec(node.node)
    if (table) found.push(table[1]!)
    const fn = /^Function (\S+)/.exec(node.node)
    const position = fn ? TABLE_ARGUMENT.get(fn[1]!.toLowerCase()) : undefined
    if (position === undefined) continue
    const list = nodes.find((n) => n.parent === node && n.node.startsWith('ExpressionList'))
    const args = list ? nodes.filter((n) => n.parent === list) : []
    const arg = /^Identifier (.+?)(?: \(alias [^)]*\))?$/.exec(args[position]?.node ?? '')
    if (arg) found.push(arg[1]!)
  }
  if (statement && /^(Exists|ShowCreate)\w*Query\b|^InsertQuery\b/.test(statement.node)) {
    const own = nodes.filter((n) => n.parent === statement).map((n) => /^Identifier (.+)$/.exec(n.node)?.[1]).filter((n) => n !== undefined)
    if (own.length) found.push(own.slice(0, 2).join('.'))
  }
  return found
}

/**
 * Refuses a table name that is not `table` or `database.table` of plain names: the embedded engine's
 * `default` database reads any file the process can read by its path (`` `/etc/passwd` ``, `` `x.csv` ``).
 */
export function refusePathLikeTable (identifier: string): void {
  const parts = identifier.split('.')
  if (parts.length > 2 || !parts.every((p) => PLAIN_NAME.test(p))) {
    throw new SandboxRefusal(`Table name ${identifier} is not allowed: only plain names (letters, digits, _) name tables, never paths to files`)
  }
}

/**
 * Checks a statement analysts want to run, from its formatting by the engine and the engine's
 * `EXPLAIN AST` of that formatting (with the query's parameters substituted); throws SandboxRefusal.
 */
export function checkAnalystStatement (formatted: string, ast: string, tableFunctions: TableFunctionNames = NO_NAMES): void {
  refuseFileSyntax(formatted)
  refuseControlCharactersInNames(formatted)
  const nodes = astNodes(ast)
  refuseHiddenFunctions(nodes)
  const kind = nodes[0]?.node.split(/\s/, 1)[0] ?? ''
  if (!ANALYST_STATEMENTS.has(kind)) {
    throw new SandboxRefusal(`Only SELECT, EXPLAIN, SHOW, DESCRIBE and EXISTS queries are allowed (got ${nodes[0]?.node.replace(/\s*\(children \d+\)$/, '') ?? 'nothing'})`)
  }
  // EXPLAIN's own options (`EXPLAIN indexes = 1, json = 1 …`) come before the query explained; a
  // SETTINGS clause after it (`EXPLAIN SELECT 1 FORMAT TSV SETTINGS …`) is the statement's.
  const explained = kind === 'Explain' ? nodes.findIndex((n) => n.parent === nodes[0] && !/^Set\b/.test(n.node)) : -1
  for (const [at, { node, parent }] of nodes.entries()) {
    const explainOptions = kind === 'Explain' && parent === nodes[0] && (explained < 0 || at < explained)
    if ((node === 'Set' || node.startsWith('Set ')) && !explainOptions) {
      const named = settingsNamed(formatted)
      const first = named.find((n) => !ANALYST_SETTINGS.has(n)) ?? named[0]
      throw new SandboxRefusal(first
        ? `Setting ${first} is not allowed in a SETTINGS clause: send allowed settings as URL parameters`
        : 'SETTINGS clauses are not allowed: send allowed settings as URL parameters')
    }
    // INTO OUTFILE's file name is a literal child of the statement itself.
    if (parent && parent === nodes[0] && /^Literal '/.test(node)) throw new SandboxRefusal('INTO OUTFILE is not allowed')
    const fn = /^Function (\S+)/.exec(node)
    if (fn) {
      const name = fn[1]!.toLowerCase()
      refuseStructureExpressions(nodes, nodes[at]!, name, fn[1]!)
      const table = (parent?.node.startsWith('TableExpression') ?? false) || tableFunctions.tableOnly.has(name)
      if (table && !ANALYST_TABLE_FUNCTIONS.has(name)) throw new SandboxRefusal(`Table function ${fn[1]} is not allowed: only the service's tables can be read`)
      if (!table && functionStems(name).some((stem) => REFUSED_FUNCTIONS.has(stem) || ANALYST_REFUSED_FUNCTIONS.has(stem) || DICTIONARY_FUNCTION.test(stem))) {
        throw new SandboxRefusal(`Function ${fn[1]} is not allowed`)
      }
    }
  }
  if (kind === 'ShowTables') {
    // SHOW TABLES, DATABASES, DICTIONARIES, SETTINGS, MERGES read allowed tables; SHOW CLUSTER(S)
    // reads system.clusters and SHOW FILESYSTEM CACHES the caches, which are not.
    if (!/^SHOW (?:FULL )?(?:TEMPORARY )?(?:TABLES|DATABASES|DICTIONARIES|SETTINGS|MERGES)\b/.test(formatted)) {
      throw new SandboxRefusal(`${/^SHOW (?:\w+ ?){1,2}/.exec(formatted)?.[0]?.trim() ?? 'This SHOW'} is not allowed on the analysts' port`)
    }
    const database = showsDatabase(formatted) ? /^Identifier (\S+)/.exec(nodes.find((n) => n.parent === nodes[0] && n.node.startsWith('Identifier '))?.node ?? '')?.[1] : undefined
    if (database !== undefined && !ANALYST_DATABASES.has(database)) throw new SandboxRefusal(`Database ${database} is not allowed: only the service's tables (default) can be read`)
  }
  for (const table of tablesInAst(ast)) refuseTable(table)
  const format = formatInAst(ast, formatted)
  if (format !== null) analystFormat(format)
}

/** Refuses a table analysts may not read: a `system` table not listed, or another database. */
function refuseTable (identifier: string): void {
  refusePathLikeTable(identifier)
  const dot = identifier.indexOf('.')
  if (dot < 0) return // the current database: default
  const database = identifier.slice(0, dot)
  const table = identifier.slice(dot + 1)
  if (!ANALYST_DATABASES.has(database)) throw new SandboxRefusal(`Database ${database} is not allowed: only the service's tables (default) can be read`)
  if (database === 'system' && !SYSTEM_TABLES.has(table)) {
    throw new SandboxRefusal(`Table system.${table} is not allowed on the analysts' port (see docs/analysts.md for the system tables allowed)`)
  }
}

/**
 * The values an allowed setting that names a function may take: the engine calls what it names
 * without checking it is one of these (with the old analyzer, `count_distinct_implementation=file`
 * made `count(DISTINCT '/etc/passwd')` read the file).
 */
const SETTING_VALUES: ReadonlyMap<string, ReadonlySet<string>> = new Map([
  ['count_distinct_implementation', new Set(['uniq', 'uniqCombined', 'uniqCombined64', 'uniqHLL12', 'uniqExact', 'uniqTheta'])],
])

/**
 * The largest values of the settings that size a Pretty format's output (at least 1): padding every
 * value of a column to 6,000 characters turned a 50 MB query into 600 MB of output, which the engine
 * holds whole (its memory cap counts blocks, not output). Their defaults, but for 10,000 rows.
 */
const SETTING_MAXIMA: ReadonlyMap<string, number> = new Map([
  ['output_format_pretty_max_rows', 10_000],
  ['output_format_pretty_max_column_pad_width', 250],
  ['output_format_pretty_max_value_width', 10_000],
])

/** Checks a URL setting an analyst's client sent, and its value (those capped are checked by the engine). */
export function checkAnalystSetting (name: string, value?: string): void {
  if (!ANALYST_SETTINGS.has(name)) throw new SandboxRefusal(`Setting ${name} is not allowed on the analysts' port (see docs/analysts.md for the settings allowed)`)
  const values = SETTING_VALUES.get(name)
  if (values && !values.has(value ?? '')) throw new SandboxRefusal(`Setting ${name} takes one of ${[...values].join(', ')} on the analysts' port (got ${value})`)
  const most = SETTING_MAXIMA.get(name)
  if (most !== undefined && !(/^\d{1,9}$/.test(value ?? '') && Number(value) >= 1 && Number(value) <= most)) {
    throw new SandboxRefusal(`Setting ${name} takes 1 to ${most} on the analysts' port (got ${value})`)
  }
}

/** Refuses, for `npm run clickhouse:serve`, a setting that names a file, a directory, a URL or a schema. */
export function checkServeSetting (name: string): void {
  if (FILE_SETTINGS.has(name.toLowerCase())) throw new SandboxRefusal(`Setting ${name} is not allowed: it names a file, a URL or a schema`)
}

/** Refuses, for `npm run clickhouse:serve`, a format that loads a schema or template from a file or a URL. */
export function checkServeFormat (name: string): void {
  if (FILE_FORMATS.has(name.toLowerCase())) throw new SandboxRefusal(`Format ${name} is not allowed: it loads a schema or template from a file or a URL`)
}

/**
 * Checks a statement for `npm run clickhouse:serve`: no INTO OUTFILE / FROM INFILE, no table function
 * reaching files, URLs, other servers or programs, no function reading files, no SETTINGS clause or
 * format naming files.
 */
export function checkServeStatement (formatted: string, ast: string, tableFunctions: TableFunctionNames = NO_NAMES): void {
  refuseFileSyntax(formatted)
  if (/^ATTACH\b[^\n]*\bFROM '/.test(formatted)) throw new SandboxRefusal('ATTACH … FROM a path is not allowed')
  refuseControlCharactersInNames(formatted)
  const nodes = astNodes(ast)
  refuseHiddenFunctions(nodes)
  const kind = nodes[0]?.node.split(/\s/, 1)[0] ?? ''
  if (kind === 'BackupQuery') throw new SandboxRefusal('BACKUP and RESTORE are not allowed: they write and read files')
  const withChild = new Set<AstNode>()
  for (const [at, { node, parent }] of nodes.entries()) {
    // A storage definition's first child is its engine (PARTITION BY, ORDER BY … follow).
    const firstChild = parent !== null && !withChild.has(parent)
    if (parent) withChild.add(parent)
    if (parent && parent === nodes[0] && /^Literal '/.test(node) && kind.startsWith('Select')) throw new SandboxRefusal('INTO OUTFILE is not allowed')
    if (node.startsWith('Dictionary definition')) throw new SandboxRefusal('CREATE DICTIONARY is not allowed: a dictionary\'s source reaches files, URLs or other servers')
    const fn = /^Function (\S+)/.exec(node)
    if (fn) {
      const name = fn[1]!.toLowerCase()
      refuseStructureExpressions(nodes, nodes[at]!, name, fn[1]!)
      const where = parent?.node ?? ''
      if (where.startsWith('Storage definition') && firstChild) {
        if (!SERVE_ENGINES.test(fn[1]!)) throw new SandboxRefusal(`Engine ${fn[1]} is not allowed: only engines that keep data in the engine's own directory`)
        continue
      }
      const table = where.startsWith('TableExpression') || (parent === nodes[0] && kind === 'InsertQuery') || tableFunctions.tableOnly.has(name)
      if (table && !SERVE_TABLE_FUNCTIONS.has(name)) throw new SandboxRefusal(`Table function ${fn[1]} is not allowed: it reaches files, URLs, other servers or programs`)
      if (!table && functionStems(name).some((stem) => REFUSED_FUNCTIONS.has(stem))) throw new SandboxRefusal(`Function ${fn[1]} is not allowed`)
    }
  }
  for (const table of tablesInAst(ast)) refusePathLikeTable(table)
  // `CREATE TABLE t AS other` copies other's engine, a file's too; its EXPLAIN AST does not show other.
  const copied = kind === 'CreateQuery' ? /^CREATE [^\n]*? AS ((?:`(?:[^`\\]|\\.)*`|[^\s`.]+)(?:\.(?:`(?:[^`\\]|\\.)*`|[^\s`.]+))*)$/m.exec(formatted) : null
  if (copied) {
    const parts = [...copied[1]!.matchAll(/`((?:[^`\\]|\\.)*)`|([^\s`.]+)/g)].map((m) => m[1]?.replace(/\\(.)/g, '$1') ?? m[2]!)
    if (parts.length > 2 || !parts.every((p) => PLAIN_NAME.test(p))) refusePathLikeTable(copied[1]!)
  }
  for (const name of settingsInFormatted(formatted)) checkServeSetting(name)
  const format = formatInAst(ast) ?? (kind === 'InsertQuery' ? /\bFORMAT (\w+)\s*$/.exec(formatted)?.[1] ?? null : null)
  if (format !== null) checkServeFormat(format)
}

/**
 * The plain names of `default` a statement names as tables, as `tablesInAst` finds them:
 * `default.t`, and `t` when `unqualifiedIsDefault` (no other `USE`). Each must be a table of the
 * service: the embedded engine's `default` database reads a file of the directory the process
 * started in as a table when no table has its name (`SELECT * FROM (SELECT * FROM Dockerfile)`).
 * Names a statement defines itself (`WITH t AS (…)`) are listed too: which reference a definition
 * covers is the engine's to resolve (engine.ts, `refuseFilesAsTables`). `CREATE TABLE t AS other`
 * names `other` where its `EXPLAIN AST` does not show it.
 */
export function defaultTableNames (formatted: string, ast: string, unqualifiedIsDefault: boolean): string[] {
  const names = tablesInAst(ast)
  const copied = astNodes(ast)[0]?.node.startsWith('CreateQuery') ? /^CREATE [^\n]*? AS ([A-Za-z_][A-Za-z0-9_.]*)$/m.exec(formatted)?.[1] : undefined
  if (copied) names.push(copied)
  const found = new Set<string>()
  for (const name of names) {
    const parts = name.split('.')
    if (parts.length === 2 && parts[0] === 'default') found.add(parts[1]!)
    else if (parts.length === 1 && unqualifiedIsDefault) found.add(parts[0]!)
  }
  return [...found]
}

/** Table and database engines `npm run clickhouse:serve` creates: those keeping their data in the engine's own directory (or none). */
const SERVE_ENGINES = /^((Replicated)?(Replacing|Summing|Aggregating|Collapsing|VersionedCollapsing|Coalescing)?MergeTree|Memory|Null|Buffer|Merge|Log|TinyLog|StripeLog|Set|Join|Atomic|Replicated|Lazy)$/

/** Every setting named in the SETTINGS clauses and SET statements of a formatted statement. */
function settingsInFormatted (formatted: string): string[] {
  const names: string[] = []
  for (const clause of formatted.matchAll(/^\s*(?:SET|SETTINGS) (.*)$/gm)) {
    for (const m of clause[1]!.matchAll(/(?:^|,\s*)`?([A-Za-z_][A-Za-z0-9_]*)`?\s*=/g)) names.push(m[1]!)
  }
  return names
}
