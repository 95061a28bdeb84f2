// Opens the drill-down or count list a link points to, filters the episode index, and steps through
// each filmstrip one frame at a time. Nothing else: the page is complete without this
// script (every frame then shows, in order).
(function () {
  "use strict";
  function openTarget() {
    // a list's id is the fragment as written (percent-encoded parts); an episode's is plain
    var raw = location.hash.slice(1), el = raw ? document.getElementById(raw) : null;
    if (!el && raw) {
      try { el = document.getElementById(decodeURIComponent(raw)); } catch (e) { el = null; }
    }
    if (el && el.tagName === "DETAILS") {
      el.open = true;
      el.scrollIntoView();
    }
  }
  window.addEventListener("hashchange", openTarget);
  openTarget();
  var input = document.getElementById("ep-filter");
  var row = document.getElementById("filter-row");
  if (input && row) {
    row.hidden = false;
    input.addEventListener("input", function () {
      var q = input.value.toLowerCase();
      var rows = document.querySelectorAll("#ep-index tbody tr");
      for (var i = 0; i < rows.length; i++) {
        rows[i].hidden = q !== "" && rows[i].textContent.toLowerCase().indexOf(q) < 0;
      }
    });
  }
  function filmstrip(strip) {
    var frames = strip.querySelectorAll(".fs-frame");
    var nav = strip.querySelector(".fs-nav");
    if (frames.length < 2 || !nav) return;
    var prev = nav.querySelector(".fs-prev"), next = nav.querySelector(".fs-next");
    var pos = nav.querySelector(".fs-pos"), at = 0;
    function show(i) {
      at = Math.max(0, Math.min(frames.length - 1, i));
      for (var k = 0; k < frames.length; k++) frames[k].hidden = k !== at;
      pos.textContent = "frame " + (at + 1) + " of " + frames.length;
      prev.disabled = at === 0;
      next.disabled = at === frames.length - 1;
    }
    prev.addEventListener("click", function () { show(at - 1); });
    next.addEventListener("click", function () { show(at + 1); });
    strip.addEventListener("keydown", function (e) {
      if (e.key === "ArrowLeft") show(at - 1);
      else if (e.key === "ArrowRight") show(at + 1);
    });
    nav.hidden = false;
    show(0);
  }
  var strips = document.querySelectorAll(".filmstrip");
  for (var s = 0; s < strips.length; s++) filmstrip(strips[s]);
})();
