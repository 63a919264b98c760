"""browser.py URL OUT_DIR FINISHED_EXP RUNNING_EXP DSAT_EXP — the web UI in headless Chromium.

Against a master holding a finished small experiment (FINISHED_EXP), a running one
(RUNNING_EXP) and a finished dsat search (DSAT_EXP): every page loads without console errors;
the experiments table lists them; the learning-curve chart has one series per trial, each with
the point count stored (read back from the REST API), none empty; the hyperparameter views draw;
the dsat page (linked from its experiment) charts every stage searched with each stage's trials,
lists every trial, and its best-config download is the best config; pausing from the page
changes the state shown without a reload; a page whose chart library is missing fails.
Screenshots go to OUT_DIR. Prints "N passed, M failed" and exits 1 on any failure.
"""
import json
import os
import sys
import time
import urllib.request

from selenium import webdriver
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By

URL, OUT, FIN, RUN, DSAT = sys.argv[1], sys.argv[2], *map(int, sys.argv[3:6])
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
        check(sorted(ids) == sorted([FIN, DSAT]), f"?state=COMPLETED lists {ids}")

        # the experiment page: one series per trial, each with its stored point count
        load(d, f"/experiments/{FIN}", "experiment.png")
        c = wait(d, "return !!(window.dtrain.charts.curves && window.dtrain.charts.curves.graph)")
        trials = api(f"/api/v1/experiments/{FIN}/trials")["trials"]
        if check(c, "no learning-curve chart"):
            g = d.execute_script("var g = window.dtrain.charts.curves.graph; var n = g.numColumns();"
                                 " var out = []; for (var k = 1; k < n; k++) { var c = 0;"
                                 " for (var r = 0; r < g.numRows(); r++)"
                                 "   if (g.getValue(r, k) !== null) c++; out.push(c); } return out;")
            check(len(g) == len(trials), f"{len(g)} series for {len(trials)} trials")
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
