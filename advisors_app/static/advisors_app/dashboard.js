/* The admin's dashboard: draws its four charts (Chart.js, vendored) from the page's JSON.
   The tables beside them hold the figures; a day without turns is a gap, not a zero. */
(function () {
  "use strict";
  var source = document.getElementById("dashboard-data");
  if (!source || typeof window.Chart === "undefined") {
    return;
  }
  var data = JSON.parse(source.textContent);
  var style = getComputedStyle(document.documentElement);
  var text = style.getPropertyValue("--body-fg").trim() || "#333";
  var grid = style.getPropertyValue("--hairline-color").trim() || "#e8e8e8";
  var colours = {
    ok: "#417690", refused: "#c7a34a", error: "#ba2121", cancelled: "#999999",
    // p95 is not red: red is errors (the versions chart shows both side by side).
    p50: "#417690", p95: "#6b4c9a", ttft50: "#70a372", ttft95: "#a0522d",
    prompt: "#417690", completion: "#79aec8", cost: "#c7a34a",
  };

  function zeros(values) {
    return values.map(function (v) { return v === null ? 0 : v; });
  }

  function axis(title, extra) {
    var scale = {
      beginAtZero: true,
      ticks: { color: text },
      grid: { color: grid },
      title: { display: true, text: title, color: text },
    };
    return Object.assign(scale, extra || {});
  }

  function draw(id, type, labels, datasets, scales) {
    var canvas = document.getElementById(id);
    if (!canvas) {
      return;
    }
    new window.Chart(canvas, {
      type: type,
      data: { labels: labels, datasets: datasets },
      options: {
        responsive: true,
        maintainAspectRatio: false,
        animation: false,
        color: text,
        spanGaps: false,
        interaction: { mode: "index", intersect: false },
        scales: Object.assign(
          { x: { stacked: type === "bar" && !scales.unstacked, ticks: { color: text, autoSkip: true, maxRotation: 0 }, grid: { color: grid } } },
          scales.axes
        ),
        plugins: { legend: { labels: { color: text } } },
      },
    });
  }

  function line(label, values, colour, extra) {
    return Object.assign(
      { type: "line", label: label, data: values, borderColor: colour, backgroundColor: colour, pointRadius: 3 },
      extra || {}
    );
  }

  function bar(label, values, colour, extra) {
    return Object.assign({ type: "bar", label: label, data: values, backgroundColor: colour }, extra || {});
  }

  var days = data.days;
  draw("dashboard-turns", "bar", days.labels, [
    bar("completed", zeros(days.turns), colours.ok),
    bar("refused", zeros(days.refusals), colours.refused),
    bar("errors", zeros(days.errors), colours.error),
    bar("cancelled", zeros(days.cancelled), colours.cancelled),
  ], { axes: { y: axis("turns", { stacked: true, ticks: { color: text, precision: 0 } }) } });

  draw("dashboard-latency", "line", days.labels, [
    line("latency p50", days.latency_p50, colours.p50),
    line("latency p95", days.latency_p95, colours.p95),
    line("first token p50", days.ttft_p50, colours.ttft50, { borderDash: [6, 4] }),
    line("first token p95", days.ttft_p95, colours.ttft95, { borderDash: [6, 4] }),
  ], { axes: { y: axis("seconds") } });

  draw("dashboard-tokens", "bar", days.labels, [
    bar("prompt tokens", zeros(days.prompt_tokens), colours.prompt, { stack: "tokens" }),
    bar("completion tokens", zeros(days.completion_tokens), colours.completion, { stack: "tokens" }),
    line("cost", days.cost, colours.cost, { yAxisID: "cost" }),
  ], {
    axes: {
      y: axis("tokens", { stacked: true }),
      cost: axis("cost", { position: "right", grid: { drawOnChartArea: false } }),
    },
  });

  var versions = data.versions;
  draw("dashboard-versions", "bar", versions.labels, [
    bar("latency p50 (s)", versions.latency_p50, colours.p50),
    bar("latency p95 (s)", versions.latency_p95, colours.p95),
    line("error rate (%)", versions.error_rate, colours.error, { yAxisID: "rate", showLine: false, pointRadius: 6 }),
    line("refusal rate (%)", versions.refusal_rate, colours.refused, { yAxisID: "rate", showLine: false, pointRadius: 6, pointStyle: "rect" }),
  ], {
    unstacked: true,
    axes: {
      y: axis("seconds"),
      rate: axis("% of turns", { position: "right", max: 100, grid: { drawOnChartArea: false } }),
    },
  });
})();
