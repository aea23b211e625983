/* redrive dashboard: pause live updates while the tab is hidden, select-all, selected count,
   CSRF header on htmx requests. No build step; htmx does the rest. */
(function () {
  "use strict";

  function csrfToken() {
    var meta = document.querySelector('meta[name="csrf-token"]');
    return meta ? meta.getAttribute("content") : "";
  }

  // Live regions poll with hx-trigger="every Ns, refresh"; skip polls while the tab is hidden
  // and refresh once when it becomes visible again.
  document.addEventListener("htmx:beforeRequest", function (event) {
    var source = event.detail && event.detail.elt;
    if (document.hidden && source && source.hasAttribute("data-live")) {
      event.preventDefault();
    }
  });
  document.addEventListener("visibilitychange", function () {
    var status = document.getElementById("live-status");
    if (status) {
      status.textContent = document.hidden ? "Live updates paused (tab hidden)" : "Live updates on";
    }
    if (!document.hidden && window.htmx) {
      document.querySelectorAll("[data-live]").forEach(function (element) {
        window.htmx.trigger(element, "refresh");
      });
    }
  });
  document.addEventListener("htmx:configRequest", function (event) {
    event.detail.headers["X-CSRF-Token"] = csrfToken();
    // Filters stay in the URL; leave out the empty ones so shared links read well.
    var source = event.detail.elt;
    if (source && source.matches && source.matches("form.filters")) {
      var parameters = event.detail.parameters;
      Array.from(parameters.keys()).forEach(function (name) {
        if (parameters.get(name) === "") {
          parameters.delete(name);
        }
      });
    }
  });

  function updateSelection() {
    var boxes = document.querySelectorAll('input[name="id"]');
    var checked = document.querySelectorAll('input[name="id"]:checked').length;
    document.querySelectorAll("[data-selected-count]").forEach(function (element) {
      element.textContent = String(checked);
    });
    document.querySelectorAll("[data-needs-selection]").forEach(function (button) {
      button.disabled = checked === 0;
    });
    var all = document.getElementById("select-all");
    if (all) {
      all.checked = boxes.length > 0 && checked === boxes.length;
      all.indeterminate = checked > 0 && checked < boxes.length;
    }
  }

  document.addEventListener("change", function (event) {
    var target = event.target;
    if (target && target.id === "select-all") {
      document.querySelectorAll('input[name="id"]').forEach(function (box) {
        box.checked = target.checked;
      });
    }
    if (target && (target.id === "select-all" || target.name === "id")) {
      updateSelection();
    }
  });
  document.addEventListener("htmx:afterSwap", updateSelection);
  document.addEventListener("DOMContentLoaded", updateSelection);
})();
