"""Measure the live page (live_loop.md) as a learner meets it: load time, time per step, bytes downloaded.

    bash scripts/book.sh                                  # builds the site into _build/html
    .venv/bin/python scripts/measure_live_page.py         # [--site _build/html] [--runs 3] [--steps 40]

Serves the built site on 127.0.0.1 (Python's http.server, as tests/book/test_website.py does) and opens
the live page in Debian's headless Chromium (``scripts/setup_browser.sh``) with the browser's cache off, as
on a first visit. Each run opens the page afresh and, in the page:

- presses **Step** (which loads the tokenizer, onnxruntime-web and the model, then takes one step) and
  times, with ``performance.now()``, the load (until the page says "Model loaded") and the first token
  (until the trace shows its first row): the time to the first token after pressing a button;
- presses **Run** up to ``--steps`` new tokens (greedy, the page's default prompt unless ``--prompt``) and
  reads the milliseconds of each step from the trace (live.js times a step from its forward pass to its
  trace row);
- adds up the bytes the page received (``transferSize`` of the Performance API's navigation and resource
  entries: the HTTP bodies and headers), before the press (the page and its theme) and after (the live
  page's files).

Prints each run and the median over runs. The numbers depend on the machine and on what else it runs.
"""

import argparse
import functools
import http.server
import os
import platform
import statistics
import sys
import tempfile
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"
PAGE = "live_loop.html"

# In the page: press Step on a fresh page; resolve when the first trace row is there. Times are the page's.
FIRST_TOKEN = """
const done = arguments[arguments.length - 1];
const $ = (id) => document.getElementById(id);
let loaded = null;
const t0 = performance.now();
const watch = new MutationObserver(() => {
  const text = $('live-status').textContent;
  if (loaded === null && text.startsWith('Model loaded')) loaded = performance.now();
  if (text.startsWith('Error') || text.startsWith('Loading failed')) { watch.disconnect(); done({error: text}); }
  if ($('live-trace-body').rows.length === 1) {
    watch.disconnect();
    done({t0, load_ms: loaded - t0, first_token_ms: performance.now() - t0});
  }
});
watch.observe($('live-loop'), {subtree: true, childList: true, characterData: true});
$('live-step').click();
"""

# In the page: press Run; resolve when the run is done, with every step's milliseconds from the trace.
RUN = """
const done = arguments[arguments.length - 1];
const root = document.getElementById('live-loop');
const finish = () => done({
  status: document.getElementById('live-status').textContent,
  steps: Array.from(document.querySelectorAll('#live-trace-body tr')).map(tr => ({
      ms: Number(tr.dataset.ms), context: Number(tr.cells[1].textContent)})),
});
const watch = new MutationObserver(() => { if (root.dataset.state === 'done') { watch.disconnect(); finish(); } });
watch.observe(root, {attributes: true, attributeFilter: ['data-state']});
document.getElementById('live-run').click();
"""

# The bytes received, from the Performance API, split at the press (t0, in the page's clock).
BYTES = """
const t0 = arguments[0];
const entries = [...performance.getEntriesByType('navigation'), ...performance.getEntriesByType('resource')];
const before = entries.filter(e => e.startTime < t0), after = entries.filter(e => e.startTime >= t0);
const sum = (list) => list.reduce((n, e) => n + e.transferSize, 0);
return {before: sum(before), after: sum(after), requests: entries.length,
        files: after.map(e => [e.name.split('/').pop(), e.transferSize])};
"""


def fail(message: str) -> None:
    print(f"measure_live_page: {message}", file=sys.stderr)
    sys.exit(2)


def serve(site: Path):
    quiet = type("Quiet", (http.server.SimpleHTTPRequestHandler,), {"log_message": lambda *args: None})
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(quiet, directory=str(site)))
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    return httpd, f"http://127.0.0.1:{httpd.server_address[1]}/"


def browser(profile: str):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-dev-shm-usage",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--window-size=1280,900", f"--user-data-dir={profile}"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)
    driver.set_script_timeout(600)
    driver.execute_cdp_cmd("Network.enable", {})
    driver.execute_cdp_cmd("Network.setCacheDisabled", {"cacheDisabled": True})  # a first visit, every run
    return driver


def measure(driver, url: str, steps: int, prompt: str | None) -> dict:
    driver.get(url)
    driver.execute_script("document.getElementById('live-max').value = arguments[0];"
                          "if (arguments[1] !== null) document.getElementById('live-prompt').value = arguments[1];",
                          str(steps), prompt)
    first = driver.execute_async_script(FIRST_TOKEN)
    if "error" in first:
        fail(f"the page says: {first['error']}")
    run = driver.execute_async_script(RUN)
    received = driver.execute_script(BYTES, first["t0"])
    later = [s["ms"] for s in run["steps"][1:]]  # the first step ran right after the load, already timed
    return {"load_ms": first["load_ms"], "first_token_ms": first["first_token_ms"],
            "step_ms": statistics.median(later) if later else float("nan"), "steps": len(run["steps"]),
            "context": (run["steps"][0]["context"], run["steps"][-1]["context"]), "status": run["status"],
            **received}


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--site", type=Path, default=ROOT / "_build" / "html",
                        help="the built site (bash scripts/book.sh)")
    parser.add_argument("--runs", type=int, default=3, help="fresh page loads to measure (default 3)")
    parser.add_argument("--steps", type=int, default=40, help="max new tokens of the run (default 40, the page's)")
    parser.add_argument("--prompt", default=None, help="the prompt (default: the page's, 'ROMEO:\\n')")
    args = parser.parse_args()
    if args.runs < 1 or not 2 <= args.steps <= 500:
        fail("--runs must be at least 1 and --steps from 2 to 500 (the page's limit)")
    if not (args.site / PAGE).is_file() or not (args.site / "_static" / "live" / "model.onnx").is_file():
        fail(f"no built live page in {args.site}: build the site first (bash scripts/book.sh)")
    missing = [p for p in (CHROMIUM, CHROMEDRIVER) if not os.access(p, os.X_OK)]
    if missing:
        fail(f"{', '.join(missing)} missing: run `bash scripts/setup_browser.sh` as root")

    httpd, base = serve(args.site.resolve())
    results = []
    with tempfile.TemporaryDirectory() as profile:
        driver = browser(profile)
        try:
            for k in range(args.runs):
                r = measure(driver, base + PAGE, args.steps, args.prompt)
                results.append(r)
                print(f"run {k + 1}: load {r['load_ms']:.0f} ms, first token {r['first_token_ms']:.0f} ms after "
                      f"pressing Step; {r['steps']} steps (context {r['context'][0]} to {r['context'][1]}), "
                      f"median {r['step_ms']:.1f} ms a step after the first; received {r['before'] / 1e6:.2f} MB "
                      f"with the page, {r['after'] / 1e6:.2f} MB after the press ({r['requests']} requests)")
        finally:
            driver.quit()
            httpd.shutdown()
    median = lambda key: statistics.median(r[key] for r in results)  # noqa: E731
    print(f"\nmedian of {len(results)} runs: load {median('load_ms'):.0f} ms; time to first token "
          f"{median('first_token_ms'):.0f} ms; {median('step_ms'):.1f} ms a step; "
          f"{(median('before') + median('after')) / 1e6:.1f} MB downloaded "
          f"({median('before') / 1e6:.2f} MB the page and its theme, {median('after') / 1e6:.2f} MB on the press)")
    print("after the press: " + ", ".join(f"{name} {size / 1e6:.2f} MB" for name, size in results[-1]["files"]))
    print(f"machine: {os.cpu_count()} CPUs ({cpu_model()}), load average {os.getloadavg()[0]:.2f} at the end; "
          f"the last run: {results[-1]['status']}")


def cpu_model() -> str:
    try:
        lines = Path("/proc/cpuinfo").read_text().splitlines()
        return next(line.split(":", 1)[1].strip() for line in lines if line.startswith("model name"))
    except (OSError, StopIteration):
        return platform.machine()


if __name__ == "__main__":
    main()
