// Calculator page: draws the Vega-Lite charts of the results fragment (after the first load and after
// every htmx swap), wires the copy buttons and shows the chosen runtime's settings group. Vega is fetched
// only when a chart is on the page.
(function () {
  "use strict";
  // A Back/Forward restore swaps the whole body (with this script in it): wire things once.
  if (window.__llmcalcWired) return;
  window.__llmcalcWired = true;
  var me = document.currentScript;
  var vegaReady = null;

  function loadScript(src) {
    return new Promise(function (resolve, reject) {
      var s = document.createElement("script");
      s.src = src; s.onload = resolve; s.onerror = reject;
      document.head.appendChild(s);
    });
  }

  function loadVega() {
    if (!vegaReady) {
      // vega-interpreter evaluates Vega expressions without eval (Content-Security-Policy: script-src 'self')
      vegaReady = loadScript(me.dataset.vega)
        .then(function () { return loadScript(me.dataset.vega.replace(/vega\.min\.js$/, "vega-interpreter.min.js")); })
        .then(function () { return loadScript(me.dataset.vegaLite); })
        .then(function () { return loadScript(me.dataset.vegaEmbed); });
    }
    return vegaReady;
  }

  function drawCharts(root) {
    var charts = root.querySelectorAll("[data-vega-spec]");
    if (!charts.length) return;
    loadVega().then(function () {
      charts.forEach(function (el) {
        var specEl = document.getElementById(el.dataset.vegaSpec);
        if (!specEl || !el.isConnected) return;
        window.vegaEmbed(el, JSON.parse(specEl.textContent), { actions: false, renderer: "svg", ast: true, expr: window.vega.expressionInterpreter })
          .then(function () { el.dataset.rendered = "1"; })
          .catch(function (err) { el.textContent = "Chart failed: " + err; });
      });
    });
  }

  function copy(text, button) {
    var done = function () { var old = button.textContent; button.textContent = "Copied"; setTimeout(function () { button.textContent = old; }, 1500); };
    if (navigator.clipboard && window.isSecureContext) {
      navigator.clipboard.writeText(text).then(done);
    } else {
      var ta = document.createElement("textarea");
      ta.value = text; document.body.appendChild(ta); ta.select();
      try { document.execCommand("copy"); done(); } finally { ta.remove(); }
    }
  }

  document.addEventListener("click", function (evt) {
    var button = evt.target.closest("button[data-copy-link], button[data-copy-target]");
    if (!button) return;
    if (button.dataset.copyLink) {
      copy(document.querySelector(button.dataset.copyLink).href, button);
    } else {
      copy(document.querySelector(button.dataset.copyTarget).textContent, button);
    }
  });

  // Phone: the bar at the bottom shows the verdict while the verdict itself is scrolled out of view.
  var observer = "IntersectionObserver" in window ? new IntersectionObserver(function (entries) {
    entries.forEach(function (e) { document.body.classList.toggle("verdict-offscreen", !e.isIntersecting); });
  }) : null;
  function watchVerdict() {
    // The header's "Compatibility matrix" link carries the calculator's model and GPU.
    var compat = document.getElementById("compat-link"), nav = document.querySelector(".site-nav a[href^='/compat/']");
    if (compat && nav) nav.href = compat.getAttribute("href");
    if (!observer) return;
    observer.disconnect();
    var v = document.getElementById("verdict");
    if (v) { observer.observe(v); } else { document.body.classList.remove("verdict-offscreen"); }
  }

  // Runtime settings groups (<details data-runtimes="sglang">, calculator/_form.html): only the chosen runtime's
  // group shows. A group that does not apply is hidden and its fields disabled, so they are not sent with the
  // form (its values stay in the page and come back when the runtime does); switching to a runtime opens its
  // group. This listens in the capture phase so the fields are set before htmx reads the form on the same change.
  function syncRuntimeGroups(openChosen) {
    var menu = document.getElementById("id_runtime");
    if (!menu) return;
    document.querySelectorAll("#calc-form details[data-runtimes]").forEach(function (group) {
      var applies = group.dataset.runtimes.split(" ").indexOf(menu.value) >= 0;
      group.hidden = !applies;
      if (applies && openChosen) group.open = true;
      group.querySelectorAll("input, select, textarea").forEach(function (el) {
        if (!applies && !el.disabled) { el.disabled = true; el.dataset.runtimeOff = "1"; }
        if (applies && el.dataset.runtimeOff) { el.disabled = false; delete el.dataset.runtimeOff; }
      });
    });
  }
  ["input", "change"].forEach(function (type) {
    document.addEventListener(type, function (evt) {
      if (evt.target && evt.target.id === "id_runtime") syncRuntimeGroups(true);
    }, true);
  });

  document.addEventListener("htmx:afterSettle", function (evt) { drawCharts(evt.detail.elt || document); watchVerdict(); });
  // A failed request (a 500, the server gone): say so above the last answer; the form keeps the input.
  document.addEventListener("htmx:responseError", function (evt) {
    var box = document.getElementById("request-error") || document.createElement("p");
    box.id = "request-error"; box.className = "error"; box.setAttribute("role", "alert");
    box.textContent = "The server answered " + evt.detail.xhr.status + " to the last change; the results below are "
      + "from before it. Your input is kept in the form.";
    var results = document.getElementById("results");
    if (results && !box.isConnected) results.prepend(box);
  });
  document.addEventListener("htmx:beforeSwap", function () {
    var box = document.getElementById("request-error"); if (box) box.remove();
  });
  // Back / Forward: htmx re-renders the page from the URL (no snapshots); draw its charts again.
  // A page answered with parameters it left out (the "Not applied" notice, rendered in that response instead of
  // redirecting) shows the permalink in the address bar, as every other answer does.
  function showPermalink() {
    var notice = document.querySelector("#not-applied[data-permalink]");
    var permalink = notice && notice.dataset.permalink;
    if (permalink && permalink !== location.pathname + location.search) {
      history.replaceState(history.state, "", permalink);
    }
  }
  function wholePage() { syncRuntimeGroups(false); drawCharts(document); watchVerdict(); showPermalink(); }
  document.addEventListener("htmx:historyRestore", wholePage);
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", wholePage);
  } else {
    wholePage();
  }
})();
