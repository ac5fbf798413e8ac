// The skillhost web console. Dependency-free; uses only the public API with the bearer
// token kept in this tab's session storage. Every value from the server is inserted as
// text (never as HTML).
'use strict';

const TOKEN_KEY = 'skillhost.token';
let token = sessionStorage.getItem(TOKEN_KEY);
let activity = null; // AbortController of the /api/activity stream
let viewStream = null; // AbortController of the current view's stream
let refreshTimer = null;
const started = new Map(); // run_id -> AbortController of runs started from this page

class ApiFailure extends Error {
  constructor(status, message) { super(message); this.status = status; }
}

// An element with attributes (`on*` are listeners) and children (strings become text).
function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (key.startsWith('on')) e.addEventListener(key.slice(2), value);
    else if (key === 'class') e.className = value;
    else e.setAttribute(key, value === true ? '' : String(value));
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    e.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return e;
}

function headers(extra) {
  const h = Object.assign({}, extra || {});
  if (token) h.Authorization = 'Bearer ' + token;
  return h;
}

async function api(path, options) {
  const opts = Object.assign({ method: 'GET' }, options || {});
  const h = headers();
  if (opts.json !== undefined) {
    h['Content-Type'] = 'application/json';
    opts.body = JSON.stringify(opts.json);
    delete opts.json;
  }
  opts.headers = h;
  let response;
  try {
    response = await fetch(path, opts);
  } catch (e) {
    throw new ApiFailure(0, 'the server cannot be reached');
  }
  let body = null;
  try { body = await response.json(); } catch (e) { body = null; }
  if (response.status === 401) {
    signOut('The token was refused: sign in again.');
    throw new ApiFailure(401, 'the token was refused');
  }
  if (!response.ok) throw new ApiFailure(response.status, (body && body.error) || response.statusText);
  return body;
}

// Reads an SSE response, calling `onEvent(type, data)` per event; resolves when it ends.
async function readSse(response, onEvent) {
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffer = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buffer += decoder.decode(value, { stream: true });
    let at;
    while ((at = buffer.indexOf('\n\n')) >= 0) {
      const chunk = buffer.slice(0, at);
      buffer = buffer.slice(at + 2);
      let type = 'message';
      let data = '';
      for (const line of chunk.split('\n')) {
        if (line.startsWith('event:')) type = line.slice(6).trim();
        else if (line.startsWith('data:')) data += line.slice(5).trim();
      }
      if (!data) continue;
      let parsed;
      try { parsed = JSON.parse(data); } catch (e) { continue; }
      onEvent(type, parsed);
    }
  }
}

async function stream(path, onEvent, controller, options) {
  const opts = Object.assign({ headers: headers(), signal: controller.signal }, options || {});
  const response = await fetch(path, opts);
  if (response.status === 401) {
    signOut('The token was refused: sign in again.');
    return;
  }
  if (!response.ok) {
    let message = response.statusText;
    try { message = (await response.json()).error || message; } catch (e) { /* not JSON */ }
    throw new ApiFailure(response.status, message);
  }
  await readSse(response, onEvent);
}

function status(text) {
  document.getElementById('status').textContent = text || '';
}

function when(seconds) {
  if (!seconds) return '';
  return new Date(seconds * 1000).toLocaleString();
}

function duration(seconds) {
  if (seconds === null || seconds === undefined) return '';
  if (seconds < 1) return Math.round(seconds * 1000) + ' ms';
  if (seconds < 120) return seconds.toFixed(1) + ' s';
  return Math.round(seconds / 60) + ' min';
}

function json(value) {
  return JSON.stringify(value, null, 2);
}

// ---- Sign-in ----------------------------------------------------------------------------

function signOut(reason) {
  token = null;
  sessionStorage.removeItem(TOKEN_KEY);
  if (activity) activity.abort();
  if (viewStream) viewStream.abort();
  activity = null;
  document.getElementById('nav').hidden = true;
  document.getElementById('view').replaceChildren();
  document.getElementById('signin').hidden = false;
  document.getElementById('signin-error').textContent = reason || '';
  document.getElementById('token').focus();
}

async function signIn(event) {
  event.preventDefault();
  const input = document.getElementById('token');
  const error = document.getElementById('signin-error');
  error.textContent = '';
  token = input.value.trim();
  try {
    await api('/api/runs');
  } catch (e) {
    token = null;
    error.textContent = e.status === 401 ? 'That token was refused.' : 'Cannot sign in: ' + e.message;
    input.select();
    return;
  }
  sessionStorage.setItem(TOKEN_KEY, token);
  input.value = '';
  enter();
}

function enter() {
  document.getElementById('signin').hidden = true;
  document.getElementById('nav').hidden = false;
  watchActivity();
  route();
}

// ---- Live activity ----------------------------------------------------------------------

function watchActivity() {
  if (activity) activity.abort();
  const controller = new AbortController();
  activity = controller;
  const loop = async () => {
    while (activity === controller && token) {
      try {
        await stream('/api/activity', () => changed(), controller);
      } catch (e) {
        if (controller.signal.aborted) return;
        status('Lost the live feed (' + e.message + '); retrying.');
      }
      if (controller.signal.aborted) return;
      await new Promise((resolve) => setTimeout(resolve, 1000));
    }
  };
  loop();
}

let changeQueued = false;
function changed() {
  if (changeQueued) return;
  changeQueued = true;
  setTimeout(async () => {
    changeQueued = false;
    status('');
    await updateBadge();
    const view = currentView();
    if (view.name === 'runs' || view.name === 'approvals') render(view, true);
  }, 50);
}

async function updateBadge() {
  try {
    const [a, q] = await Promise.all([api('/api/approvals'), api('/api/questions')]);
    const count = a.approvals.length + q.questions.length;
    const badge = document.getElementById('pending');
    badge.textContent = String(count);
    badge.hidden = count === 0;
    badge.setAttribute('aria-label', count + ' waiting for a person');
  } catch (e) { /* shown by the view */ }
}

// ---- Routing ----------------------------------------------------------------------------

function currentView() {
  const parts = (location.hash || '#/runs').slice(2).split('/');
  return { name: parts[0] || 'runs', id: parts[1] ? decodeURIComponent(parts[1]) : null };
}

function route() {
  if (!token) return;
  const view = currentView();
  for (const link of document.querySelectorAll('nav a')) {
    if (link.dataset.view === view.name) link.setAttribute('aria-current', 'page');
    else link.removeAttribute('aria-current');
  }
  if (viewStream) viewStream.abort();
  viewStream = null;
  clearInterval(refreshTimer);
  render(view, false);
  updateBadge();
}

async function render(view, quiet) {
  const target = document.getElementById('view');
  const views = { runs: runsView, run: runView, approvals: waitingView, skills: skillsView, mcp: mcpView, new: newView, audit: auditView };
  const make = views[view.name];
  if (!make) {
    target.replaceChildren(el('h1', {}, 'Not found'), el('p', {}, 'No such page. ', el('a', { href: '#/runs' }, 'Back to runs')));
    return;
  }
  try {
    const content = await make(view);
    if (content && currentView().name === view.name && currentView().id === view.id) {
      const focused = document.activeElement && document.activeElement.id;
      const typed = saveInputs(target);
      target.replaceChildren(content);
      restoreInputs(target, typed);
      if (focused && document.getElementById(focused)) document.getElementById(focused).focus();
      else if (!quiet) target.focus({ preventScroll: true });
    }
  } catch (e) {
    if (e.status === 401) return;
    target.replaceChildren(el('h1', {}, 'Something went wrong'), el('p', { class: 'error', role: 'alert' }, 'Cannot load this page: ' + e.message));
  }
}

// What a person typed survives a refresh of the list it is in.
function saveInputs(root) {
  const typed = {};
  for (const input of root.querySelectorAll('input[id], textarea[id]')) typed[input.id] = input.value;
  return typed;
}

function restoreInputs(root, typed) {
  for (const [id, value] of Object.entries(typed)) {
    const input = root.querySelector('#' + CSS.escape(id));
    if (input && value) input.value = value;
  }
}

// ---- Runs -------------------------------------------------------------------------------

function stateCell(state) {
  return el('span', { class: 'state state-' + state }, state);
}

async function runsView() {
  const body = await api('/api/runs');
  document.getElementById('agent').textContent = 'agent ' + body.agent;
  clearInterval(refreshTimer);
  if (body.runs.some((r) => r.state === 'running' || r.state === 'waiting')) {
    refreshTimer = setInterval(() => { if (currentView().name === 'runs') render(currentView(), true); }, 3000);
  }
  const heading = el('h1', {}, 'Runs');
  if (body.runs.length === 0) {
    return el('div', {}, heading, el('p', { class: 'muted', id: 'runs-empty' },
      'No runs yet. Start one from ', el('a', { href: '#/new' }, 'New run'), ', or with POST /api/trigger.'));
  }
  const rows = body.runs.map((r) => el('tr', { 'data-run': r.run_id },
    el('td', {}, el('a', { href: '#/run/' + encodeURIComponent(r.run_id) }, r.channel_id)),
    el('td', {}, stateCell(r.state), r.pending_approvals + r.pending_questions > 0 ? ' (' + (r.pending_approvals + r.pending_questions) + ' waiting)' : ''),
    el('td', { class: 'hide-narrow' }, r.agent),
    el('td', {}, r.adapter + (r.mode && r.mode !== 'chat' ? ' · ' + r.mode : '')),
    el('td', { class: 'hide-narrow' }, r.replica === 'another' ? 'on another replica' : when(r.started_at)),
    el('td', {}, duration(r.duration)),
    el('td', { class: 'hide-narrow' }, r.tool_calls === null ? '' : String(r.tool_calls))));
  const head = el('tr', {}, el('th', {}, 'Channel'), el('th', {}, 'State'), el('th', { class: 'hide-narrow' }, 'Agent'),
    el('th', {}, 'Adapter'), el('th', { class: 'hide-narrow' }, 'Started'), el('th', {}, 'Duration'), el('th', { class: 'hide-narrow' }, 'Tools'));
  return el('div', {}, heading, el('div', { class: 'table-wrap' }, el('table', { id: 'runs' }, el('thead', {}, head), el('tbody', {}, rows))));
}

// One run: its summary, then its events as they stream.
async function runView(view) {
  const run = await api('/api/runs/' + encodeURIComponent(view.id));
  const summary = el('dl', { class: 'kv' },
    el('dt', {}, 'Channel'), el('dd', {}, run.channel_id),
    el('dt', {}, 'State'), el('dd', { id: 'run-state' }, stateCell(run.state)),
    el('dt', {}, 'Adapter'), el('dd', {}, run.adapter + (run.mode ? ' · ' + run.mode : '')),
    el('dt', {}, 'Started'), el('dd', {}, when(run.started_at)),
    el('dt', {}, 'Run id'), el('dd', { class: 'mono' }, run.run_id));
  if (run.replica === 'another') {
    // Held by another replica (or one that died): what waits on a person is decided here;
    // its events are read on the replica that runs it.
    const page = el('div', {}, el('h1', {}, 'Run'), summary,
      el('p', { class: 'muted', id: 'run-elsewhere' }, 'This run is held by another replica; its events are shown there.'));
    for (const a of run.approvals) page.append(approvalCard(a, a.decidable));
    for (const q of run.questions) page.append(questionCard(q, q.decidable));
    return page;
  }
  const log = el('div', { id: 'events' });
  const decidable = run.mode === 'approval-v1';
  const page = el('div', {}, el('h1', {}, 'Run'), summary, el('h2', {}, 'Events'), log);
  if (run.events_dropped) page.append(el('p', { class: 'muted' }, run.events_dropped + ' events were not kept.'));
  const controller = new AbortController();
  viewStream = controller;
  const renderer = eventRenderer(log, decidable);
  stream('/api/runs/' + encodeURIComponent(view.id) + '/events', (type, data) => {
    renderer(type, data);
    const state = { run_completed: 'completed', run_failed: 'failed', run_cancelled: 'cancelled' }[type];
    const cell = document.getElementById('run-state');
    if (state && cell) cell.replaceChildren(stateCell(state));
  }, controller).catch((e) => {
    if (!controller.signal.aborted) log.append(el('p', { class: 'error', role: 'alert' }, 'The event stream ended: ' + e.message));
  });
  return page;
}

// Renders approval-v1 events into `log`; approvals and questions get their controls when
// this console can decide them.
function eventRenderer(log, decidable) {
  let text = null;
  const tools = new Map();
  return (type, data) => {
    if (type !== 'assistant_text') text = type === 'assistant_text_start' ? null : text;
    switch (type) {
      case 'assistant_text':
        if (!text) { text = el('div', { class: 'event text' }); log.append(text); }
        text.append(data.text);
        break;
      case 'tool_started': {
        const row = el('div', { class: 'event tool', 'data-tool-call': data.tool_call_id },
          el('strong', {}, data.tool_name), ' ', el('span', { class: 'muted outcome' }, 'running…'),
          el('pre', {}, json(data.tool_input)));
        tools.set(data.tool_call_id, row);
        log.append(row);
        break;
      }
      case 'tool_completed': {
        const row = tools.get(data.tool_call_id);
        const outcome = (data.approved === false ? 'not run' : 'done') + ' in ' + duration(data.duration) + (data.is_empty ? ' (empty)' : '');
        if (row) row.querySelector('.outcome').textContent = outcome;
        else log.append(el('div', { class: 'event tool' }, el('strong', {}, data.tool_name), ' ', outcome));
        break;
      }
      case 'approval_requested':
        log.append(approvalCard(data, decidable, 'event approval'));
        break;
      case 'approval_resolved': {
        const card = log.querySelector('[data-approval="' + CSS.escape(data.approval_id || '') + '"]');
        if (card) settle(card, 'Approval ' + data.outcome + '.');
        else log.append(el('div', { class: 'event approval' }, 'Approval ' + data.outcome + '.'));
        break;
      }
      case 'question_requested':
        log.append(questionCard(data, decidable, 'event question'));
        break;
      case 'question_resolved': {
        const card = log.querySelector('[data-question="' + CSS.escape(data.question_id) + '"]');
        const said = data.outcome === 'answered' ? 'Answered: ' + data.answer : 'Question ' + data.outcome + '.';
        if (card) settle(card, said);
        else log.append(el('div', { class: 'event question' }, said));
        break;
      }
      case 'run_completed':
        log.append(el('div', { class: 'event done', id: 'run-done' }, 'Completed' + (data.time_boxed ? ' (time-boxed)' : '') + '.',
          data.usage ? el('span', { class: 'muted' }, ' Tokens: ' + data.usage.input_tokens + ' in, ' + data.usage.output_tokens + ' out.') : null));
        break;
      case 'run_failed':
        log.append(el('div', { class: 'event failed', role: 'alert' }, data.error));
        break;
      case 'run_cancelled':
        log.append(el('div', { class: 'event failed' }, 'Cancelled before it finished.'));
        break;
      case 'lagged':
        log.append(el('p', { class: 'muted' }, 'Missed some events; reload to see them all.'));
        break;
      default:
        break;
    }
  };
}

function settle(card, text) {
  for (const control of card.querySelectorAll('.actions')) control.remove();
  card.append(el('p', { class: 'resolved' }, text));
}

// ---- Approvals and questions ------------------------------------------------------------

function approvalCard(a, decidable, cls) {
  const id = a.approval_id;
  const error = el('p', { class: 'error', role: 'alert' });
  const card = el('div', { class: cls || 'card', 'data-approval': id },
    el('h3', {}, a.tool_name, ' ', el('span', { class: 'muted' }, '(' + a.level + ')')),
    a.safe_description ? el('p', {}, a.safe_description) : null,
    el('pre', {}, json(a.tool_input)),
    el('p', { class: 'muted' }, 'Channel ', a.channel_id, a.expires_at ? ' · expires ' + when(a.expires_at) : ''));
  if (!decidable) {
    card.append(el('p', { class: 'muted' }, 'Decided in its ' + (a.adapter || 'own') + ' conversation.'));
    return card;
  }
  // `extra`: the changed `arguments` of an approval, or the `reason` of a denial.
  const decide = async (approved, confirmation, extra) => {
    error.textContent = '';
    for (const b of card.querySelectorAll('button')) b.disabled = true;
    try {
      const body = Object.assign({ approved }, extra || {});
      if (confirmation !== undefined) body.confirmation = confirmation;
      const result = await api('/api/approvals/' + encodeURIComponent(id) + '/decision', { method: 'POST', json: body });
      settle(card, 'Approval ' + result.outcome + (body.arguments ? ' with changed arguments.' : '.'));
    } catch (e) {
      error.textContent = e.message;
      for (const b of card.querySelectorAll('button')) b.disabled = false;
    }
  };
  const actions = el('div', { class: 'actions' });
  let confirmation = () => undefined;
  if (a.confirmation_challenge) {
    const inputId = 'confirm-' + id;
    const input = el('input', { id: inputId, autocomplete: 'off', spellcheck: 'false' });
    confirmation = () => input.value;
    actions.append(el('div', {}, el('label', { for: inputId }, 'Type ' + a.confirmation_challenge + ' to approve'), input),
      el('button', { class: 'approve', type: 'button', onclick: () => decide(true, input.value) }, 'Confirm'));
  } else {
    actions.append(el('button', { class: 'approve', type: 'button', onclick: () => decide(true) }, 'Approve'));
  }
  // Approve with edits: the call runs with the arguments typed here (the server checks them
  // against the tool's input schema), and the model is told they were changed.
  const argsId = 'arguments-' + id;
  const args = el('textarea', { id: argsId, rows: '6', spellcheck: 'false' });
  args.value = JSON.stringify(a.tool_input, null, 2);
  const approveEdited = () => {
    let changed;
    try {
      changed = JSON.parse(args.value);
    } catch (e) {
      error.textContent = 'The arguments are not JSON: ' + e.message;
      return;
    }
    decide(true, confirmation(), { arguments: changed });
  };
  actions.append(el('details', { class: 'edit' }, el('summary', {}, 'Edit arguments'),
    el('label', { for: argsId }, 'Arguments (JSON)'), args,
    el('button', { class: 'approve-edited', type: 'button', onclick: approveEdited }, 'Approve with these arguments')));
  // Deny, with a reason the model reads.
  const reasonId = 'reason-' + id;
  const reason = el('input', { id: reasonId, autocomplete: 'off', maxlength: '1000' });
  const deny = () => decide(false, undefined, reason.value.trim() ? { reason: reason.value.trim() } : undefined);
  actions.append(el('div', {}, el('label', { for: reasonId }, 'Reason (optional)'), reason),
    el('button', { class: 'deny', type: 'button', onclick: deny }, 'Deny'));
  card.append(actions, error);
  return card;
}

function questionCard(q, decidable, cls) {
  const id = q.question_id;
  const error = el('p', { class: 'error', role: 'alert' });
  const card = el('div', { class: cls || 'card', 'data-question': id },
    el('h3', {}, q.prompt),
    el('p', { class: 'muted' }, 'Channel ', q.channel_id, q.expires_at ? ' · expires ' + when(q.expires_at) : ''));
  if (q.schema) {
    // A form: the answer is JSON fitting the schema (the server checks it and says why not).
    card.append(el('p', { class: 'muted' }, 'Answer with JSON matching:'), el('pre', { class: 'schema' }, JSON.stringify(q.schema, null, 2)));
  }
  if (!decidable) {
    card.append(el('p', { class: 'muted' }, 'Answered in its ' + (q.adapter || 'own') + ' conversation.'));
    return card;
  }
  const answer = async (text) => {
    error.textContent = '';
    if (!text.trim()) { error.textContent = 'Write an answer first.'; return; }
    for (const b of card.querySelectorAll('button')) b.disabled = true;
    try {
      await api('/api/questions/' + encodeURIComponent(id) + '/answer', { method: 'POST', json: { answer: text } });
      settle(card, 'Answered: ' + text);
    } catch (e) {
      error.textContent = e.message;
      for (const b of card.querySelectorAll('button')) b.disabled = false;
    }
  };
  const actions = el('div', { class: 'actions' });
  for (const choice of q.choices || []) {
    actions.append(el('button', { type: 'button', class: 'choice', onclick: () => answer(choice) }, choice));
  }
  const inputId = 'answer-' + id;
  const input = el('input', { id: inputId, autocomplete: 'off' });
  actions.append(el('div', {}, el('label', { for: inputId }, 'Your answer'), input),
    el('button', { type: 'button', class: 'answer', onclick: () => answer(input.value) }, 'Answer'));
  card.append(actions, error);
  return card;
}

async function waitingView() {
  const [a, q] = await Promise.all([api('/api/approvals'), api('/api/questions')]);
  const page = el('div', {}, el('h1', {}, 'Waiting for a person'));
  page.append(el('h2', {}, 'Approvals'));
  if (a.approvals.length === 0) page.append(el('p', { class: 'muted', id: 'no-approvals' }, 'No approval is waiting.'));
  for (const approval of a.approvals) page.append(approvalCard(approval, approval.decidable));
  page.append(el('h2', {}, 'Questions'));
  if (q.questions.length === 0) page.append(el('p', { class: 'muted', id: 'no-questions' }, 'No question is waiting.'));
  for (const question of q.questions) page.append(questionCard(question, question.decidable));
  return page;
}

// ---- Start a run --------------------------------------------------------------------------

function newView() {
  const error = el('p', { class: 'error', role: 'alert' });
  const message = el('textarea', { id: 'message', rows: 4, required: true });
  const channel = el('input', { id: 'channel', value: 'console', autocomplete: 'off' });
  const form = el('form', { id: 'new-run' },
    el('label', { for: 'message' }, 'Message'), message,
    el('label', { for: 'channel' }, 'Channel'), channel,
    el('button', { type: 'submit' }, 'Start'), error);
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    error.textContent = '';
    if (!message.value.trim()) { error.textContent = 'Write a message first.'; return; }
    const body = JSON.stringify({ message: message.value, channel_id: channel.value.trim() || 'console' });
    const controller = new AbortController();
    let opened = false;
    try {
      await stream('/api/trigger?wait=true&stream=approval-v1', (type, data) => {
        if (type === 'run_started' && !opened) {
          opened = true;
          started.set(data.run_id, controller);
          location.hash = '#/run/' + encodeURIComponent(data.run_id);
        }
      }, controller, { method: 'POST', body, headers: headers({ 'Content-Type': 'application/json' }) });
    } catch (e) {
      if (!opened) error.textContent = 'Cannot start the run: ' + e.message;
    }
  });
  return el('div', {}, el('h1', {}, 'New run'),
    el('p', { class: 'muted' }, 'The run streams on its page; closing this tab cancels it (the approval-v1 rule).'), form);
}

// ---- Skills and MCP ---------------------------------------------------------------------

function kv(pairs) {
  const list = el('dl', { class: 'kv' });
  for (const [key, value] of pairs) {
    if (value === null || value === undefined || (Array.isArray(value) && value.length === 0)) continue;
    list.append(el('dt', {}, key), el('dd', {}, Array.isArray(value) ? value.join(', ') : String(value)));
  }
  return list;
}

function toolsTable(tools) {
  const rows = tools.map((t) => el('tr', {},
    el('td', { class: 'mono' }, t.name),
    el('td', {}, t.override ? t.level + ' → ' + t.override + ' (override)' : t.level),
    el('td', { class: 'hide-narrow' }, t.description)));
  return el('div', { class: 'table-wrap' }, el('table', {},
    el('thead', {}, el('tr', {}, el('th', {}, 'Tool'), el('th', {}, 'Approval'), el('th', { class: 'hide-narrow' }, 'Description'))),
    el('tbody', {}, rows)));
}

// Where a skill came from: its folder, or the OCI reference, digest and signer it was
// verified as.
function sourceText(source) {
  if (!source) return null;
  if (source.folder) return 'folder ' + source.folder;
  const signer = source.signer === 'unsigned' ? 'unsigned (allow_unsigned)'
    : (source.signer && source.signer.key ? 'signed, key ' + source.signer.key : 'signed');
  return source.reference + ' @ ' + source.digest + ' · ' + signer;
}

// Reloads this replica's skills (POST /api/skills/reload) and says how it went; a failed
// reload leaves the loaded skills serving and says why.
function reloadControl() {
  const status = el('p', { id: 'reload-status', role: 'status' });
  const button = el('button', { type: 'button', id: 'reload' }, 'Reload skills');
  button.addEventListener('click', async () => {
    button.disabled = true;
    status.className = 'muted';
    status.textContent = 'Reloading: pulling, verifying and compiling what changed…';
    try {
      const done = await api('/api/skills/reload', { method: 'POST' });
      const names = (done.skills || []).flatMap((a) => a.skills.map((s) => s.name));
      await render(currentView(), true);
      const after = document.getElementById('reload-status');
      if (after) { after.className = 'muted'; after.textContent = 'Reloaded on this replica: ' + (names.join(', ') || 'no skill'); }
    } catch (e) {
      status.className = 'error';
      status.textContent = e.message;
      button.disabled = false;
    }
  });
  return el('div', { class: 'actions' }, button, status);
}

async function skillsView() {
  const body = await api('/api/skills');
  const page = el('div', {}, el('h1', {}, 'Skills'), reloadControl());
  if (body.skills.length === 0 && body.declared.length === 0) page.append(el('p', { class: 'muted' }, 'No skill is loaded.'));
  for (const skill of body.skills) {
    const card = el('div', { class: 'card', 'data-skill': skill.name }, el('h3', {}, skill.name, ' ', el('span', { class: 'muted' }, '(' + skill.kind + ')')));
    if (skill.about) card.append(el('p', {}, skill.about));
    card.append(kv([['Source', sourceText(skill.source)], ['Hooks', skill.hooks], ['Schedule', skill.schedule_seconds ? 'every ' + skill.schedule_seconds + ' s' : null],
      ['MCP servers', skill.mcp_servers], ['MCP tools', skill.mcp_tools.map((m) => m.server + ': ' + m.tools.join(' '))]]));
    if (skill.tools.length) card.append(toolsTable(skill.tools));
    if (skill.grants) {
      const g = skill.grants;
      card.append(el('h4', {}, 'Granted'), kv([
        ['HTTP asked', g.http_requested], ['HTTP granted', g.http_granted.length ? g.http_granted : 'none'],
        ['Environment', g.env.length ? g.env : 'none'], ['Memory', g.memory ? 'yes' : 'no'],
        ['State', g.state ? (g.state === 'skill' ? "the skill's own" : 'per conversation') : 'no'],
        ['Files', g.files ? g.files.path + ' (read-only, ' + g.files.files + ' files)' : 'none'], ['MCP', g.mcp ? 'yes' : 'no'],
        ['Notify', g.notify === null ? 'not asked' : (g.notify.length ? g.notify : 'asked, not granted')]]));
    }
    if (skill.limits) {
      const l = skill.limits;
      card.append(el('h4', {}, 'Limits per call'), kv([
        ['Fuel', l.fuel.toLocaleString()], ['Deadline', l.timeout_ms + ' ms'],
        ['Memory', Math.round(l.memory_bytes / 1048576) + ' MiB'], ['Largest result', Math.round(l.max_result_bytes / 1024) + ' KiB'],
        ['State quota', l.state_quota_keys + ' keys, ' + Math.round(l.state_quota_bytes / 1024) + ' KiB']]));
    }
    page.append(card);
  }
  if (body.declared.length) {
    page.append(el('h2', {}, 'Declared in config'), toolsTable(body.declared));
  }
  if (body.problems.length) {
    page.append(el('h2', {}, 'Not loaded'));
    for (const problem of body.problems) page.append(el('p', { class: 'error' }, problem));
  }
  return page;
}

async function mcpView() {
  const body = await api('/api/mcp');
  const page = el('div', {}, el('h1', {}, 'MCP servers'));
  if (body.servers.length === 0) {
    page.append(el('p', { class: 'muted', id: 'no-servers' }, 'No MCP server is configured (mcp_servers).'));
    return page;
  }
  const rows = body.servers.map((s) => el('tr', { 'data-server': s.name },
    el('td', { class: 'mono' }, s.name), el('td', {}, s.transport),
    el('td', {}, el('span', { class: 'state state-' + (s.status === 'ready' ? 'completed' : s.status === 'down' ? 'failed' : 'running') }, s.status),
      s.error ? el('div', { class: 'error' }, s.error) : null),
    el('td', { class: 'hide-narrow' }, s.tools.join(', '))));
  page.append(el('div', { class: 'table-wrap' }, el('table', {},
    el('thead', {}, el('tr', {}, el('th', {}, 'Server'), el('th', {}, 'Transport'), el('th', {}, 'Status'), el('th', { class: 'hide-narrow' }, 'Tools'))),
    el('tbody', {}, rows))));
  return page;
}

// ---- The record -------------------------------------------------------------------------

// The newest page of the record (the last 100 records), newest first, and the head to keep.
async function auditView() {
  const first = await api('/api/audit?limit=1');
  const after = Math.max(0, first.head.seq - 100);
  const body = await api('/api/audit?limit=100&after=' + after);
  const page = el('div', {}, el('h1', {}, 'Record'),
    el('p', { class: 'muted' }, 'Every approval and question: opened, decided, expired, cancelled. Keep the head elsewhere and check it with ',
      el('code', {}, 'skillhost audit verify --expect <head>'), '.'),
    el('p', {}, 'Head: ', el('code', { id: 'audit-head' }, body.head.text)));
  if (body.records.length === 0) {
    page.append(el('p', { class: 'muted', id: 'audit-empty' }, 'Nothing recorded yet.'));
    return page;
  }
  const rows = body.records.slice().reverse().map((r) => el('tr', { 'data-seq': String(r.seq) },
    el('td', { class: 'mono' }, String(r.seq)),
    el('td', { class: 'hide-narrow' }, when(r.at / 1000)),
    el('td', {}, r.event + (r.outcome ? ' · ' + r.outcome : '') + (r.edited_sha256 ? ' (edited)' : '')),
    el('td', { class: 'mono' }, r.tool || r.kind || ''),
    el('td', {}, r.by ? r.by + (r.token ? ' (token ' + r.token + ')' : '') : ''),
    el('td', { class: 'hide-narrow' }, r.surface || ''),
    el('td', { class: 'hide-narrow mono' }, r.entry || (r.through ? 'through ' + r.through : ''))));
  page.append(el('div', { class: 'table-wrap' }, el('table', { id: 'audit' },
    el('thead', {}, el('tr', {}, el('th', {}, '#'), el('th', { class: 'hide-narrow' }, 'When'), el('th', {}, 'Event'),
      el('th', {}, 'Tool'), el('th', {}, 'By'), el('th', { class: 'hide-narrow' }, 'Surface'), el('th', { class: 'hide-narrow' }, 'Entry'))),
    el('tbody', {}, rows))));
  return page;
}

// ---- Start ------------------------------------------------------------------------------

document.addEventListener('DOMContentLoaded', () => {
  document.getElementById('signin-form').addEventListener('submit', signIn);
  document.getElementById('sign-out').addEventListener('click', () => signOut(''));
  window.addEventListener('hashchange', route);
  if (token) enter();
  else signOut('');
});
