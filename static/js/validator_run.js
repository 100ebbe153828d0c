// Renders the run report's Vega-Lite specs (JSON in <script type="application/json">) with vega-embed,
// on page load and after each htmx swap of the run status fragment. Without vega the tables remain.
// Expressions run through vega-interpreter (ast: true), so the Content-Security-Policy needs no eval.
(function () {
  function embedOptions() {
    var opts = { actions: false };
    if (window.vega && window.vega.expressionInterpreter) {
      opts.ast = true;
      opts.expr = window.vega.expressionInterpreter;
    }
    return opts;
  }

  function render(root) {
    if (!window.vegaEmbed) return;
    root.querySelectorAll("[data-vega-spec]").forEach(function (el) {
      var src = document.getElementById(el.dataset.vegaSpec);
      if (!src || el.dataset.rendered) return;
      el.dataset.rendered = "1";
      window.vegaEmbed(el, JSON.parse(src.textContent), embedOptions());
    });
  }
  document.addEventListener("DOMContentLoaded", function () { render(document); });
  document.addEventListener("htmx:afterSettle", function (e) { render(e.target); });
})();
