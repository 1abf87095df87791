// The loader, the page's one classic script: it imports the app (app.js, which the page
// preloads). When the app's scripts fail to load (the network changed, the server is
// restarting), it shows the message index.html holds and loads the page again after
// 1, 2, 4 ... up to 30 seconds, at once when the browser comes back online or with the
// "Retry now" button. A page loaded again gets a fresh module map: a failed import is
// remembered by the browser for the life of the page, so importing again would not do.
// The app clears the count of attempts when it starts.
(function () {
  "use strict";
  var KEY = "slipway.load-attempts";

  function attempts() {
    try { return Number(sessionStorage.getItem(KEY)) || 0; } catch (e) { return 0; }
  }

  function failed(error) {
    var box = document.getElementById("load-failed");
    if (!box) return; // the app started (it replaced the message): a later failure is its own to show
    var n = attempts() + 1;
    try { sessionStorage.setItem(KEY, String(n)); } catch (e) { /* private mode: no backoff, still retries */ }
    var seconds = Math.min(30, Math.pow(2, n - 1));
    var retry = function () { location.reload(); };
    document.getElementById("load-why").textContent = String(error && error.message || error);
    document.getElementById("load-next").textContent =
      "Trying again in " + seconds + " s" + (n > 1 ? " (attempt " + (n + 1) + ")." : ".");
    document.getElementById("load-retry").addEventListener("click", retry);
    addEventListener("online", retry);
    setTimeout(retry, seconds * 1000);
    box.hidden = false;
  }

  import("./app.js").catch(failed);
})();
