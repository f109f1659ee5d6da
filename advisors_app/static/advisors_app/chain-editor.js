/* The chain editor's advisor rows: params as forms drawn from each type's JSON Schema
   (django-jsonform's react-json-form) with a raw JSON toggle, reordering by drag (SortableJS)
   or by the Move up / Move down buttons, and the effective order, outermost to innermost,
   recomputed as you go.

   The row's params textarea stays the submitted value: the form writes the params into it as
   JSON on every change, and the raw JSON toggle shows it. Schemas come from the page
   (#advisor-params-forms: advisors_app.admin.param_forms.form_specs), so a row whose type
   changes gets that type's form at once. */
(function () {
  "use strict";

  var HIGHEST = -2147483648;
  var LOWEST = 2147483647;
  var NEAR = 1000000;
  var GAP = 100;
  var RELATIVE = /^(HIGHEST|LOWEST)(?:_PRECEDENCE)?(?:([+-])(\d+))?$/i;
  var specs = {};
  var group = null;
  var labelCount = 0;

  function parseOrder(text) {
    var value = String(text || "").replace(/\s+/g, "");
    if (!value) return null;
    var match = RELATIVE.exec(value);
    if (match) {
      var base = match[1].toUpperCase() === "HIGHEST" ? HIGHEST : LOWEST;
      var offset = parseInt(match[3] || "0", 10);
      return match[2] === "-" ? base - offset : base + offset;
    }
    return /^[+-]?\d+$/.test(value) ? parseInt(value, 10) : NaN;
  }

  function formatOrder(order) {
    if (order === null || isNaN(order)) return "?";
    if (order - HIGHEST <= NEAR) return order === HIGHEST ? "HIGHEST" : "HIGHEST+" + (order - HIGHEST);
    if (LOWEST - order <= NEAR) return order === LOWEST ? "LOWEST" : "LOWEST-" + (LOWEST - order);
    return String(order);
  }

  /* ---- rows ---- */

  function formRows() {
    return Array.prototype.filter.call(
      group.querySelectorAll("tbody > tr.form-row"),
      function (tr) { return !tr.classList.contains("empty-form") && tr.id.indexOf("__prefix__") < 0; }
    );
  }

  function field(tr, suffix) {
    return tr.querySelector("[name$='-" + suffix + "']");
  }

  function typeOf(tr) {
    var select = field(tr, "advisor_type");
    return select ? select.value : "";
  }

  function isDeleted(tr) {
    var box = field(tr, "DELETE");
    return Boolean(box && box.checked);
  }

  function effective(tr) {
    var key = typeOf(tr);
    if (!key) return null;
    var order = parseOrder((field(tr, "order") || {}).value);
    if (order === null) return specs[key] ? specs[key].default_order : null;
    return order;
  }

  function rowName(tr) {
    return typeOf(tr) || "new advisor";
  }

  /* "advisor 3: Safe guard": the row's place and its type's label, for per-row control names. */
  function rowTitle(tr) {
    var spec = specs[typeOf(tr)];
    return "advisor " + (formRows().indexOf(tr) + 1) + ": " + (spec ? spec.label : rowName(tr));
  }

  /* ---- the effective order, shown live ---- */

  /* `moving`: a row being dragged; the list then follows the table, where the row would land. */
  function showOrder(moving) {
    var list = group.querySelector(".chain-order ol");
    var entries = [];
    formRows().forEach(function (tr, index) {
      var order = effective(tr);
      var cell = tr.querySelector("td.field-effective p");
      if (cell) cell.textContent = order === null ? "-" : formatOrder(order);
      if (!typeOf(tr) || isDeleted(tr) || order === null || isNaN(order)) return;
      var enabled = field(tr, "enabled");
      entries.push({ tr: tr, order: order, index: index, off: enabled && !enabled.checked });
    });
    if (moving) entries.sort(function (a, b) { return a.index - b.index; });
    else entries.sort(function (a, b) { return a.order - b.order || a.index - b.index; });
    list.textContent = "";
    entries.forEach(function (entry) {
      var item = document.createElement("li");
      var code = document.createElement("code");
      code.textContent = typeOf(entry.tr);
      item.appendChild(code);
      var at = entry.tr === moving ? " (moving)" : " at " + formatOrder(entry.order);
      item.appendChild(document.createTextNode(at + (entry.off ? " (disabled)" : "")));
      list.appendChild(item);
    });
    var mismatch = entries.some(function (entry, i) {
      return i > 0 && entries[i - 1].index > entry.index;
    });
    group.querySelector(".chain-order .order-note").hidden = !mismatch;
  }

  /* After rows moved, give the row at `moved` an order between its neighbours (and push the
     rows after it down where they would run before it): the rows' orders then match what the
     table shows, outermost first. */
  function reorder(moved) {
    var rows = formRows().filter(function (tr) { return typeOf(tr) && !isDeleted(tr); });
    var at = rows.indexOf(moved);
    if (at < 0) { showOrder(); return; }
    var before = at > 0 ? effective(rows[at - 1]) : null;
    var after = at < rows.length - 1 ? effective(rows[at + 1]) : null;
    var order;
    if (before !== null && after !== null) {
      // Just after the row before (HIGHEST+200, 100), not the middle of a wide gap
      // (HIGHEST and 0 would give -1073741724): orders stay readable.
      if (after - before > GAP) order = before + GAP;
      else order = after - before >= 2 ? before + Math.floor((after - before) / 2) : before + 1;
    } else if (before !== null) {
      order = Math.min(before + GAP, LOWEST);
    } else if (after !== null) {
      order = Math.max(after - GAP, HIGHEST);
    } else {
      order = effective(moved);
    }
    setOrder(moved, order);
    for (var i = at + 1; i < rows.length; i++) {
      var previous = effective(rows[i - 1]);
      if (effective(rows[i]) <= previous) setOrder(rows[i], Math.min(previous + 1, LOWEST));
    }
    showOrder();
  }

  function setOrder(tr, order) {
    var input = field(tr, "order");
    if (input && order !== null) input.value = formatOrder(order);
  }

  function move(tr, step) {
    var rows = formRows();
    var target = rows[rows.indexOf(tr) + step];
    if (!target) return;
    var errors = tr.previousElementSibling;
    if (step < 0) target.parentNode.insertBefore(tr, target);
    else target.parentNode.insertBefore(tr, target.nextSibling);
    if (errors && errors.classList.contains("row-form-errors")) tr.parentNode.insertBefore(errors, tr);
    reorder(tr);
    formRows().forEach(labelRow);  // places changed: "advisor 2: ..." names follow
    announce(rowName(tr) + " moved " + (step < 0 ? "up" : "down") + ", now runs at " + formatOrder(effective(tr)));
  }

  function announce(text) {
    group.querySelector(".chain-order .order-status").textContent = text;
  }

  /* Rows shown in the order they run (ties keep the saved order), unless a row shows errors
     (its error line sits above it). */
  function sortRows() {
    if (group.querySelector("tr.row-form-errors")) return;
    var rows = formRows();
    var sorted = rows.slice().sort(function (a, b) {
      var x = effective(a), y = effective(b);
      if (x === null || isNaN(x)) x = Infinity;
      if (y === null || isNaN(y)) y = Infinity;
      return x - y || rows.indexOf(a) - rows.indexOf(b);
    });
    var anchor = rows.length ? rows[rows.length - 1].nextSibling : null;
    sorted.forEach(function (tr) { tr.parentNode.insertBefore(tr, anchor); });
  }

  function addMoveControls(tr) {
    var cell = tr.querySelector("td.original");
    if (!cell || cell.querySelector(".row-move")) return;
    var box = document.createElement("div");
    box.className = "row-move";
    var handle = document.createElement("span");
    handle.className = "drag-handle";
    handle.setAttribute("aria-hidden", "true");
    handle.title = "Drag to reorder";
    handle.textContent = "\u2630";
    box.appendChild(handle);
    [["up", -1, "\u2191"], ["down", 1, "\u2193"]].forEach(function (spec) {
      var button = document.createElement("button");
      button.type = "button";
      button.className = "move-" + spec[0];
      button.textContent = spec[2];
      button.addEventListener("click", function () { move(tr, spec[1]); button.focus(); });
      box.appendChild(button);
    });
    cell.insertBefore(box, cell.firstChild);
    labelRow(tr);
  }

  /* Labels for the row's controls (a table row has no <label>s): the column and the type. */
  function labelRow(tr) {
    var name = rowName(tr);
    var labels = {
      advisor_type: "Advisor type", order: "Order", enabled: "Enabled",
      params: "Params (JSON)", DELETE: "Delete"
    };
    Object.keys(labels).forEach(function (suffix) {
      var control = field(tr, suffix);
      if (control) control.setAttribute("aria-label", suffix === "advisor_type" ? labels[suffix] : labels[suffix] + ": " + name);
    });
    var toggle = tr.querySelector(".params-toggle");
    if (toggle) toggle.setAttribute("aria-label", "Raw JSON for " + rowTitle(tr));
    var form = tr.querySelector(".params-form");
    if (form) labelForm(form);
    var up = tr.querySelector(".row-move .move-up");
    if (up) {
      up.setAttribute("aria-label", "Move " + name + " up");
      tr.querySelector(".row-move .move-down").setAttribute("aria-label", "Move " + name + " down");
    }
  }

  /* ---- params forms ---- */

  function parse(text) {
    if (!String(text || "").trim()) return {};
    return JSON.parse(text);
  }

  /* Stored params → the form's data: JSON-text params as indented JSON. */
  function toForm(spec, params) {
    var data = {};
    Object.keys(params).forEach(function (name) {
      var value = params[name];
      if (spec.raw.indexOf(name) >= 0) data[name] = JSON.stringify(value, null, 2);
      else if (value === null) data[name] = "";
      else data[name] = value;
    });
    return data;
  }

  /* The form's data → params: JSON-text params parsed (kept as text when they are not JSON:
     the server's error then names the param), a cleared nullable param null, a cleared number
     left out (the type's default applies). */
  function fromForm(spec, data) {
    var params = {};
    var props = spec.schema.properties;
    Object.keys(data).forEach(function (name) {
      var value = data[name];
      if (spec.raw.indexOf(name) >= 0) {
        if (typeof value !== "string" || !value.trim()) return;
        try { params[name] = JSON.parse(value); } catch (e) { params[name] = value; }
        return;
      }
      var blank = value === "" || value === null;
      if (blank && spec.nullable.indexOf(name) >= 0) { params[name] = null; return; }
      if (blank && props[name] && props[name].type !== "string") return;
      params[name] = value;
    });
    return params;
  }

  /* The params as JSON, an integer too large for a JS number as typed: the form holds
     99999999999999999999999 as 1e+23, and the server's error would name that instead. */
  function paramsJson(spec, data, container) {
    var params = fromForm(spec, data);
    var typed = {};
    Object.keys(params).forEach(function (name) {
      var prop = spec.schema.properties[name];
      var value = params[name];
      if (!prop || prop.type !== "integer" || typeof value !== "number" || Number.isSafeInteger(value)) return;
      var input = container.querySelector("input[name='rjf\u00a7" + name + "']");
      var text = input ? input.value.trim() : "";
      if (!/^-?\d+$/.test(text)) return;
      var token = "\u0000typed:" + name;
      params[name] = token;
      typed[JSON.stringify(token)] = text;
    });
    var json = JSON.stringify(params);
    Object.keys(typed).forEach(function (token) { json = json.split(token).join(typed[token]); });
    return json;
  }

  /* django-jsonform's labels have no `for`, and array items none at all: name each control
     after its label, or its list's title and place ("words, item 1"). */
  function labelForm(container) {
    var tr = container.closest("tr");
    // django-jsonform's collapse toggle reads "[-]" / "[+]": say what it does, and for which row.
    container.querySelectorAll(".rjf-form-group-title button").forEach(function (button) {
      var text = button.textContent.trim();
      if (text !== "[-]" && text !== "[+]") return;
      var name = (text === "[-]" ? "Collapse" : "Expand") + " params of " + (tr ? rowTitle(tr) : "advisor");
      if (button.getAttribute("aria-label") !== name) button.setAttribute("aria-label", name);
    });
    container.querySelectorAll("input, select, textarea, button, [tabindex='0']").forEach(function (control) {
      if (control.getAttribute("aria-labelledby") || control.getAttribute("aria-label")) return;
      if (control.tagName === "BUTTON") {
        if (!control.textContent.trim() && control.title) control.setAttribute("aria-label", control.title);
        return;
      }
      var row = control.closest(".rjf-form-row");
      var label = row && row.querySelector("label:not(.rjf-radio-option)");
      if (label && label.textContent.trim() && !label.contains(control)) {
        if (!label.id) label.id = "rjf-label-" + (++labelCount);
        control.setAttribute("aria-labelledby", label.id);
        return;
      }
      var group = control.closest(".rjf-form-group");
      var title = group && group.querySelector(".rjf-form-group-title");
      if (!title || label) return;
      var rows = Array.prototype.filter.call(
        group.querySelectorAll(".rjf-form-row"),
        function (r) { return r.closest(".rjf-form-group") === group; }
      );
      // The title's own text, without its collapse toggle ("[-]").
      var name = (title.firstChild && title.firstChild.nodeType === 3 ? title.firstChild.textContent : title.textContent)
        .replace(/\s*\[[-+]\]\s*$/, "").trim();
      if (control.classList.contains("rjf-multiselect-field-input")) {
        control.setAttribute("aria-label", name);
        return;
      }
      var place = rows.indexOf(row) + 1;
      control.setAttribute("aria-label", name + (place ? ", item " + place : ""));
    });
  }

  /* The type's schema, plus a "slug (missing)" choice for each stored reference whose row is
     gone: the picker then shows it picked (lint E110 names it) and saving another change keeps
     it, where a picker of existing rows only would drop it silently. */
  function schemaFor(spec, params) {
    var refs = spec.references || {};
    var properties = {};
    Object.keys(spec.schema.properties).forEach(function (name) {
      var prop = spec.schema.properties[name];
      if (!refs[name] || params[name] === undefined || params[name] === null) { properties[name] = prop; return; }
      var isArray = prop.type === "array";
      var target = isArray ? prop.items : prop;
      var known = (target.choices || []).map(function (c) { return typeof c === "object" ? c.value : c; });
      var values = isArray ? (Array.isArray(params[name]) ? params[name] : []) : [params[name]];
      var missing = values.filter(function (v, i) {
        return typeof v === "string" && v !== "" && known.indexOf(v) < 0 && values.indexOf(v) === i;
      });
      if (!missing.length) { properties[name] = prop; return; }
      var choices = (target.choices || []).concat(missing.map(function (v) { return { value: v, title: v + " (missing)" }; }));
      var copy = Object.assign({}, target, { choices: choices });
      properties[name] = isArray ? Object.assign({}, prop, { items: copy }) : copy;
    });
    return Object.assign({}, spec.schema, { properties: properties });
  }

  /* JSON boxes as tall as their text (django-jsonform sizes them only as you type, and to 0 px
     when drawn hidden); the CSS gives a minimum. */
  function fitBoxes(container) {
    container.querySelectorAll("textarea").forEach(function (box) {
      if (!box.offsetParent) return;
      box.style.height = "auto";
      box.style.height = Math.min(box.scrollHeight + 4, 480) + "px";
    });
  }

  /* django-jsonform's multiselect opens on click only: Enter, Space and ArrowDown open it (its
     options are checkboxes, focused in turn), Escape closes it and returns to the picker. */
  function onPickerKey(event) {
    var target = event.target;
    if (target.classList && target.classList.contains("rjf-multiselect-field-input")) {
      if (["Enter", " ", "ArrowDown"].indexOf(event.key) < 0) return;
      event.preventDefault();
      var field = target.closest(".rjf-multiselect-field") || target.parentNode;
      var open = field.querySelector(".rjf-multiselect-field-options-container input");
      if (!open) target.click();
      var first = field.querySelector(".rjf-multiselect-field-options-container input");
      if (first) first.focus();
      target.setAttribute("aria-expanded", first ? "true" : "false");
      return;
    }
    var options = target.closest && target.closest(".rjf-multiselect-field-options-container");
    if (!options) return;
    var picker = options.closest(".rjf-multiselect-field").querySelector(".rjf-multiselect-field-input");
    var boxes = Array.prototype.slice.call(options.querySelectorAll("input"));
    var at = boxes.indexOf(target);
    if (event.key === "Escape" && picker) {
      event.preventDefault();
      picker.click();
      picker.setAttribute("aria-expanded", "false");
      picker.focus();
    } else if (event.key === "ArrowDown" && at < boxes.length - 1) {
      event.preventDefault();
      boxes[at + 1].focus();
    } else if (event.key === "ArrowUp" && at > 0) {
      event.preventDefault();
      boxes[at - 1].focus();
    } else if (event.key === "Enter") {
      event.preventDefault();
      target.click();
    }
  }

  function mountForm(editor) {
    var textarea = editor.querySelector("textarea.params-json");
    var container = editor.querySelector(".params-form");
    var spec = specs[editor.dataset.advisorType];
    if (editor.paramsForm) {
      window.ReactDOM.unmountComponentAtNode(container);
      editor.paramsForm = null;
    }
    var toggle = editor.querySelector(".params-toggle");
    var note = editor.querySelector(".params-note");
    note.textContent = "";
    if (!spec || !Object.keys(spec.schema.properties).length) {
      container.hidden = true;
      toggle.hidden = true;
      textarea.hidden = !spec;  // a type without params: nothing to type either
      if (spec) note.textContent = "No params.";
      return;
    }
    toggle.hidden = false;
    if (editor.dataset.mode === "raw") { showRaw(editor); return; }
    var params;
    try {
      params = parse(textarea.value);
      if (typeof params !== "object" || params === null || Array.isArray(params)) throw new Error("not an object");
    } catch (e) {
      editor.dataset.mode = "raw";
      showRaw(editor);
      note.textContent = "The params are not a JSON object: fix them here.";
      return;
    }
    var form = window.reactJsonForm.createForm({
      containerId: container.id,
      dataInputId: editor.querySelector(".params-sink").id,
      schema: schemaFor(spec, params),
      data: toForm(spec, params),
      errorMap: editor.errorMap || {},
      fileHandler: "",
      fileHandlerArgs: {},
      readonly: textarea.disabled
    });
    form.addEventListener("change", function (event) {
      textarea.value = paramsJson(spec, event.data, container);
    });
    form.render();
    editor.paramsForm = form;
    container.hidden = false;
    textarea.hidden = true;
    toggle.setAttribute("aria-pressed", "false");
    labelForm(container);
    fitBoxes(container);
  }

  function showRaw(editor) {
    editor.querySelector(".params-form").hidden = true;
    var textarea = editor.querySelector("textarea.params-json");
    textarea.hidden = false;
    editor.querySelector(".params-toggle").setAttribute("aria-pressed", "true");
  }

  function toggleRaw(editor) {
    var textarea = editor.querySelector("textarea.params-json");
    if (editor.dataset.mode !== "raw") {
      editor.dataset.mode = "raw";
      if (editor.paramsForm) {
        window.ReactDOM.unmountComponentAtNode(editor.querySelector(".params-form"));
        editor.paramsForm = null;
      }
      try { textarea.value = JSON.stringify(parse(textarea.value), null, 2); } catch (e) { /* as typed */ }
      showRaw(editor);
      textarea.focus();
      return;
    }
    try {
      parse(textarea.value);
    } catch (e) {
      editor.querySelector(".params-note").textContent = "Not valid JSON: " + e.message;
      return;
    }
    editor.dataset.mode = "form";
    editor.errorMap = {};
    mountForm(editor);
  }

  function setUpEditor(editor) {
    if (editor.dataset.ready) return;
    var textarea = editor.querySelector("textarea");
    if (!textarea || textarea.id.indexOf("__prefix__") >= 0) return;
    editor.dataset.ready = "1";
    textarea.classList.add("params-json");
    try { editor.errorMap = JSON.parse(editor.dataset.errors || "{}"); } catch (e) { editor.errorMap = {}; }
    var sink = document.createElement("textarea");
    sink.id = textarea.id + "_sink";
    sink.className = "params-sink";
    sink.hidden = true;
    sink.tabIndex = -1;
    sink.setAttribute("aria-hidden", "true");
    editor.appendChild(sink);
    var bar = document.createElement("div");
    bar.className = "params-bar";
    var toggle = document.createElement("button");
    toggle.type = "button";
    toggle.className = "params-toggle";
    toggle.textContent = "Raw JSON";
    toggle.setAttribute("aria-pressed", "false");
    toggle.addEventListener("click", function () { toggleRaw(editor); });
    var note = document.createElement("span");
    note.className = "params-note";
    note.setAttribute("role", "status");
    bar.appendChild(toggle);
    bar.appendChild(note);
    editor.insertBefore(bar, editor.firstChild);
    // Labels for what the form draws (django-jsonform's labels have no `for`).
    new MutationObserver(function () {
      var form = editor.querySelector(".params-form");
      labelForm(form);
      form.querySelectorAll("textarea").forEach(function (box) {
        if (box.style.height === "0px") fitBoxes(form);  // drawn while hidden
      });
    })
      .observe(editor.querySelector(".params-form"), { childList: true, subtree: true });
    mountForm(editor);
  }

  function setUpRow(tr) {
    if (tr.classList.contains("empty-form") || tr.id.indexOf("__prefix__") >= 0) return;
    addMoveControls(tr);
    var editor = tr.querySelector("[data-params-editor]");
    if (editor) setUpEditor(editor);
    labelRow(tr);
  }

  function onTypeChange(tr) {
    var editor = tr.querySelector("[data-params-editor]");
    var key = typeOf(tr);
    var input = field(tr, "order");
    if (input) input.placeholder = specs[key] ? formatOrder(specs[key].default_order) : "";
    labelRow(tr);
    if (!editor) return;
    var textarea = editor.querySelector("textarea.params-json");
    var spec = specs[key];
    // Params the new type also has are kept; the others belonged to the old type.
    try {
      var params = parse(textarea.value);
      var kept = {};
      if (spec) Object.keys(params).forEach(function (name) {
        if (spec.schema.properties[name]) kept[name] = params[name];
      });
      textarea.value = Object.keys(kept).length ? JSON.stringify(kept) : "";
    } catch (e) { /* invalid JSON stays for the expert to fix */ }
    editor.dataset.advisorType = key;
    editor.errorMap = {};
    mountForm(editor);
  }

  function init() {
    group = document.getElementById("advisors-group");
    var source = document.getElementById("advisor-params-forms");
    if (!group || !source || !window.reactJsonForm) return;
    specs = JSON.parse(source.textContent);
    group.classList.add("chain-editor");
    group.addEventListener("keydown", onPickerKey);
    // The move controls' column has no header text (axe: empty-table-header).
    group.querySelectorAll("thead th").forEach(function (th) {
      if (th.textContent.trim()) return;
      var label = document.createElement("span");
      label.className = "visually-hidden";
      label.textContent = th.classList.contains("original") || !th.previousElementSibling ? "Move" : "Row";
      th.appendChild(label);
    });
    var panel = document.createElement("div");
    panel.className = "chain-order";
    panel.innerHTML =
      '<h3 id="chain-order-heading">Runs outermost \u2192 innermost</h3>' +
      '<ol aria-labelledby="chain-order-heading"></ol>' +
      '<p class="help order-note" hidden>The table is not in this order: drag a row (or use its ' +
      "\u2191 \u2193 buttons) to set orders that match the table.</p>" +
      '<p class="order-status visually-hidden" role="status" aria-live="polite"></p>' +
      '<p class="help">Drag a row by \u2630, or use \u2191 \u2193, to reorder: the moved row gets ' +
      "an order between its neighbours. Save to keep it.</p>";
    var table = group.querySelector("table");
    table.parentNode.insertBefore(panel, table.nextSibling);
    sortRows();
    formRows().forEach(setUpRow);
    var tbody = group.querySelector("tbody");
    if (window.Sortable) {
      window.Sortable.create(tbody, {
        draggable: "tr.form-row:not(.empty-form)",
        handle: ".drag-handle",
        forceFallback: true,  // mouse and touch events, not HTML5 drag and drop: table rows drag the same everywhere
        animation: 120,
        onChange: function (event) { showOrder(event.item); },
        onEnd: function (event) {
          if (event.oldIndex !== event.newIndex) reorder(event.item);
          else showOrder();
        }
      });
    }
    group.addEventListener("change", function (event) {
      var tr = event.target.closest("tr.form-row");
      if (!tr) return;
      if (/-advisor_type$/.test(event.target.name)) onTypeChange(tr);
      showOrder();
    });
    group.addEventListener("input", function (event) {
      if (/-order$/.test(event.target.name || "")) showOrder();
    });
    // Rows added with "Add another advisor".
    document.addEventListener("formset:added", function (event) {
      var tr = event.target;
      if (tr && tr.closest && tr.closest("#advisors-group")) { setUpRow(tr); showOrder(); }
    });
    showOrder();
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", init);
  else init();
})();
