/* The chat page: one websocket per chain (/ws/chat/<slug>/), replies streamed as Markdown.
 *
 * Frames are those of advisors_app/consumers.py (start, sources, tool_call, tool_result,
 * delta, done | error). Model output is rendered by markdown-it with raw HTML off and images
 * off (a remote image in an answer could leak the conversation through its URL); everything
 * else the server sends is inserted as text. A reply's tool cards, sources and meta line are
 * drawn by the same functions live and for a reopened conversation (whose stored metadata the
 * page embeds as JSON, "chat-replies"), so both look alike. No build step: plain script.
 */
(function () {
  "use strict";

  var config = JSON.parse(document.getElementById("chat-config").textContent);
  var $ = function (id) { return document.getElementById(id); };
  var messages = $("messages");
  var prompt = $("prompt");
  var sendButton = $("send");
  var stopButton = $("stop");
  var picker = $("chain-picker");
  var connection = $("connection");
  var alertBox = $("alert");
  var list = $("conversation-list");
  var drawer = $("trace-drawer");

  var md = window.markdownit({ html: false, linkify: true, breaks: false });
  md.disable("image");
  var renderLink = md.renderer.rules.link_open || function (tokens, idx, options, env, self) {
    return self.renderToken(tokens, idx, options);
  };
  md.renderer.rules.link_open = function (tokens, idx, options, env, self) {
    tokens[idx].attrSet("rel", "noopener noreferrer nofollow");
    tokens[idx].attrSet("target", "_blank");
    return renderLink(tokens, idx, options, env, self);
  };

  function renderMarkdown(element, text) {
    element.innerHTML = md.render(text);
  }

  function el(tag, className, text) {
    var node = document.createElement(tag);
    if (className) node.className = className;
    if (text !== undefined && text !== null) node.textContent = text;
    return node;
  }

  var state = {
    chain: config.chain,
    conversationId: config.conversationId,
    ws: null,
    attempt: 0,
    timer: null,
    reply: null,
  };

  /* ---- connection ------------------------------------------------------------------ */

  function setConnection(kind, text) {
    connection.dataset.state = kind;
    connection.textContent = text;
  }

  function showAlert(text) {
    alertBox.textContent = "";
    if (text) alertBox.appendChild(typeof text === "string" ? document.createTextNode(text) : text);
    alertBox.hidden = !text;
  }

  function updateControls() {
    var open = state.ws !== null && state.ws.readyState === WebSocket.OPEN;
    var busy = state.reply !== null;
    prompt.disabled = !open && !busy;
    sendButton.disabled = !open || busy;
    sendButton.hidden = busy;
    stopButton.hidden = !busy;
    picker.disabled = busy || picker.options.length === 0 || !state.chain;
  }

  function connect() {
    clearTimeout(state.timer);
    if (!state.chain) {
      setConnection("closed", "No chain");
      updateControls();
      return;
    }
    var scheme = location.protocol === "https:" ? "wss://" : "ws://";
    var ws = new WebSocket(scheme + location.host + config.wsPath + encodeURIComponent(state.chain) + "/");
    state.ws = ws;
    setConnection("connecting", "Connecting…");
    ws.onopen = function () {
      if (state.ws !== ws) return;
      state.attempt = 0;
      setConnection("open", "Connected");
      showAlert("");
      updateControls();
    };
    ws.onmessage = function (event) {
      if (state.ws === ws) handleFrame(JSON.parse(event.data));
    };
    ws.onclose = function (event) {
      if (state.ws !== ws) return; // replaced on purpose (another chain)
      state.ws = null;
      if (state.reply) {
        finishReply({ note: "The connection dropped; what arrived so far was saved." });
      }
      if (event.code === 4401) {
        setConnection("closed", "Signed out");
        var message = el("span", null, "You are signed out. ");
        var link = el("a", null, "Log in again");
        link.href = config.loginUrl + "?next=" + encodeURIComponent(location.pathname);
        message.appendChild(link);
        showAlert(message);
        updateControls();
        return;
      }
      scheduleReconnect();
      updateControls();
    };
  }

  function scheduleReconnect() {
    // Exponential backoff with jitter: 0.5 s, 1 s, 2 s ... at most 15 s.
    var delay = Math.min(15000, 500 * Math.pow(2, state.attempt)) * (0.8 + Math.random() * 0.4);
    state.attempt += 1;
    setConnection("reconnecting", "Connection lost; reconnecting in " + Math.ceil(delay / 1000) + " s…");
    state.timer = setTimeout(connect, delay);
  }

  window.addEventListener("online", function () {
    if (state.ws === null) connect();
  });

  function switchChain(slug) {
    state.chain = slug;
    var url = new URL(location.href);
    url.searchParams.set("chain", slug);
    history.replaceState(history.state, "", url);
    var old = state.ws;
    state.ws = null;
    if (old) old.close(1000, "chain changed");
    connect();
  }

  /* ---- messages -------------------------------------------------------------------- */

  function scrollToEnd() {
    messages.scrollTop = messages.scrollHeight;
  }

  function addMessage(role, text) {
    var article = el("article", "msg msg-" + role);
    article.appendChild(el("h2", "visually-hidden", role === "user" ? "You" : "Assistant"));
    var body = el("div", "msg-body");
    if (role === "user") body.textContent = text;
    article.appendChild(body);
    messages.appendChild(article);
    scrollToEnd();
    return { article: article, body: body };
  }

  function startReply() {
    var parts = addMessage("assistant", "");
    parts.article.setAttribute("aria-busy", "true");
    parts.body.appendChild(el("span", "msg-typing", "…"));
    state.reply = {
      article: parts.article, body: parts.body, text: "", traceId: null, conversationId: null,
      sentAt: performance.now(), firstAt: null, frame: null, scheduled: false,
      toolCards: {},
    };
  }

  function scheduleRender() {
    var reply = state.reply;
    if (!reply || reply.scheduled) return;
    reply.scheduled = true;
    requestAnimationFrame(function () {
      reply.scheduled = false;
      renderMarkdown(reply.body, reply.text);
      scrollToEnd();
    });
  }

  /* ---- what a reply shows besides its text: the same live and reopened ------------ */

  function seconds(ms) {
    return (ms / 1000).toFixed(2) + " s";
  }

  function isNumber(value) {
    return typeof value === "number" && isFinite(value);
  }

  /* "first token 0.12 s · total 0.80 s · 31 prompt + 9 completion tokens · finish STOP":
   * details holds a reply's timings (milliseconds), usage and finish_reason, as the done frame
   * and the stored reply's metadata carry them; missing parts are left out. */
  function metaText(details) {
    var parts = [];
    var timings = details.timings || {};
    if (isNumber(timings.time_to_first_token_ms)) {
      parts.push("first token " + seconds(timings.time_to_first_token_ms));
    }
    if (isNumber(timings.latency_ms)) parts.push("total " + seconds(timings.latency_ms));
    var usage = details.usage;
    if (usage && isNumber(usage.prompt_tokens) && isNumber(usage.completion_tokens)) {
      parts.push(usage.prompt_tokens + " prompt + " + usage.completion_tokens + " completion tokens");
    } else if (usage && isNumber(usage.total_tokens)) {
      parts.push(usage.total_tokens + " tokens");
    }
    if (details.finish_reason) parts.push("finish " + details.finish_reason);
    return parts.join(" · ");
  }

  /* Timings measured in the page, for a reply whose final frame carried none (an error, a
   * dropped connection). */
  function measuredTimings(reply) {
    return {
      latency_ms: performance.now() - reply.sentAt,
      time_to_first_token_ms: reply.firstAt !== null ? reply.firstAt - reply.sentAt : null,
    };
  }

  /* Sources in the shape of the sources event, from response metadata: the fallback for a
   * done frame without "sources" (citations, or the retrieval advisors' documents). */
  function sourcesOf(metadata) {
    if (!metadata) return [];
    if (Array.isArray(metadata.citations) && metadata.citations.length) {
      return metadata.citations.map(function (c) {
        return { document_id: c.id, title: c.title, source: c.source, score: c.score };
      });
    }
    var documents = metadata.qa_retrieved_documents || metadata.rag_document_context || [];
    if (!Array.isArray(documents)) return [];
    return documents.map(function (d) {
      var meta = d.metadata || {};
      return {
        document_id: d.id,
        title: meta.title || meta.file_name,
        source: meta.source || meta.url,
        score: d.score,
        snippet: typeof d.text === "string" ? d.text.slice(0, 240) : "",
      };
    });
  }

  function safeHref(value) {
    // Only absolute web links: a document's source is often a file name, not a URL.
    if (typeof value !== "string" || !/^https?:\/\//i.test(value)) return null;
    try {
      var url = new URL(value, location.href);
      return url.protocol === "http:" || url.protocol === "https:" ? url.href : null;
    } catch (error) {
      return null;
    }
  }

  function renderSources(sources) {
    var box = el("details", "msg-sources");
    box.open = true;
    box.appendChild(el("summary", null, "Sources (" + sources.length + ")"));
    var ol = el("ol");
    sources.forEach(function (source) {
      var li = el("li");
      var label = plainName(source.title || source.source || source.document_id || "document");
      var href = source.source && safeHref(source.source);
      var title = href ? el("a", "source-title", label) : el("span", "source-title", label);
      title.dir = "auto";
      if (href) {
        title.href = href;
        title.rel = "noopener noreferrer nofollow";
        title.target = "_blank";
      }
      li.appendChild(title);
      if (isNumber(source.score)) li.appendChild(el("span", "source-score", " " + source.score.toFixed(2)));
      if (source.snippet) li.appendChild(el("p", "source-snippet", String(source.snippet)));
      ol.appendChild(li);
    });
    box.appendChild(ol);
    return box;
  }

  function showSources(article, sources) {
    var old = article.querySelector(".msg-sources");
    if (!Array.isArray(sources) || !sources.length) return;
    var box = renderSources(sources);
    if (old) old.replaceWith(box);
    else article.insertBefore(box, article.querySelector(".msg-footer"));
  }

  /* Notes and errors go right below the text, above the sources and the footer. */
  function addBelowText(article, node) {
    article.insertBefore(node, article.querySelector(".msg-sources, .msg-footer"));
  }

  function duration(ms) {
    if (!isNumber(ms)) return "";
    if (ms >= 1000) return seconds(ms);
    return (ms < 10 ? ms.toFixed(1) : String(Math.round(ms))) + " ms";
  }

  function prettyArguments(text) {
    if (typeof text !== "string") return JSON.stringify(text, null, 2);
    try {
      return JSON.stringify(JSON.parse(text), null, 2);
    } catch (error) {
      return text; // not JSON after all: shown as the model sent it
    }
  }

  /* One tool call as a small card: its name, the arguments (collapsed), then how it ended. */
  function toolCard(call) {
    var card = el("div", "tool-card");
    card.dataset.state = "running";
    var head = el("p", "tool-head");
    head.appendChild(el("span", "tool-kind", "Tool "));
    head.appendChild(el("code", "tool-name", String(call.name || "?")));
    head.appendChild(el("span", "tool-status", "running…"));
    card.appendChild(head);
    var args = el("details", "tool-args");
    args.appendChild(el("summary", null, "Arguments"));
    args.appendChild(el("pre", null, prettyArguments(call.arguments === undefined ? "" : call.arguments)));
    card.appendChild(args);
    return card;
  }

  /* A card's result: ok, or failed with the error the model got instead; how long it took. */
  function showToolResult(card, result) {
    var status = card.querySelector(".tool-status");
    var old = card.querySelector(".tool-error");
    if (old) old.remove();
    var took = duration(result.duration_ms);
    if (result.ok === true) {
      card.dataset.state = "ok";
      status.textContent = "ok" + (took ? " · " + took : "");
    } else if (result.ok === false) {
      card.dataset.state = "error";
      status.textContent = "failed" + (took ? " · " + took : "");
      if (result.error) card.appendChild(el("p", "tool-error", String(result.error)));
    } else {
      card.dataset.state = "unknown";
      status.textContent = "no result";
    }
  }

  function toolsBox(article) {
    var box = article.querySelector(".msg-tools");
    if (!box) {
      box = el("div", "msg-tools");
      article.insertBefore(box, article.querySelector(".msg-body"));
    }
    return box;
  }

  /* The card of tool call ``call`` in ``cards`` (id -> card), made now if there is none. */
  function cardFor(article, cards, call) {
    var key = String(call.id);
    if (!Object.prototype.hasOwnProperty.call(cards, key)) {
      cards[key] = toolCard(call);
      toolsBox(article).appendChild(cards[key]);
    }
    return cards[key];
  }

  /* What the reply shows once it has ended, from a done frame or the stored metadata: every
   * tool call with its result, the sources (unless shown already), the meta line and, for
   * staff, the trace button. ``cards`` are the tool cards the live frames made ({} otherwise). */
  function showReplyDetails(article, details, cards, traceId) {
    (Array.isArray(details.tools) ? details.tools : []).forEach(function (tool) {
      showToolResult(cardFor(article, cards, tool), tool);
    });
    Object.keys(cards).forEach(function (key) {
      if (cards[key].dataset.state === "running") showToolResult(cards[key], {});
    });
    if (!article.querySelector(".msg-sources")) showSources(article, details.sources);
    var footer = el("div", "msg-footer");
    var meta = metaText(details);
    if (meta) footer.appendChild(el("p", "msg-meta", meta));
    if (config.traceUrl && traceId) footer.appendChild(traceButton(traceId));
    if (footer.firstChild) article.appendChild(footer);
  }

  function finishReply(options) {
    var reply = state.reply;
    if (!reply) return;
    state.reply = null;
    var done = options.done;
    if (done && typeof done.content === "string" && done.content) reply.text = done.content;
    if (reply.text) renderMarkdown(reply.body, reply.text);
    else reply.body.textContent = "";
    reply.article.removeAttribute("aria-busy");
    if (options.note) addBelowText(reply.article, el("p", "msg-note", options.note));
    if (options.error) addBelowText(reply.article, errorBox(options.error));
    var details = { timings: measuredTimings(reply) };
    if (done) {
      details = {
        tools: done.tools,
        // Shown at the sources frame already, unless the server sent none: then these.
        sources: Array.isArray(done.sources) && done.sources.length
          ? done.sources : sourcesOf(done.metadata),
        usage: done.usage,
        finish_reason: done.finish_reason,
        timings: done.timings && isNumber(done.timings.latency_ms) ? done.timings : details.timings,
      };
    }
    showReplyDetails(reply.article, details, reply.toolCards, reply.traceId);
    scrollToEnd();
    updateControls();
    if (document.activeElement === stopButton || document.activeElement === document.body) prompt.focus();
  }

  function traceButton(traceId) {
    var button = el("button", "chat-link-button msg-trace", "Trace");
    button.type = "button";
    button.setAttribute("aria-haspopup", "dialog");
    button.addEventListener("click", function () { openTrace(traceId); });
    return button;
  }

  function errorBox(frame) {
    var box = el("div", "msg-error");
    box.setAttribute("role", "alert");
    box.appendChild(el("strong", null, frame.message || "Something went wrong."));
    var details = [];
    Object.keys(frame.errors || {}).forEach(function (field) {
      frame.errors[field].forEach(function (text) { details.push(field + ": " + text); });
    });
    if (frame.retry_after) details.push("Try again in " + frame.retry_after + " s.");
    if (details.length) {
      var ul = el("ul");
      details.forEach(function (text) { ul.appendChild(el("li", null, text)); });
      box.appendChild(ul);
    }
    box.appendChild(el("span", "msg-error-code", frame.code));
    return box;
  }

  /* ---- conversations --------------------------------------------------------------- */

  function conversationUrl(id) {
    return config.chatUrl + "c/" + encodeURIComponent(id) + "/";
  }

  /* Names people chose (conversation titles, document names) lose their bidi control
   * characters, which would reorder them ("invoice\u202Efdp.exe" read as "invoiceexe.pdf") and
   * the text after them; the element showing one gets dir="auto", which isolates it
   * (advisors_app/bidi.py does the same on the server). */
  var BIDI_CONTROLS = /[\u202A-\u202E\u2066-\u2069]/g;

  function plainName(text) {
    return String(text).replace(BIDI_CONTROLS, "");
  }

  function upsertConversation(id, title) {
    var empty = $("no-conversations");
    if (empty) empty.remove();
    var link = list.querySelector('a[data-id="' + CSS.escape(id) + '"]');
    if (!link) {
      link = el("a");
      link.href = conversationUrl(id);
      link.dataset.id = id;
      link.dir = "auto";
      var li = el("li");
      li.appendChild(link);
      list.insertBefore(li, list.firstChild);
    } else {
      list.insertBefore(link.parentNode, list.firstChild);
    }
    if (title && plainName(title)) link.textContent = plainName(title);
    else if (!link.textContent) link.textContent = "Untitled";
    if (id === state.conversationId) {
      list.querySelectorAll("a[aria-current]").forEach(function (a) { a.removeAttribute("aria-current"); });
      link.setAttribute("aria-current", "page");
    }
  }

  /* A turn that stored nothing (refused by a guard, failed) leaves no conversation behind. */
  function removeConversation(id) {
    if (!id) return;
    var link = list.querySelector('a[data-id="' + CSS.escape(id) + '"]');
    if (link) link.parentNode.remove();
    if (id === state.conversationId) {
      state.conversationId = null;
      history.replaceState(null, "", config.chatUrl);
    }
  }

  /* ---- frames ---------------------------------------------------------------------- */

  /* A turn's final frame says conversation_id null when the conversation its start frame
   * named was removed (its first turn stored nothing): forget it at once, URL included. */
  function followRemoval(reply, frame) {
    if (reply && reply.conversationId && frame.conversation_id === null) {
      removeConversation(reply.conversationId);
    }
  }

  function handleFrame(frame) {
    var reply = state.reply;
    switch (frame.type) {
      case "start":
        if (!reply) return;
        reply.traceId = frame.trace_id;
        reply.conversationId = frame.conversation_id;
        if (state.conversationId !== frame.conversation_id) {
          state.conversationId = frame.conversation_id;
          history.replaceState(null, "", conversationUrl(frame.conversation_id));
          upsertConversation(frame.conversation_id, reply.question);
        }
        break;
      case "sources":
        if (!reply) return;
        showSources(reply.article, frame.sources);
        scrollToEnd();
        break;
      case "tool_call":
        if (!reply) return;
        cardFor(reply.article, reply.toolCards, frame);
        scrollToEnd();
        break;
      case "tool_result":
        if (!reply) return;
        showToolResult(cardFor(reply.article, reply.toolCards, frame), frame);
        break;
      case "delta":
        if (!reply) return;
        if (reply.firstAt === null) reply.firstAt = performance.now();
        reply.text += frame.text;
        scheduleRender();
        break;
      case "done":
        if (!reply) return;
        followRemoval(reply, frame);
        finishReply({
          done: frame,
          note: frame.reason !== "cancelled" ? null
            : frame.stored === false ? "Stopped before any answer; nothing was saved."
            : "Stopped; the answer so far was saved.",
        });
        break;
      case "error":
        if (frame.code === "busy") {
          showAlert(frame.message);
          return;
        }
        followRemoval(reply, frame);
        if (reply) finishReply({ error: frame });
        else showAlert(frame.message);
        break;
      case "conversation":
        if (frame.removed) removeConversation(frame.conversation_id);
        else upsertConversation(frame.conversation_id, frame.title);
        break;
    }
  }

  /* ---- composer -------------------------------------------------------------------- */

  function send() {
    var text = prompt.value;
    if (!text.trim() || state.reply || !state.ws || state.ws.readyState !== WebSocket.OPEN) return;
    showAlert("");
    addMessage("user", text);
    startReply();
    state.reply.question = text.replace(/\s+/g, " ").trim().slice(0, 80);
    var frame = { type: "message", message: text };
    if (state.conversationId) frame.conversation_id = state.conversationId;
    state.ws.send(JSON.stringify(frame));
    prompt.value = "";
    updateControls();
    stopButton.focus();
  }

  function stop() {
    if (state.reply && state.ws && state.ws.readyState === WebSocket.OPEN) {
      state.ws.send(JSON.stringify({ type: "cancel" }));
    }
  }

  $("composer").addEventListener("submit", function (event) {
    event.preventDefault();
    send();
  });
  prompt.addEventListener("keydown", function (event) {
    if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
      event.preventDefault();
      send();
    }
  });
  stopButton.addEventListener("click", stop);
  document.addEventListener("keydown", function (event) {
    if (event.key === "Escape" && state.reply && !drawer.open) stop();
  });
  picker.addEventListener("change", function () { switchChain(picker.value); });
  $("new-chat").addEventListener("click", function (event) {
    if (state.reply || event.metaKey || event.ctrlKey || event.shiftKey) return;
    event.preventDefault();
    state.conversationId = null;
    messages.querySelectorAll(".msg").forEach(function (node) { node.remove(); });
    list.querySelectorAll("a[aria-current]").forEach(function (a) { a.removeAttribute("aria-current"); });
    var url = new URL(config.chatUrl, location.href);
    if (state.chain) url.searchParams.set("chain", state.chain);
    history.pushState(null, "", url);
    showAlert("");
    prompt.focus();
  });
  window.addEventListener("popstate", function () { location.reload(); });

  var toggle = $("sidebar-toggle");
  toggle.addEventListener("click", function () {
    var open = toggle.getAttribute("aria-expanded") !== "true";
    toggle.setAttribute("aria-expanded", String(open));
    $("chat-sidebar").classList.toggle("is-open", open);
  });

  /* ---- trace drawer (staff) -------------------------------------------------------- */

  function ms(value) {
    return typeof value === "number" ? (value * 1000).toFixed(1) + " ms" : "";
  }

  function openTrace(traceId) {
    var body = $("trace-body");
    body.textContent = "Loading…";
    $("trace-title").textContent = "Trace " + traceId;
    if (!drawer.open) drawer.showModal();
    fetch(config.traceUrl.replace("TRACE_ID", encodeURIComponent(traceId)), {
      credentials: "same-origin", headers: { Accept: "application/json" },
    }).then(function (response) {
      return response.json().then(function (data) { return { ok: response.ok, data: data }; });
    }).then(function (result) {
      body.textContent = "";
      if (!result.ok) {
        body.appendChild(el("p", "msg-error", result.data.detail || "Could not load the trace."));
        return;
      }
      var data = result.data;
      var summary = el("p", "trace-summary",
        data.chain + " · " + data.status + " · " + ms(data.latency) +
        (data.time_to_first_token !== null ? " · first token " + ms(data.time_to_first_token) : "") +
        (data.usage && data.usage.total_tokens ? " · " + data.usage.total_tokens + " tokens" : ""));
      body.appendChild(summary);
      if (data.error) body.appendChild(el("p", "msg-error", data.error));
      var table = el("table", "trace-table");
      var head = el("tr");
      ["Advisor", "Order", "Mode", "Duration", "Self", "First chunk", "Chunks", "Status", "Tokens"]
        .forEach(function (name) {
          var th = el("th", null, name);
          th.scope = "col";
          head.appendChild(th);
        });
      var thead = el("thead");
      thead.appendChild(head);
      table.appendChild(thead);
      var tbody = el("tbody");
      data.rows.forEach(function (row) {
        var tr = el("tr");
        var name = el("th", null, row.name);
        name.scope = "row";
        name.style.paddingLeft = (0.5 + row.depth) + "rem";
        tr.appendChild(name);
        [row.order, row.mode, row.duration, row.self_duration, row.first_chunk, row.chunks,
         row.status + (row.error ? ": " + row.error : ""), row.tokens].forEach(function (value) {
          tr.appendChild(el("td", null, String(value)));
        });
        tbody.appendChild(tr);
      });
      table.appendChild(tbody);
      var wrap = el("div", "trace-scroll");
      wrap.appendChild(table);
      body.appendChild(wrap);
      if (data.admin_url) {
        var link = el("a", null, "Open the call log in the admin");
        link.href = data.admin_url;
        body.appendChild(link);
      }
    }).catch(function () {
      body.textContent = "Could not load the trace.";
    });
  }

  $("trace-close").addEventListener("click", function () { drawer.close(); });

  /* ---- start ----------------------------------------------------------------------- */

  messages.querySelectorAll("[data-markdown]").forEach(function (node) {
    renderMarkdown(node, node.textContent);
  });
  // Replies from the history show their tool cards, sources, meta line and trace button as the
  // live reply did: the metadata stored with each is embedded as JSON, never as markup.
  var stored = JSON.parse($("chat-replies").textContent);
  messages.querySelectorAll("article[data-reply-id]").forEach(function (article) {
    var details = stored[article.dataset.replyId] || {};
    showReplyDetails(article, details, {}, details.trace_id);
  });
  scrollToEnd();
  updateControls();
  connect();
})();
