/* The chat page: one websocket per chain (/ws/chat/<slug>/), replies streamed as Markdown.
 *
 * Frames are those of advisors_app/consumers.py (start, sources, tool_call_delta, tool_call, tool_result, reasoning,
 * guard, delta, approval_required, done | error). Model output is rendered by markdown-it with raw HTML off and images
 * off (a remote image in an answer could leak the conversation through its URL), dunder names
 * kept literal and a JSON answer drawn as an indented block; everything else the server sends
 * is inserted as text. Another chain starts another conversation. A reply's tool cards, sources and meta line are
 * drawn by the same functions live and for a reopened conversation (whose stored metadata the
 * page embeds as JSON, "chat-replies"), so both look alike. No build step: plain script.
 *
 * Tool calls that wait for approval (approval_required, or a reopened conversation whose last
 * reply is still pending) get an approval card under the reply; once each call has a decision
 * the page sends one message frame with the decisions and shows the resumed turn in place,
 * under the card. A turn resumed elsewhere (another tab, the admin) arrives as frames flagged
 * resumed_elsewhere and is drawn the same way when its conversation is open — as is a turn
 * another tab of the same user is running.
 *
 * Every frame of a turn carries an event_id. When the socket drops mid-answer the page
 * reconnects (backoff) and sends {"type": "resume", "conversation_id", "last_event_id"} with
 * the last id it saw: the server sends the frames it missed, then the rest live, so the whole
 * answer shows (with ADVISORS["DISCONNECT_POLICY"] = "continue" the turn kept running while
 * the page was away; under "cancel" it ends as stopped, with what was generated).
 *
 * Every stored reply gets 👍/👎 (its message id: the done frame's message_id live, the
 * article's data-reply-id reopened, where "chat-replies" holds the user's vote as feedback).
 * A click sends a feedback frame; the buttons show what the server acknowledged (the feedback
 * frame's score), clicking the pressed one again undoes the vote, and after 👎 an optional
 * reason can be picked (config.feedbackReasons).
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

  /* Python names survive: CommonMark reads "__enter__()" or "__slots__" as **enter** and
   * **slots** (the underscores of a word that starts with them can open and close emphasis).
   * An identifier wrapped in two or more underscores on each side (a dunder name, as a whole
   * word) is kept as literal text; underscores inside a word never emphasise anyway, and
   * "__bold words__" (a space inside) and **bold** still are bold. */
  var DUNDER = /^_{2,}[A-Za-z0-9][A-Za-z0-9_]*?_{2,}(?![A-Za-z0-9_])/;
  md.inline.ruler.before("emphasis", "python_identifier", function (state, silent) {
    var src = state.src;
    var pos = state.pos;
    if (src.charCodeAt(pos) !== 0x5f /* _ */) return false;
    if (pos > 0 && /[A-Za-z0-9_]/.test(src.charAt(pos - 1))) return false;
    var match = DUNDER.exec(src.slice(pos, pos + 200));
    if (!match) return false;
    if (!silent) state.push("text", "", 0).content = match[0];
    state.pos += match[0].length;
    return true;
  });

  /* An answer that is a JSON object or array (a structured-output chain's) is shown as an
   * indented code block, not run together into one paragraph. While it streams in and does
   * not parse yet, or when it was cut short, it shows as the raw text in the same block if it
   * starts like JSON ("{", or "[" then "{", "[", '"' or "]"); "[1] ..." or "[a link](...)"
   * that does not parse is Markdown. */
  var JSON_START = /^(\{|\[\s*[\[{"\]])/;

  function jsonAnswer(text) {
    var trimmed = text.trim();
    if (trimmed.charAt(0) !== "{" && trimmed.charAt(0) !== "[") return null;
    try {
      var value = JSON.parse(trimmed);
      if (value !== null && typeof value === "object") return JSON.stringify(value, null, 2);
    } catch (error) {
      // not (yet) JSON: see below
    }
    return JSON_START.test(trimmed) ? trimmed : null;
  }

  function renderMarkdown(element, text) {
    var json = jsonAnswer(text);
    if (json === null) {
      element.innerHTML = md.render(text);
      return;
    }
    element.textContent = "";
    var pre = el("pre", "msg-json");
    var code = el("code", "language-json", json);
    pre.appendChild(code);
    element.appendChild(pre);
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
    // The turn resumed elsewhere whose frames are being drawn (see handleElsewhere).
    elsewhere: null,
    // The approval boxes on the page (see approvalBox).
    approvals: [],
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
      var reply = state.reply;
      if (reply && reply.reconnecting) {
        // The answer was cut off by the dropped connection: the server sends what this page
        // missed (after the last event id it saw), then the rest live.
        reply.reconnecting = false;
        ws.send(JSON.stringify({
          type: "resume", conversation_id: reply.conversationId, last_event_id: reply.lastEventId,
        }));
      }
      updateControls();
    };
    ws.onmessage = function (event) {
      if (state.ws === ws) handleFrame(JSON.parse(event.data));
    };
    ws.onclose = function (event) {
      if (state.ws !== ws) return; // replaced on purpose (another chain)
      state.ws = null;
      if (state.reply) {
        if (state.reply.resume && !state.reply.started) {
          resumeRefused(state.reply, {
            code: "connection_lost",
            message: "The connection dropped before the decisions were confirmed: reload the " +
              "page to see whether they arrived.",
          });
        } else if (state.reply.started && state.reply.conversationId && state.reply.lastEventId &&
                   event.code !== 4401) {
          state.reply.reconnecting = true; // resumed once the socket is back (onopen)
        } else if (!state.reply.started) {
          // Nothing came back: the server may never have read the message (a frame past its
          // limit is dropped with the socket). Give it back to send again.
          var lost = state.reply;
          if (lost.sent && !prompt.value) prompt.value = lost.sent;
          finishReply({ note: "The connection dropped before the server answered; nothing was saved. Your message is back in the box." }, lost);
        } else {
          finishReply({ note: "The connection dropped; what arrived so far was saved." });
        }
      }
      if (state.elsewhere) {
        finishReply({ note: "The connection dropped; reload the page for the rest." }, state.elsewhere);
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

  /* Another chain starts another conversation: a conversation's memory, version and
   * answers belong to the chain it was started with (the JSON chain, given the plain chain's
   * history, copied its last reply). The open conversation stays in the list. */
  function switchChain(slug) {
    state.chain = slug;
    messages.querySelectorAll(".chat-switched").forEach(function (node) { node.remove(); });
    var open = state.conversationId || messages.querySelector(".msg");
    if (open) {
      clearConversation();
      var name = picker.options[picker.selectedIndex] ? picker.options[picker.selectedIndex].text : slug;
      messages.appendChild(el("p", "chat-notice chat-switched",
        "New conversation with " + name + "." + (state.previous ? " The previous one is in the list of conversations." : "")));
    }
    var url = new URL(open ? config.chatUrl : location.href, location.href);
    url.searchParams.set("chain", slug);
    if (open) history.pushState(null, "", url);
    else history.replaceState(history.state, "", url);
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
    body.dir = "auto"; // isolated: a bidi override in the text reorders nothing around it
    if (role === "user") body.textContent = text;
    article.appendChild(body);
    messages.appendChild(article);
    scrollToEnd();
    return { article: article, body: body };
  }

  /* A reply being drawn. ``parent`` given, it is a resumed turn: a segment appended to that
   * element (the part of a reply that shows the approval card); else a new assistant message.
   * ``reply.article`` is the element its parts (tools, body, sources, footer) live in,
   * ``reply.root`` the message article. */
  function newReply(parent) {
    var root, target, body;
    if (parent) {
      root = parent.closest("article");
      target = el("div", "msg-resumed");
      body = el("div", "msg-body");
      body.dir = "auto";
      target.appendChild(body);
      parent.appendChild(target);
    } else {
      var parts = addMessage("assistant", "");
      root = target = parts.article;
      body = parts.body;
    }
    root.setAttribute("aria-busy", "true");
    body.appendChild(el("span", "msg-typing", "…"));
    scrollToEnd();
    return {
      article: target, root: root, body: body, text: "", traceId: null, conversationId: null,
      sentAt: performance.now(), firstAt: null, frame: null, scheduled: false,
      toolCards: {}, started: false, resume: null, lastEventId: null, reconnecting: false,
    };
  }

  function startReply() {
    state.reply = newReply(null);
  }

  function scheduleRender(reply) {
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

  /* Which leg of the search found a chunk: "lexical #1 · vector #3", "" when not told. */
  function foundBy(how) {
    if (!how || typeof how !== "object") return "";
    var legs = [];
    if (isNumber(how.lexical_rank)) legs.push("lexical #" + how.lexical_rank);
    if (isNumber(how.vector_rank)) legs.push("vector #" + how.vector_rank);
    if (isNumber(how.rerank_score)) legs.push("reranked");
    return legs.join(" · ");
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
      var found = foundBy(source.retrieval);
      if (found) li.appendChild(el("span", "source-found", " " + found));
      if (source.snippet) li.appendChild(el("p", "source-snippet", String(source.snippet)));
      ol.appendChild(li);
    });
    box.appendChild(ol);
    return box;
  }

  /* A reply's parts are direct children of its element: a resumed turn's segment, nested in
   * the reply it resumes, has parts of its own. */
  function part(article, selector) {
    return article.querySelector(":scope > " + selector.split(", ").join(", :scope > "));
  }

  function showSources(article, sources) {
    var old = part(article, ".msg-sources");
    if (!Array.isArray(sources) || !sources.length) return;
    var box = renderSources(sources);
    if (old) old.replaceWith(box);
    else article.insertBefore(box, part(article, ".msg-footer"));
  }

  /* Notes, errors and approval cards go right below the text, above the sources and the
   * footer. */
  function addBelowText(article, node) {
    article.insertBefore(node, part(article, ".msg-sources, .msg-footer"));
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
    var box = part(article, ".msg-tools");
    if (!box) {
      box = el("div", "msg-tools");
      article.insertBefore(box, part(article, ".msg-body"));
    }
    return box;
  }

  /* The model's reasoning (``reasoning`` frames), collapsed above the answer: shown on
   * request, never part of the answer's text. */
  function reasoningText(article) {
    var box = part(article, ".msg-reasoning");
    if (!box) {
      box = el("details", "msg-reasoning");
      box.appendChild(el("summary", null, "Reasoning"));
      box.appendChild(el("pre", null, ""));
      article.insertBefore(box, part(article, ".msg-body"));
    }
    return box.querySelector("pre");
  }

  function toolArgs(card) {
    return card.querySelector(".tool-args pre");
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
   * tool call with its result, the sources (unless shown already), the meta line, for staff
   * the trace button and, for a stored reply (``messageId``), the 👍/👎. ``cards`` are the
   * tool cards the live frames made ({} otherwise). */
  function showReplyDetails(article, details, cards, traceId, messageId) {
    (Array.isArray(details.tools) ? details.tools : []).forEach(function (tool) {
      showToolResult(cardFor(article, cards, tool), tool);
    });
    Object.keys(cards).forEach(function (key) {
      if (cards[key].dataset.state === "running") showToolResult(cards[key], {});
    });
    if (!part(article, ".msg-sources")) showSources(article, details.sources);
    var footer = el("div", "msg-footer");
    var meta = metaText(details);
    if (meta) footer.appendChild(el("p", "msg-meta", meta));
    if (config.traceUrl && traceId) footer.appendChild(traceButton(traceId));
    var waiting = Array.isArray(details.pending_approvals) && details.pending_approvals.length;
    if (messageId && !waiting) {
      footer.appendChild(feedbackBox(messageId, (details.feedback || {}).thumbs || null));
    }
    if (footer.firstChild) article.appendChild(footer);
  }

  function finishReply(options, reply) {
    reply = reply || state.reply;
    if (!reply) return;
    if (state.reply === reply) state.reply = null;
    if (state.elsewhere === reply) state.elsewhere = null;
    var done = options.done;
    if (done && typeof done.content === "string" && done.content) reply.text = done.content;
    if (reply.text) renderMarkdown(reply.body, reply.text);
    else reply.body.textContent = "";
    reply.root.removeAttribute("aria-busy");
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
        pending_approvals: done.pending_approvals,
      };
    }
    var messageId = done && done.stored !== false && isNumber(done.message_id) ? done.message_id : null;
    showReplyDetails(reply.article, details, reply.toolCards, reply.traceId, messageId);
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

  /* An ISO time as the reader's local date and time ("3 Dec, 00:00"). */
  function localTime(iso) {
    var when = new Date(iso);
    if (isNaN(when.getTime())) return iso;
    return "on " + when.toLocaleString(undefined, {
      day: "numeric", month: "short", hour: "2-digit", minute: "2-digit",
    });
  }

  /* Seconds as "40 s", "12 min" or "22 h". */
  function waitText(seconds) {
    if (seconds < 90) return Math.ceil(seconds) + " s";
    if (seconds < 5400) return Math.round(seconds / 60) + " min";
    return Math.round(seconds / 3600) + " h";
  }

  /* A budget counting this turn is past its soft limit, or switched it to a cheaper model. */
  function budgetNote(article, frame) {
    var text = frame.downgraded_to
      ? "Budget \u201c" + frame.budget + "\u201d reached: answering with a cheaper model ("
        + frame.downgraded_to + ")"
      : "Budget \u201c" + frame.budget + "\u201d: " + frame.percent + " % used";
    if (frame.reset_at) text += " until it resets " + localTime(frame.reset_at);
    addBelowText(article, el("p", "msg-note msg-budget", text + "."));
  }

  /* What a guard verdict did, in words (docs/guards.md: rails and actions). */
  var GUARD_RAILS = {
    input: "your message", documents: "a retrieved document", tool_arguments: "a tool call",
    tool_results: "a tool's result", output: "the answer",
  };
  var GUARD_ACTIONS = {
    block: "stopped", redact: "redacted", drop: "left out", reask: "asked again for",
    hold: "held for review", log: "flagged",
  };

  function guardNote(article, frame) {
    var text = "A safety check (" + frame.check + ") " + (GUARD_ACTIONS[frame.action] || frame.action)
      + " " + (GUARD_RAILS[frame.rail] || frame.rail);
    if (frame.failed) text += " (the check could not run)";
    addBelowText(article, el("p", "msg-note msg-guard", text + "."));
  }

  function errorBox(frame) {
    var box = el("div", "msg-error");
    box.setAttribute("role", "alert");
    box.appendChild(el("strong", null, frame.message || "Something went wrong."));
    var details = [];
    Object.keys(frame.errors || {}).forEach(function (field) {
      frame.errors[field].forEach(function (text) { details.push(field + ": " + text); });
    });
    if (frame.reset_at) details.push("The budget resets " + localTime(frame.reset_at) + ".");
    else if (frame.retry_after) details.push("Try again in " + waitText(frame.retry_after) + ".");
    if (details.length) {
      var ul = el("ul");
      details.forEach(function (text) { ul.appendChild(el("li", null, text)); });
      box.appendChild(ul);
    }
    box.appendChild(el("span", "msg-error-code", frame.code));
    return box;
  }

  /* ---- feedback: 👍/👎 on a stored reply ---------------------------------------------- */

  /* A thumb drawn as SVG, so it shows without an emoji font (the shape is Feather's
   * thumbs-up, MIT licence); turned over for 👎. */
  var SVG = "http://www.w3.org/2000/svg";
  var THUMB = "M14 9V5a3 3 0 0 0-3-3l-4 9v11h11.28a2 2 0 0 0 2-1.7l1.38-9a2 2 0 0 0-2-2.3z" +
    "M7 22H4a2 2 0 0 1-2-2v-7a2 2 0 0 1 2-2h3";

  function thumbButton(label, className, down, onClick) {
    var node = button("", className, onClick);
    node.setAttribute("aria-label", label);
    node.title = label;
    var icon = document.createElementNS(SVG, "svg");
    [["viewBox", "0 0 24 24"], ["width", "16"], ["height", "16"], ["fill", "none"],
     ["stroke", "currentColor"], ["stroke-width", "2"], ["stroke-linecap", "round"],
     ["stroke-linejoin", "round"], ["aria-hidden", "true"], ["focusable", "false"]]
      .forEach(function (pair) { icon.setAttribute(pair[0], pair[1]); });
    var path = document.createElementNS(SVG, "path");
    path.setAttribute("d", THUMB);
    if (down) path.setAttribute("transform", "rotate(180 12 12)");
    icon.appendChild(path);
    node.appendChild(icon);
    return node;
  }

  function feedbackBoxOf(messageId) {
    return messages.querySelector('.msg-feedback[data-message-id="' + CSS.escape(String(messageId)) + '"]');
  }

  /* The 👍/👎 of reply ``messageId``; ``vote`` is the user's stored thumbs vote ({value,
   * reason}) or null. */
  function feedbackBox(messageId, vote) {
    var box = el("div", "msg-feedback");
    box.dataset.messageId = String(messageId);
    box.setAttribute("role", "group");
    box.setAttribute("aria-label", "Rate this reply");
    var up = thumbButton("Good reply", "feedback-up", false, function () {
      sendVote(box, box.dataset.vote === "up" ? null : true, "");
    });
    var down = thumbButton("Bad reply", "feedback-down", true, function () {
      sendVote(box, box.dataset.vote === "down" ? null : false, "");
    });
    box.appendChild(up);
    box.appendChild(down);
    var reasons = el("div", "feedback-reasons");
    reasons.setAttribute("role", "group");
    reasons.setAttribute("aria-label", "What was wrong? (optional)");
    reasons.appendChild(el("span", "feedback-ask", "What was wrong?"));
    (config.feedbackReasons || []).forEach(function (pair) {
      var chip = button(pair[1], "feedback-reason", function () {
        sendVote(box, false, box.dataset.reason === pair[0] ? "" : pair[0]);
      });
      chip.dataset.reason = pair[0];
      reasons.appendChild(chip);
    });
    box.appendChild(reasons);
    var status = el("span", "feedback-status");
    status.setAttribute("role", "status");
    box.appendChild(status);
    showVote(box, vote);
    return box;
  }

  /* Draw ``vote`` ({value, reason} or null) as the pressed buttons; the box's data-vote
   * ("up", "down" or "") and data-reason say what is stored. */
  function showVote(box, vote) {
    var value = vote ? vote.value : null;
    box.dataset.vote = value === true ? "up" : value === false ? "down" : "";
    box.dataset.reason = vote && vote.reason ? vote.reason : "";
    box.removeAttribute("aria-busy");
    box.querySelector(".feedback-up").setAttribute("aria-pressed", String(value === true));
    box.querySelector(".feedback-down").setAttribute("aria-pressed", String(value === false));
    box.querySelector(".feedback-reasons").hidden = value !== false;
    box.querySelectorAll(".feedback-reason").forEach(function (chip) {
      chip.setAttribute("aria-pressed", String(chip.dataset.reason === box.dataset.reason));
    });
  }

  function sendVote(box, value, reason) {
    var status = box.querySelector(".feedback-status");
    if (!state.ws || state.ws.readyState !== WebSocket.OPEN) {
      status.textContent = "Not connected: try again in a moment.";
      return;
    }
    status.textContent = "";
    box.setAttribute("aria-busy", "true");
    var frame = { type: "feedback", message_id: Number(box.dataset.messageId), key: "thumbs", value: value };
    if (reason) frame.reason = reason;
    state.ws.send(JSON.stringify(frame));
  }

  /* The server's answer to a feedback frame: the stored vote, or why it was refused. */
  function handleFeedback(frame) {
    var box = frame.message_id !== null && frame.message_id !== undefined ? feedbackBoxOf(frame.message_id) : null;
    if (frame.type === "feedback") {
      if (box && frame.key === "thumbs") showVote(box, frame.score);
      return;
    }
    if (!box) {
      showAlert(frame.message);
      return;
    }
    box.removeAttribute("aria-busy");
    box.querySelector(".feedback-status").textContent = "Not saved: " + (frame.message || frame.code);
  }

  /* ---- approval cards: tool calls that wait for the user's decision ----------------- */

  var DECISIONS = ["approve", "edit", "reject"];
  var DECIDED_TEXT = { approve: "Approved", edit: "Approved with edited arguments", reject: "Rejected" };
  var approvalCount = 0;

  /* The open (undecided or being sent) approval box of conversation ``id``, if any. */
  function openApproval(id) {
    state.approvals = state.approvals.filter(function (box) { return box.element.isConnected; });
    for (var i = state.approvals.length - 1; i >= 0; i -= 1) {
      var box = state.approvals[i];
      if (box.conversationId === id && (box.state === "open" || box.state === "sent")) return box;
    }
    return null;
  }

  /* The approval box of a paused reply, below its text in ``segment``: one card per call.
   * ``approvals`` are those of the approval_required frame (approval_id, tool, arguments,
   * allowed_decisions, reason, expires_at). */
  function approvalBox(segment, approvals, conversationId) {
    var element = el("section", "approval");
    var heading = el("h3", "approval-title", approvals.length === 1
      ? "Approve this tool call?"
      : "Approve these " + approvals.length + " tool calls?");
    heading.id = "approval-" + (approvalCount += 1);
    element.setAttribute("aria-labelledby", heading.id);
    element.appendChild(heading);
    element.appendChild(el("p", "approval-intro", approvals.length === 1
      ? "Nothing runs until you decide."
      : "Nothing runs until you have decided on each call."));
    var box = {
      element: element, segment: segment, conversationId: conversationId, cards: [],
      state: "open", errors: el("div", "approval-errors"), note: el("p", "approval-note"),
    };
    approvals.forEach(function (approval) {
      var card = approvalCard(box, approval);
      box.cards.push(card);
      element.appendChild(card.element);
    });
    box.note.hidden = true;
    box.note.setAttribute("role", "status");
    element.appendChild(box.note);
    element.appendChild(box.errors);
    element.dataset.state = box.state;
    state.approvals.push(box);
    addBelowText(segment, element);
    return box;
  }

  function button(text, className, onClick) {
    var node = el("button", className, text);
    node.type = "button";
    node.addEventListener("click", onClick);
    return node;
  }

  function approvalCard(box, approval) {
    var allowed = Array.isArray(approval.allowed_decisions)
      ? approval.allowed_decisions.filter(function (d) { return DECISIONS.indexOf(d) >= 0; }) : [];
    if (!allowed.length) allowed = DECISIONS.slice();  // unknown: the server checks
    var id = "approval-" + (approvalCount += 1);
    var card = {
      approval: approval, id: String(approval.approval_id), decision: null,
      element: el("div", "approval-card"), buttons: {}, panels: {},
    };
    var element = card.element;
    element.dataset.approvalId = card.id;
    var name = String(approval.tool || "?");
    var head = el("p", "approval-head");
    head.id = id + "-head";
    head.appendChild(el("span", "tool-kind", "Run tool "));
    head.appendChild(el("code", "tool-name", name));
    element.appendChild(head);
    if (approval.reason) element.appendChild(el("p", "approval-reason", String(approval.reason)));
    element.appendChild(el("p", "approval-label", "Arguments"));
    var args = el("pre", "approval-args", prettyArguments(
      approval.arguments === undefined || approval.arguments === null ? "{}" : approval.arguments));
    args.tabIndex = 0;  // scrollable by keyboard when wide
    element.appendChild(args);
    if (approval.expires_at) {
      var expires = new Date(approval.expires_at);
      if (!isNaN(expires.getTime())) {
        element.appendChild(el("p", "approval-expiry", "Decide before " + expires.toLocaleString()));
      }
    }

    var actions = el("div", "approval-actions");
    actions.setAttribute("role", "group");
    actions.setAttribute("aria-labelledby", head.id);
    if (allowed.indexOf("approve") >= 0) {
      card.buttons.approve = button("Approve", "approval-approve", function () {
        decide(box, card, withGrant(card, { approval_id: card.id, decision: "approve" }));
      });
      actions.appendChild(card.buttons.approve);
    }
    if (allowed.indexOf("edit") >= 0) {
      card.buttons.edit = button("Edit", "approval-edit-button", function () { openPanel(card, "edit"); });
      card.buttons.edit.setAttribute("aria-expanded", "false");
      actions.appendChild(card.buttons.edit);
    }
    if (allowed.indexOf("reject") >= 0) {
      card.buttons.reject = button("Reject", "approval-reject-button", function () { openPanel(card, "reject"); });
      card.buttons.reject.setAttribute("aria-expanded", "false");
      actions.appendChild(card.buttons.reject);
    }
    card.buttons.change = button("Change decision", "chat-link-button approval-change", function () {
      card.decision = null;
      showCardState(box, card);
      var first = actions.querySelector("button:not([hidden])");
      if (first) first.focus();
    });
    card.buttons.change.hidden = true;
    actions.appendChild(card.buttons.change);
    element.appendChild(actions);

    if (card.buttons.approve || card.buttons.edit) {
      var grantLabel = el("label", "approval-grant");
      card.grant = el("input");
      card.grant.type = "checkbox";
      grantLabel.appendChild(card.grant);
      grantLabel.appendChild(document.createTextNode(" Allow " + name + " for this conversation"));
      element.appendChild(grantLabel);
    }

    if (card.buttons.edit) {
      var edit = el("div", "approval-panel approval-edit");
      edit.id = id + "-edit";
      card.buttons.edit.setAttribute("aria-controls", edit.id);
      var editLabel = el("label", null, "Arguments to run " + name + " with (a JSON object)");
      editLabel.htmlFor = id + "-arguments";
      card.editText = el("textarea", "approval-edit-text");
      card.editText.id = id + "-arguments";
      card.editText.rows = 5;
      card.editText.spellcheck = false;
      card.editText.value = prettyArguments(
        approval.arguments === undefined || approval.arguments === null ? "{}" : approval.arguments);
      card.editError = el("p", "approval-field-error");
      card.editError.id = id + "-arguments-error";
      card.editError.hidden = true;
      card.editText.setAttribute("aria-describedby", card.editError.id);
      var editButtons = el("div", "approval-actions");
      editButtons.appendChild(button("Run with these arguments", "approval-confirm", function () {
        var parsed = parseObject(card.editText.value);
        if (parsed.error) {
          card.editError.textContent = parsed.error;
          card.editError.hidden = false;
          card.editText.setAttribute("aria-invalid", "true");
          card.editText.focus();
          return;
        }
        decide(box, card, withGrant(card, { approval_id: card.id, decision: "edit", arguments: parsed.value }));
      }));
      editButtons.appendChild(button("Cancel", "chat-link-button", function () { closePanels(card, "edit"); }));
      edit.appendChild(editLabel);
      edit.appendChild(card.editText);
      edit.appendChild(card.editError);
      edit.appendChild(editButtons);
      edit.hidden = true;
      card.panels.edit = edit;
      element.appendChild(edit);
    }

    if (card.buttons.reject) {
      var reject = el("div", "approval-panel approval-reject");
      reject.id = id + "-reject";
      card.buttons.reject.setAttribute("aria-controls", reject.id);
      var reasonLabel = el("label", null, "Why not? (optional; the assistant reads it)");
      reasonLabel.htmlFor = id + "-reason";
      card.reasonText = el("textarea", "approval-reason-text");
      card.reasonText.id = id + "-reason";
      card.reasonText.rows = 2;
      card.reasonText.maxLength = 2000;
      var rejectButtons = el("div", "approval-actions");
      rejectButtons.appendChild(button("Reject the call", "approval-confirm approval-reject-confirm", function () {
        var decision = { approval_id: card.id, decision: "reject" };
        var reason = card.reasonText.value.trim();
        if (reason) decision.reason = reason;
        decide(box, card, decision);
      }));
      rejectButtons.appendChild(button("Cancel", "chat-link-button", function () { closePanels(card, "reject"); }));
      reject.appendChild(reasonLabel);
      reject.appendChild(card.reasonText);
      reject.appendChild(rejectButtons);
      reject.hidden = true;
      card.panels.reject = reject;
      element.appendChild(reject);
    }

    card.status = el("p", "approval-status");
    card.status.setAttribute("role", "status");
    card.status.hidden = true;
    element.appendChild(card.status);
    return card;
  }

  /* ``text`` parsed as a JSON object: {value} or {error} (a message for the user). */
  function parseObject(text) {
    var value;
    try {
      value = JSON.parse(text);
    } catch (error) {
      return { error: "This is not valid JSON: " + error.message };
    }
    if (value === null || typeof value !== "object" || Array.isArray(value)) {
      return { error: "The arguments must be a JSON object, like {\"text\": \"...\"}." };
    }
    return { value: value };
  }

  function withGrant(card, decision) {
    if (card.grant && card.grant.checked) decision.grant = true;
    return decision;
  }

  function openPanel(card, which) {
    var panel = card.panels[which];
    var opening = panel.hidden;
    closePanels(card);
    if (!opening) return;
    panel.hidden = false;
    card.buttons[which].setAttribute("aria-expanded", "true");
    (which === "edit" ? card.editText : card.reasonText).focus();
  }

  /* Close the card's panels; with ``returnTo``, focus goes back to that panel's button. */
  function closePanels(card, returnTo) {
    Object.keys(card.panels).forEach(function (key) {
      card.panels[key].hidden = true;
      card.buttons[key].setAttribute("aria-expanded", "false");
    });
    if (returnTo) card.buttons[returnTo].focus();
  }

  function decide(box, card, decision) {
    if (box.state !== "open") return;
    card.decision = decision;
    if (card.editError) {
      card.editError.hidden = true;
      card.editText.removeAttribute("aria-invalid");
    }
    closePanels(card);
    showCardState(box, card);
    var waiting = box.cards.filter(function (c) { return c.decision === null; });
    if (waiting.length) {
      var next = waiting[0].element.querySelector(".approval-actions button:not([hidden])");
      if (next) next.focus();
      return;
    }
    sendDecisions(box);
  }

  /* What a card shows for its decision (none: the buttons; made: what was decided). */
  function showCardState(box, card) {
    var decided = card.decision !== null;
    var usable = box.state === "open";
    card.element.dataset.decision = decided ? card.decision.decision : "";
    DECISIONS.forEach(function (key) {
      if (!card.buttons[key]) return;
      card.buttons[key].hidden = decided;
      card.buttons[key].disabled = !usable;
    });
    card.buttons.change.hidden = !decided || !usable;
    if (card.grant) card.grant.disabled = decided || !usable;
    [card.editText, card.reasonText].forEach(function (field) {
      if (field) field.disabled = !usable;
    });
    Object.keys(card.panels).forEach(function (key) {
      card.panels[key].querySelectorAll("button").forEach(function (b) { b.disabled = !usable; });
    });
    if (!usable) closePanels(card);
    var text = "";
    if (decided) {
      text = DECIDED_TEXT[card.decision.decision];
      if (card.decision.grant) text += "; allowed for this conversation";
      if (card.decision.reason) text += ": " + card.decision.reason;
      if (box.state === "open") text += " (waiting for your other decisions)";
    }
    card.status.textContent = text;
    card.status.hidden = !text;
  }

  function setBoxState(box, value, note) {
    box.state = value;
    box.element.dataset.state = value;
    box.cards.forEach(function (card) { showCardState(box, card); });
    box.note.textContent = note || "";
    box.note.hidden = !note;
  }

  /* Every call has a decision: one message frame resumes the turn, drawn under the box. */
  function sendDecisions(box) {
    box.errors.textContent = "";
    var problem = null;
    if (!state.ws || state.ws.readyState !== WebSocket.OPEN) {
      problem = "Not connected: the decisions were not sent. Decide again once connected.";
    } else if (state.reply) {
      problem = "A reply is still being written: decide again when it has finished.";
    }
    if (problem) {
      box.cards.forEach(function (card) { card.decision = null; });
      setBoxState(box, "open");
      box.errors.appendChild(errorBox({ code: "not_sent", message: problem }));
      return;
    }
    setBoxState(box, "sent", "Sending your decision…");
    var reply = newReply(box.segment);
    reply.resume = box;
    reply.conversationId = box.conversationId;
    state.reply = reply;
    state.ws.send(JSON.stringify({
      type: "message",
      conversation_id: box.conversationId,
      decisions: box.cards.map(function (card) { return card.decision; }),
    }));
    updateControls();
    stopButton.focus();
  }

  /* The resumed turn started: the decisions are recorded for good. */
  function markDecided(box) {
    if (box.state === "sent") setBoxState(box, "decided");
  }

  /* No further decision is possible here (decided elsewhere, superseded, gone). */
  function closeApproval(box, note) {
    if (box.state === "decided" || box.state === "closed") return;
    if (box.state === "open") box.cards.forEach(function (card) { card.decision = null; });
    setBoxState(box, "closed", note);
  }

  /* Whether a refusal of the decisions says the calls no longer wait for any. */
  function approvalGone(frame) {
    if (frame.code === "conflict") return true;
    var texts = (frame.errors && frame.errors.decisions) || [];
    return frame.code === "invalid" && texts.some(function (text) {
      return /no tool calls waiting|expired|is not a call waiting/i.test(String(text));
    });
  }

  /* The server refused the decisions before resuming: the error goes next to the box, which
   * stays usable unless the calls are gone. */
  function resumeRefused(reply, frame) {
    var box = reply.resume;
    if (state.reply === reply) state.reply = null;
    reply.article.remove();
    reply.root.removeAttribute("aria-busy");
    box.errors.textContent = "";
    box.errors.appendChild(errorBox(frame));
    if (box.state === "sent") {
      // Not recorded: the cards show no decision again, usable unless the calls are gone.
      box.cards.forEach(function (card) { card.decision = null; });
      if (approvalGone(frame)) setBoxState(box, "closed", "These calls no longer wait for a decision.");
      else setBoxState(box, "open");
    }
    updateControls();
    var first = box.element.querySelector(".approval-actions button:not([hidden]):not(:disabled)");
    if (first) first.focus();
    else prompt.focus();
    scrollToEnd();
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
    if (frame.type === "feedback" || frame.in_reply_to === "feedback") handleFeedback(frame);
    else if (frame.resumed_elsewhere === true) handleElsewhere(frame);
    else handleTurnFrame(frame, state.reply);
  }

  /* One frame of the turn ``reply`` draws (this page's own, or one resumed elsewhere). */
  function handleTurnFrame(frame, reply) {
    if (reply && typeof frame.event_id === "string") reply.lastEventId = frame.event_id;
    switch (frame.type) {
      case "start":
        if (!reply) return;
        reply.started = true;
        reply.traceId = frame.trace_id;
        reply.conversationId = frame.conversation_id;
        if (reply.resume) markDecided(reply.resume);
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
      case "tool_call_delta":
        /* The card fills in as the model streams the call's arguments (raw JSON text). */
        if (!reply) return;
        toolArgs(cardFor(reply.article, reply.toolCards, frame)).textContent +=
          String(frame.arguments_delta || "");
        scrollToEnd();
        break;
      case "tool_call":
        if (!reply) return;
        toolArgs(cardFor(reply.article, reply.toolCards, frame)).textContent =
          prettyArguments(frame.arguments);
        scrollToEnd();
        break;
      case "tool_result":
        if (!reply) return;
        showToolResult(cardFor(reply.article, reply.toolCards, frame), frame);
        break;
      case "reasoning":
        if (!reply) return;
        reasoningText(reply.article).textContent += String(frame.text || "");
        break;
      case "delta":
        if (!reply) return;
        if (reply.firstAt === null) reply.firstAt = performance.now();
        reply.text += frame.text;
        scheduleRender(reply);
        break;
      case "budget_warning":
        if (!reply) return;
        budgetNote(reply.article, frame);
        break;
      case "guard":
        if (!reply) return;
        guardNote(reply.article, frame);
        break;
      case "approval_required":
        if (!reply || !Array.isArray(frame.approvals) || !frame.approvals.length) return;
        approvalBox(reply.article, frame.approvals, reply.conversationId || state.conversationId);
        scrollToEnd();
        break;
      case "done":
        if (!reply) return;
        followRemoval(reply, frame);
        if (reply.resume) markDecided(reply.resume);
        finishReply({
          done: frame,
          note: frame.reason !== "cancelled" ? null
            : frame.stored === false ? "Stopped before any answer; nothing was saved."
            : "Stopped; the answer so far was saved.",
        }, reply);
        break;
      case "error":
        if (frame.in_reply_to === "resume") {
          // Nothing of the turn is kept any more (the server restarted, or it ended long ago).
          if (reply) finishReply({ note: "The connection dropped; reload the conversation for the rest of this answer." }, reply);
          return;
        }
        if (reply && reply.resume && !reply.started) {
          resumeRefused(reply, frame);
          return;
        }
        if (frame.code === "busy") {
          showAlert(frame.message);
          return;
        }
        followRemoval(reply, frame);
        // A turn refused as a whole stored nothing: give the message back to edit and resend.
        if (reply && reply.sent && REFUSED_TURN_CODES.indexOf(frame.code) >= 0 && !prompt.value) {
          prompt.value = reply.sent;
        }
        // Refused before the model answered: what retrieval found is no answer's source.
        if (reply && frame.code === "budget_exceeded" && !reply.text) {
          var found = part(reply.article, ".msg-sources");
          if (found) found.remove();
        }
        if (reply) finishReply({ error: frame }, reply);
        else showAlert(frame.message);
        break;
      case "conversation":
        if (frame.removed) removeConversation(frame.conversation_id);
        else upsertConversation(frame.conversation_id, frame.title);
        break;
    }
  }

  /* A frame of a turn resumed elsewhere (another tab, the admin, the approvals API): drawn
   * like a live turn under the approval card it decided, when its conversation is open;
   * ignored otherwise (the sidebar learns of it from the conversation frame). */
  function handleElsewhere(frame) {
    var id = frame.conversation_id;
    if (!id || id !== state.conversationId || frame.type === "conversation") return;
    var own = state.reply;
    // This page's own resume of the conversation is running: the same turn, echoed.
    if (own && own.resume && own.started && own.conversationId === id) return;
    var reply = state.elsewhere;
    if (!reply || reply.conversationId !== id) {
      var box = openApproval(id);
      if (box) closeApproval(box, "Decided elsewhere; the reply continues below.");
      reply = state.elsewhere = newReply(box ? box.segment : null);
      reply.conversationId = id;
    }
    handleTurnFrame(frame, reply);
  }

  /* ---- composer -------------------------------------------------------------------- */

  /* Error codes of a turn that stored nothing of the message (refused input, the context
   * window, the rate): the composer gets the message back. */
  var REFUSED_TURN_CODES = [
    "invalid", "context_overflow", "throttled", "permission_denied",
    "chain_not_found", "version_not_found", "budget_exceeded",
  ];

  /* What is wrong with the composer's text for its length ("" when it fits). The textarea has
   * no maxlength: a browser would cut a pasted text there without a word, and send the rest. */
  function overLimit(text) {
    var limit = Number($("composer").dataset.maxChars);
    if (!(limit > 0 && text.length > limit)) return "";
    return "The message is " + text.length.toLocaleString() + " characters long; at most " +
      limit.toLocaleString() + " can be sent. Shorten it and send again.";
  }

  /* Said as soon as the text is too long (a paste), and again when it is sent anyway. */
  function checkLength() {
    var problem = overLimit(prompt.value);
    if (problem) {
      prompt.setAttribute("aria-invalid", "true");
      showAlert(problem);
    } else if (prompt.hasAttribute("aria-invalid")) {
      prompt.removeAttribute("aria-invalid");
      showAlert("");
    }
    return !problem;
  }

  function send() {
    var text = prompt.value;
    if (!text.trim() || state.reply || !state.ws || state.ws.readyState !== WebSocket.OPEN) return;
    // The server refuses longer messages (MAX_MESSAGE_CHARS): say so here, before a frame that
    // large is sent at all (past the server's frame limit the socket is simply dropped).
    if (!checkLength()) {
      prompt.focus();
      return;
    }
    showAlert("");
    // A new message instead of a decision: the server answers the waiting calls as not run.
    var waiting = state.conversationId && openApproval(state.conversationId);
    if (waiting) closeApproval(waiting, "Not decided: you sent a new message, so these calls did not run.");
    addMessage("user", text);
    startReply();
    state.reply.question = text.replace(/\s+/g, " ").trim().slice(0, 80);
    state.reply.sent = text;
    var frame = { type: "message", message: text };
    if (state.conversationId) frame.conversation_id = state.conversationId;
    state.ws.send(JSON.stringify(frame));
    prompt.value = "";
    updateControls();
    stopButton.focus();
  }

  /* An empty page for a new conversation (the chain stays); ``state.previous`` says
   * whether one was open. */
  function clearConversation() {
    state.previous = state.conversationId;
    state.conversationId = null;
    messages.querySelectorAll(".msg, .chat-switched").forEach(function (node) { node.remove(); });
    list.querySelectorAll("a[aria-current]").forEach(function (a) { a.removeAttribute("aria-current"); });
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
  prompt.addEventListener("input", checkLength);
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
    clearConversation();
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
      // The advisor and its status first: a wide trace scrolls, and these stay in view.
      ["Advisor", "Status", "Order", "Mode", "Duration", "Self", "First chunk", "Chunks", "Tokens"]
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
        [row.status + (row.error ? ": " + row.error : ""), row.order, row.mode, row.duration,
         row.self_duration, row.first_chunk, row.chunks, row.tokens].forEach(function (value) {
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
    showReplyDetails(article, details, {}, details.trace_id, Number(article.dataset.replyId));
    if (Array.isArray(details.pending_approvals) && details.pending_approvals.length) {
      approvalBox(article, details.pending_approvals, config.conversationId);
    }
  });
  scrollToEnd();
  updateControls();
  connect();
})();
