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
    clipped: [],
    wrapped: []
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
    // A text report scrolls sideways by design (the reader scrolls it); what holds it must not.
    var scrolls = el.matches("pre.report") && !print;
    for (var a = scrolls ? el.parentElement : el; !why && a && a !== root; a = a.parentElement) {
      var ox = getComputedStyle(a).overflowX;
      if (ox !== "visible" && a.scrollWidth > a.clientWidth + 1) why = "cut by a scrolling box (" + a.tagName.toLowerCase() + ", " + (a.scrollWidth - a.clientWidth) + " px hidden)";
    }
    if (why) found.clipped.push(el.tagName.toLowerCase() + " #" + [].indexOf.call(document.querySelectorAll(el.tagName), el) + " \"" + el.innerText.slice(0, 40).replace(/\s+/g, " ") + "\": " + why);
  });
  // Every line of a text report stays one line on screen: the distinct tops of the text's line boxes
  // are as many as its non-empty lines.
  [].forEach.call(document.querySelectorAll("pre.report"), function (el, i) {
    var range = document.createRange();
    range.selectNodeContents(el);
    var tops = {};
    [].forEach.call(range.getClientRects(), function (r) { if (r.width > 0) tops[Math.round(r.top)] = true; });
    var rows = Object.keys(tops).length;
    var lines = el.textContent.split("\n").filter(function (l) { return l.trim().length > 0; }).length;
    if (rows > lines) found.wrapped.push("pre.report #" + i + ": " + lines + " lines take " + rows + " rows");
  });
  var pre = document.createElement("pre");
  pre.id = "landspeed-probe";
  pre.textContent = encodeURIComponent(JSON.stringify(found));
  document.body.appendChild(pre);
});
