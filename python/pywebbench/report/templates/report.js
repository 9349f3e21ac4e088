/* pywebbench report: tabs, load-point selection, sortable tables, the filter box, and lazy
   Plotly drawing (a plot is drawn the first time it becomes visible). Study strings are only
   ever put in the page through textContent or as Plotly data (escaped by the generator). */
(function () {
  "use strict";
  var DATA = JSON.parse(document.getElementById("pwb-data").textContent);
  var FIGURES = DATA.figures || {};
  var CONFIG = {
    displaylogo: false,
    responsive: true,
    modeBarButtonsToRemove: ["lasso2d", "select2d", "autoScale2d"],
    toImageButtonOptions: { format: "png", scale: 2 }
  };
  var filterText = "";

  function matches(label) {
    return !filterText || String(label).toLowerCase().indexOf(filterText) !== -1;
  }

  function pick(arr, keep) {
    return Array.isArray(arr) ? arr.filter(function (_, i) { return keep[i]; }) : arr;
  }

  /* A copy of a figure with the filter applied: traces of one stack are hidden, traces that
     hold several stacks (the ranking bars) keep only the matching points. */
  function filtered(spec) {
    var layout = Object.assign({}, spec.layout);
    var kept = 0;
    var keptCats = {};
    var multi = false;
    var data = spec.data.map(function (tr) {
      var t = Object.assign({}, tr);
      var m = tr.meta || {};
      if (m.stacks) {
        multi = true;
        var keep = m.stacks.map(matches);
        ["x", "y", "text", "customdata"].forEach(function (k) {
          if (k in tr) t[k] = pick(tr[k], keep);
        });
        if (tr.error_x) {
          t.error_x = Object.assign({}, tr.error_x, {
            array: pick(tr.error_x.array, keep),
            arrayminus: pick(tr.error_x.arrayminus, keep)
          });
        }
        if (tr.marker && tr.marker.pattern) {
          t.marker = Object.assign({}, tr.marker, {
            pattern: Object.assign({}, tr.marker.pattern, { shape: pick(tr.marker.pattern.shape, keep) })
          });
        }
        (t.y || []).forEach(function (y) { keptCats[y] = true; });
        kept += (t.y || []).length;
      } else if (m.stack !== undefined) {
        t.visible = matches(m.stack) ? (tr.visible === undefined ? true : tr.visible) : false;
      }
      return t;
    });
    if (multi && layout.yaxis && layout.yaxis.categoryarray) {
      layout.yaxis = Object.assign({}, layout.yaxis, {
        categoryarray: layout.yaxis.categoryarray.filter(function (c) { return keptCats[c]; })
      });
      layout.height = Math.max(160, 40 + 26 * kept);
    }
    return { data: data, layout: layout };
  }

  function isVisible(el) {
    return el.offsetParent !== null;
  }

  function draw(el) {
    var spec = FIGURES[el.getAttribute("data-figure")];
    if (!spec) return;
    var f = filtered(spec);
    var done = el.getAttribute("data-drawn") === el.getAttribute("data-figure");
    var p = done ? Plotly.react(el, f.data, f.layout, CONFIG) : Plotly.newPlot(el, f.data, f.layout, CONFIG);
    el.setAttribute("data-drawn", el.getAttribute("data-figure"));
    return p;
  }

  function drawVisible(force) {
    document.querySelectorAll(".plot[data-figure]").forEach(function (el) {
      if (!isVisible(el)) return;
      var drawn = el.getAttribute("data-drawn");
      if (force || drawn !== el.getAttribute("data-figure")) draw(el);
      else Plotly.Plots.resize(el);
    });
  }

  /* Workload tabs (the URL hash keeps the chosen tab). */
  var tabs = document.querySelectorAll(".tab");
  function showWorkload(id) {
    var found = false;
    tabs.forEach(function (t) {
      var on = t.getAttribute("data-target") === id;
      found = found || on;
      t.classList.toggle("active", on);
      t.setAttribute("aria-selected", on ? "true" : "false");
    });
    if (!found) return false;
    document.querySelectorAll("section.workload").forEach(function (s) {
      s.classList.toggle("active", s.id === id);
    });
    drawVisible(false);
    return true;
  }
  tabs.forEach(function (t) {
    t.addEventListener("click", function () {
      var id = t.getAttribute("data-target");
      showWorkload(id);
      if (history.replaceState) history.replaceState(null, "", "#" + id);
    });
  });

  /* Load-point selection of a workload's ranking. */
  document.querySelectorAll(".load-select").forEach(function (sel) {
    sel.addEventListener("change", function () {
      var section = sel.closest("section.workload");
      section.querySelectorAll(".sel").forEach(function (g) {
        g.classList.toggle("active", g.getAttribute("data-sel") === sel.value);
      });
      drawVisible(false);
    });
  });

  /* Sortable tables: click a header; numbers sort numerically, missing values last. */
  document.querySelectorAll("table.data").forEach(function (table) {
    var heads = table.querySelectorAll("th");
    heads.forEach(function (th, col) {
      th.addEventListener("click", function () {
        var numeric = th.classList.contains("num");
        var asc = !th.classList.contains("sorted-asc");
        heads.forEach(function (h) { h.classList.remove("sorted-asc", "sorted-desc"); });
        th.classList.add(asc ? "sorted-asc" : "sorted-desc");
        var body = table.tBodies[0];
        var rows = Array.prototype.slice.call(body.rows);
        rows.sort(function (a, b) {
          var va = a.cells[col].getAttribute("data-v");
          var vb = b.cells[col].getAttribute("data-v");
          if (va === null || va === "") return 1;
          if (vb === null || vb === "") return -1;
          var r = numeric ? parseFloat(va) - parseFloat(vb) : va.localeCompare(vb);
          return asc ? r : -r;
        });
        rows.forEach(function (r) { body.appendChild(r); });
      });
    });
  });

  /* Figure selectors (cells over time, warm-up per stack): one plot, its figure chosen. */
  function showChoice(sel) {
    var plot = document.getElementById(sel.getAttribute("data-target"));
    if (!plot) return;
    plot.setAttribute("data-figure", sel.value);
    if (isVisible(plot)) draw(plot);
  }
  var figSelects = document.querySelectorAll("select.fig-select");
  figSelects.forEach(function (sel) {
    sel.addEventListener("change", function () { showChoice(sel); });
  });
  var cellSelect = document.getElementById("cell-select");
  function stepCell(delta) {
    var opts = Array.prototype.filter.call(cellSelect.options, function (o) {
      return !o.classList.contains("hidden");
    });
    var i = opts.indexOf(cellSelect.options[cellSelect.selectedIndex]);
    var next = opts[Math.min(opts.length - 1, Math.max(0, i + delta))];
    if (next) { cellSelect.value = next.value; showChoice(cellSelect); }
  }
  if (cellSelect) {
    document.getElementById("cell-prev").addEventListener("click", function () { stepCell(-1); });
    document.getElementById("cell-next").addEventListener("click", function () { stepCell(1); });
  }

  /* The filter box: table rows, plot traces and the cell selector. */
  var filter = document.getElementById("filter");
  var pending = null;
  function applyFilter() {
    filterText = filter.value.trim().toLowerCase();
    document.querySelectorAll("tr[data-stack]").forEach(function (tr) {
      var label = tr.getAttribute("data-stack");
      tr.classList.toggle("hidden", label !== "" && !matches(label));
    });
    figSelects.forEach(function (sel) {
      var first = null;
      Array.prototype.forEach.call(sel.options, function (o) {
        var hide = !matches(o.getAttribute("data-stack"));
        o.classList.toggle("hidden", hide);
        if (!hide && first === null) first = o;
      });
      var cur = sel.options[sel.selectedIndex];
      if (first && cur && cur.classList.contains("hidden")) { sel.value = first.value; showChoice(sel); }
    });
    document.querySelectorAll(".plot[data-drawn]").forEach(function (el) {
      if (isVisible(el)) draw(el);
      else el.setAttribute("data-drawn", "");
    });
  }
  if (filter) {
    filter.addEventListener("input", function () {
      clearTimeout(pending);
      pending = setTimeout(applyFilter, 120);
    });
  }

  var initial = (location.hash || "").slice(1);
  if (!initial || !showWorkload(initial)) drawVisible(false);
  /* Plots below the fold are drawn too, so printing and "Save as" keep them. */
  document.querySelectorAll("section.card .plot[data-figure]").forEach(function (el) {
    if (isVisible(el) && !el.getAttribute("data-drawn")) draw(el);
  });
  window.PWB_READY = true;
})();
