// The viewer's pages: sort and filter the runs table, apply an episode page's query
// (arm, task, category, outcome) to its rows, and in a static index say which
// compare command to run. The pages are complete without it.
(function () {
  "use strict";
  function matches(wanted, label) {
    return !wanted || label === wanted || label.indexOf(wanted + " ") === 0 ||
      label.indexOf(wanted + ":") === 0;
  }
  var runs = document.getElementById("runs");
  if (runs) {
    var body = runs.tBodies[0], heads = runs.tHead.rows[0].cells;
    var sortAt = -1, up = true;
    function key(row, i) {
      var cell = row.cells[i];
      var v = cell ? (cell.getAttribute("data-sort") || "") : "";
      var n = parseFloat(v);
      return v !== "" && !isNaN(n) && String(n) === v.replace(/\.0$/, "") ? n : v;
    }
    Array.prototype.forEach.call(heads, function (th, i) {
      th.querySelector("button").addEventListener("click", function () {
        up = sortAt === i ? !up : true;
        sortAt = i;
        var rows = Array.prototype.slice.call(body.rows);
        rows.sort(function (a, b) {
          var x = key(a, i), y = key(b, i);
          var c = typeof x === typeof y ? (x < y ? -1 : x > y ? 1 : 0) : (typeof x === "number" ? -1 : 1);
          return up ? c : -c;
        });
        rows.forEach(function (r) { body.appendChild(r); });
        Array.prototype.forEach.call(heads, function (h) { h.removeAttribute("aria-sort"); });
        th.setAttribute("aria-sort", up ? "ascending" : "descending");
      });
    });
    var text = document.getElementById("run-filter"), prov = document.getElementById("provider-filter");
    document.getElementById("view-filters").hidden = false;
    function filterRuns() {
      var q = text.value.toLowerCase(), p = prov.value;
      Array.prototype.forEach.call(body.rows, function (r) {
        r.hidden = (q !== "" && r.textContent.toLowerCase().indexOf(q) < 0) ||
          (p !== "" && r.getAttribute("data-provider") !== p);
      });
    }
    text.addEventListener("input", filterRuns);
    prov.addEventListener("change", filterRuns);
  }
  var form = document.getElementById("compare-form");
  if (form && form.hasAttribute("data-static")) {
    form.addEventListener("submit", function (e) {
      e.preventDefault();
      var root = form.getAttribute("data-static"), sel = form.querySelectorAll("select");
      document.getElementById("compare-command").textContent = "Run: effectbench compare " +
        root + "/" + sel[0].value + " " + root + "/" + sel[1].value + " --out compare.html";
    });
  }
  var episodes = document.getElementById("episodes");
  if (episodes) {
    var params = new URLSearchParams(location.search), shown = 0, rows = episodes.tBodies[0].rows;
    Array.prototype.forEach.call(rows, function (r) {
      var keep = ["arm", "task", "category"].every(function (k) {
        var w = params.get(k);
        return !w || r.getAttribute("data-" + k) === w;
      }) && matches(params.get("outcome"), r.getAttribute("data-outcome"));
      r.hidden = !keep;
      if (keep) shown += 1;
    });
    var count = document.getElementById("episode-count");
    if (count && !document.getElementById("episode-filters").hasAttribute("data-served")) {
      count.textContent = shown + " of " + count.getAttribute("data-total") + " episodes match" +
        (rows.length < +count.getAttribute("data-total") ? " among the " + rows.length + " listed" : "") + ".";
    }
  }
})();
