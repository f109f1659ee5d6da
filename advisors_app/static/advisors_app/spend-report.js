/* The admin's spend report: draws spend by day (Chart.js, vendored) from the page's JSON.
   One bar series per currency; the tables below hold the exact amounts. */
(function () {
  "use strict";
  var source = document.getElementById("spend-by-day-data");
  var canvas = document.getElementById("spend-by-day");
  if (!source || !canvas || typeof window.Chart === "undefined") {
    return;
  }
  var data = JSON.parse(source.textContent);
  var palette = ["#417690", "#c7a34a", "#70a372", "#ba2121", "#8a6fb2"];
  var style = getComputedStyle(document.documentElement);
  var text = style.getPropertyValue("--body-fg").trim() || "#333";
  var grid = style.getPropertyValue("--hairline-color").trim() || "#e8e8e8";
  var datasets = data.datasets.map(function (set, index) {
    return {
      label: set.label,
      data: set.data,
      backgroundColor: palette[index % palette.length],
    };
  });
  if (!datasets.length) {
    // Nothing priced in the range: an empty axis rather than no chart at all.
    datasets = [{ label: "cost", data: data.labels.map(function () { return 0; }) }];
  }
  new window.Chart(canvas, {
    type: "bar",
    data: { labels: data.labels, datasets: datasets },
    options: {
      responsive: true,
      maintainAspectRatio: false,
      animation: false,
      color: text,
      scales: {
        x: { ticks: { color: text, autoSkip: true, maxRotation: 0 }, grid: { color: grid } },
        y: { beginAtZero: true, ticks: { color: text }, grid: { color: grid },
             title: { display: true, text: "cost", color: text } },
      },
      plugins: {
        legend: { display: data.datasets.length > 1, labels: { color: text } },
        tooltip: {
          callbacks: {
            footer: function (items) {
              var unknown = data.unknown[items[0].dataIndex];
              return unknown ? unknown + " call(s) with unknown price, not counted" : "";
            },
          },
        },
      },
    },
  });
})();
