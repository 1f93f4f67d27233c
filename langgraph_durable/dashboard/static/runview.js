// langgraph-durable dashboard, thread page: the "show internal channels" toggle. The
// server renders every channel, internal ones marked; this only shows or hides them and
// keeps the choice in the URL (all_channels=1), so a link keeps it.
"use strict";
(function () {
  var box = document.getElementById("show-internal");
  if (!box) { return; }
  box.addEventListener("change", function () {
    var parts = document.querySelectorAll("#timeline-section, #state");
    for (var i = 0; i < parts.length; i++) {
      parts[i].classList.toggle("hide-internal", !box.checked);
    }
    var url = new URL(window.location.href);
    if (box.checked) { url.searchParams.set("all_channels", "1"); }
    else { url.searchParams.delete("all_channels"); }
    window.history.replaceState(null, "", url.toString());
  });
})();
(function () {  // the storage panel: measured after the page is shown (HTML the server
  // rendered and escaped with the same template, as the live thread rows)
  var panel = document.getElementById("size");
  if (!panel || !window.fetch) { return; }
  fetch(panel.getAttribute("data-part"), {credentials: "same-origin"})
    .then(function (r) { return r.ok ? r.text() : Promise.reject(r.status); })
    .then(function (html) { panel.innerHTML = html; })
    .catch(function (e) {
      document.getElementById("size-loading").textContent =
        "the storage report could not be read (" + String(e) + ")";
    });
})();
