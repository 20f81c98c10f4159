// Injected first into a copy of the page under test: collects script errors, failed loads and console
// errors and warnings into window.__landspeed.errors before the page's own content runs.
window.__landspeed = { errors: [] };
window.addEventListener("error", function (e) {
  var t = e.target;
  var what = t && t !== window ? "failed to load " + (t.currentSrc || t.src || t.href || t.tagName) : e.message;
  window.__landspeed.errors.push(String(what));
}, true);
window.addEventListener("unhandledrejection", function (e) {
  window.__landspeed.errors.push("unhandled rejection: " + e.reason);
});
["error", "warn"].forEach(function (level) {
  var orig = console[level];
  console[level] = function () {
    window.__landspeed.errors.push("console." + level + ": " + [].join.call(arguments, " "));
    return orig.apply(console, arguments);
  };
});
