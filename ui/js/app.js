// Entry point: sign-in, the page shell with its navigation, and the hash router.
import { render } from 'preact'
import { useEffect, useState, useRef } from 'preact/hooks'
import { api, token, tokenProblem, whenUnauthorized, claimsOf } from './api.js'
import { html, ErrorNote, focusHeading } from './ui.js'
import { Overview } from './pages/overview.js'
import { AgentsPage, AgentPage } from './pages/agents.js'
import { LivePage } from './pages/live.js'
import { SessionsPage, SessionPage, TracesPage, TracePage } from './pages/traces.js'
import { ErrorsPage } from './pages/errors.js'
import { AlertsPage } from './pages/alerts.js'
import { SpendPage } from './pages/spend.js'
import { KeysPage } from './pages/keys.js'
import { ChannelsPage } from './pages/channels.js'
import { PricesPage } from './pages/prices.js'
import { ScoresPage } from './pages/scores.js'

const NAV = [
  ['overview', 'Overview'],
  ['agents', 'Agents'],
  ['live', 'Live events'],
  ['sessions', 'Sessions'],
  ['traces', 'Traces'],
  ['errors', 'Errors'],
  ['alerts', 'Alerts'],
  ['scores', 'Scores'],
  ['spend', 'Spend'],
  ['prices', 'Model prices'],
  ['keys', 'API keys'],
  ['channels', 'Channels'],
]

/**
 * `#token=…` (the URL `npm run token` prints): keeps the token for this tab and drops it from the
 * address bar and window.history at once. True when the URL carried one.
 */
function takeTokenFromUrl () {
  const fromUrl = /^#token=([^&]*)/.exec(window.location.hash)
  if (!fromUrl) return false
  token.set(decodeURIComponent(fromUrl[1]))
  window.history.replaceState(null, '', `${window.location.pathname}${window.location.search}#/overview`)
  return true
}
takeTokenFromUrl()

/**
 * The page, id and parameters of the hash (`#/traces/abc?q=why?`): the query is everything after the
 * first `?`, later ones included (`q=why?` searches for `why?`), as a URL's query would be.
 */
function currentRoute () {
  const hash = window.location.hash.replace(/^#\/?/, '')
  const at = hash.indexOf('?')
  const [path, search] = at === -1 ? [hash, ''] : [hash.slice(0, at), hash.slice(at + 1)]
  // A hand-written `%` that is no escape (`#/traces/%E0`) is kept as written rather than failing the page.
  const parts = path.split('/').map((part) => {
    try {
      return decodeURIComponent(part)
    } catch {
      return part
    }
  })
  return { page: parts[0] || 'overview', id: parts.slice(1).join('/') || null, ...paramsOf(search) }
}

/** What tells two routes apart: a page is drawn anew when it changes. */
function routeKey (route) {
  return `${route.page}/${route.id}?${route.params}`
}

/**
 * The parameters of the address's query, and the names of those whose `%` escapes are not UTF-8 text
 * (`q=%ED%A0%80`), which are left out and said, as the service refuses such a filter with a 400:
 * URLSearchParams would turn them into U+FFFD and search for that.
 */
export function paramsOf (search) {
  const params = new URLSearchParams()
  const unreadable = []
  for (const part of search.split('&')) {
    if (!part) continue
    const eq = part.indexOf('=')
    const [name, value] = eq === -1 ? [part, ''] : [part.slice(0, eq), part.slice(eq + 1)]
    try {
      params.append(decodeURIComponent(name.replace(/\+/g, ' ')), decodeURIComponent(value.replace(/\+/g, ' ')))
    } catch {
      unreadable.push(name)
    }
  }
  return { params, unreadable }
}

function SignIn ({ message, onSignedIn }) {
  const [value, setValue] = useState('')
  const [error, setError] = useState(message ? { message } : null)
  const [busy, setBusy] = useState(false)
  const field = useRef()
  useEffect(() => field.current?.focus(), [])
  const submit = async (e) => {
    e.preventDefault()
    const jwt = value.trim().replace(/^Bearer\s+/i, '')
    const problem = tokenProblem(jwt)
    if (problem) return setError({ message: problem })
    setBusy(true)
    token.set(jwt)
    try {
      const me = await api('/v1/me')
      onSignedIn(me)
    } catch (err) {
      token.clear()
      if (err.status !== 401) setError(err)
      else setError({ message: 'The service refused that token (invalid, expired or signed by another key).' })
    } finally {
      setBusy(false)
    }
  }
  return html`<main class="signin" id="main">
    <h1>Agent telemetry</h1>
    <form onSubmit=${submit} aria-describedby="signin-help">
      <label for="token">Dashboard token</label>
      <textarea id="token" ref=${field} rows="4" spellcheck="false" autocomplete="off" value=${value}
        onInput=${(e) => setValue(e.target.value)} placeholder="eyJhbGciOi…"></textarea>
      <${ErrorNote} error=${error} />
      <button class="primary" type="submit" disabled=${busy || !value.trim()}>Sign in</button>
    </form>
    <p id="signin-help" class="muted">Run <code>npm run token -- your-name</code> and open the URL it prints,
      or paste the token here. It is kept for this browser tab only.</p>
  </main>`
}

function Page ({ route, names, refreshNames }) {
  const props = { id: route.id, params: route.params, names, refreshNames }
  switch (route.page) {
    case 'agents': return route.id ? html`<${AgentPage} ...${props} />` : html`<${AgentsPage} ...${props} />`
    case 'live': return html`<${LivePage} ...${props} />`
    case 'sessions': return route.id ? html`<${SessionPage} ...${props} />` : html`<${SessionsPage} ...${props} />`
    case 'traces': return route.id ? html`<${TracePage} ...${props} />` : html`<${TracesPage} ...${props} />`
    case 'errors': return html`<${ErrorsPage} ...${props} />`
    case 'alerts': return html`<${AlertsPage} ...${props} />`
    case 'scores': return html`<${ScoresPage} ...${props} />`
    case 'spend': return html`<${SpendPage} ...${props} />`
    case 'keys': return html`<${KeysPage} ...${props} />`
    case 'channels': return html`<${ChannelsPage} ...${props} />`
    case 'prices': return html`<${PricesPage} ...${props} />`
    default: return html`<${Overview} ...${props} />`
  }
}

function Shell ({ me, onSignOut }) {
  const [route, setRoute] = useState(currentRoute())
  const [names, setNames] = useState(new Map())
  const [menuOpen, setMenuOpen] = useState(false)
  const refreshNames = async () => {
    try {
      const { agents = [] } = await api('/v1/me/agents', { query: { limit: 1000 } })
      setNames(new Map(agents.map((a) => [a.id, a.displayName])))
    } catch {}
  }
  useEffect(() => {
    refreshNames()
    const onHash = () => {
      setRoute(currentRoute())
      setMenuOpen(false)
      // Move focus to the new page's heading, as a page load would.
      window.requestAnimationFrame(focusHeading)
    }
    window.addEventListener('hashchange', onHash)
    // The address may have changed between the first render and now (effects run after it is
    // painted), and that hashchange had no listener yet: take the page it names.
    const now = currentRoute()
    setRoute((shown) => routeKey(shown) === routeKey(now) && `${shown.unreadable}` === `${now.unreadable}` ? shown : now)
    return () => window.removeEventListener('hashchange', onHash)
  }, [])
  // Each page its own title, so tabs and the history tell pages apart: "Traces", "Traces: 4bf9…".
  useEffect(() => {
    const label = NAV.find(([page]) => page === route.page)?.[1]
    document.title = label ? `${label}${route.id ? `: ${route.id}` : ''} · Agent telemetry` : 'Agent telemetry'
  }, [route.page, route.id])
  // Escape closes the menu (on a phone it covers the page), and gives the focus back to its button.
  useEffect(() => {
    if (!menuOpen) return
    const onKey = (e) => {
      if (e.key !== 'Escape') return
      setMenuOpen(false)
      document.querySelector('header .menu')?.focus()
    }
    window.addEventListener('keydown', onKey)
    return () => window.removeEventListener('keydown', onKey)
  }, [menuOpen])
  const exp = claimsOf(token.get() || '')?.exp
  return html`<div class="shell">
    <a class="skip" href="#main" onClick=${(e) => { e.preventDefault(); document.getElementById('main')?.focus() }}>Skip to content</a>
    <header class="top">
      <a class="brand" href="#/overview">Agent telemetry</a>
      <button class="menu" aria-expanded=${menuOpen} aria-controls="nav" onClick=${() => setMenuOpen(!menuOpen)}>Menu</button>
      <span class="who" title=${exp ? `token expires ${new Date(exp * 1000).toLocaleString()}` : ''}>${me.handle || me.privyId}</span>
      <button onClick=${onSignOut}>Sign out</button>
    </header>
    <nav id="nav" class=${menuOpen ? 'open' : ''} aria-label="Pages">
      <ul>${NAV.map(([page, label]) => html`<li><a href=${`#/${page}`} aria-current=${route.page === page ? 'page' : undefined}>${label}</a></li>`)}</ul>
    </nav>
    <main id="main" tabindex="-1">
      ${route.unreadable.length
        ? html`<${ErrorNote} error=${{ message: `Left out of this search: ${route.unreadable.join(', ')}, whose %-escapes in the address are not UTF-8 text.` }} />`
        : null}
      <${Page} key=${routeKey(route)} route=${route} names=${names} refreshNames=${refreshNames} />
    </main>
  </div>`
}

function App () {
  const [me, setMe] = useState(null)
  const [message, setMessage] = useState(null)
  const [checking, setChecking] = useState(Boolean(token.get()))
  useEffect(() => {
    whenUnauthorized((why) => { token.clear(); setMe(null); setMessage(why) })
    const check = () => {
      const jwt = token.get()
      if (!jwt) return
      const problem = tokenProblem(jwt)
      if (problem) { token.clear(); setMe(null); setMessage(problem); setChecking(false); return }
      // Show the pages at once (their reads start now); /v1/me confirms the token meanwhile, and any
      // 401 returns to sign-in.
      setMe({ privyId: claimsOf(jwt)?.sub, handle: null })
      api('/v1/me').then(setMe, (err) => { if (err.status !== 401) setMessage(err.message) }).finally(() => setChecking(false))
    }
    check()
    // A token URL opened in a tab that is already on the dashboard.
    const onHash = () => { if (takeTokenFromUrl()) check() }
    window.addEventListener('hashchange', onHash)
    return () => window.removeEventListener('hashchange', onHash)
  }, [])
  // Sign out when the token's expiry passes, rather than on the next failed request.
  useEffect(() => {
    const exp = me && claimsOf(token.get() || '')?.exp
    if (!exp) return
    const timer = setTimeout(() => { token.clear(); setMe(null); setMessage('Your token has expired. Sign in with a new one.') }, Math.min(exp * 1000 - Date.now(), 2 ** 31 - 1))
    return () => clearTimeout(timer)
  }, [me])
  if (checking && !me) return html`<p class="boot">Signing in…</p>`
  if (!me) return html`<${SignIn} message=${message} onSignedIn=${(m) => { setMessage(null); setMe(m); if (!window.location.hash.startsWith('#/')) window.location.hash = '#/overview' }} />`
  return html`<${Shell} me=${me} onSignOut=${() => { token.clear(); setMe(null); setMessage('Signed out.') }} />`
}

render(html`<${App} />`, document.getElementById('app'))
