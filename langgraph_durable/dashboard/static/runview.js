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
