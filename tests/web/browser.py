"""browser.py URL OUT_DIR FINISHED_EXP RUNNING_EXP DSAT_EXP ONE_EXP — the web UI in headless Chromium.

Against a master holding a finished small experiment (FINISHED_EXP), a running one
(RUNNING_EXP) and a finished dsat search (DSAT_EXP): every page loads without console errors;
the experiments table lists them; the learning-curve chart has one series per trial, each with
the point count stored (read back from the REST API), none empty; the hyperparameter views draw;
the dsat page (linked from its experiment) charts every stage searched with each stage's trials,
lists every trial, and its best-config download is the best config; pausing from the page
changes the state shown without a reload and offers the actions of the new state, a finished
experiment offers none; typed paths (/experiments, trailing slashes) reach pages; a page whose
chart library is missing fails. ONE_EXP's trials validated once each at the same batch: its
charts are checked in screenshots (decoded here, no imaging library): a marker of each trial's
colour inside the plot area, the axis lines, and tick labels drawn under and beside it.
Screenshots go to OUT_DIR. Prints "N passed, M failed" and exits 1 on any failure.
"""
import json
import os
import sys
import time
import urllib.request
import zlib

from selenium import webdriver
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By

URL, OUT, FIN, RUN, DSAT, ONE = sys.argv[1], sys.argv[2], *map(int, sys.argv[3:7])
passed = failed = 0


def check(ok, what):
    global passed, failed
    if ok:
        passed += 1
    else:
        failed += 1
        print("FAIL:", what, file=sys.stderr)
    return ok


def api(path):
    with urllib.request.urlopen(URL + path, timeout=30) as f:
        return json.loads(f.read())


def png_pixels(data):
    """An 8-bit RGB or RGBA PNG as (width, height, rows of (r, g, b) tuples)."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, w = 8, b"", 0
    while pos < len(data):
        n = int.from_bytes(data[pos:pos + 4], "big")
        kind, body = data[pos + 4:pos + 8], data[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            w, h, depth, ctype = *(int.from_bytes(body[i:i + 4], "big") for i in (0, 4)), body[8], body[9]
            assert depth == 8 and ctype in (2, 6) and body[12] == 0, "not an 8-bit RGB(A) PNG"
            bpp = 3 if ctype == 2 else 4
        elif kind == b"IDAT":
            idat += body
        pos += n + 12
    raw, rows, prev, stride = zlib.decompress(idat), [], bytearray(w * bpp), w * bpp
    for y in range(h):
        f, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b, c = prev[i], prev[i - bpp] if i >= bpp else 0
            if f == 1:
                line[i] = (line[i] + a) & 255
            elif f == 2:
                line[i] = (line[i] + b) & 255
            elif f == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append([tuple(line[x * bpp:x * bpp + 3]) for x in range(w)])
        prev = line
    return w, h, rows


def count(rows, x0, y0, x1, y1, want):
    """Pixels p of the box [x0, x1) x [y0, y1) with want(p)."""
    n = 0
    for y in range(max(0, int(y0)), min(len(rows), int(y1))):
        for x in range(max(0, int(x0)), min(len(rows[y]), int(x1))):
            n += bool(want(rows[y][x]))
    return n


def dark(p):
    return sum(p) < 3 * 160


def drawn_chart(d, graph_js, shot, n_series):
    """What the dygraph `graph_js` drew, from a screenshot: each series' colour as a marker in
    the plot area, the x and y axis lines, tick labels under and left of the area."""
    info = d.execute_script(graph_js + """; g.graphDiv.scrollIntoView();
        var r = g.canvas_.getBoundingClientRect(), a = g.getArea();
        return {x: r.left + a.x, y: r.top + a.y, w: a.w, h: a.h, colors: g.getColors(),
                dpr: window.devicePixelRatio,
                xticks: g.graphDiv.querySelectorAll('.dygraph-axis-label-x').length,
                yticks: g.graphDiv.querySelectorAll('.dygraph-axis-label-y').length};""")
    time.sleep(0.3)
    png = d.get_screenshot_as_png()
    with open(os.path.join(OUT, shot), "wb") as f:
        f.write(png)
    _, _, rows = png_pixels(png)
    k = info["dpr"]
    x, y, w, h = (v * k for v in (info["x"], info["y"], info["w"], info["h"]))
    check(info["xticks"] >= 2 and info["yticks"] >= 2, f"{shot}: ticks {info}")
    for c in info["colors"][:n_series]:
        rgb = tuple(int(v) for v in c[c.index("(") + 1:c.index(")")].split(","))
        near = count(rows, x, y, x + w, y + h,
                     lambda p: all(abs(p[i] - rgb[i]) <= 24 for i in range(3)))
        check(near >= 12, f"{shot}: {near} pixels of a {c} marker in the plot area {info}")
    # the axis lines: dark pixels along the left and the bottom edge of the area
    left = count(rows, x - 2, y, x + 2, y + h, dark)
    bottom = count(rows, x, y + h - 2, x + w, y + h + 2, dark)
    check(left >= h * 0.8 and bottom >= w * 0.8, f"{shot}: axis lines {left}/{h}, {bottom}/{w}")
    # tick labels: text under the area (x) and left of it (y)
    under = count(rows, x, y + h + 3, x + w, y + h + 22 * k, dark)
    beside = count(rows, x - 60 * k, y, x - 3, y + h, dark)
    check(under >= 30 and beside >= 30, f"{shot}: tick label pixels under {under}, beside {beside}")


def one_point(d):
    """ONE_EXP: every trial validated once, at the same batch."""
    trials = api(f"/api/v1/experiments/{ONE}/trials")["trials"]
    load(d, f"/experiments/{ONE}", "one_x.png")
    c = wait(d, "return !!(window.dtrain.charts.curves && window.dtrain.charts.curves.graph)")
    if not check(c, "one point each: no learning-curve chart"):
        return
    xs = {p[0] for t in trials for p in api(
        f"/api/v1/experiments/{ONE}/metrics?kind=validation&trial={t['id']}")["series"][0]["data"]}
    check(len(xs) == 1, f"the one-point search validated at several batches: {xs}")
    rng = d.execute_script("return window.dtrain.charts.curves.graph.xAxisRange()")
    check(rng[0] < min(xs) < rng[1], f"the x axis {rng} does not hold the one x value {xs}")
    drawn_chart(d, "var g = window.dtrain.charts.curves.graph", "one_x_chart.png", len(trials))
    load(d, f"/trials/{trials[0]['id']}", "one_point_trial.png")
    ok = wait(d, "return !!(window.dtrain.charts.trial && window.dtrain.charts.trial.validation_loss)")
    if check(ok, "the one-point trial has no validation_loss chart"):
        drawn_chart(d, "var g = window.dtrain.charts.trial.validation_loss",
                    "one_point_trial_chart.png", 2)


def typed_paths(d):
    """Paths a person types reach pages."""
    for path, want in (("/experiments", "/"), ("/experiments/", "/"), (f"/experiments/{FIN}/",
                       f"/experiments/{FIN}/"), ("/trials", "/")):
        d.get(URL + path)
        got = d.execute_script("return location.pathname")
        check(got == want and d.find_elements(By.TAG_NAME, "h1"), f"{path} led to {got}")


def dsat_page(d):
    """The dsat page: reached from its experiment, a series per stage searched, a row per trial,
    the best config to download."""
    d.get(URL + f"/experiments/{DSAT}")
    links = d.find_elements(By.ID, "dsat-link")
    if check(links, "the dsat experiment's page has no link to its dsat page"):
        links[0].click()
    ready = wait(d, "return window.dtrain && window.dtrain.ready && location.pathname")
    check(ready == f"/experiments/{DSAT}/dsat", f"the dsat link led to {ready}")
    time.sleep(0.5)
    d.save_screenshot(os.path.join(OUT, "dsat.png"))
    check(not errors(d), f"the dsat page: console errors: {errors(d)}")
    ans = api(f"/api/v1/experiments/{DSAT}/dsat")
    tried = [t for t in ans["trials"] if t["kind"] == "trial"]
    check(ans["done"] and ans["profile"] and tried, f"the dsat search is not done: {ans}")
    chart = d.execute_script("return window.dtrain.charts.dsat") or {"series": []}
    stages = sorted(ans["zero_stages"])
    check([s["stage"] for s in chart["series"]] == stages,
          f"the chart's stages {chart['series']} are not the searched {stages}")
    for s in chart["series"]:
        mine = [t for t in tried if t["stage"] == s["stage"]]
        ok = [t for t in mine if t["result"] == "ok" and t["metric"] is not None]
        check(mine, f"stage {s['stage']} was searched but has no trial (pick other flags)")
        check(s["points"] == len(ok) and s["failed"] == len(mine) - len(ok),
              f"stage {s['stage']}: chart {s}, the API {len(ok)} ok of {len(mine)}")
    drawn = d.find_elements(By.CSS_SELECTOR, "#dsat-chart g.series")
    check(len(drawn) == len(stages), f"{len(drawn)} series drawn for stages {stages}")
    points = d.find_elements(By.CSS_SELECTOR, "#dsat-chart g.series circle")
    check(len(points) == sum(s["points"] for s in chart["series"]) > 0,
          f"{len(points)} points drawn for {chart['series']}")
    rows = [int(r.get_attribute("data-request"))
            for r in d.find_elements(By.CSS_SELECTOR, "#dsat-trials tbody tr[data-request]")]
    check(rows == [t["request_id"] for t in ans["trials"]],
          f"the trials table lists requests {rows}, the API {len(ans['trials'])} trials")
    href = d.find_element(By.ID, "best-download").get_attribute("href")
    with urllib.request.urlopen(href, timeout=30) as f:
        got, disp = json.loads(f.read()), f.headers.get("Content-Disposition", "")
    check(got == ans["best"]["ds_config"] and "attachment" in disp,
          f"the download ({disp}) is not the best config: {got}")
    shown = json.loads(d.find_element(By.ID, "best-config").text)
    check(shown == ans["best"]["ds_config"], "the best config shown is not the best config")
    d.find_element(By.ID, "best-copy").click()
    check(wait(d, "return document.getElementById('best-copied').textContent", 5),
          "the copy button did nothing")
    check(not errors(d), f"the dsat page after copying: console errors: {errors(d)}")


def browser():
    o = Options()
    for a in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
              "--window-size=1400,1000", "--no-proxy-server"):
        o.add_argument(a)
    o.binary_location = "/usr/bin/chromium"
    o.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=o)


def errors(d):
    return [e for e in d.get_log("browser") if e["level"] == "SEVERE"]


def wait(d, js, timeout=20):
    end = time.time() + timeout
    while time.time() < end:
        v = d.execute_script(js)
        if v:
            return v
        time.sleep(0.2)
    return None


def load(d, path, shot):
    d.get(URL + path)
    ready = wait(d, "return window.dtrain && window.dtrain.ready")
    check(ready, f"{path}: the page's script did not finish")
    time.sleep(0.5)
    d.save_screenshot(os.path.join(OUT, shot))
    errs = errors(d)
    check(not errs, f"{path}: console errors: {errs}")


def main():
    os.makedirs(OUT, exist_ok=True)
    d = browser()
    try:
        # the experiments table lists both
        load(d, "/", "experiments.png")
        ids = [int(r.get_attribute("data-id"))
               for r in d.find_elements(By.CSS_SELECTOR, "#experiments tbody tr[data-id]")]
        check(FIN in ids and RUN in ids and DSAT in ids,
              f"experiments table lists {ids}, not {FIN}, {RUN} and {DSAT}")
        # filtered by state through the URL, without JS
        d.get(URL + "/?state=COMPLETED")
        ids = [int(r.get_attribute("data-id"))
               for r in d.find_elements(By.CSS_SELECTOR, "#experiments tbody tr[data-id]")]
        check(sorted(ids) == sorted([FIN, DSAT, ONE]), f"?state=COMPLETED lists {ids}")

        # the experiment page: one series per trial, each with its stored point count
        load(d, f"/experiments/{FIN}", "experiment.png")
        acts = d.find_elements(By.CSS_SELECTOR, "#exp-actions button")
        check(not acts, f"a finished experiment offers {[a.text for a in acts]}")
        c = wait(d, "return !!(window.dtrain.charts.curves && window.dtrain.charts.curves.graph)")
        trials = api(f"/api/v1/experiments/{FIN}/trials")["trials"]
        if check(c, "no learning-curve chart"):
            g = d.execute_script("var g = window.dtrain.charts.curves.graph; var n = g.numColumns();"
                                 " var out = []; for (var k = 1; k < n; k++) { var c = 0;"
                                 " for (var r = 0; r < g.numRows(); r++)"
                                 "   if (g.getValue(r, k) !== null) c++; out.push(c); } return out;")
            check(len(g) == len(trials), f"{len(g)} series for {len(trials)} trials")
            asked = d.execute_script("return [window.dtrain.charts.curves.max_points,"
                                     " document.getElementById('curves').clientWidth]")
            check(asked[0] == min(4000, max(200, asked[1])),
                  f"the curves asked for {asked[0]} points a trial, drawn {asked[1]} px wide")
            forms = d.execute_script("return performance.getEntriesByType('resource')"
                                     ".map(function (e) { return e.name; })"
                                     ".filter(function (n) { return n.indexOf('/metrics?') > 0; })")
            check(forms and all("format=f64" in f for f in forms),
                  f"the curves were not read in their binary form: {forms}")
            for t, drawn in zip(trials, g):
                n = len(api(f"/api/v1/trials/{t['id']}/metrics?kind=validation")["metrics"])
                check(drawn == n and n > 0, f"trial {t['id']}: {drawn} points drawn, {n} stored")
        hp = d.execute_script("return window.dtrain.charts.hp")
        check(hp and hp["trials"] == len(trials),
              f"parallel coordinates: {hp} for {len(trials)} trials")
        check(len(d.find_elements(By.CSS_SELECTOR, "#hp-parallel path.pc-line")) == len(trials),
              "one parallel-coordinates line per trial")
        check(len(d.find_elements(By.CSS_SELECTOR, "#hp-scatter svg")) >= 1, "no scatter plot")
        d.find_element(By.ID, "curve-log").click()
        check(d.execute_script("return window.dtrain.charts.curves.graph.getOption('logscale')"),
              "the log-scale toggle did not switch the chart")

        # the trial page: a chart per metric, the logs
        tid = trials[0]["id"]
        load(d, f"/trials/{tid}", "trial.png")
        charts = d.execute_script("return Object.keys(window.dtrain.charts.trial || {})")
        check(len(charts) >= 1, f"trial page charts: {charts}")
        check("[rank 0]" in d.find_element(By.ID, "logs").text or
              not api(f"/api/v1/trials/{tid}/logs")["logs"], "the logs are not rank-prefixed")

        dsat_page(d)
        one_point(d)
        typed_paths(d)

        # pause from the page: the state shown changes without a reload
        load(d, f"/experiments/{RUN}", "running.png")
        d.execute_script("window.__same_page = 1")
        d.find_element(By.CSS_SELECTOR, "button.act-pause").click()
        st = wait(d, "var s = document.querySelector('#exp .state').textContent;"
                     " return s === 'PAUSED' && s")
        check(st == "PAUSED", "pausing from the page did not show PAUSED")
        check(d.execute_script("return window.__same_page === 1"), "pausing reloaded the page")
        check(api(f"/api/v1/experiments/{RUN}")["experiment"]["state"] == "PAUSED",
              "the master did not pause the experiment")
        acts = wait(d, "var b = document.querySelectorAll('#exp-actions button');"
                       " return b.length && [].map.call(b, function (x) { return x.textContent; })")
        check(acts and "pause" not in acts and "activate" in acts,
              f"a paused experiment offers {acts}")
        d.save_screenshot(os.path.join(OUT, "paused.png"))
        check(not errors(d), "console errors after pausing")

        # without the chart library the page must fail (the check above can fail)
        d.execute_cdp_cmd("Network.enable", {})
        d.execute_cdp_cmd("Network.setBlockedURLs", {"urls": ["*dygraph.min.js*"]})
        d.get(URL + f"/experiments/{FIN}")
        time.sleep(1.5)
        errs = errors(d)
        check(any("chart library" in e["message"] or "dygraph" in e["message"] for e in errs),
              f"a page without its chart library reported no error: {errs}")
        d.execute_cdp_cmd("Network.setBlockedURLs", {"urls": []})
    finally:
        d.quit()
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
