// API keys: create (the secret is shown once, with a copy button), list, revoke.
import { useState } from 'preact/hooks'
import { api, agentRef } from '../api.js'
import { html, useData, useAction, ErrorNote, Loading, Empty, Time, ConfirmButton, AgentLink, SecretOnce, ago } from '../ui.js'

function KeyRow ({ k, names, onRevoked }) {
  const action = useAction()
  return html`<tr data-key-id=${k.id}>
    <th scope="row">${k.label}</th><td><code>${k.keyPrefix}…</code></td>
    <td>${k.agentId ? html`<${AgentLink} agent=${agentRef(k.agentId, names)} />` : html`<span class="muted">any agent</span>`}</td>
    <td><${Time} iso=${k.createdAt} /></td><td>${k.lastUsedAt ? ago(k.lastUsedAt) : 'never'}</td>
    <td><${ConfirmButton} label="Revoke" confirmLabel="Revoke now" busy=${action.busy} question=${`Revoke “${k.label}”? Events sent with it are refused at once.`}
      onConfirm=${() => action.run(() => api(`/v1/me/keys/${k.id}`, { method: 'DELETE' }), onRevoked)} /><${ErrorNote} error=${action.error} /></td>
  </tr>`
}

export function KeysPage ({ names }) {
  const { data, error, reload } = useData(() => api('/v1/me/keys'), [])
  const [label, setLabel] = useState('')
  const [agentId, setAgentId] = useState('')
  const [created, setCreated] = useState(null)
  const create = useAction()
  const submit = (e) => {
    e.preventDefault()
    create.run(() => api('/v1/me/keys', { method: 'POST', body: agentId ? { label: label.trim(), agentId } : { label: label.trim() } }), async (key) => {
      setCreated(key)
      setLabel('')
      await reload()
    })
  }
  const agents = [...names.entries()].sort((a, b) => a[1].localeCompare(b[1]))
  return html`
    <h1 tabindex="-1">API keys</h1>
    ${created
? html`<${SecretOnce} title=${`Key “${created.label}” created`} secret=${created.secret} onDismiss=${() => setCreated(null)}>
        Send it as <code>Authorization: Bearer …</code> to <code>POST /v1/events</code>.</${SecretOnce}>`
: null}
    <section class="card" aria-labelledby="create"><h2 id="create">Create a key</h2>
      <form class="inline" onSubmit=${submit}>
        <label>Label <input value=${label} maxLength="100" required onInput=${(e) => setLabel(e.target.value)} placeholder="laptop" /></label>
        <label>Bound to <select value=${agentId} onChange=${(e) => setAgentId(e.target.value)}>
          <option value="">any agent</option>${agents.map(([id, name]) => html`<option value=${id}>${name}</option>`)}</select></label>
        <button class="primary" type="submit" disabled=${create.busy || !label.trim()}>Create key</button>
      </form>
      <${ErrorNote} error=${create.error} />
    </section>
    <${ErrorNote} error=${error} />
    ${!data
? html`<${Loading} />`
: data.keys.length === 0
? html`<${Empty}>No keys yet.</${Empty}>`
: html`
    <div class="table-wrap"><table class="keys">
      <thead><tr><th scope="col">Label</th><th scope="col">Prefix</th><th scope="col">Agent</th><th scope="col">Created</th><th scope="col">Last used</th><th scope="col"><span class="sr-only">Actions</span></th></tr></thead>
      <tbody>${data.keys.map((k) => html`<${KeyRow} key=${k.id} k=${k} names=${names} onRevoked=${reload} />`)}</tbody>
    </table></div>`}`
}
