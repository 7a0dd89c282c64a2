/* The A2A inspector: shows the agent card, chats with the agent over A2A 1.0
 * JSON-RPC (streaming with SendStreamingMessage when the card allows it, else
 * SendMessage), lists tasks with their state timelines, and renders artifacts.
 * Plain JavaScript, no dependencies; every URL it calls comes from the data
 * attributes of #inspector (relative to the page by default). */
(function () {
  "use strict";

  const ROOT = document.getElementById("inspector");
  const CONFIG = {
    rpcUrl: new URL(ROOT.dataset.rpcUrl || "../", document.baseURI).href,
    cardUrl: new URL(ROOT.dataset.cardUrl || "../.well-known/agent-card.json", document.baseURI).href,
    pollMs: Number(ROOT.dataset.pollMs || 5000),
  };
  const TERMINAL = new Set(["TASK_STATE_COMPLETED", "TASK_STATE_FAILED",
    "TASK_STATE_CANCELED", "TASK_STATE_REJECTED"]);
  const INTERRUPTED = new Set(["TASK_STATE_INPUT_REQUIRED", "TASK_STATE_AUTH_REQUIRED"]);
  const $ = (id) => document.getElementById(id);
  const STREAMED = new Set(["event", "task"]);  // timeline sources that arrive in order

  const state = {
    card: null,
    streaming: true,        // from the card; true until the card says otherwise
    contextId: null,        // the conversation in the chat box
    taskId: null,
    taskState: null,
    busy: false,
    tasks: new Map(),       // task id -> {id, contextId, state, timestamp, timeline[], keys}
    shownMessages: new Set(),   // message ids already shown in the chat
    shownArtifacts: new Set(),  // "taskId|artifactId" already shown in an earlier turn
  };

  // ------------------------------------------------------------------ helpers

  /** h("div", {class: "x", onclick: f}, child, ...): a DOM element. */
  function h(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(attrs || {})) {
      if (value === null || value === undefined || value === false) continue;
      if (key === "class") node.className = value;
      else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
      else node.setAttribute(key, value === true ? "" : String(value));
    }
    for (const child of children.flat(Infinity)) {
      if (child === null || child === undefined || child === false) continue;
      node.append(child instanceof Node ? child : String(child));
    }
    return node;
  }

  /** Replace node's children, skipping null/false and flattening arrays. */
  function fill(node, ...children) {
    node.replaceChildren(...children.flat(Infinity).filter((c) => c !== null && c !== undefined && c !== false));
  }

  function newId() {
    if (window.crypto && crypto.randomUUID) return crypto.randomUUID();
    const b = crypto.getRandomValues(new Uint8Array(16));  // also outside secure contexts
    b[6] = (b[6] & 15) | 64;
    b[8] = (b[8] & 63) | 128;
    const x = Array.from(b, (n) => n.toString(16).padStart(2, "0")).join("");
    return `${x.slice(0, 8)}-${x.slice(8, 12)}-${x.slice(12, 16)}-${x.slice(16, 20)}-${x.slice(20)}`;
  }

  const shortId = (id) => (id ? String(id).slice(0, 8) : "?");
  const stateName = (s) => (s ? String(s).replace(/^TASK_STATE_/, "").toLowerCase().replace(/_/g, "-") : "unknown");
  const stateBadge = (s) => h("span", {class: `state state-${stateName(s)}`}, stateName(s));
  const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

  function formatTime(timestamp) {
    if (!timestamp) return "";
    const date = new Date(timestamp);
    if (isNaN(date)) return String(timestamp);
    return date.toLocaleTimeString([], {hour12: false}) + "." + String(date.getMilliseconds()).padStart(3, "0");
  }

  function messageText(message) {
    if (!message || !Array.isArray(message.parts)) return "";
    return message.parts.filter((p) => typeof p.text === "string").map((p) => p.text).join("\n");
  }

  function safeHttpUrl(url) {
    try {
      const parsed = new URL(url, document.baseURI);
      return parsed.protocol === "http:" || parsed.protocol === "https:" ? parsed.href : null;
    } catch (e) {
      return null;
    }
  }

  // ------------------------------------------------------------------ JSON-RPC

  class RpcError extends Error {
    constructor(code, message, data) {
      super(message);
      this.code = code;
      this.data = data;
    }

    static from(error) {
      const e = error && typeof error === "object" ? error : {};
      return new RpcError(typeof e.code === "number" ? e.code : null, e.message || "Unknown error", e.data);
    }

    describe() {
      let text = this.code === null ? this.message : `JSON-RPC error ${this.code}: ${this.message}`;
      for (const detail of Array.isArray(this.data) ? this.data : []) {
        if (detail && detail.reason) text += ` (${detail.reason})`;
        for (const v of (detail && detail.fieldViolations) || []) text += `; ${v.field}: ${v.description}`;
      }
      return text;
    }
  }

  let requestCounter = 0;

  async function post(method, params, accept, extraHeaders) {
    const body = {jsonrpc: "2.0", id: ++requestCounter, method, params};
    try {
      return await fetch(CONFIG.rpcUrl, {
        method: "POST",
        cache: "no-store",
        headers: {"Content-Type": "application/json", "A2A-Version": "1.0", Accept: accept, ...extraHeaders},
        body: JSON.stringify(body),
      });
    } catch (err) {
      throw new RpcError(null, `Network error calling ${method}: ${err.message}`);
    }
  }

  async function readJson(response) {
    const type = response.headers.get("Content-Type") || "";
    if (!type.includes("json")) {
      throw new RpcError(null, `HTTP ${response.status} ${response.statusText}: expected JSON, got ${type || "nothing"}`);
    }
    try {
      return await response.json();
    } catch (err) {
      throw new RpcError(null, `HTTP ${response.status}: the answer is not valid JSON`);
    }
  }

  function unwrap(body) {
    if (body && body.error) throw RpcError.from(body.error);
    if (!body || !("result" in body)) throw new RpcError(null, "The answer has neither result nor error");
    return body.result;
  }

  /** One JSON-RPC call; resolves to the result, rejects with an RpcError. */
  async function call(method, params) {
    return unwrap(await readJson(await post(method, params || {}, "application/json")));
  }

  /** Take complete SSE events off the front of buffer: {events: [{id, data}], rest}. */
  function takeEvents(buffer) {
    const hold = buffer.endsWith("\r") ? "\r" : "";  // its "\n" may be in the next chunk
    let text = (hold ? buffer.slice(0, -1) : buffer).replace(/\r\n?/g, "\n");
    const events = [];
    let cut;
    while ((cut = text.indexOf("\n\n")) >= 0) {
      const block = text.slice(0, cut);
      text = text.slice(cut + 2);
      const data = [];
      let id = null;
      for (const line of block.split("\n")) {
        if (line === "" || line.startsWith(":")) continue;  // comments: keep-alives
        const colon = line.indexOf(":");
        const field = colon < 0 ? line : line.slice(0, colon);
        let value = colon < 0 ? "" : line.slice(colon + 1);
        if (value.startsWith(" ")) value = value.slice(1);
        if (field === "data") data.push(value);
        else if (field === "id") id = value;
      }
      if (data.length) events.push({id, data: data.join("\n")});
    }
    return {events, rest: text + hold};
  }

  /** A streaming call: onResult(result) for every event as it arrives. An error
   * before the first event comes back as plain JSON; one mid-stream as an event. */
  async function callStream(method, params, onResult, lastEventId) {
    const headers = lastEventId ? {"Last-Event-ID": lastEventId} : {};
    const response = await post(method, params, "text/event-stream", headers);
    const type = response.headers.get("Content-Type") || "";
    if (!type.startsWith("text/event-stream")) {
      onResult(unwrap(await readJson(response)), null);
      return;
    }
    const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
    let buffer = "";
    for (;;) {
      let chunk;
      try {
        chunk = await reader.read();
      } catch (err) {
        throw new RpcError(null, `The stream broke: ${err.message}`);
      }
      if (chunk.done) break;
      const taken = takeEvents(buffer + chunk.value);
      buffer = taken.rest;
      for (const event of taken.events) {
        let body;
        try {
          body = JSON.parse(event.data);
        } catch (err) {
          throw new RpcError(null, "The stream sent an event that is not JSON");
        }
        onResult(unwrap(body), event.id);
      }
    }
  }

  // ------------------------------------------------------------------ artifacts

  const blobUrls = new Map();  // one object URL per distinct file content

  function fileLink(part) {
    const name = part.filename || "file";
    const type = part.mediaType || "application/octet-stream";
    const key = `${type}|${name}|${part.raw}`;
    let href = blobUrls.get(key);
    let size;
    try {
      const binary = atob(part.raw);
      size = binary.length;
      if (!href) {
        const bytes = Uint8Array.from(binary, (c) => c.charCodeAt(0));
        href = URL.createObjectURL(new Blob([bytes], {type}));
        blobUrls.set(key, href);
      }
    } catch (err) {
      return h("p", {class: "part part-file error"}, `File ${name}: its content is not valid base64`);
    }
    return h("p", {class: "part part-file"},
      h("a", {href, download: name, class: "file-link"}, `Download ${name}`), ` (${type}, ${size} bytes)`);
  }

  function renderPart(part) {
    if (typeof part.text === "string") return h("div", {class: "part part-text"}, part.text);
    if (typeof part.raw === "string") return fileLink(part);
    if (typeof part.url === "string") {
      const href = safeHttpUrl(part.url);
      const label = part.filename || part.url;
      const meta = part.mediaType ? ` (${part.mediaType})` : "";
      return h("p", {class: "part part-url"},
        href ? h("a", {href, target: "_blank", rel: "noopener noreferrer"}, label) : h("code", {}, part.url), meta);
    }
    if ("data" in part) return h("pre", {class: "part part-data"}, JSON.stringify(part.data, null, 2));
    return h("pre", {class: "part part-unknown"}, JSON.stringify(part, null, 2));
  }

  /** An artifact on screen; text chunks are appended to the text already shown. */
  class ArtifactView {
    constructor(artifact) {
      this.id = artifact.artifactId;
      this.title = h("h4", {class: "artifact-name"});
      this.body = h("div", {class: "artifact-parts"});
      this.el = h("section", {class: "artifact", "data-artifact-id": this.id}, this.title, this.body);
      this.lastText = null;
      this.replace(artifact);
    }

    setTitle(artifact) {
      const name = artifact.name || this.name || `Artifact ${shortId(this.id)}`;
      this.name = artifact.name || this.name;
      this.title.textContent = artifact.description ? `${name} · ${artifact.description}` : name;
    }

    replace(artifact) {
      this.body.replaceChildren();
      this.lastText = null;
      this.append(artifact);
    }

    append(artifact) {
      this.setTitle(artifact);
      for (const part of artifact.parts || []) {
        if (typeof part.text === "string" && this.lastText) {
          this.lastText.append(part.text);
          continue;
        }
        const node = renderPart(part);
        this.body.append(node);
        this.lastText = typeof part.text === "string" ? node : null;
      }
    }
  }

  function renderArtifacts(artifacts) {
    return (artifacts || []).map((a) => new ArtifactView(a).el);
  }

  // ------------------------------------------------------------------ chat

  /** One answer of the agent in the chat log, updated as events arrive. */
  class Turn {
    constructor() {
      this.stateEl = h("span", {class: "turn-state meta"}, "sending…");
      this.taskEl = h("span", {class: "turn-task meta"});
      this.messages = h("div", {class: "turn-messages"});
      this.artifactsEl = h("div", {class: "artifacts"});
      this.el = h("article", {class: "turn turn-agent", "aria-busy": "true"},
        h("header", {}, h("strong", {}, "Agent"), " ", this.taskEl, " ", this.stateEl),
        this.messages, this.artifactsEl);
      this.views = new Map();
      this.taskId = null;
      appendToLog(this.el);
    }

    setTask(taskId) {
      this.taskId = taskId;
      this.taskEl.textContent = `task ${shortId(taskId)}`;
      this.el.dataset.taskId = taskId;
    }

    setState(s) {
      this.el.dataset.state = stateName(s);
      this.stateEl.replaceChildren(stateBadge(s));
    }

    addMessage(message, kind) {
      if (!message || (message.messageId && state.shownMessages.has(message.messageId))) return;
      if (message.messageId) state.shownMessages.add(message.messageId);
      const parts = (message.parts || []).map(renderPart);
      if (parts.length) this.messages.append(h("div", {class: `agent-message ${kind}`}, parts));
    }

    artifact(artifact, append, fromSnapshot) {
      const key = `${this.taskId}|${artifact.artifactId}`;
      let view = this.views.get(artifact.artifactId);
      if (fromSnapshot && !view && state.shownArtifacts.has(key)) return;  // shown in an earlier turn
      if (!view) {
        view = new ArtifactView(artifact);
        this.views.set(artifact.artifactId, view);
        this.artifactsEl.append(view.el);
        state.shownArtifacts.add(key);
      } else if (append) {
        view.append(artifact);
      } else {
        view.replace(artifact);
      }
    }

    error(err) {
      this.el.append(h("p", {class: "error turn-error"}, err.describe ? err.describe() : String(err)));
    }

    done() {
      this.el.setAttribute("aria-busy", "false");
    }
  }

  function appendToLog(node) {
    const log = $("chat-log");
    log.append(node);
    log.scrollTop = log.scrollHeight;
  }

  /** Apply a StreamResponse / SendMessageResponse (task | message | statusUpdate | artifactUpdate). */
  function apply(turn, result, fromStream) {
    if (result.task) {
      const task = result.task;
      adoptTask(turn, task.id, task.contextId);
      noteStatus(task.id, task.contextId, task.status, "task");
      turn.setState(task.status && task.status.state);
      if (!fromStream) {  // no events seen: show the agent's messages from the history
        for (const m of task.history || []) if (m.role === "ROLE_AGENT") turn.addMessage(m, "status-message");
      }
      if (task.status) turn.addMessage(task.status.message, "status-message");
      for (const a of task.artifacts || []) turn.artifact(a, false, true);
    } else if (result.message) {
      const message = result.message;
      if (message.contextId) state.contextId = message.contextId;
      turn.addMessage(message, "reply");
      turn.el.dataset.state = "message";
      turn.stateEl.replaceChildren(h("span", {class: "state state-message"}, "message"));
    } else if (result.statusUpdate) {
      const update = result.statusUpdate;
      adoptTask(turn, update.taskId, update.contextId);
      noteStatus(update.taskId, update.contextId, update.status, "event");
      turn.setState(update.status && update.status.state);
      if (update.status) turn.addMessage(update.status.message, "status-message");
    } else if (result.artifactUpdate) {
      const update = result.artifactUpdate;
      adoptTask(turn, update.taskId, update.contextId);
      turn.artifact(update.artifact || {artifactId: "?", parts: []}, Boolean(update.append), false);
    }
    renderConversation();
  }

  function adoptTask(turn, taskId, contextId) {
    if (!taskId) return;
    if (turn.taskId !== taskId) turn.setTask(taskId);
    if (state.taskId !== taskId) state.taskState = taskInfo(taskId, contextId).state;
    state.taskId = taskId;
    if (contextId) state.contextId = contextId;
  }

  const settled = () => !state.taskId || TERMINAL.has(state.taskState) || INTERRUPTED.has(state.taskState);

  async function send(text, file) {
    const parts = [];
    if (text) parts.push({text});
    try {
      if (file) parts.push(await filePart(file));
    } catch (err) {
      showError(err);
      return;
    }
    const message = {messageId: newId(), role: "ROLE_USER", parts};
    if (state.contextId) message.contextId = state.contextId;
    if (state.taskId && !TERMINAL.has(state.taskState)) message.taskId = state.taskId;
    state.shownMessages.add(message.messageId);
    appendToLog(h("article", {class: "turn turn-user"}, h("header", {}, h("strong", {}, "You")),
      parts.map(renderPart)));
    const turn = new Turn();
    setBusy(true);
    showError(null);
    try {
      let lastEventId = null;
      const onEvent = (result, id) => {
        if (id) lastEventId = id;
        apply(turn, result, true);
      };
      if (state.streaming) {
        await callStream("SendStreamingMessage", {message}, onEvent);
      } else {
        apply(turn, await call("SendMessage", {message, configuration: {returnImmediately: false}}), false);
      }
      // A stream that ended before the task settled (a dropped connection): resume it;
      // a blocking SendMessage that timed out: poll the task.
      const attempts = state.streaming ? 5 : 300;
      for (let attempt = 1; attempt <= attempts && !settled(); attempt++) {
        await sleep(state.streaming ? 200 * attempt : 1000);
        if (state.streaming) {
          try {
            await callStream("SubscribeToTask", {id: state.taskId}, onEvent, lastEventId);
            continue;
          } catch (err) {
            if (!(err instanceof RpcError) || err.code !== -32004) throw err;
          }
        }
        apply(turn, {task: await call("GetTask", {id: state.taskId})}, false);
      }
    } catch (err) {
      turn.error(err);
      showError(err);
    } finally {
      turn.done();
      setBusy(false);
      if (state.taskId && TERMINAL.has(state.taskState)) state.taskId = null;  // next: a new task, same context
      renderConversation();
      refreshTasks();
    }
  }

  function filePart(file) {
    return new Promise((resolve, reject) => {
      const reader = new FileReader();
      reader.onload = () => resolve({raw: String(reader.result).replace(/^data:[^,]*,/, ""),
        filename: file.name, mediaType: file.type || "application/octet-stream"});
      reader.onerror = () => reject(new RpcError(null, `Could not read ${file.name}`));
      reader.readAsDataURL(file);
    });
  }

  function setBusy(busy) {
    state.busy = busy;
    $("send-button").disabled = busy;
    $("chat-form").setAttribute("aria-busy", String(busy));
    renderConversation();
  }

  function showError(err) {
    const box = $("chat-error");
    box.hidden = !err;
    box.textContent = err ? (err.describe ? err.describe() : String(err)) : "";
  }

  function renderConversation() {
    const el = $("conversation");
    $("cancel-button").disabled = !state.taskId || TERMINAL.has(state.taskState);
    if (!state.contextId) {
      el.textContent = "New conversation.";
      return;
    }
    const bits = [`Context ${shortId(state.contextId)}`];
    if (state.taskId) bits.push(`task ${shortId(state.taskId)}: ${stateName(state.taskState)}`);
    if (state.taskState === "TASK_STATE_INPUT_REQUIRED" && state.taskId) bits.push("the agent is waiting for your answer");
    if (state.taskState === "TASK_STATE_AUTH_REQUIRED" && state.taskId) bits.push("the agent needs credentials");
    el.textContent = bits.join(" · ");
  }

  function resetConversation() {
    Object.assign(state, {contextId: null, taskId: null, taskState: null});
    $("chat-log").replaceChildren();
    showError(null);
    renderConversation();
    $("chat-input").focus();
  }

  /** Continue an existing task in the chat box (e.g. one waiting for input). */
  function continueTask(info) {
    Object.assign(state, {contextId: info.contextId, taskId: info.id, taskState: info.state});
    renderConversation();
    $("chat-input").focus();
  }

  async function cancelTask(taskId) {
    try {
      const task = await call("CancelTask", {id: taskId});
      noteStatus(task.id, task.contextId, task.status, "cancel");
      if (taskId === state.taskId) state.taskState = task.status && task.status.state;
    } catch (err) {
      showError(err);
    }
    renderConversation();
    refreshTasks();
  }

  // ------------------------------------------------------------------ tasks

  function taskInfo(id, contextId) {
    let info = state.tasks.get(id);
    if (!info) {
      info = {id, contextId: null, state: null, timestamp: null, timeline: [], keys: new Set()};
      state.tasks.set(id, info);
    }
    if (contextId) info.contextId = contextId;
    return info;
  }

  /** Record a status seen (event, snapshot or list) in the task's timeline. */
  function noteStatus(taskId, contextId, status, source) {
    if (!taskId || !status) return;
    const info = taskInfo(taskId, contextId);
    const messageId = (status.message && status.message.messageId) || "";
    const timestamp = status.timestamp || "";
    const key = `${status.state}|${timestamp}|${messageId}`;
    // The same status seen again (a list after the event, a snapshot without its message).
    const seen = info.keys.has(key) || info.timeline.some((e) => e.state === status.state
      && e.timestamp === timestamp && (!messageId || !e.messageId));
    if (!seen) {
      info.keys.add(key);
      const entry = {state: status.state, timestamp, messageId, text: messageText(status.message), source};
      // Stream events come in the task's exact order; a snapshot (list, get) may have
      // overtaken them, so a late event goes before any later-stamped snapshot entry.
      const at = STREAMED.has(source) ? info.timeline.findIndex((e) => !STREAMED.has(e.source) && e.timestamp > timestamp) : -1;
      info.timeline.splice(at < 0 ? info.timeline.length : at, 0, entry);
    }
    info.state = status.state;
    info.timestamp = status.timestamp || info.timestamp;
    if (taskId === state.taskId) state.taskState = status.state;
    scheduleTaskRender();
  }

  let renderPending = false;

  function scheduleTaskRender() {
    if (renderPending) return;
    renderPending = true;
    setTimeout(() => {
      renderPending = false;
      renderTaskList();
    }, 30);
  }

  const taskItems = new Map();  // task id -> {el, summary, timeline, detail, toggle, detailKey}

  function renderTaskList() {
    const list = $("task-list");
    const infos = Array.from(state.tasks.values()).sort((a, b) =>
      String(b.timestamp || "\uffff").localeCompare(String(a.timestamp || "\uffff")));
    infos.forEach((info, index) => {
      const item = taskItems.get(info.id) || createTaskItem(info);
      item.el.dataset.state = stateName(info.state);
      fill(item.summary, stateBadge(info.state), " ", h("code", {}, shortId(info.id)),
        " ", h("span", {class: "meta"}, formatTime(info.timestamp)));
      fill(item.timeline, info.timeline.map((entry) =>
        h("li", {class: "timeline-entry", "data-state": stateName(entry.state)},
          stateBadge(entry.state), " ", h("span", {class: "meta"}, formatTime(entry.timestamp)),
          entry.text ? h("span", {class: "timeline-text"}, ` ${entry.text}`) : null)));
      if (item.actionsFor !== info.state) {  // rebuilt only on a change: keeps keyboard focus
        item.actionsFor = info.state;
        fill(item.actions,
          INTERRUPTED.has(info.state) && h("button", {type: "button", onclick: () => continueTask(info)}, "Answer in chat"),
          !TERMINAL.has(info.state) && h("button", {type: "button", onclick: () => cancelTask(info.id)}, "Cancel"));
      }
      if (list.children[index] !== item.el) list.insertBefore(item.el, list.children[index] || null);
    });
    for (const [id, item] of taskItems) {
      if (!state.tasks.has(id)) {
        item.el.remove();
        taskItems.delete(id);
      }
    }
  }

  function createTaskItem(info) {
    const detailId = `task-detail-${info.id}`;
    const item = {
      summary: h("span", {class: "task-summary"}),
      timeline: h("ol", {class: "timeline", "aria-label": "State timeline"}),
      actions: h("span", {class: "task-actions"}),
      detail: h("div", {class: "task-detail", id: detailId, hidden: true}),
      detailKey: null,
      actionsFor: undefined,
    };
    item.toggle = h("button", {type: "button", class: "task-toggle", "aria-expanded": "false",
      "aria-controls": detailId, onclick: () => toggleTask(info.id)}, item.summary);
    item.el = h("li", {class: "task", "data-task-id": info.id}, item.toggle, item.actions,
      item.timeline, item.detail);
    taskItems.set(info.id, item);
    return item;
  }

  function toggleTask(taskId) {
    const item = taskItems.get(taskId);
    const open = item.toggle.getAttribute("aria-expanded") !== "true";
    item.toggle.setAttribute("aria-expanded", String(open));
    item.detail.hidden = !open;
    if (open) loadTaskDetail(taskId);
  }

  /** GetTask: the whole task (history, artifacts) into the expanded item. */
  async function loadTaskDetail(taskId) {
    const item = taskItems.get(taskId);
    if (!item) return;
    let task;
    try {
      task = await call("GetTask", {id: taskId});
    } catch (err) {
      item.detail.replaceChildren(h("p", {class: "error"}, err.describe()));
      return;
    }
    noteStatus(task.id, task.contextId, task.status, "get");
    const key = JSON.stringify(task);
    if (key === item.detailKey) return;  // unchanged: keep the DOM (and any focus) as it is
    item.detailKey = key;
    const history = (task.history || []).map((m) => h("li", {class: `history-${m.role === "ROLE_USER" ? "user" : "agent"}`},
      h("strong", {}, m.role === "ROLE_USER" ? "User: " : "Agent: "), messageText(m) || "(no text)"));
    fill(item.detail,
      h("p", {class: "meta"}, `Task ${task.id} · context ${task.contextId}`),
      h("h4", {}, "History"), history.length ? h("ol", {class: "history"}, history) : h("p", {class: "meta"}, "No messages."),
      h("h4", {}, "Artifacts"), task.artifacts && task.artifacts.length ? h("div", {class: "artifacts"}, renderArtifacts(task.artifacts))
        : h("p", {class: "meta"}, "No artifacts."));
  }

  let refreshing = false;
  let refreshAgain = false;

  async function refreshTasks() {
    if (refreshing) {
      refreshAgain = true;  // asked for while one runs: run once more after it
      return;
    }
    refreshing = true;
    const status = $("tasks-status");
    try {
      const result = await call("ListTasks", {pageSize: 50, historyLength: 0});
      const listed = new Set();
      for (const task of result.tasks || []) {
        listed.add(task.id);
        noteStatus(task.id, task.contextId, task.status, "list");
      }
      if (!result.nextPageToken) {  // the whole list: forget tasks the server no longer has
        for (const id of Array.from(state.tasks.keys())) if (!listed.has(id) && id !== state.taskId) state.tasks.delete(id);
      }
      const total = typeof result.totalSize === "number" ? result.totalSize : listed.size;
      status.textContent = total === listed.size ? `${total} task(s).` : `Showing ${listed.size} of ${total} tasks.`;
      status.classList.remove("error");
      renderTaskList();
      for (const [id, item] of taskItems) if (!item.detail.hidden) loadTaskDetail(id);
    } catch (err) {
      status.textContent = `Could not list tasks: ${err.describe ? err.describe() : err}`;
      status.classList.add("error");
    } finally {
      refreshing = false;
      if (refreshAgain) {
        refreshAgain = false;
        refreshTasks();
      }
    }
  }

  // ------------------------------------------------------------------ card

  function renderCard(card) {
    const caps = card.capabilities || {};
    const yesNo = (v) => (v ? "yes" : "no");
    const rows = [
      ["Version", card.version],
      ["Provider", card.provider && [card.provider.organization, card.provider.url && safeHttpUrl(card.provider.url)
        ? h("a", {href: safeHttpUrl(card.provider.url), target: "_blank", rel: "noopener noreferrer"}, ` ${card.provider.url}`) : null]],
      ["Documentation", card.documentationUrl && safeHttpUrl(card.documentationUrl)
        && h("a", {href: safeHttpUrl(card.documentationUrl), target: "_blank", rel: "noopener noreferrer"}, card.documentationUrl)],
      ["Input modes", (card.defaultInputModes || []).join(", ")],
      ["Output modes", (card.defaultOutputModes || []).join(", ")],
      ["Security", Object.keys(card.securitySchemes || {}).join(", ")],
    ].filter(([, value]) => value && (!Array.isArray(value) || value.some(Boolean)));
    const interfaces = (card.supportedInterfaces || []).map((i) =>
      h("tr", {}, h("td", {}, i.protocolBinding || ""), h("td", {}, i.protocolVersion || ""),
        h("td", {}, h("code", {}, i.url || "")), h("td", {}, i.tenant || "")));
    const skills = (card.skills || []).map((skill) => h("li", {class: "skill"},
      h("strong", {}, skill.name || skill.id), " ", h("code", {class: "meta"}, skill.id || ""),
      skill.description ? h("p", {}, skill.description) : null,
      (skill.tags || []).length ? h("p", {class: "tags"}, skill.tags.map((t) => h("span", {class: "tag"}, t))) : null,
      (skill.examples || []).length ? h("p", {class: "examples"}, "Try: ", skill.examples.map((example) =>
        h("button", {type: "button", class: "example", onclick: () => useExample(example)}, example))) : null));
    fill($("card-view"),
      h("h3", {id: "card-name"}, card.name || "(unnamed agent)"),
      card.description ? h("p", {id: "card-description"}, card.description) : null,
      h("dl", {class: "card-facts"}, rows.map(([name, value]) => [h("dt", {}, name), h("dd", {}, value)])),
      h("h4", {}, "Capabilities"),
      h("ul", {class: "capabilities"},
        h("li", {}, `Streaming: ${yesNo(caps.streaming)}`),
        h("li", {}, `Push notifications: ${yesNo(caps.pushNotifications)}`),
        h("li", {}, `Extended card: ${yesNo(caps.extendedAgentCard)}`),
        (caps.extensions || []).map((e) => h("li", {}, `Extension ${e.uri}${e.required ? " (required)" : ""}`))),
      h("h4", {}, "Skills"), skills.length ? h("ul", {class: "skills"}, skills) : h("p", {class: "meta"}, "None declared."),
      h("h4", {}, "Interfaces"),
      interfaces.length ? h("table", {class: "interfaces"}, h("thead", {}, h("tr", {},
        h("th", {scope: "col"}, "Binding"), h("th", {scope: "col"}, "Version"),
        h("th", {scope: "col"}, "URL"), h("th", {scope: "col"}, "Tenant"))), h("tbody", {}, interfaces))
        : h("p", {class: "meta"}, "None declared."));
    $("card-json").textContent = JSON.stringify(card, null, 2);
  }

  function useExample(text) {
    const input = $("chat-input");
    input.value = text;
    input.focus();
  }

  async function loadCard() {
    const status = $("card-status");
    try {
      const response = await fetch(CONFIG.cardUrl, {headers: {Accept: "application/json"}, cache: "no-cache"});
      if (!response.ok) throw new RpcError(null, `HTTP ${response.status} ${response.statusText}`);
      const card = await readJson(response);
      state.card = card;
      state.streaming = Boolean(card.capabilities && card.capabilities.streaming);
      renderCard(card);
      $("agent-title").textContent = card.name || "A2A inspector";
      document.title = `${card.name || "Agent"} · A2A inspector`;
      status.textContent = "";
      status.hidden = true;
    } catch (err) {
      status.textContent = `Could not load the agent card from ${CONFIG.cardUrl}: ${err.describe ? err.describe() : err}`;
      status.classList.add("error");
    }
    $("chat-mode").textContent = state.streaming
      ? "Answers stream as they arrive (SendStreamingMessage)."
      : "The card says streaming is off: messages use SendMessage.";
  }

  // ------------------------------------------------------------------ wiring

  function init() {
    $("endpoint-url").textContent = CONFIG.rpcUrl;
    const form = $("chat-form");
    const input = $("chat-input");
    const fileInput = $("chat-file");
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      const text = input.value.trim();
      const file = fileInput.files && fileInput.files[0];
      if (state.busy || (!text && !file)) return;
      input.value = "";
      fileInput.value = "";
      send(text, file);
    });
    input.addEventListener("keydown", (event) => {
      if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
        event.preventDefault();
        form.requestSubmit();
      }
    });
    $("new-button").addEventListener("click", resetConversation);
    $("cancel-button").addEventListener("click", () => state.taskId && cancelTask(state.taskId));
    $("refresh-button").addEventListener("click", refreshTasks);
    if (CONFIG.pollMs > 0) {
      setInterval(() => {
        if ($("auto-refresh").checked && !document.hidden) refreshTasks();
      }, CONFIG.pollMs);
    }
    renderConversation();
    loadCard().then(() => input.focus());
    refreshTasks();
  }

  // Exposed for debugging in the console (and for tests): read-only use.
  window.A2AInspector = {config: CONFIG, state};
  init();
})();
