/* Buttons with data-confirm="question" ask before they submit: the pages carry no inline event
   handler (the site's Content-Security-Policy runs scripts from files only). */
(function () {
  "use strict";
  document.addEventListener("click", function (event) {
    var button = event.target.closest && event.target.closest("button[data-confirm]");
    if (button && !window.confirm(button.getAttribute("data-confirm"))) event.preventDefault();
  });
})();
