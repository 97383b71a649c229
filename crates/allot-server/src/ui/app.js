// allot's web UI: the one script. Keeps the countdowns to a pending claim's expiry
// going, from the server's clock (the page's data-now) rather than the browser's.
"use strict";
(function () {
  const body = document.body;
  const serverNow = Number(body && body.dataset.now);
  const offset = Number.isFinite(serverNow) ? serverNow - Date.now() / 1000 : 0;
  function text(left) {
    if (left <= 0) return "expired";
    const h = Math.floor(left / 3600), m = Math.floor((left % 3600) / 60), s = left % 60;
    if (h > 0) return "in " + h + "h " + m + "m " + s + "s";
    if (m > 0) return "in " + m + "m " + s + "s";
    return "in " + s + "s";
  }
  function tick() {
    const now = Math.floor(Date.now() / 1000 + offset);
    for (const el of document.querySelectorAll("[data-expires]")) {
      const left = Number(el.dataset.expires) - now;
      el.textContent = text(left);
      el.classList.toggle("expired", left <= 0);
    }
  }
  tick();
  setInterval(tick, 1000);
})();
