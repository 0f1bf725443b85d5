// web/demo/chat.js — chat mode, for a model whose file has a chat template (info.chatTemplate):
// a conversation in #output (one bubble per message; the assistant's tokens streamed into its
// bubble with the same colours and inspector as a completion), a system prompt, Send, Stop,
// Regenerate (the last assistant turn again) and Clear. engine.chat() renders the template
// (js/chat/chat.js) and reuses the KV cache of the previous turn: the statistics say how many prompt
// tokens it reused (lastResult.nCached).
//
// For tests: body[data-mode] ('completion' | 'chat'); #output holds one
// <div class="msg user|assistant" data-role> per message, an assistant bubble with
// data-status ('streaming' | 'done' | 'aborted' | 'error'); #stat-cached[data-n] the reused
// tokens of the last turn.
//
// Images: a model loaded with its vision projector (info.vision) shows #chat-attach-row: the
// Attach button (a file picker), and images dropped or pasted onto the message; each one is
// checked (web/sources.js checkImageFile: decodable, not too large: else the reason in
// #run-error, the typed message untouched) and shown in #chat-attachments (<li data-name> with
// a thumbnail and a Remove button). Send puts them into the user message as OpenAI image_url
// parts (data: URLs), before its text; a turn with images that fails gives the text and the
// images back (and leaves nothing of itself in the conversation).

import { fmtBytes, fmtMs, fmtRate, describeError } from './format.js';
import { $, app, setState, showError, clearError } from './state.js';
import { syncStopError, readParams, showApplied } from './controls.js';
import { formatParams } from './output-format.js';
import { appendStreamed, resetOutputState } from './output.js';
import { setStat, showPrefill } from './stats.js';
import { openaiParams, toolTurn, toolsOn } from './tools.js';

/** The conversation: {role: 'user'|'assistant'|'tool', content, tool_calls?, tool_call_id?} in
 *  order (the system prompt apart; tool turns: web/demo/tools.js). */
const conversation = [];

/** The images attached to the next message: {file, thumb (an object URL), width, height}. */
const attachments = [];

/** Whether the loaded model takes images: it was loaded with its vision projector (mmproj). */
export function visionAvailable() {
  return Boolean(app.info?.vision);
}

/** Shows the attach controls for a vision model only; a text-only model drops the attachments. */
export function syncAttach() {
  const on = visionAvailable();
  $('chat-attach-row').hidden = !on;
  if (!on) clearAttachments();
}

function clearAttachments() {
  for (const a of attachments) URL.revokeObjectURL(a.thumb);
  attachments.length = 0;
  renderAttachments();
}

function renderAttachments() {
  const list = $('chat-attachments');
  list.replaceChildren(...attachments.map((a, i) => {
    const li = document.createElement('li');
    li.dataset.name = a.file.name;
    const img = document.createElement('img');
    img.src = a.thumb;
    img.alt = `${a.file.name} (${a.width}×${a.height})`;
    const remove = document.createElement('button');
    remove.type = 'button';
    remove.className = 'remove secondary';
    remove.textContent = '×';
    remove.setAttribute('aria-label', `Remove ${a.file.name}`);
    remove.addEventListener('click', () => {
      URL.revokeObjectURL(a.thumb);
      attachments.splice(i, 1);
      renderAttachments();
      $('chat-input').focus();
    });
    li.append(img, remove);
    return li;
  }));
  list.hidden = attachments.length === 0;
  $('chat-attach-count').textContent = attachments.length
    ? `${attachments.length} image${attachments.length === 1 ? '' : 's'} attached` : '';
}

/**
 * Attaches image files (the Attach button's picker, a drop or a paste onto the message) to the
 * next message; a file that is not a decodable image (any other file too), or is too large, is
 * left out and the reason shown in the error area (the typed message stays as it is).
 */
export async function attachImages(fileList) {
  const files = [...fileList];
  if (!files.length) return;
  if (!visionAvailable()) {
    showError('This model takes no images: load a vision model with its projector (mmproj) to attach them.', 'image');
    return;
  }
  clearError();
  const errors = [];
  for (const file of files) {
    try {
      const { width, height } = await app.sources.checkImageFile(file);
      attachments.push({ file, thumb: URL.createObjectURL(file), width, height });
    } catch (err) {
      errors.push(err.message);
    }
  }
  renderAttachments();
  if (errors.length) showError(`Image not attached: ${errors.join('; ')}.`, 'image');
}

/** Whether the loaded model can chat: its file has a chat template. */
export function chatAvailable() {
  return Boolean(app.info?.chatTemplate);
}

/** The current mode: 'completion', 'chat' or 'embed' (web/demo/embed.js). */
export function currentMode() {
  const m = document.body.dataset.mode;
  return m === 'chat' || m === 'embed' ? m : 'completion';
}

/**
 * Enables the Chat mode for a model with a chat template and says why it is disabled
 * otherwise (a model without one goes back to completion). Called after each load.
 */
export function syncMode() {
  syncAttach();
  const chat = $('mode-chat');
  const note = $('mode-note');
  if (chatAvailable()) {
    chat.disabled = false;
    note.textContent = `Chat uses ${app.info.name || 'the model'}'s own chat template.`;
  } else {
    chat.disabled = true;
    note.textContent = app.info
      ? 'Chat is unavailable: this model\'s file has no chat template (a base model such as ' +
        'stories260K only continues text).'
      : 'Chat needs a model with a chat template.';
    if (currentMode() === 'chat') setMode('completion');
  }
  // an encoder only embeds; back to completion when a generative model follows one
  if (app.info?.generative === false) setMode('embed');
  else if (app.info && currentMode() === 'embed' && document.body.dataset.embedForced) setMode('completion');
  document.body.dataset.embedForced = app.info?.generative === false ? '1' : '';
}

/** Switches between completion and chat: the prompt form or the chat form, and #output's text. */
export function setMode(mode) {
  if (mode === 'chat' && !chatAvailable()) mode = 'completion';
  syncAttach();
  if (currentMode() === mode && document.body.dataset.mode) return;
  document.body.dataset.mode = mode;
  $(`mode-${mode}`).checked = true;
  $('gen-form').hidden = mode !== 'completion';
  $('chat-form').hidden = mode !== 'chat';
  $('embed-form').hidden = mode !== 'embed';
  $('output').replaceChildren();
  resetOutputState();
  if (mode === 'chat') {
    // The text of earlier turns (their tokens' probabilities are not kept).
    for (const m of conversation) {
      if (Array.isArray(m.content)) showUserParts(bubble(m.role).body, m.content);
      else if (m.content) bubble(m.role).body.append(document.createTextNode(m.content));
      for (const c of m.tool_calls ?? []) {
        bubble('call', `Tool call: ${c.function.name}`).body.append(document.createTextNode(`${c.function.name}(${c.function.arguments})`));
      }
    }
  }
  setState(document.body.dataset.state);
}

/** Appends a message bubble to #output; returns it and the element its text goes into. */
function bubble(role, label) {
  const msg = document.createElement('div');
  msg.className = `msg ${role}`;
  msg.dataset.role = role;
  const who = document.createElement('p');
  who.className = 'msg-role';
  who.textContent = label ?? ({ user: 'You', assistant: 'Assistant', tool: 'Tool result', call: 'Tool call' }[role] ?? role);
  const body = document.createElement('div');
  body.className = 'msg-text';
  msg.append(who, body);
  $('output').append(msg);
  return { msg, body };
}

/** A user message's content parts into its bubble: the images as thumbnails, then the text. */
function showUserParts(body, parts) {
  for (const p of parts) {
    if (p.type === 'image_url') {
      const img = document.createElement('img');
      img.className = 'msg-image';
      img.src = p.image_url.url;
      img.alt = 'Attached image';
      body.append(img);
    } else if (p.type === 'text') body.append(document.createTextNode(p.text));
  }
}

/** Sends the message in #chat-input (with the attached images) and streams the reply. A turn
 *  with images that fails gives the typed text and the images back, for another try. */
export async function sendChat() {
  if (!canRun()) return;
  const input = $('chat-input');
  const text = input.value.trim();
  const images = visionAvailable() ? attachments.splice(0) : [];
  if (!text && !images.length) {
    input.focus();
    return;
  }
  let content = text;
  if (images.length) {
    try {
      const urls = await Promise.all(images.map((a) => app.sources.dataUrl(a.file)));
      content = [...urls.map((url) => ({ type: 'image_url', image_url: { url } })), ...(text ? [{ type: 'text', text }] : [])];
    } catch (err) {
      attachments.unshift(...images);
      renderAttachments();
      showError(`Could not read the image: ${describeError(err)}`, 'image');
      return;
    }
  }
  const typed = input.value;
  input.value = '';
  renderAttachments();
  const message = { role: 'user', content };
  conversation.push(message);
  const { msg, body } = bubble('user');
  if (Array.isArray(content)) showUserParts(body, content);
  else body.append(document.createTextNode(content));
  const ok = await reply();
  if (!ok && images.length && conversation.at(-1) === message) {
    // nothing of a failed turn with images stays (every later turn would send them again): the
    // message goes back into the input, its images with it (a text-only turn stays, as before)
    conversation.pop();
    msg.remove();
    if (!input.value) input.value = typed;
    attachments.unshift(...images);
    renderAttachments();
    setState(document.body.dataset.state);
  } else {
    for (const a of images) URL.revokeObjectURL(a.thumb);
  }
}

/** Drops the last assistant turn and generates it again. */
export async function regenerate() {
  if (!canRun() || !canRegenerate()) return;
  while (conversation.length && conversation.at(-1).role !== 'user') conversation.pop(); // tool rounds too
  const users = $('output').querySelectorAll('.msg.user');
  const last = users[users.length - 1];
  while (last?.nextElementSibling) last.nextElementSibling.remove();
  await reply();
}

/** Forgets the conversation (the system prompt stays). */
export function clearChat() {
  if (app.genController) return;
  conversation.length = 0;
  $('output').replaceChildren();
  resetOutputState();
  clearError();
  for (const id of ['ttft', 'prefill', 'decode', 'tokens', 'stop', 'cached']) setStat(id, '—');
  delete $('stat-cached').dataset.n;
  if (app.info) setStat('context', `0 / ${app.info.nCtx}`);
  setState(document.body.dataset.state);
  $('chat-input').focus();
}

/** Whether a turn may start now (invalid stop strings: no, and the field gets the focus). */
function canRun() {
  if (!app.engine || !chatAvailable() || ['generating', 'loading'].includes(document.body.dataset.state)) return false;
  if (syncStopError()) {
    $('stop-strings').focus();
    return false;
  }
  return true;
}

/** Whether the conversation ends with an assistant turn (for Regenerate). */
export function canRegenerate() {
  return conversation.length > 0 && conversation.at(-1).role !== 'user';
}

/** Whether there is anything to clear. */
export function hasConversation() {
  return conversation.length > 0;
}

// setState() (state.js) enables Regenerate and Clear through these.
app.chat = { canRegenerate, hasConversation };

/** Streams the assistant's reply to the conversation into a new bubble; false when it failed. */
async function reply() {
  const engine = app.engine;
  clearError();
  const { params: sampling, seedRandom } = readParams();
  const format = formatParams('chat');
  const params = { ...sampling, ...format.params };
  document.body.dataset.runs = String(Number(document.body.dataset.runs || 0) + 1);
  showApplied(params, seedRandom, format.label);
  app.lastParams = { ...sampling, ...formatParams('generate').params }; // preview: no responseFormat
  const nCtx = app.info.nCtx;
  const system = $('chat-system').value.trim();
  const messages = [...(system ? [{ role: 'system', content: system }] : []), ...conversation];

  const output = $('output');
  const { msg, body } = bubble('assistant');
  msg.dataset.status = 'streaming';
  msg.setAttribute('aria-busy', 'true');
  app.activeToken?.removeAttribute('tabindex');
  app.activeToken = null;
  app.previewSeq++;
  for (const id of ['ttft', 'prefill', 'decode', 'cached']) setStat(id, '…');
  setStat('tokens', '0');
  setStat('stop', '—');

  const controller = new AbortController();
  app.genController = controller;
  setState('generating');
  output.scrollTop = output.scrollHeight;

  const t0 = performance.now();
  let tFirst = 0;
  let n = 0;
  let nPast = 0;
  let text = '';
  let frame = 0;
  const refresh = () => {
    frame = 0;
    const secs = (performance.now() - tFirst) / 1000;
    if (n > 1 && secs > 0) setStat('decode', fmtRate((n - 1) / secs));
    setStat('tokens', String(n));
    if (nPast) setStat('context', `${nPast} / ${nCtx}`);
    output.scrollTop = output.scrollHeight;
  };

  const previousResult = engine.lastResult;
  let result = null;
  let failure = null;
  let stopReason = null;
  // Tools on (or earlier tool turns in the conversation): OpenAI's API, web/demo/tools.js.
  if (toolsOn() || conversation.some((m) => m.role === 'tool')) {
    msg.remove();
    const before = messages.length;
    try {
      const out = await toolTurn(engine, messages, {
        bubble, params: openaiParams(params), signal: controller.signal, tools: toolsOn(),
        onChunk: () => { if (!frame) frame = requestAnimationFrame(refresh); },
      });
      n = out.usage?.completion_tokens ?? 0;
      stopReason = out.finish;
      result = engine.lastResult;
    } catch (err) {
      if (err?.name === 'AbortError') stopReason = 'aborted';
      else failure = err;
    } finally {
      app.genController = null;
      if (frame) cancelAnimationFrame(frame);
    }
    conversation.push(...messages.slice(before)); // what was done stays, also when stopped
    refresh();
    if (result && result !== previousResult) {
      showPrefill(result.nPrompt - (result.nCached ?? 0), result.prefillMs, result.prefillTokensPerSec);
      setStat('decode', fmtRate(result.decodeTokensPerSec));
      const cached = result.nCached ?? 0;
      setStat('cached', `reused ${cached} cached token${cached === 1 ? '' : 's'} of ${result.nPrompt}`);
      $('stat-cached').dataset.n = String(cached);
      setStat('context', `${result.nPrompt + result.nGenerated} / ${nCtx}`);
    }
    setStat('ttft', '—'); // (a streamed request's first token is not timed here)
    const stopStat = $('stat-stop');
    stopStat.textContent = failure ? 'error' : String(stopReason).replace('_', ' ');
    stopStat.dataset.reason = failure ? 'error' : stopReason;
    if (failure) showError(`Chat failed: ${describeError(failure)}`, 'generation');
    else setState('ready');
    return !failure;
  }
  try {
    for await (const tok of engine.chat(messages, params, { signal: controller.signal })) {
      if (controller.signal.aborted) break;
      nPast = tok.nPast;
      text += tok.text;
      if (tok.id >= 0 && n++ === 0) {
        tFirst = performance.now();
        setStat('ttft', fmtMs(tFirst - t0));
      }
      appendStreamed(body, tok, n);
      if (tok.id >= 0 && !frame) frame = requestAnimationFrame(refresh);
    }
    if (controller.signal.aborted) stopReason = 'aborted';
    else {
      result = engine.lastResult;
      stopReason = result?.stopReason ?? 'done';
    }
  } catch (err) {
    if (err?.name === 'AbortError') stopReason = 'aborted';
    else failure = err;
  } finally {
    if (!result && !failure && engine.lastResult !== previousResult) result = engine.lastResult;
    app.genController = null;
    if (frame) cancelAnimationFrame(frame);
  }

  refresh();
  msg.removeAttribute('aria-busy');
  msg.dataset.status = failure ? 'error' : stopReason === 'aborted' ? 'aborted' : 'done';
  // A stopped reply stays in the conversation as far as it went; a failed one is dropped.
  if (!failure) conversation.push({ role: 'assistant', content: text });
  else msg.remove();
  if (n === 0) setStat('ttft', '—');
  if (result && result !== previousResult) {
    showPrefill(result.nPrompt - (result.nCached ?? 0), result.prefillMs, result.prefillTokensPerSec);
    setStat('decode', fmtRate(result.decodeTokensPerSec));
    const cached = result.nCached ?? 0;
    setStat('cached', `reused ${cached} cached token${cached === 1 ? '' : 's'} of ${result.nPrompt}`);
    $('stat-cached').dataset.n = String(cached);
    const memory = engine.wasmMemoryBytes ?? result.wasmMemoryBytes;
    if (memory) setStat('memory', fmtBytes(memory));
  } else {
    setStat('prefill', '—');
    setStat('cached', '—');
    if (n <= 1) setStat('decode', '—');
  }
  const stopStat = $('stat-stop');
  stopStat.textContent = failure ? 'error' : stopReason.replace('_', ' ');
  stopStat.dataset.reason = failure ? 'error' : stopReason;
  if (failure) showError(`Chat failed: ${describeError(failure)}`, 'generation');
  else setState('ready');
  return !failure;
}
