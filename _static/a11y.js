// The course's fixes for what the axe-core audit of every page (tests/book/test_website.py) finds:
// - two of the theme's buttons (pydata-sphinx-theme 0.17), rule label-content-name-mismatch, serious. A
//   control's accessible name must contain the text it shows, so that someone using speech input can say
//   what they see. Both buttons exist only with JavaScript (the theme hides them without it), so fixing them
//   here is enough.
// - the references page's entries (docutils writes each as role="doc-biblioentry" inside a role="list"),
//   rule aria-required-children, critical: a list's children must be list items, and DPUB-ARIA 1.1
//   deprecated doc-biblioentry in favour of listitem. Without JavaScript the old role stays, which screen
//   readers still read as an entry of a list.
// Jupyter Book adds every .js file in _static to each page.
(() => {
  "use strict";
  const MODES = {light: "light", dark: "dark", auto: "system settings"};  // the theme's data-mode values

  function fixSearch(button) {
    // It shows "Search Ctrl+K" and is named "Search": without the aria-label its text is its name.
    button.removeAttribute("aria-label");
  }

  function fixColorMode(button) {
    // Its icons are Font Awesome SVGs titled Light, Dark and System Settings, read as its text while it is
    // named "Color mode": they are hidden from assistive technology, and the name says the mode in use.
    for (const icon of button.querySelectorAll("svg, i")) icon.setAttribute("aria-hidden", "true");
    const mode = MODES[document.documentElement.dataset.mode] || MODES.auto;
    button.setAttribute("aria-label", `Color mode: ${mode}`);
  }

  function fixBibliography(entry) {
    entry.setAttribute("role", "listitem");
  }

  function fixAll() {
    document.querySelectorAll('.citation-list[role="list"] > [role="doc-biblioentry"]').forEach(fixBibliography);
    document.querySelectorAll(".search-button-field[aria-label]").forEach(fixSearch);
    document.querySelectorAll(".theme-switch-button").forEach(fixColorMode);
  }

  function start() {
    fixAll();
    // Font Awesome swaps each <i> for an <svg> when it gets to it, and the theme changes data-mode when the
    // button is pressed: fix again after either.
    const again = new MutationObserver(fixAll);
    document.querySelectorAll(".theme-switch-button").forEach((b) => again.observe(b, {childList: true}));
    new MutationObserver(fixAll).observe(document.documentElement, {attributes: true, attributeFilter: ["data-mode"]});
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
