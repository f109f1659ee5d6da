/* Skip links (a.skip-link[href="#id"]): move the keyboard focus to their target. Following the
   link only scrolls there in Chromium when the target is a form control; the focus would stay
   on the link. */
(function () {
  "use strict";
  document.addEventListener("click", function (event) {
    var link = event.target.closest && event.target.closest("a.skip-link");
    if (!link) return;
    var target = document.getElementById(link.getAttribute("href").slice(1));
    if (!target) return;
    event.preventDefault();
    if (target.disabled) target = target.closest("form") || target;  // not connected yet
    if (target.tabIndex < 0 && !target.hasAttribute("tabindex")) target.setAttribute("tabindex", "-1");
    target.focus();
  });
})();
