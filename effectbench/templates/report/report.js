// Opens the drill-down a link points to, and filters the episode index. Nothing else:
// the page is complete without this script.
(function () {
  "use strict";
  function openTarget() {
    var id = decodeURIComponent(location.hash.slice(1));
    var el = id ? document.getElementById(id) : null;
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
})();
