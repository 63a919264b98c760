/* app.js — the web UI's behaviour (embedded into the binary; docs/webui.md): charts with
 * dygraphs (learning curves) and d3 (parallel coordinates, scatter plots), live updates by
 * polling the REST API, the dsat page's chart (d3), and the pause / activate / kill buttons as
 * JSON requests. Every value from the API reaches the page as text (textContent, d3 .text),
 * never as markup.
 * window.dtrain exposes what the charts hold, for the browser tests. */
(function () {
  "use strict";
  var TERMINAL = { COMPLETED: 1, CANCELED: 1, ERROR: 1, DELETED: 1 };
  var POLL_MS = 3000;
  var state = (window.dtrain = { charts: {} });

  function api(path) {
    return fetch(path, { credentials: "same-origin" }).then(function (r) {
      return r.json().then(function (j) {
        if (!r.ok) throw new Error(j.error || "HTTP " + r.status);
        return j;
      });
    });
  }

  /* A metrics route's answer in its binary form (format=f64, docs/api.md) as the JSON one reads:
   * "DTCHART1", the header's length, the JSON header, then per series four doubles (trial id,
   * points stored, points sent, sampled) and its x and y values, little-endian binary64. */
  function chartApi(path) {
    return fetch(path + "&format=f64", { credentials: "same-origin" }).then(function (r) {
      if (!r.ok) return r.json().then(function (j) { throw new Error(j.error || "HTTP " + r.status); });
      return r.arrayBuffer().then(function (buf) {
        var magic = String.fromCharCode.apply(null, new Uint8Array(buf, 0, 8));
        if (magic !== "DTCHART1") throw new Error("dtrain: a chart answer of an unknown form");
        var hl = new DataView(buf).getUint32(8, true);
        var ans = JSON.parse(new TextDecoder().decode(new Uint8Array(buf, 16, hl)));
        ans.series = [];
        for (var off = 16 + hl; off < buf.byteLength;) {
          var h = new Float64Array(buf, off, 4), n = h[2];
          var xs = new Float64Array(buf, off + 32, n), ys = new Float64Array(buf, off + 32 + 8 * n, n);
          var data = new Array(n);
          for (var i = 0; i < n; i++) data[i] = [xs[i], ys[i]];
          ans.series.push({ trial_id: h[0], total: h[1], sampled: h[3] !== 0, data: data });
          off += 32 + 16 * n;
        }
        return ans;
      });
    });
  }

  function chartLibs(el) {
    if (typeof Dygraph === "undefined" || typeof d3 === "undefined") {
      el.textContent = "The chart library did not load.";
      el.className += " chart-error";
      throw new Error("dtrain: the chart library (dygraphs / d3) is missing");
    }
  }

  /* series [{trial_id, data: [[x, y]...]}] -> dygraph rows over the union of x values */
  function toRows(series) {
    var xs = {}, index = {};
    series.forEach(function (s, k) {
      s.data.forEach(function (p) {
        if (!(p[0] in xs)) xs[p[0]] = [];
        xs[p[0]].push([k, p[1]]);
      });
    });
    var keys = Object.keys(xs).map(Number).sort(function (a, b) { return a - b; });
    return keys.map(function (x) {
      var row = [x];
      for (var k = 0; k < series.length; k++) row.push(null);
      xs[x].forEach(function (kv) { row[kv[0] + 1] = kv[1]; });
      return row;
    });
  }

  /* Options that keep a chart readable whatever its data: when every point has the same x (one
   * validation per trial, at the same batch) the x axis would have no width, so it gets a window
   * around that x; a series of a single point has no line to show it, so it is drawn as a
   * marker. labels: the dygraph labels (x first), series[k] the k-th series' points. */
  function readable(rows, labels, series) {
    var opts = { series: {}, dateWindow: null };
    if (rows.length && rows[0][0] === rows[rows.length - 1][0]) {
      var x = rows[0][0], d = Math.max(1, Math.abs(x) * 0.1);
      opts.dateWindow = [x - d, x + d];
    }
    series.forEach(function (s, k) {
      if (s.data.length === 1) opts.series[labels[k + 1]] = { drawPoints: true, pointSize: 4 };
    });
    return opts;
  }

  /* The points a chart of el can show per series: its width in pixels (the master sends, per
   * two-pixel span of the x range, the lowest and the highest value, plus the first and last). */
  function chartPoints(el) {
    var w = Math.round((el && el.clientWidth) || 0);
    return Math.min(4000, Math.max(200, w || 1000));
  }

  function merge(a, b) {
    Object.keys(b).forEach(function (k) { a[k] = b[k]; });
    return a;
  }

  /* ---- the experiment page: learning curves ---- */
  function curves() {
    var el = document.getElementById("curves");
    if (!el) return null;
    chartLibs(el);
    var exp = el.getAttribute("data-exp");
    var kind = document.getElementById("curve-kind"), metric = document.getElementById("curve-metric");
    var xsel = document.getElementById("curve-x"), logc = document.getElementById("curve-log");
    var summary = document.getElementById("exp");
    var wanted = summary ? summary.getAttribute("data-metric") : "";
    function load() {
      var q = "/api/v1/experiments/" + exp + "/metrics?max_points=" + chartPoints(el) +
        "&kind=" + encodeURIComponent(kind.value) +
        "&x=" + encodeURIComponent(xsel.value);
      var name = metric.value || wanted;
      if (name) q += "&name=" + encodeURIComponent(name);
      return chartApi(q).then(function (ans) {
        var keep = metric.value;
        metric.textContent = "";
        ans.names.forEach(function (n) {
          var o = document.createElement("option");
          o.textContent = n;
          metric.appendChild(o);
        });
        if (ans.names.indexOf(ans.name) >= 0) metric.value = ans.name;
        else if (keep) metric.value = keep;
        var series = ans.series.filter(function (s) { return s.data.length > 0; });
        state.charts.curves = { name: ans.name, kind: ans.kind, x: ans.x, max_points: ans.max_points,
          series: ans.series.map(function (s) {
            return { trial_id: s.trial_id, total: s.total, sampled: s.sampled, points: s.data.length };
          }) };
        if (!series.length) {
          el.textContent = "No " + ans.kind + " points of " + (ans.name || "any metric") + " yet.";
          state.charts.curves.graph = null;
          return;
        }
        var labels = [ans.x].concat(series.map(function (s) { return "trial " + s.trial_id; }));
        var rows = toRows(series), g = state.charts.curves.graph;
        var opts = merge({ labels: labels, logscale: logc.checked, connectSeparatedPoints: true,
          xlabel: ans.x, ylabel: ans.name, legend: "follow", labelsSeparateLines: true,
          highlightSeriesOpts: { strokeWidth: 2 } }, readable(rows, labels, series));
        if (state.curvesGraph) {
          opts.file = rows;
          state.curvesGraph.updateOptions(opts);
        } else {
          el.textContent = "";
          state.curvesGraph = new Dygraph(el, rows, opts);
        }
        state.charts.curves.graph = state.curvesGraph;
      });
    }
    [kind, metric, xsel].forEach(function (s) { s.addEventListener("change", function () {
      if (s === kind) metric.value = "";
      load().catch(report);
    }); });
    logc.addEventListener("change", function () {
      if (state.curvesGraph) state.curvesGraph.updateOptions({ logscale: logc.checked });
    });
    return load;
  }

  /* ---- the experiment page: hyperparameters ---- */
  function hpViews(trials, metricName) {
    var pc = document.getElementById("hp-parallel"), sc = document.getElementById("hp-scatter");
    if (!pc || !sc) return;
    var names = {};
    trials.forEach(function (t) { Object.keys(t.hparams || {}).forEach(function (k) { names[k] = 1; }); });
    var hps = Object.keys(names).filter(function (k) {
      var vals = {};
      trials.forEach(function (t) { vals[JSON.stringify(t.hparams[k])] = 1; });
      return Object.keys(vals).length > 1; /* constants say nothing */
    });
    var rows = trials.filter(function (t) { return typeof t.best_validation === "number"; });
    pc.textContent = "";
    sc.textContent = "";
    state.charts.hp = { dims: hps.length, trials: rows.length };
    if (!rows.length || !hps.length) {
      pc.textContent = !rows.length ? "No trial has validated yet." : "Every trial has the same hyperparameters.";
      return;
    }
    function scaleFor(k, range) {
      var vals = rows.map(function (t) { return t.hparams[k]; });
      if (vals.every(function (v) { return typeof v === "number"; })) {
        var s = d3.scale.linear().domain(d3.extent(vals)).range(range);
        if (s.domain()[0] === s.domain()[1]) s.domain([s.domain()[0] - 1, s.domain()[1] + 1]);
        return s.nice();
      }
      var u = [];
      vals.forEach(function (v) { v = String(v); if (u.indexOf(v) < 0) u.push(v); });
      var o = d3.scale.ordinal().domain(u).rangePoints(range, 1);
      return function (v) { return o(String(v)); };
    }
    var dims = hps.concat([metricName]);
    var W = pc.clientWidth || 900, H = 300, m = { t: 24, r: 70, b: 12, l: 60 };
    var metricOf = function (t) { return t.best_validation; };
    var x = d3.scale.ordinal().domain(dims).rangePoints([m.l, W - m.r]);
    var y = {};
    hps.forEach(function (k) { y[k] = scaleFor(k, [H - m.b, m.t]); });
    var ext = d3.extent(rows, metricOf);
    if (ext[0] === ext[1]) ext = [ext[0] - 1, ext[1] + 1];
    y[metricName] = d3.scale.linear().domain(ext).range([H - m.b, m.t]).nice();
    var color = d3.scale.linear().domain(ext).range(["#1b9e77", "#d95f02"]);
    var svg = d3.select(pc).append("svg").attr("width", W).attr("height", H);
    svg.selectAll("path.pc-line").data(rows).enter().append("path").attr("class", "pc-line")
      .attr("stroke", function (t) { return color(metricOf(t)); })
      .attr("d", function (t) {
        return "M" + dims.map(function (k) {
          return x(k) + "," + (k === metricName ? y[k](metricOf(t)) : y[k](t.hparams[k]));
        }).join("L");
      }).append("title").text(function (t) { return "trial " + t.id + ": " + metricOf(t); });
    dims.forEach(function (k) {
      var g = svg.append("g").attr("class", "axis").attr("transform", "translate(" + x(k) + ",0)");
      if (y[k].ticks) g.call(d3.svg.axis().scale(y[k]).orient("left").ticks(5));
      else rows.forEach(function (t) {
        g.append("text").attr("x", 4).attr("y", y[k](t.hparams[k])).text(String(t.hparams[k]));
      });
      g.append("text").attr("y", 12).attr("text-anchor", "middle").text(k);
    });
    /* the metric against each hyperparameter */
    hps.forEach(function (k) {
      var w = 280, h = 200, mm = { t: 20, r: 10, b: 30, l: 50 };
      var sx = scaleFor(k, [mm.l, w - mm.r]);
      var sy = d3.scale.linear().domain(ext).range([h - mm.b, mm.t]).nice();
      var s = d3.select(sc).append("svg").attr("width", w).attr("height", h).attr("class", "hp-scatter");
      s.append("text").attr("x", w / 2).attr("y", 12).attr("text-anchor", "middle").text(metricName + " vs " + k);
      s.append("g").attr("class", "axis").attr("transform", "translate(" + mm.l + ",0)")
        .call(d3.svg.axis().scale(sy).orient("left").ticks(5));
      if (sx.ticks) s.append("g").attr("class", "axis").attr("transform", "translate(0," + (h - mm.b) + ")")
        .call(d3.svg.axis().scale(sx).orient("bottom").ticks(4));
      s.selectAll("circle").data(rows).enter().append("circle").attr("r", 4)
        .attr("cx", function (t) { return sx(t.hparams[k]); })
        .attr("cy", function (t) { return sy(metricOf(t)); })
        .attr("fill", function (t) { return color(metricOf(t)); })
        .append("title").text(function (t) { return "trial " + t.id + ": " + k + "=" + t.hparams[k] + ", " + metricOf(t); });
    });
  }

  /* Replace the elements with these ids by the same ones of the page fetched again. */
  function refreshParts(ids) {
    return fetch(location.href, { credentials: "same-origin" }).then(function (r) { return r.text(); })
      .then(function (html) {
        var doc = new DOMParser().parseFromString(html, "text/html");
        ids.forEach(function (id) {
          var fresh = doc.getElementById(id), old = document.getElementById(id);
          if (fresh && old) old.parentNode.replaceChild(document.importNode(fresh, true), old);
        });
      });
  }

  function report(e) {
    var f = document.getElementById("flash");
    if (!f) {
      f = document.createElement("p");
      f.id = "flash";
      f.className = "flash";
      var main = document.querySelector("main");
      main.insertBefore(f, main.firstChild);
    }
    f.textContent = String(e && e.message ? e.message : e);
  }

  function setState(el, s) {
    el.setAttribute("data-state", s);
    var badge = el.querySelector(".state");
    if (badge) { badge.textContent = s; badge.className = "state " + s; }
  }

  function experimentPage() {
    var sum = document.getElementById("exp");
    if (!sum) return;
    var exp = sum.getAttribute("data-exp");
    var loadCurves = curves();
    function loadHp() {
      return api("/api/v1/experiments/" + exp + "/trials").then(function (a) {
        hpViews(a.trials, sum.getAttribute("data-metric"));
      });
    }
    function tick() {
      return api("/api/v1/experiments/" + exp).then(function (a) {
        var e = a.experiment;
        setState(sum, e.state);
        document.getElementById("exp-progress").value = e.progress;
        document.getElementById("exp-progress-text").textContent = Math.round(100 * e.progress) + "%";
        document.getElementById("exp-best").textContent =
          typeof e.best_metric === "number" ? String(e.best_metric) : "–"; /* shortest digits */
        return Promise.all([loadCurves ? loadCurves() : null, loadHp(),
          refreshParts(["trials", "exp-actions"])]);
      });
    }
    /* the action forms (one per action the state allows) are replaced when the state changes:
     * listen on the document */
    document.addEventListener("submit", function (ev) {
      var f = ev.target;
      if (!f.parentNode || f.parentNode.id !== "exp-actions") return;
      ev.preventDefault();
      var act = f.getAttribute("action").split("/").pop();
      fetch("/api/v1/experiments/" + exp + "/" + act, { method: "POST", credentials: "same-origin",
        headers: { "Content-Type": "application/json", "X-Dtrain-Csrf": "1" } })
        .then(function (r) { return r.json().then(function (j) {
          if (!r.ok) throw new Error(j.error || "HTTP " + r.status);
          setState(sum, j.experiment.state);
          schedule();
          return refreshParts(["exp-actions"]);
        }); }).catch(report);
    });
    var timer = null;
    function schedule() {
      if (timer || TERMINAL[sum.getAttribute("data-state")]) return;
      timer = setTimeout(function () {
        timer = null;
        tick().then(schedule, function (e) { report(e); schedule(); });
      }, POLL_MS);
    }
    Promise.all([loadCurves ? loadCurves() : null, loadHp()]).then(function () {
      state.ready = true;
    }, function (e) { state.ready = true; throw e; });
    schedule();
  }

  /* ---- the trial page ---- */
  function trialPage() {
    var sum = document.getElementById("trial"), box = document.getElementById("trial-charts");
    if (!sum || !box) return;
    chartLibs(box);
    var id = sum.getAttribute("data-trial"), exp = sum.getAttribute("data-exp");
    var base = "/api/v1/experiments/" + exp + "/metrics?max_points=" + chartPoints(box) + "&trial=" + id;
    state.charts.trial = {};
    function draw() {
      return Promise.all([chartApi(base + "&kind=training"), chartApi(base + "&kind=validation")]).then(function (two) {
        var names = {};
        two.forEach(function (a) { a.names.forEach(function (n) { names[n] = 1; }); });
        return Promise.all(Object.keys(names).sort().map(function (n) {
          return Promise.all(["training", "validation"].map(function (k) {
            return chartApi(base + "&kind=" + k + "&name=" + encodeURIComponent(n));
          })).then(function (pair) {
            var series = [], labels = ["batches"];
            pair.forEach(function (a) {
              var s = a.series[0];
              if (s && s.data.length) { series.push(s); labels.push(a.kind); }
            });
            if (!series.length) return;
            var el = document.getElementById("chart-" + n);
            if (!el) {
              var h = document.createElement("h3");
              h.textContent = n;
              box.appendChild(h);
              el = document.createElement("div");
              el.id = "chart-" + n;
              el.className = "trial-chart";
              box.appendChild(el);
            }
            var rows = toRows(series);
            var opts = merge({ labels: labels, connectSeparatedPoints: true, legend: "follow",
              drawPoints: true, xlabel: "batches", ylabel: n }, readable(rows, labels, series));
            var c = state.charts.trial[n];
            if (c) c.updateOptions(merge({ file: rows }, opts));
            else { el.textContent = ""; state.charts.trial[n] = new Dygraph(el, rows, opts); }
          });
        }));
      });
    }
    var logs = document.getElementById("logs"), follow = document.getElementById("log-follow");
    function pollLogs() {
      if (logs.getAttribute("data-done") === "true") return Promise.resolve(true);
      return api("/api/v1/trials/" + id + "/logs?limit=1000&after=" + logs.getAttribute("data-after"))
        .then(function (a) {
          a.logs.forEach(function (l) {
            logs.appendChild(document.createTextNode("[rank " + l.rank + "] " + l.line + "\n"));
            logs.setAttribute("data-after", l.id);
          });
          logs.setAttribute("data-done", a.done ? "true" : "false");
          if (follow.checked) logs.scrollTop = logs.scrollHeight;
          return a.done;
        });
    }
    function loop() {
      setTimeout(function () {
        Promise.all([api("/api/v1/trials/" + id), pollLogs()]).then(function (r) {
          setState(sum, r[0].trial.state);
          var live = !TERMINAL[r[0].trial.state];
          return (live ? draw() : null), live || !r[1];
        }).then(function (again) { if (again) loop(); }, function (e) { report(e); loop(); });
      }, POLL_MS);
    }
    draw().then(function () { state.ready = true; }, function (e) { state.ready = true; throw e; });
    if (!TERMINAL[sum.getAttribute("data-state")] || logs.getAttribute("data-done") !== "true") loop();
  }

  /* ---- the dsat page: the metric against micro-batch, one series per ZeRO stage ---- */
  function dsatChart(el, d) {
    var W = el.clientWidth || 900, H = 360, m = { t: 20, r: 130, b: 40, l: 80 };
    var tried = d.trials.filter(function (t) { return t.kind === "trial" && t.result !== "running"; });
    var stages = d.zero_stages.slice();
    tried.forEach(function (t) { if (stages.indexOf(t.stage) < 0) stages.push(t.stage); });
    stages.sort(function (a, b) { return a - b; });
    var series = stages.map(function (s) {
      var mine = tried.filter(function (t) { return t.stage === s; });
      return { stage: s,
        ok: mine.filter(function (t) { return t.result === "ok" && typeof t.metric === "number"; })
          .sort(function (a, b) { return a.mbs - b.mbs; }),
        failed: mine.filter(function (t) { return t.result !== "ok" || typeof t.metric !== "number"; }) };
    });
    state.charts.dsat = { metric: d.metric, series: series.map(function (s) {
      return { stage: s.stage, points: s.ok.length, failed: s.failed.length };
    }) };
    el.textContent = "";
    if (!tried.length) {
      el.textContent = "No trial of the search has finished yet.";
      return;
    }
    var ok = [].concat.apply([], series.map(function (s) { return s.ok; }));
    var x = d3.scale.linear().domain([0, d3.max(tried, function (t) { return t.mbs; })])
      .range([m.l, W - m.r]).nice();
    var ext = ok.length ? d3.extent(ok, function (t) { return t.metric; }) : [0, 1];
    if (ext[0] === ext[1]) ext = [ext[0] * 0.9 - 1e-9, ext[1] * 1.1 + 1e-9];
    var y = d3.scale.linear().domain(ext).range([H - m.b, m.t]).nice();
    var color = d3.scale.category10().domain([0, 1, 2, 3]);
    var svg = d3.select(el).append("svg").attr("width", W).attr("height", H);
    svg.append("g").attr("class", "axis").attr("transform", "translate(0," + (H - m.b) + ")")
      .call(d3.svg.axis().scale(x).orient("bottom").ticks(8));
    svg.append("g").attr("class", "axis").attr("transform", "translate(" + m.l + ",0)")
      .call(d3.svg.axis().scale(y).orient("left").ticks(6).tickFormat(d3.format(".3s")));
    svg.append("text").attr("x", (m.l + W - m.r) / 2).attr("y", H - 6).attr("text-anchor", "middle")
      .text("micro-batch (train_micro_batch_size_per_gpu)");
    svg.append("text").attr("transform", "rotate(-90)").attr("x", -(H - m.b + m.t) / 2).attr("y", 14)
      .attr("text-anchor", "middle").text(d.metric);
    var line = d3.svg.line().x(function (t) { return x(t.mbs); }).y(function (t) { return y(t.metric); });
    series.forEach(function (s, k) {
      var g = svg.append("g").attr("class", "series stage-" + s.stage).attr("data-stage", s.stage);
      var c = color(s.stage);
      g.append("path").attr("class", "dsat-line").attr("d", s.ok.length ? line(s.ok) : "")
        .attr("stroke", c);
      g.selectAll("circle").data(s.ok).enter().append("circle").attr("r", 4)
        .attr("cx", function (t) { return x(t.mbs); }).attr("cy", function (t) { return y(t.metric); })
        .attr("fill", c).append("title").text(function (t) {
          return "stage " + t.stage + ", micro-batch " + t.mbs + ": " + d.metric + " " + t.metric +
            " (request " + t.request_id + ")";
        });
      g.selectAll("text.fail").data(s.failed).enter().append("text").attr("class", "fail")
        .attr("x", function (t) { return x(t.mbs); }).attr("y", H - m.b - 4).attr("fill", c)
        .attr("text-anchor", "middle").text("×").append("title").text(function (t) {
          return "stage " + t.stage + ", micro-batch " + t.mbs + ": " + t.result + " (request " +
            t.request_id + ")";
        });
      var lg = svg.append("g").attr("class", "legend-item")
        .attr("transform", "translate(" + (W - m.r + 12) + "," + (m.t + 18 * k) + ")");
      lg.append("rect").attr("width", 10).attr("height", 10).attr("fill", c);
      lg.append("text").attr("x", 14).attr("y", 9).text("stage " + s.stage +
        (s.ok.length + s.failed.length ? "" : " (no trial)"));
    });
  }

  function dsatPage() {
    var sum = document.getElementById("dsat"), el = document.getElementById("dsat-chart");
    if (!sum || !el) return;
    chartLibs(el);
    var exp = sum.getAttribute("data-exp");
    function load() {
      return api("/api/v1/experiments/" + exp + "/dsat").then(function (d) {
        setState(sum, d.state);
        dsatChart(el, d);
        return d;
      });
    }
    /* copy the best configuration: the clipboard when the browser allows it, else select it */
    document.addEventListener("click", function (ev) {
      if (!ev.target || ev.target.id !== "best-copy") return;
      var pre = document.getElementById("best-config"), note = document.getElementById("best-copied");
      function select() {
        var r = document.createRange();
        r.selectNodeContents(pre);
        var sel = window.getSelection();
        sel.removeAllRanges();
        sel.addRange(r);
        note.textContent = "selected: press Ctrl+C";
      }
      if (navigator.clipboard && navigator.clipboard.writeText)
        navigator.clipboard.writeText(pre.textContent).then(function () { note.textContent = "copied"; }, select);
      else select();
    });
    function loop() {
      if (TERMINAL[sum.getAttribute("data-state")]) return;
      setTimeout(function () {
        load().then(function () {
          return refreshParts(["dsat-reason", "dsat-profile", "dsat-stages", "dsat-trials", "dsat-best",
            "dsat-log"]);
        }).then(loop, function (e) { report(e); loop(); });
      }, POLL_MS);
    }
    load().then(function () { state.ready = true; }, function (e) { state.ready = true; throw e; });
    loop();
  }

  /* ---- the experiments list ---- */
  function listPage() {
    var t = document.getElementById("experiments");
    if (!t) return;
    state.ready = true;
    setInterval(function () { refreshParts(["experiments"]).catch(report); }, 5000);
  }

  document.addEventListener("DOMContentLoaded", function () {
    listPage();
    experimentPage();
    trialPage();
    dsatPage();
  });
})();
