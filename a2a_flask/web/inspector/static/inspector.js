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
    // The inspector's own task API ("" when the page has no agent to ask: JSON-RPC only).
    apiUrl: ROOT.dataset.apiUrl ? new URL(ROOT.dataset.apiUrl, document.baseURI).href : "",
  };
  const TERMINAL = new Set(["TASK_STATE_COMPLETED", "TASK_STATE_FAILED",
    "TASK_STATE_CANCELED", "TASK_STATE_REJECTED"]);
  const INTERRUPTED = new Set(["TASK_STATE_INPUT_REQUIRED", "TASK_STATE_AUTH_REQUIRED"]);
  const $ = (id) => document.getElementById(id);

  const state = {
    card: null,
    streaming: true,        // from the card; true until the card says otherwise
    contextId: null,        // the conversation in the chat box
    taskId: null,
    taskState: null,
    busy: false,
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

  async function post(method, params, accept, extraHeaders, signal) {
    const body = {jsonrpc: "2.0", id: ++requestCounter, method, params};
    try {
      return await fetch(CONFIG.rpcUrl, {
        method: "POST",
        cache: "no-store",
        headers: {"Content-Type": "application/json", "A2A-Version": "1.0", Accept: accept, ...extraHeaders},
        body: JSON.stringify(body),
        signal,
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
  async function callStream(method, params, onResult, lastEventId, signal) {
    const headers = lastEventId ? {"Last-Event-ID": lastEventId} : {};
    const response = await post(method, params, "text/event-stream", headers, signal);
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
      chatStatus(task.id, task.status);
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
      chatStatus(update.taskId, update.status);
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
    if (state.taskId !== taskId) state.taskState = (tasks.rows.get(taskId) || {}).state || null;
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

  async function cancelTask(taskId, tenant) {
    try {
      const task = await call("CancelTask", {id: taskId, ...tenantParam(tenant)});
      if (taskId === state.taskId) state.taskState = task.status && task.status.state;
    } catch (err) {
      showError(err);
    }
    renderConversation();
    refreshTasks();
  }

  /** A status the chat saw: the chat's state, and the list refreshed if it is news. */
  function chatStatus(taskId, status) {
    if (!taskId || !status) return;
    if (taskId === state.taskId) state.taskState = status.state;
    const row = tasks.rows.get(taskId);
    if (!row || row.state !== status.state) scheduleRefresh();
  }

  // ------------------------------------------------------------------ tasks

  const ENDED_WITH_REASON = new Set(["TASK_STATE_FAILED", "TASK_STATE_CANCELED", "TASK_STATE_REJECTED"]);
  const PAGE_SIZE = 20;

  const tasks = {
    rows: new Map(),        // task id -> its row (the inspector API's summary of the task)
    order: [],              // task ids as listed: most recently updated first
    nextPageToken: "",
    pages: 0,               // pages loaded since the filters last changed
    totalSize: null,
    filters: {state: "", contextId: "", tenant: ""},
    search: "",
    generation: 0,          // bumped when the filters change: answers for older ones are dropped
    error: null,
    loading: false,         // a page is being read
    loadAgain: null,        // asked for meanwhile: null, or whether it is the next page
  };
  const taskItems = new Map();   // task id -> {el, toggle, summary, actions, detail, view, key}

  /** GET a view of the inspector's API; rejects with an RpcError saying what went wrong. */
  async function apiGet(path, params) {
    const url = new URL(path, CONFIG.apiUrl);
    for (const [key, value] of Object.entries(params || {})) {
      if (value !== "" && value !== null && value !== undefined) url.searchParams.set(key, String(value));
    }
    let response;
    try {
      response = await fetch(url.href, {headers: {Accept: "application/json"}, cache: "no-store"});
    } catch (err) {
      throw new RpcError(null, `Network error: ${err.message}`);
    }
    const body = await readJson(response);
    if (!response.ok) {
      const e = (body && body.error) || {};
      throw new RpcError(null, `HTTP ${response.status}: ${e.message || response.statusText}`);
    }
    return body;
  }

  const tenantParam = (tenant) => (tenant ? {tenant} : {});

  // Without the inspector's API (make_inspector() without agent=): what ListTasks and
  // GetTask say, in the API's shapes.
  function wireParts(parts) {
    return (parts || []).map((part) => {
      if (typeof part.text === "string") return {kind: "text", text: part.text};
      if (typeof part.raw === "string") {
        const link = fileLink(part).querySelector("a");
        let size = null;
        try { size = atob(part.raw).length; } catch (err) { size = null; }
        return {kind: "file", name: part.filename || "file", mediaType: part.mediaType || "", size,
          href: link ? link.getAttribute("href") : ""};
      }
      if (typeof part.url === "string") return {kind: "url", url: part.url, name: part.filename || "", mediaType: part.mediaType || ""};
      return {kind: "data", data: "data" in part ? part.data : part};
    });
  }

  function rowFromTask(task, tenant) {
    const first = (task.history || []).find((m) => m.role === "ROLE_USER");
    const status = task.status || {};
    return {id: task.id, contextId: task.contextId, state: status.state, tenant, owner: "",
      asked: firstLine(messageText(first)),
      askedFiles: first ? (first.parts || []).filter((p) => p.filename).map((p) => p.filename) : [],
      statusText: firstLine(messageText(status.message)), createdAt: "", updatedAt: status.timestamp || ""};
  }

  async function listPage(params) {
    if (CONFIG.apiUrl) return apiGet("tasks", params);
    const request = {pageSize: params.pageSize, includeArtifacts: false, ...tenantParam(params.tenant)};
    if (params.pageToken) request.pageToken = params.pageToken;
    if (params.contextId) request.contextId = params.contextId;
    if (params.state) request.status = `TASK_STATE_${params.state.toUpperCase().replace(/-/g, "_")}`;
    const result = await call("ListTasks", request);
    return {tasks: (result.tasks || []).map((t) => rowFromTask(t, params.tenant || "")),
      nextPageToken: result.nextPageToken || "", totalSize: result.totalSize};
  }

  async function taskDetail(taskId, params) {
    if (CONFIG.apiUrl) return apiGet(`tasks/${encodeURIComponent(taskId)}`, params);
    const task = await call("GetTask", {id: taskId, ...tenantParam(params.tenant)});
    const status = task.status || {};
    const message = (m) => ({messageId: m.messageId, role: m.role === "ROLE_USER" ? "user" : "agent", parts: wireParts(m.parts)});
    return {task: rowFromTask(task, params.tenant || ""), streaming: false,
      status: {state: status.state, timestamp: status.timestamp, message: status.message ? message(status.message) : null},
      history: (task.history || []).map(message), historyTotal: (task.history || []).length,
      artifacts: (task.artifacts || []).map((a) => ({artifactId: a.artifactId, name: a.name || "",
        description: a.description || "", parts: wireParts(a.parts)})),
      artifactsTotal: (task.artifacts || []).length, webhooks: null,
      metadata: {data: task.metadata === undefined ? null : task.metadata},
      timeline: {entries: params.after ? [] : [{seq: 0, kind: "status", state: status.state, time: status.timestamp || "",
        text: firstLine(messageText(status.message))}], last: 0, seq: 0, more: false}};
  }

  /** Load the first page again (new and changed tasks), or the next page (more). */
  async function loadTasks(more) {
    if (tasks.loading) {
      tasks.loadAgain = tasks.loadAgain === null ? Boolean(more) : tasks.loadAgain && Boolean(more);
      return;
    }
    tasks.loading = true;
    const generation = tasks.generation;
    const params = {...tasks.filters, pageSize: PAGE_SIZE, pageToken: more ? tasks.nextPageToken : ""};
    try {
      const page = await listPage(params);
      if (generation !== tasks.generation) return;
      const ids = page.tasks.map((row) => row.id);
      if (more) {
        tasks.order = tasks.order.concat(ids.filter((id) => !tasks.order.includes(id)));
        tasks.nextPageToken = page.nextPageToken || "";
        tasks.pages += 1;
      } else {
        // Rows loaded with "more" stay below the fresh first page; with only one page
        // loaded, the first page is the list (tasks gone from the store go too).
        const rest = tasks.order.filter((id) => !ids.includes(id) && (tasks.pages > 1 || isOpen(id)));
        tasks.order = ids.concat(rest);
        if (tasks.pages <= 1) {
          tasks.nextPageToken = page.nextPageToken || "";
          tasks.pages = 1;
        }
      }
      if (typeof page.totalSize === "number") tasks.totalSize = page.totalSize;
      for (const row of page.tasks) noteRow(row);
      for (const id of Array.from(tasks.rows.keys())) {
        if (!tasks.order.includes(id) && !isOpen(id)) tasks.rows.delete(id);
      }
      tasks.error = null;
    } catch (err) {
      tasks.error = `Could not list tasks: ${err.describe ? err.describe() : err}`;
    } finally {
      tasks.loading = false;
      renderTaskList();
      if (tasks.loadAgain !== null) {
        const again = tasks.loadAgain;
        tasks.loadAgain = null;
        loadTasks(again);
      }
    }
  }

  /** A row as the server has it now; an open task that changed is read again. */
  function noteRow(row) {
    const before = tasks.rows.get(row.id);
    tasks.rows.set(row.id, row);
    if (row.id === state.taskId && row.state !== state.taskState) {
      state.taskState = row.state;
      renderConversation();
    }
    const item = taskItems.get(row.id);
    if (before && item && item.view && !item.view.following
        && (before.state !== row.state || before.updatedAt !== row.updatedAt)) {
      loadDetail(item.view);
    }
  }

  /** Refresh the list (the chat saw a task change); one request at a time, and one
   * more after it for whatever changed meanwhile (see loadTasks). */
  function scheduleRefresh() {
    loadTasks(false);
  }

  function refreshTasks() {
    loadTasks(false);
  }

  function setFilters(changes) {
    Object.assign(tasks.filters, changes);
    $("filter-state").value = tasks.filters.state;
    $("filter-context").value = tasks.filters.contextId;
    $("filter-tenant").value = tasks.filters.tenant;
    tasks.generation += 1;
    tasks.order = [];
    tasks.pages = 0;
    tasks.nextPageToken = "";
    tasks.totalSize = null;
    tasks.loading = false;  // an answer for the old filters is dropped when it comes
    tasks.loadAgain = null;
    renderTaskList();
    loadTasks(false);
  }

  function firstLine(text) {
    const line = String(text || "").trim().split("\n")[0].trim();
    return line.length > 300 ? line.slice(0, 299) + "…" : line;
  }

  function formatDateTime(timestamp) {
    if (!timestamp) return "";
    const date = new Date(timestamp);
    if (isNaN(date)) return String(timestamp);
    const time = date.toLocaleTimeString([], {hour12: false});
    const today = new Date().toDateString() === date.toDateString();
    return today ? time : `${date.toISOString().slice(0, 10)} ${time}`;
  }

  function formatDuration(ms) {
    if (!(ms >= 0)) ms = 0;
    if (ms < 1000) return `${Math.round(ms)} ms`;
    const s = ms / 1000;
    if (s < 60) return `${s.toFixed(1)} s`;
    const m = Math.floor(s / 60);
    if (m < 60) return `${m} min ${Math.floor(s % 60)} s`;
    return `${Math.floor(m / 60)} h ${m % 60} min`;
  }

  function durationText(row) {
    const start = Date.parse(row.createdAt);
    if (isNaN(start)) return row.updatedAt ? `updated ${formatDateTime(row.updatedAt)}` : "";
    if (TERMINAL.has(row.state)) return `took ${formatDuration(Date.parse(row.updatedAt) - start)}`;
    if (INTERRUPTED.has(row.state)) return `waiting since ${formatDateTime(row.updatedAt)}, ${formatDuration(Date.now() - start)} in all`;
    return `running for ${formatDuration(Date.now() - start)}`;
  }

  const joined = (nodes, separator) => nodes.filter(Boolean).flatMap((node, i) => (i ? [separator, node] : [node]));

  function rowMatches(row, query) {
    if (!query) return true;
    const haystack = [row.asked, ...(row.askedFiles || []), row.id].join("\n").toLowerCase();
    return haystack.includes(query);
  }

  function renderTaskList() {
    const list = $("task-list");
    const query = tasks.search.trim().toLowerCase();
    let matching = 0;
    let index = 0;
    for (const id of tasks.order) {
      const row = tasks.rows.get(id);
      if (!row) continue;
      const item = taskItems.get(id) || createTaskItem(id);
      renderRow(item, row);
      const match = rowMatches(row, query);
      item.el.hidden = !match;
      if (match) matching += 1;
      if (list.children[index] !== item.el) list.insertBefore(item.el, list.children[index] || null);
      index += 1;
    }
    for (const [id, item] of taskItems) {
      if (!tasks.order.includes(id) || !tasks.rows.has(id)) {
        if (item.view) closeDetail(item);
        item.el.remove();
        taskItems.delete(id);
      }
    }
    const loaded = index;
    const status = $("tasks-status");
    const bits = [];
    if (tasks.error) bits.push(tasks.error);
    else if (tasks.pages === 0) bits.push("Loading tasks…");
    else {
      const total = typeof tasks.totalSize === "number" ? tasks.totalSize : loaded;
      bits.push(loaded >= total && !tasks.nextPageToken ? `${total} task(s).` : `Showing ${loaded} of ${total} tasks.`);
      if (query) {
        bits.push(`${matching} of the ${loaded} loaded match “${tasks.search.trim()}”` +
          (tasks.nextPageToken ? "; load more to search further." : "."));
      }
    }
    status.textContent = bits.join(" ");
    status.classList.toggle("error", Boolean(tasks.error));
    $("more-tasks").hidden = !tasks.nextPageToken;
  }

  function createTaskItem(id) {
    const detailId = `task-detail-${id}`;
    const item = {id, key: null, view: null, actionsFor: undefined};
    item.summary = h("span", {class: "task-summary"});
    item.toggle = h("button", {type: "button", class: "task-toggle", "aria-expanded": "false",
      "aria-controls": detailId, onclick: () => toggleTask(id)}, item.summary);
    item.actions = h("span", {class: "task-actions"});
    item.detail = h("div", {class: "task-detail", id: detailId, hidden: true});
    item.el = h("li", {class: "task", "data-task-id": id}, h("div", {class: "task-row"}, item.toggle, item.actions), item.detail);
    taskItems.set(id, item);
    return item;
  }

  function renderRow(item, row) {
    item.el.dataset.state = stateName(row.state);
    const key = JSON.stringify(row);
    if (key !== item.key) {  // rebuilt only on a change: keeps the DOM (and focus) as it is
      item.key = key;
      const files = (row.askedFiles || []).map((name) => h("span", {class: "task-file", title: "a file sent with the task"}, name));
      const facts = [
        row.owner ? h("span", {class: "task-owner"}, "owner ", h("strong", {}, row.owner)) : null,
        row.tenant ? h("span", {class: "task-tenant"}, "tenant ", h("strong", {}, row.tenant)) : null,
        row.createdAt ? h("span", {class: "task-started", title: row.createdAt}, `started ${formatDateTime(row.createdAt)}`) : null,
        h("span", {class: "task-duration"}, durationText(row)),
        h("code", {class: "task-id", title: `task ${row.id}`}, shortId(row.id)),
      ];
      const reason = row.statusText && (ENDED_WITH_REASON.has(row.state) ? h("span", {class: "task-reason"}, row.statusText)
        : INTERRUPTED.has(row.state) ? h("span", {class: "task-waiting"}, row.statusText) : null);
      fill(item.summary,
        h("span", {class: "task-line"}, stateBadge(row.state), " ",
          h("span", {class: "task-asked"}, row.asked || (files.length ? "" : "(no text)")), " ", files),
        h("span", {class: "task-facts meta"}, joined(facts, " · ")),
        reason);
    } else {
      const duration = item.summary.querySelector(".task-duration");
      if (duration) duration.textContent = durationText(row);
    }
    if (item.actionsFor !== row.state) {
      item.actionsFor = row.state;
      fill(item.actions,
        INTERRUPTED.has(row.state) && !row.tenant && h("button", {type: "button", onclick: () => continueTask(row)}, "Answer in chat"),
        !TERMINAL.has(row.state) && h("button", {type: "button", class: "row-cancel", onclick: () => cancelTask(row.id, row.tenant)}, "Cancel"));
    }
  }

  const isOpen = (id) => Boolean(taskItems.get(id) && taskItems.get(id).view);

  function toggleTask(id) {
    const item = taskItems.get(id);
    if (item.view) {
      closeDetail(item);
      if (location.hash === taskHash(id)) history.replaceState(null, "", location.pathname + location.search);
    } else {
      openDetail(item);
      history.replaceState(null, "", taskHash(id));
    }
  }

  const taskHash = (id) => `#task=${encodeURIComponent(id)}`;

  function closeDetail(item) {
    const view = item.view;
    item.view = null;
    item.toggle.setAttribute("aria-expanded", "false");
    item.detail.hidden = true;
    item.detail.replaceChildren();
    if (view) {
      view.closed = true;
      if (view.abort) view.abort.abort();
    }
  }

  /** One open task: its timeline so far, and what reads and follows it. */
  function openDetail(item) {
    const row = tasks.rows.get(item.id) || {id: item.id, tenant: tasks.filters.tenant};
    const view = {id: item.id, tenant: row.tenant || "", last: 0, generation: 0, history: null, loading: false, again: false,
      following: false, closed: false, abort: null, failures: 0, pollOnly: false, keys: {}, lastEntry: null};
    view.meta = h("p", {class: "meta detail-meta"});
    view.actions = h("p", {class: "detail-actions"});
    view.error = h("p", {class: "error", role: "alert", hidden: true});
    view.timeline = h("ol", {class: "timeline", "aria-label": "Timeline"});
    view.more = h("button", {type: "button", class: "more-events", hidden: true, onclick: () => loadDetail(view)}, "Load more events");
    view.live = h("p", {class: "live meta", role: "status"});
    view.conversation = h("div", {class: "conversation-wrap"});
    view.artifacts = h("div", {class: "artifacts"});
    view.webhooks = h("div", {class: "webhooks"});
    view.metadata = h("div", {class: "metadata"});
    fill(item.detail, view.meta, view.actions, view.error,
      h("div", {class: "detail-grid"},
        h("section", {class: "detail-timeline"}, h("h4", {}, "Timeline"), view.timeline, view.more, view.live),
        h("section", {class: "detail-conversation"}, h("h4", {}, "Conversation"), view.conversation),
        h("section", {class: "detail-artifacts"}, h("h4", {}, "Artifacts"), view.artifacts),
        h("section", {class: "detail-webhooks"}, h("h4", {}, "Webhooks"), view.webhooks, h("h4", {}, "Metadata"), view.metadata)));
    item.view = view;
    item.toggle.setAttribute("aria-expanded", "true");
    item.detail.hidden = false;
    loadDetail(view);
    return view;
  }

  /** Read the task again: what changed, and the log from where the timeline stops. */
  async function loadDetail(view) {
    if (view.closed) return;
    if (view.loading) {
      view.again = true;
      return;
    }
    view.loading = true;
    try {
      // The generation the timeline ends at: the API counts on from it (it reads no entry before `after`).
      const params = {after: view.last, ...tenantParam(view.tenant)};
      if (view.last) params.generation = view.generation;
      if (view.history) params.history = view.history;
      const detail = await taskDetail(view.id, params);
      if (!view.closed) applyDetail(view, detail);
    } catch (err) {
      view.error.hidden = false;
      view.error.textContent = err.describe ? err.describe() : String(err);
    } finally {
      view.loading = false;
      if (view.again && !view.closed) {
        view.again = false;
        loadDetail(view);
      }
    }
  }

  function applyDetail(view, detail) {
    const row = detail.task;
    view.error.hidden = true;
    if (taskItems.has(row.id) && !tasks.order.includes(row.id)) tasks.order.unshift(row.id);
    const before = tasks.rows.get(row.id);
    tasks.rows.set(row.id, row);
    if (!before || JSON.stringify(before) !== JSON.stringify(row)) renderTaskList();
    view.streaming = Boolean(detail.streaming && state.streaming) && !view.pollOnly;
    once(view, "meta", [row.id, row.contextId, row.tenant, row.owner], () => fill(view.meta,
      "Task ", h("code", {}, row.id), " · context ", h("code", {}, row.contextId || "?"),
      row.owner ? [" · owner ", h("strong", {}, row.owner)] : null,
      row.tenant ? [" · tenant ", h("strong", {}, row.tenant)] : null,
      " · ", h("a", {href: taskHash(row.id), class: "task-link"}, "link to this task")));
    once(view, "actions", [row.state, row.contextId], () => fill(view.actions,
      !TERMINAL.has(row.state) && h("button", {type: "button", class: "detail-cancel",
        onclick: () => cancelTask(row.id, view.tenant).then(() => loadDetail(view))}, "Cancel this task"),
      row.contextId && h("button", {type: "button", class: "same-context",
        onclick: () => setFilters({contextId: row.contextId, tenant: view.tenant})}, "Tasks of this context")));
    appendTimeline(view, detail.timeline);
    once(view, "conversation", [detail.history, detail.status, detail.historyTotal], () => {
      const box = view.conversation.querySelector(".conversation");
      const atEnd = !box || box.scrollTop + box.clientHeight >= box.scrollHeight - 8;
      const top = box ? box.scrollTop : 0;
      renderConversationOf(view, detail);
      const fresh = view.conversation.querySelector(".conversation");
      if (fresh) fresh.scrollTop = atEnd ? fresh.scrollHeight : top;
    });
    once(view, "artifacts", [detail.artifacts, detail.artifactsTotal], () => fill(view.artifacts,
      detail.artifacts.length ? detail.artifacts.map((a) => renderApiArtifact(a))
        : h("p", {class: "meta"}, "No artifacts."),
      detail.artifactsTotal > detail.artifacts.length
        ? h("p", {class: "meta"}, `Only the first ${detail.artifacts.length} of ${detail.artifactsTotal} artifacts are shown.`) : null));
    once(view, "webhooks", [detail.webhooks, row.state], () => fill(view.webhooks, renderWebhooks(detail.webhooks, detail.timeline.seq)));
    once(view, "metadata", [detail.metadata], () => fill(view.metadata, renderJson(detail.metadata, "No metadata.")));
    const running = !TERMINAL.has(row.state) && !INTERRUPTED.has(row.state);
    view.more.hidden = !detail.timeline.more || running;
    if (detail.timeline.more && running) view.again = true;  // catch up with a running task
    else if (running && !view.following) follow(view);
    if (!running && !view.following) view.live.textContent = TERMINAL.has(row.state) ? "" : `Waiting (${stateName(row.state)}).`;
  }

  /** Run render when the parts of the detail it shows changed (keeps the DOM otherwise). */
  function once(view, name, parts, render) {
    const key = JSON.stringify(parts);
    if (view.keys[name] === key) return;
    view.keys[name] = key;
    render();
  }

  /** Keep a scrolled box at its end while it grows, unless the reader scrolled up. */
  function keepAtEnd(box, grow) {
    const atEnd = box.scrollTop + box.clientHeight >= box.scrollHeight - 8;
    grow();
    if (atEnd) box.scrollTop = box.scrollHeight;
  }

  function appendTimeline(view, timeline) {
    keepAtEnd(view.timeline, () => appendEntries(view, timeline));
  }

  function appendEntries(view, timeline) {
    for (const entry of timeline.entries) {
      const last = view.lastEntry;
      if (last && last.entry.kind === "artifact" && entry.kind === "artifact" && entry.append
          && last.entry.artifactId === entry.artifactId) {
        // More chunks of the artifact the timeline ends with: one entry, counted.
        last.entry.chunks += entry.chunks;
        last.entry.chars += entry.chars;
        last.entry.lastSeq = entry.lastSeq;
        last.entry.lastChunk = entry.lastChunk;
        last.entry.generation = entry.generation;
        const node = renderTimelineEntry(last.entry);
        last.node.replaceWith(node);
        last.node = node;
        continue;
      }
      const node = renderTimelineEntry({...entry});
      view.timeline.append(node);
      view.lastEntry = {entry: {...entry}, node};
    }
    if ((timeline.last || 0) > view.last && timeline.generation !== undefined) view.generation = timeline.generation;
    view.last = Math.max(view.last, timeline.last || 0);
  }

  function renderTimelineEntry(entry) {
    const time = h("time", {class: entry.inherited ? "meta inherited" : "meta", datetime: entry.time || null,
      title: entry.inherited ? "this event has no time of its own: the time of the status before it" : entry.time || null},
      formatTime(entry.time));
    const seq = h("span", {class: "seq meta"}, entry.lastSeq && entry.lastSeq !== entry.seq ? `#${entry.seq}–${entry.lastSeq}` : `#${entry.seq}`);
    const generation = entry.generation === undefined ? null
      : h("span", {class: "generation meta", title: "the task's generation after this event (A2A 1.1 draft)"}, `g${entry.generation}`);
    let what;
    if (entry.kind === "created") {
      what = [stateBadge(entry.state), " created: ", h("span", {class: "timeline-text"}, entry.text || "(no text)"),
        (entry.files || []).map((f) => [" ", h("span", {class: "task-file"}, f)])];
    } else if (entry.kind === "status") {
      what = [stateBadge(entry.state), entry.text ? h("span", {class: "timeline-text"}, ` ${entry.text}`) : null];
    } else if (entry.kind === "artifact") {
      const chunks = entry.chunks > 1 ? `${entry.chunks} chunks` : entry.append ? "a chunk" : "new";
      const size = entry.chars ? `, ${entry.chars} characters` : "";
      what = [h("span", {class: "kind"}, "artifact"), " ", h("strong", {}, entry.name || shortId(entry.artifactId)),
        h("span", {class: "meta"}, ` (${(entry.partKinds || []).join(", ")}): ${chunks}${size}${entry.lastChunk ? ", last" : ""}`)];
    } else if (entry.kind === "message") {
      what = [h("span", {class: "kind"}, entry.role === "user" ? "user message" : "agent message"), " ",
        h("span", {class: "timeline-text"}, entry.text || "(no text)")];
    } else {
      what = [h("span", {class: "kind"}, String(entry.kind))];
    }
    const attrs = {class: "timeline-entry", "data-kind": entry.kind, "data-seq": entry.seq};
    if (entry.state && (entry.kind === "created" || entry.kind === "status")) attrs["data-state"] = stateName(entry.state);
    if (entry.generation !== undefined) attrs["data-generation"] = entry.generation;
    return h("li", attrs, time, " ", seq, " ", generation, generation ? " " : null, what);
  }

  function renderConversationOf(view, detail) {
    const messages = detail.history.slice();
    const status = detail.status && detail.status.message;
    if (status && !messages.some((m) => m.messageId && m.messageId === status.messageId)) messages.push(status);
    const earlier = detail.historyTotal - detail.history.length;
    fill(view.conversation,
      earlier > 0 ? h("p", {class: "meta earlier"}, `${earlier} earlier message(s) not shown. `,
        !view.history || view.history < 200 ? h("button", {type: "button", class: "more-history", onclick: () => {
          view.history = Math.min(200, detail.historyTotal);
          loadDetail(view);
        }}, "Show more") : "(the newest 200 are shown)") : null,
      messages.length ? h("ol", {class: "conversation"}, messages.map((m) =>
        h("li", {class: `msg msg-${m.role}`}, h("strong", {class: "who"}, m.role === "user" ? "User" : "Agent"),
          h("div", {class: "msg-parts"}, m.parts.map(renderApiPart)),
          m.partsDropped ? h("p", {class: "meta"}, `${m.partsDropped} more part(s) not shown.`) : null,
          metadataOf(m))))
        : h("p", {class: "meta"}, "No messages."));
  }

  function sameOriginHref(href) {
    try {
      const url = new URL(href, CONFIG.apiUrl || document.baseURI);
      if (url.protocol === "blob:") return url.href;
      return url.origin === location.origin ? url.href : null;
    } catch (err) {
      return null;
    }
  }

  function renderJson(value, empty) {
    if (!value) return h("p", {class: "meta"}, empty);
    if (value.cut) return [h("pre", {class: "part part-data"}, value.text), h("p", {class: "meta"}, "(cut: too large to show whole)")];
    if (value.data === null || value.data === undefined) return h("p", {class: "meta"}, empty);
    return h("pre", {class: "part part-data"}, JSON.stringify(value.data, null, 2));
  }

  function renderApiPart(part) {
    if (part.kind === "text") {
      return h("div", {class: "part part-text"}, part.text,
        part.cut ? h("span", {class: "meta cut"}, " … (cut: the rest is not shown)") : null);
    }
    if (part.kind === "data") return h("div", {class: "part"}, renderJson(part, "null"));
    if (part.kind === "file") {
      const href = sameOriginHref(part.href);
      const name = part.name || "file";
      const facts = [part.mediaType || "application/octet-stream", typeof part.size === "number" ? `${part.size} bytes` : null].filter(Boolean).join(", ");
      return h("p", {class: "part part-file"},
        href ? h("a", {href, download: name, class: "file-link"}, `Download ${name}`) : h("span", {}, name), ` (${facts})`);
    }
    if (part.kind === "url") {
      const href = safeHttpUrl(part.url);
      return h("p", {class: "part part-url"},
        href ? h("a", {href, target: "_blank", rel: "noopener noreferrer"}, part.name || part.url) : h("code", {}, part.url),
        part.mediaType ? ` (${part.mediaType})` : "");
    }
    return h("pre", {class: "part part-unknown"}, JSON.stringify(part, null, 2));
  }

  function renderApiArtifact(artifact) {
    const name = artifact.name || `Artifact ${shortId(artifact.artifactId)}`;
    return h("section", {class: "artifact", "data-artifact-id": artifact.artifactId},
      h("h5", {class: "artifact-name"}, artifact.description ? `${name} · ${artifact.description}` : name),
      h("div", {class: "artifact-parts"}, artifact.parts.map(renderApiPart)),
      artifact.partsDropped ? h("p", {class: "meta"}, `${artifact.partsDropped} more part(s) not shown.`) : null,
      metadataOf(artifact));
  }

  /** A message's or an artifact's metadata, folded away. */
  function metadataOf(holder) {
    if (!holder.metadata) return null;
    return h("details", {class: "part-metadata"}, h("summary", {}, "metadata"), renderJson(holder.metadata, "none"));
  }

  function renderWebhooks(hooks, seq) {
    if (hooks === null) return h("p", {class: "meta"}, "Unknown here (the inspector has no agent to ask).");
    if (!hooks.length) return h("p", {class: "meta"}, "None.");
    return h("table", {class: "webhook-table"},
      h("thead", {}, h("tr", {}, ["Webhook", "URL", "Delivered", "Failures"].map((t) => h("th", {scope: "col"}, t)))),
      h("tbody", {}, hooks.map((hook) => h("tr", {class: "webhook", "data-config-id": hook.id},
        h("td", {}, h("code", {}, hook.id)), h("td", {class: "webhook-url"}, h("code", {}, hook.url)),
        h("td", {class: "webhook-cursor"}, hook.gaveUp ? `gave up after event ${hook.delivered} of ${seq}`
          : hook.delivered >= seq ? `all ${seq} events` : `through event ${hook.delivered} of ${seq}`),
        h("td", {}, String(hook.failures))))));
  }

  /** Follow a running task: its stream (SubscribeToTask from where the timeline
   * stops) wakes the detail up at each event; without streaming, a poll. */
  async function follow(view) {
    view.following = true;
    view.live.textContent = view.streaming ? "Following live (the task's stream)…" : "Following (reading it every second)…";
    let events = 0;
    try {
      if (view.streaming) {
        view.abort = new AbortController();
        await callStream("SubscribeToTask", {id: view.id, ...tenantParam(view.tenant)}, () => {
          events += 1;
          loadDetail(view);
        }, String(view.last), view.abort.signal);
      } else {
        await sleep(1000);
      }
    } catch (err) {
      if (view.closed) return;
    } finally {
      view.following = false;
      view.abort = null;
    }
    if (view.closed) return;
    if (view.streaming) {
      // A stream that failed or ended with nothing: wait longer each time before the
      // next one; after three, read the task every second instead.
      view.failures = events ? 0 : view.failures + 1;
      if (view.failures >= 3) view.pollOnly = true;
      if (view.failures) await sleep(Math.min(5000, 250 * 2 ** view.failures));
      if (view.closed) return;
    }
    view.live.textContent = "";
    await loadDetail(view);  // what the task looks like now (and on following it if it still runs)
  }

  // ------------------------------------------------------------------ deep links

  /** Open the task the address names (#task=<id>), listed or not. */
  function openFromHash() {
    const match = /^#task=(.+)$/.exec(location.hash);
    if (!match) return;
    let id;
    try {
      id = decodeURIComponent(match[1]);
    } catch (err) {
      return;
    }
    if (!tasks.rows.has(id)) {
      tasks.rows.set(id, {id, state: "", asked: "", askedFiles: [], owner: "", tenant: tasks.filters.tenant,
        createdAt: "", updatedAt: "", statusText: ""});
    }
    if (!tasks.order.includes(id)) tasks.order.unshift(id);
    renderTaskList();
    const item = taskItems.get(id);
    if (!item.view) openDetail(item);
    item.el.scrollIntoView({block: "start"});
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
    $("filter-state").addEventListener("change", (e) => setFilters({state: e.target.value}));
    $("filter-context").addEventListener("change", (e) => setFilters({contextId: e.target.value.trim()}));
    $("filter-tenant").addEventListener("change", (e) => setFilters({tenant: e.target.value.trim()}));
    $("task-filters").addEventListener("submit", (event) => event.preventDefault());
    $("clear-filters").addEventListener("click", () => {
      $("task-search").value = "";
      tasks.search = "";
      setFilters({state: "", contextId: "", tenant: ""});
    });
    $("task-search").addEventListener("input", (e) => {
      tasks.search = e.target.value;
      renderTaskList();
    });
    $("more-tasks").addEventListener("click", () => loadTasks(true));
    // Running tasks' durations count on between refreshes.
    setInterval(() => {
      for (const [id, item] of taskItems) {
        const row = tasks.rows.get(id);
        if (row && !TERMINAL.has(row.state)) renderRow(item, row);
      }
    }, 1000);
    window.addEventListener("hashchange", openFromHash);
    renderConversation();
    loadCard().then(() => {
      input.focus();
      const tenants = new Set((state.card && state.card.supportedInterfaces || []).map((i) => i.tenant).filter(Boolean));
      fill($("tenant-list"), Array.from(tenants, (t) => h("option", {value: t})));
    });
    loadTasks(false).then(openFromHash);
  }

  // Exposed for debugging in the console (and for tests): read-only use.
  window.A2AInspector = {config: CONFIG, state, tasks};
  init();
})();
