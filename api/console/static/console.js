// The console's only script: live board rows (server-sent events), confirmations, actions sent
// without leaving the page, and the history charts (uPlot, vendored beside this file). Every page
// works without it (forms post and redirect back; each chart has its numbers in a table).
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
    var total = table.getAttribute("data-count") ? document.querySelector(table.getAttribute("data-count")) : null;
    var source = new EventSource(table.getAttribute("data-live-board"));
    // The streamed rows are the same for every session: their forms get this page's CSRF token.
    var updated = function (data) {
      rows.querySelectorAll("input[name=csrf_token]").forEach(function (input) { input.value = csrf || ""; });
      if (total && data && typeof data.count === "number") { total.textContent = String(data.count); }
      if (state) { state.textContent = "Updates live. Last update " + new Date().toLocaleTimeString() + "."; }
    };
    // A reason being typed (Stop, Force start) and a row ticked for a bulk action survive the rows
    // being replaced.
    var reasons = function () {
      var typed = {};
      typed["\u0000ticked"] = {};
      rows.querySelectorAll("input[name=match_ids]:checked").forEach(function (box) {
        typed["\u0000ticked"][box.value] = true;
      });
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
      rows.querySelectorAll("input[name=match_ids]").forEach(function (box) {
        if (typed["\u0000ticked"][box.value]) { box.checked = true; }
      });
      rows.querySelectorAll("input[name=reason]").forEach(function (input) {
        var action = input.form.getAttribute("action");
        if (typed[action]) { input.value = typed[action]; }
        if (typed[""] === action) { input.focus(); }
      });
    };
    source.addEventListener("board", function (event) {
      var typed = reasons();
      var data = JSON.parse(event.data);
      rows.innerHTML = data.html;
      restore(typed);
      updated(data);
    });
    // Only the rows that changed, in place (the board's rows and their order are the same).
    source.addEventListener("rows", function (event) {
      var typed = reasons();
      var data = JSON.parse(event.data);
      data.rows.forEach(function (pair) {
        var row = rows.querySelector('tr[data-match-id="' + pair[0] + '"]');
        if (row) { row.outerHTML = pair[1]; }
      });
      restore(typed);
      updated(data);
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

  // The Matches board: "select every row of this page" ticks each row's box (for a bulk action).
  var all = document.getElementById("select-all");
  if (all) {
    all.addEventListener("change", function () {
      document.querySelectorAll("#board-rows input[name=match_ids]").forEach(function (box) {
        box.checked = all.checked;
      });
    });
  }

  // History charts: each [data-chart] draws its series' JSON with uPlot. Lines differ by dash as
  // well as colour, and the legend names each one in text; the table beside a chart has its numbers.
  var COLOURS = ["#111111", "#0b4f9c", "#b3261e", "#1b5e20", "#8a5300", "#6a1b9a", "#00695c", "#ad1457", "#37474f"];
  var DASHES = [[], [8, 4], [2, 3], [12, 4, 2, 4], [4, 4], [1, 6], [16, 6], [6, 2, 2, 2], [3, 8]];
  var SWATCH = ["solid", "dashed", "dotted", "dashed", "dashed", "dotted", "dashed", "dotted", "dotted"];
  function drawChart(box) {
    fetch(box.getAttribute("data-chart"), { credentials: "same-origin", headers: { "Accept": "application/json" } })
      .then(function (answer) {
        return answer.json().then(function (data) {
          if (!answer.ok) { throw new Error(data.error || ("HTTP " + answer.status)); }
          return data;
        });
      })
      .then(function (data) {
        var keys = Object.keys(data.values);
        var series = [{}];
        var columns = [data.times];
        var drawn = 0;
        keys.forEach(function (key, i) {
          var readings = data.values[key].filter(function (v) { return v !== null; }).length;
          series.push({
            label: data.labels[key] || key,
            stroke: COLOURS[i % COLOURS.length],
            width: i === 0 ? 2.5 : 1.5,
            dash: DASHES[i % DASHES.length],
            points: { show: readings < 8, size: 6 }  // a few readings draw no line: mark each one
          });
          columns.push(data.values[key]);
          data.values[key].forEach(function (v) { if (v) { drawn += 1; } });
        });
        box.textContent = "";
        var width = function () { return Math.max(260, box.clientWidth || 600); };
        var plot = new window.uPlot({
          width: width(),
          height: 200,
          series: series,
          legend: { show: false },
          tzDate: function (ts) { return window.uPlot.tzDate(new Date(ts * 1e3), "Etc/UTC"); },
          axes: [{}, { label: box.getAttribute("data-unit") || "", size: 60 }]
        }, columns, box);
        window.addEventListener("resize", function () { plot.setSize({ width: width(), height: 200 }); });
        var legend = document.createElement("ul");
        legend.className = "legend";
        keys.forEach(function (key, i) {
          var item = document.createElement("li");
          var mark = document.createElement("span");
          mark.className = "swatch";
          mark.style.borderTop = "3px " + SWATCH[i % SWATCH.length] + " " + COLOURS[i % COLOURS.length];
          item.appendChild(mark);
          item.appendChild(document.createTextNode(data.labels[key] || key));
          legend.appendChild(item);
        });
        box.parentNode.insertBefore(legend, box.nextSibling);
        box.setAttribute("data-drawn", String(drawn));
      })
      .catch(function (error) {
        box.textContent = "The chart could not be drawn: " + error.message + ". Its numbers are in the table.";
        box.setAttribute("data-error", "true");
      });
  }
  if (window.uPlot && window.fetch) {
    document.querySelectorAll("[data-chart]").forEach(drawChart);
  }
})();
