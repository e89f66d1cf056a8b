// The console's only script: live board rows (server-sent events), confirmations, and actions
// sent without leaving the page. Every page works without it (forms post and redirect back).
(function () {
  "use strict";
  var main = document.getElementById("main");
  var csrf = main ? main.getAttribute("data-csrf") : null;

  function notice(text, ok) {
    var box = document.getElementById("notice");
    if (!box) { return; }
    box.textContent = text;
    box.className = "notice " + (ok ? "ok" : "error");
    box.hidden = false;
  }

  // Actions: confirm when asked, post with the CSRF header, show the answer in the notice.
  document.addEventListener("submit", function (event) {
    var form = event.target;
    if (!(form instanceof HTMLFormElement)) { return; }
    var question = form.getAttribute("data-confirm");
    if (question && !window.confirm(question)) {
      event.preventDefault();
      return;
    }
    if (!form.classList.contains("action") || !csrf || !window.fetch) { return; }
    event.preventDefault();
    var body = new URLSearchParams(new FormData(form));
    fetch(form.action, {
      method: "POST",
      body: body,
      credentials: "same-origin",
      headers: { "Accept": "application/json", "X-CSRF-Token": csrf }
    }).then(function (answer) {
      return answer.json().then(function (data) {
        var text = data.message || data.error || ("HTTP " + answer.status);
        notice(text, answer.ok && data.ok !== false);
        if (answer.ok && data.location) { window.location.assign(data.location); }
        else if (answer.ok && form.hasAttribute("data-reload")) { window.location.reload(); }
      });
    }).catch(function (error) { notice("request failed: " + error, false); });
  });

  // The live board: replace the rows whenever the server sends new ones.
  var table = document.querySelector("[data-live-board]");
  if (table && window.EventSource) {
    var rows = document.getElementById("board-rows");
    var state = document.getElementById("live-state");
    var source = new EventSource(table.getAttribute("data-live-board"));
    // The streamed rows are the same for every session: their forms get this page's CSRF token.
    var updated = function () {
      rows.querySelectorAll("input[name=csrf_token]").forEach(function (input) { input.value = csrf || ""; });
      if (state) { state.textContent = "Updates live. Last update " + new Date().toLocaleTimeString() + "."; }
    };
    // A reason being typed (Stop, Force start) survives the rows being replaced.
    var reasons = function () {
      var typed = {};
      var active = document.activeElement;
      if (active && active.name === "reason" && active.form && rows.contains(active)) {
        typed[""] = active.form.getAttribute("action");
      }
      rows.querySelectorAll("input[name=reason]").forEach(function (input) {
        if (input.value) { typed[input.form.getAttribute("action")] = input.value; }
      });
      return typed;
    };
    var restore = function (typed) {
      rows.querySelectorAll("input[name=reason]").forEach(function (input) {
        var action = input.form.getAttribute("action");
        if (typed[action]) { input.value = typed[action]; }
        if (typed[""] === action) { input.focus(); }
      });
    };
    source.addEventListener("board", function (event) {
      var typed = reasons();
      rows.innerHTML = JSON.parse(event.data).html;
      restore(typed);
      updated();
    });
    // Only the rows that changed, in place (the board's rows and their order are the same).
    source.addEventListener("rows", function (event) {
      var typed = reasons();
      JSON.parse(event.data).rows.forEach(function (pair) {
        var row = rows.querySelector('tr[data-match-id="' + pair[0] + '"]');
        if (row) { row.outerHTML = pair[1]; }
      });
      restore(typed);
      updated();
    });
    source.addEventListener("problem", function (event) {
      if (state) { state.textContent = "Live updates paused: " + event.data; }
    });
    source.addEventListener("signed-out", function () {
      source.close();
      window.location.assign("/sign-in");
    });
    source.onerror = function () {
      if (state) { state.textContent = "Live updates reconnecting..."; }
    };
  }
})();
