// Injected last into a copy of the page under test. On load it measures the rendered page and writes
// the findings, URI-encoded JSON, into <pre id="landspeed-probe"> for `chromium --dump-dom` to print.
// With #print in the URL it first applies the page's print rules (and drops its screen-only rules), so
// the layout measured is the one printed, at the window's width (the test sets A4's printable width).
window.addEventListener("load", function () {
  var print = location.hash === "#print";
  if (print) {
    [].forEach.call(document.styleSheets, function (sheet) {
      [].forEach.call(sheet.cssRules, function (rule) {
        if (!rule.media) return;
        var m = rule.media.mediaText;
        if (/\bprint\b/.test(m)) rule.media.mediaText = "all";
        else if (/\bscreen\b/.test(m)) rule.media.mediaText = "not all";
      });
    });
  }
  var root = document.documentElement;
  var width = root.clientWidth;
  var found = {
    errors: window.__landspeed.errors,
    width: width,
    scroll_width: root.scrollWidth,
    text_chars: document.body.innerText.trim().length,
    plots: [],
    clipped: []
  };
  [].forEach.call(document.querySelectorAll("svg, img, canvas"), function (el) {
    if (el.closest("svg") && el.closest("svg") !== el) return;
    var b = el.getBoundingClientRect();
    var drawn = el.tagName === "IMG" ? el.naturalWidth * el.naturalHeight : el.tagName === "svg" ? el.querySelectorAll("*").length : el.width * el.height;
    found.plots.push({ tag: el.tagName, id: (el.closest("figure") || el).id || "", width: b.width, height: b.height, drawn: drawn, right: b.right });
  });
  [].forEach.call(document.querySelectorAll("table, pre, figure"), function (el) {
    var b = el.getBoundingClientRect();
    var why = null;
    if (b.right > width + 0.5) why = "runs " + Math.round(b.right - width) + " px past the page's right edge";
    for (var a = el; !why && a && a !== root; a = a.parentElement) {
      var ox = getComputedStyle(a).overflowX;
      if (ox !== "visible" && a.scrollWidth > a.clientWidth + 1) why = "cut by a scrolling box (" + a.tagName.toLowerCase() + ", " + (a.scrollWidth - a.clientWidth) + " px hidden)";
    }
    if (why) found.clipped.push(el.tagName.toLowerCase() + " #" + [].indexOf.call(document.querySelectorAll(el.tagName), el) + " \"" + el.innerText.slice(0, 40).replace(/\s+/g, " ") + "\": " + why);
  });
  var pre = document.createElement("pre");
  pre.id = "landspeed-probe";
  pre.textContent = encodeURIComponent(JSON.stringify(found));
  document.body.appendChild(pre);
});
