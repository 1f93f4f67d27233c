// langgraph-durable dashboard: live thread rows, a thread's runs and audit log, and the
// tiers page over server-sent events.
// Plain JS, no dependencies. The rows (and the tiers page's body) arrive as HTML the
// server rendered (and escaped) with the same template as the first page load.
"use strict";
(function () {  // a thread's page: say when the thread has a newer checkpoint
  var newer = document.getElementById("newer");
  if (!newer || !window.EventSource) { return; }
  var source = new EventSource(newer.getAttribute("data-events"));
  source.addEventListener("latest", function (event) {
    var data = JSON.parse(event.data);
    if (data.checkpoint_id && data.checkpoint_id !== newer.getAttribute("data-latest")) {
      document.getElementById("newer-step").textContent = String(data.step);
      document.getElementById("newer-status").textContent = String(data.status);
      newer.hidden = false;
    }
  });
  source.addEventListener("audit", function (event) {  // runs and audit log, live
    var activity = document.getElementById("activity");
    if (activity) { activity.innerHTML = JSON.parse(event.data).html; }
  });
})();
function humanAge(ms) {  // as views.human_age: "1m 15s", "2h 3m", "4d 1h"
  var s = Math.max(0, Math.floor(ms / 1000));
  if (s >= 86400) { return Math.floor(s / 86400) + "d " + Math.floor(s % 86400 / 3600) + "h"; }
  if (s >= 3600) { return Math.floor(s / 3600) + "h " + Math.floor(s % 3600 / 60) + "m"; }
  if (s >= 60) { return Math.floor(s / 60) + "m " + (s % 60) + "s"; }
  return s + "s";
}
function showAges() {  // the rows carry their time; the page shows each row's age
  var now = Date.now();
  Array.prototype.forEach.call(document.querySelectorAll("td.age[data-at]"), function (td) {
    td.textContent = humanAge(now - Number(td.getAttribute("data-at")));
  });
}
(function () {  // the thread list: live rows
  var table = document.getElementById("threads");
  if (!table || !window.EventSource) { return; }
  var rows = document.getElementById("rows");
  var total = document.getElementById("total");
  var pages = document.getElementById("pages");
  var live = document.getElementById("live");
  showAges();
  window.setInterval(showAges, 1000);
  var source = new EventSource(table.getAttribute("data-events"));
  source.addEventListener("rows", function (event) {  // only changed rows come as HTML
    var data = JSON.parse(event.data);
    var kept = {};
    Array.prototype.forEach.call(rows.querySelectorAll("tr[data-thread]"), function (tr) {
      kept[tr.getAttribute("data-thread")] = tr;
    });
    var next = document.createDocumentFragment();
    data.order.forEach(function (tid) {
      var tr = kept[tid];
      if (Object.prototype.hasOwnProperty.call(data.changed, tid)) {
        var holder = document.createElement("tbody");
        holder.innerHTML = data.changed[tid];
        tr = holder.firstElementChild;
      }
      if (tr) { next.appendChild(tr); }
    });
    if (data.order.length) {
      rows.textContent = "";
      rows.appendChild(next);
    } else {
      rows.innerHTML = data.empty;
    }
    Object.keys(data.counts || {}).forEach(function (status) {
      var count = document.querySelector('.count[data-count="' + status + '"]');
      if (count) { count.textContent = String(data.counts[status]); }
    });
    var attention = document.querySelector('.count[data-count="attention"]');
    if (attention) { attention.textContent = String(data.attention); }
    showAges();
    total.textContent = String(data.total);
    if (pages) { pages.textContent = String(data.pages); }
    var older = document.getElementById("older-count");
    var newer = document.getElementById("newer-count");
    if (data.versions && older && newer) {
      older.textContent = String(data.versions.older);
      newer.textContent = String(data.versions.newer);
    }
    live.className = "live on";
    // how many updates the list took (the first one re-sends every row of the page)
    rows.setAttribute("data-updates", String(Number(rows.getAttribute("data-updates") || 0) + 1));
  });
  source.onerror = function () { live.className = "live off"; };
  source.onopen = function () { live.className = "live on"; };
})();
(function () {  // the tiers page: the verdict and figures, live
  var body = document.getElementById("tiers-body");
  if (!body || !window.EventSource) { return; }
  var live = document.getElementById("live");
  var source = new EventSource(body.getAttribute("data-events"));
  source.addEventListener("tiers", function (event) {
    var data = JSON.parse(event.data);
    body.innerHTML = data.html;
    live.className = "live on";
  });
  source.onerror = function () { live.className = "live off"; };
  source.onopen = function () { live.className = "live on"; };
})();
