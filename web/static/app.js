// dmarcd: small enhancements only; every page works without this file.
// Copy buttons, and times shown in the browser's time zone (UTC on hover).
"use strict";
document.addEventListener("DOMContentLoaded", function () {
  document.querySelectorAll("button.copy[data-copy]").forEach(function (b) {
    if (!navigator.clipboard) return;
    b.hidden = false;
    b.addEventListener("click", function () {
      var el = document.getElementById(b.getAttribute("data-copy"));
      if (!el) return;
      navigator.clipboard.writeText(el.textContent).then(function () {
        b.textContent = "Copied";
        setTimeout(function () { b.textContent = "Copy"; }, 1500);
      }, function () {});
    });
  });
  document.querySelectorAll("time[datetime]").forEach(function (t) {
    var d = new Date(t.getAttribute("datetime"));
    if (isNaN(d)) return;
    t.title = t.textContent;
    t.textContent = d.toLocaleString(undefined, { year: "numeric", month: "short", day: "numeric", hour: "2-digit", minute: "2-digit" });
  });
});
