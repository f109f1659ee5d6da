/* The admin's run comparison: each run's mean per score key as bars (Chart.js, vendored),
   from the page's JSON; the delta and its bootstrap interval are in the tooltip and the table. */
(function () {
  "use strict";
  var source = document.getElementById("eval-compare-data");
  var canvas = document.getElementById("eval-compare-chart");
  if (!source || !canvas || typeof window.Chart === "undefined") {
    return;
  }
  var data = JSON.parse(source.textContent);
  var style = getComputedStyle(document.documentElement);
  var text = style.getPropertyValue("--body-fg").trim() || "#333";
  var grid = style.getPropertyValue("--hairline-color").trim() || "#e8e8e8";
  function fixed(value) {
    return value === null || value === undefined ? "-" : value.toFixed(3);
  }
  new window.Chart(canvas, {
    type: "bar",
    data: {
      labels: data.labels,
      datasets: [
        { label: data.names[0], data: data.baseline, backgroundColor: "#8a9ba8" },
        { label: data.names[1], data: data.candidate, backgroundColor: "#417690" },
      ],
    },
    options: {
      responsive: true,
      maintainAspectRatio: false,
      animation: false,
      color: text,
      scales: {
        x: { ticks: { color: text }, grid: { color: grid } },
        y: { beginAtZero: true, ticks: { color: text }, grid: { color: grid },
             title: { display: true, text: "mean score", color: text } },
      },
      plugins: {
        legend: { labels: { color: text } },
        tooltip: {
          callbacks: {
            footer: function (items) {
              var i = items[0].dataIndex;
              return "delta " + fixed(data.delta[i]) + " [" + fixed(data.low[i]) + ", " +
                fixed(data.high[i]) + "]";
            },
          },
        },
      },
    },
  });
})();
