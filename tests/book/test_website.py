"""The course website as a learner meets it: built, served on localhost, opened in a real browser.

The book is built from the notebooks' stored outputs (no execution: ``execute_notebooks: "off"`` in a
copy of ``_config.yml``) into a temporary folder, with the same ``-n -W --keep-going`` as
``scripts/book.sh``. Python's ``http.server`` serves it on 127.0.0.1, and Debian's headless Chromium,
driven through chromedriver (selenium), opens every page listed in ``_toc.yml``. For each page:

- it loads with no console error and no failed request, and every request stays on the site (so the
  site works offline: MathJax too is served from ``_static``);
- the sidebar lists every page of ``_toc.yml``, in order;
- every image in the page's article is loaded and has a non-zero rendered size;
- math is typeset: every ``.math`` element holds MathJax output (``mjx-container``), no MathJax error,
  and no raw ``$$`` / ``\\[`` / ``\\(`` left in the text;
- no error traceback (except in cells tagged ``raises-exception``);
- while ``repository.url`` is the placeholder (``scripts/set_repository.py``), no GitHub or Colab button;
  once it is real, a notebook page has an "Open in Colab" link to its own notebook on GitHub, and a
  Colab link never points at anything but a notebook of the repository;
- one search box; no Colab install cell (it runs only on Colab); no code or output block wider than its
  column (long lines wrap); a chapter's answers folded in ``<details>``.

Chapter 5's streamed tokens show as printed, on one line (``test_streamed_tokens_show_as_printed``).

The site, audited: axe-core (pinned in ``package-lock.json``, injected by the test) finds no serious or
critical violation on any page, in light and dark mode, nor on the live page after a run; every internal
link and anchor resolves (``check_links``, from the built HTML; the external links are written to
``_build/external_links.txt``, not fetched); the theme's search, colour-mode and download buttons work.

A full-page screenshot of every page is saved in ``_build/screenshots/`` (kept after the test).

Needs Debian's ``chromium`` and ``chromium-driver`` (``scripts/setup_browser.sh``, run by
``scripts/test.sh``). Without them the test skips, except under ``CI=true``, where it fails.
"""

import base64
import copy
import functools
import html.parser
import http.server
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
import urllib.parse
from pathlib import Path

import pytest
import yaml
from helpers import CHROMEDRIVER, CHROMIUM, CONFIG, ROOT, load_script, source_of, toc_pages

pytestmark = pytest.mark.slow  # builds the whole site (a minute or more); the browser tests are marked too
SCREENSHOTS = ROOT / "_build" / "screenshots"
WINDOW = (1280, 900)  # wide enough for the theme to show the sidebar
MAX_SCREENSHOT_HEIGHT = 16000


PAGES = toc_pages()
PLACEHOLDER = "https://github.com/nexttoken-course/autoregressive-generation"  # scripts/set_repository.py
BUTTONS = bool(CONFIG["html"].get("use_repository_button")) or bool(CONFIG["launch_buttons"].get("colab_url"))


def expected_colab_url(notebook: str) -> str:
    """The Colab link of a notebook given by its path in the repository, as _config.yml defines it."""
    repo = urllib.parse.urlparse(CONFIG["repository"]["url"]).path.strip("/")
    branch = CONFIG["repository"].get("branch", "main")
    book = CONFIG["repository"].get("path_to_book", "").strip("/")
    path = f"{book}/{notebook}" if book else notebook
    return f"{CONFIG['launch_buttons']['colab_url'].rstrip('/')}/github/{repo}/blob/{branch}/{path}"


# ---------------------------------------------------------------------------------------------------
# fixtures: the built site, a server, a browser


@pytest.fixture(scope="module")
def chromium():
    """(chromium, chromedriver) paths; skip (fail under CI=true) when the browser is not installed."""
    missing = [p for p in (CHROMIUM, CHROMEDRIVER) if not os.access(p, os.X_OK)]
    try:
        import selenium  # noqa: F401
    except ImportError:
        missing.append("selenium (requirements.txt)")
    if missing:
        msg = (f"the website test needs {', '.join(missing)}: run `bash scripts/setup_browser.sh` as root "
               "(apt-get install chromium chromium-driver), or `bash scripts/test.sh`")
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(msg)
        pytest.skip(msg)
    return CHROMIUM, CHROMEDRIVER


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    """Build the book from the stored notebook outputs into a temporary folder; return its html folder."""
    out = tmp_path_factory.mktemp("site")
    config = copy.deepcopy(CONFIG)
    config.setdefault("execute", {})["execute_notebooks"] = "off"  # the notebooks are stored executed
    local = config.get("sphinx", {}).get("local_extensions") or {}
    for name, path in local.items():  # relative to the config file, which now lies elsewhere
        local[name] = str((ROOT / path).resolve())
    (out / "_config.yml").write_text(yaml.safe_dump(config, sort_keys=False))
    jupyter_book = Path(sys.executable).parent / "jupyter-book"
    cmd = [str(jupyter_book if jupyter_book.exists() else shutil.which("jupyter-book")), "build", str(ROOT),
           "--path-output", str(out), "--config", str(out / "_config.yml"), "-n", "-W", "--keep-going"]
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    log = re.sub(r"\x1b\[[0-9;]*m", "", result.stdout + result.stderr)
    warnings = [line for line in log.splitlines() if re.search(r"WARNING|ERROR|Error|Exception", line)]
    if result.returncode != 0:
        pytest.fail(f"the book does not build cleanly ({' '.join(cmd)}):\n"
                    + "\n".join(warnings or log.splitlines()[-40:]), pytrace=False)
    html = out / "_build" / "html"
    assert (html / "index.html").exists()
    return html


class _Handler(http.server.SimpleHTTPRequestHandler):
    """http.server's handler, recording (path, status) of every request instead of printing it."""

    log: list = []
    lock = threading.Lock()

    def log_request(self, code="-", size="-"):
        with self.lock:
            self.log.append((self.path, int(getattr(code, "value", code))))

    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def server(site):
    """Serve the built site on 127.0.0.1 (a free port); yield (base url, request log)."""
    log = []
    handler = type("Handler", (_Handler,), {"log": log, "lock": threading.Lock()})
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0),
                                            functools.partial(handler, directory=str(site)))
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/", log
    httpd.shutdown()
    httpd.server_close()


@pytest.fixture(scope="module")
def browser(chromium, tmp_path_factory, terminal_summary):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    binary, driver_path = chromium
    options = webdriver.ChromeOptions()
    options.binary_location = binary
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--disable-dev-shm-usage", "--hide-scrollbars", f"--window-size={WINDOW[0]},{WINDOW[1]}",
                 f"--user-data-dir={tmp_path_factory.mktemp('chromium-profile')}"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL", "performance": "ALL"})
    driver = webdriver.Chrome(service=Service(executable_path=driver_path), options=options)
    driver.set_page_load_timeout(60)
    driver.set_script_timeout(60)
    driver.get("about:blank")  # leave the browser's start page, whose requests are not the site's
    if SCREENSHOTS.exists():
        shutil.rmtree(SCREENSHOTS)
    SCREENSHOTS.mkdir(parents=True)
    yield driver
    driver.quit()
    shots = sorted(SCREENSHOTS.glob("*.png"))
    if shots:
        terminal_summary.append(f"test_website: {len(shots)} page screenshots in {SCREENSHOTS}")


# ---------------------------------------------------------------------------------------------------
# what the browser is asked

WAIT_FOR_PAGE = """
const done = arguments[arguments.length - 1];
const mathjax = (window.MathJax && MathJax.startup && MathJax.startup.promise) || Promise.resolve();
const images = Array.from(document.images).map(img => img.complete ? null :
    new Promise(ok => { img.addEventListener('load', ok); img.addEventListener('error', ok); }));
Promise.all([mathjax, ...images]).then(() => document.fonts.ready)
    .then(() => done('ok'), err => done('waiting for the page failed: ' + err));
"""

INSPECT_PAGE = """
const main = document.querySelector('main#main-content') || document.querySelector('main');
const box = el => { const r = el.getBoundingClientRect(); return [r.width, r.height]; };
const visible = el => { const r = el.getBoundingClientRect(); return r.width > 0 && r.height > 0
    && getComputedStyle(el).visibility !== 'hidden'; };
// as the page opens, before anything is unfolded
const searches = Array.from(document.querySelectorAll('.search-button-field, input[type=search]'))
  .filter(visible).length;
const details = Array.from(document.querySelectorAll('article details'));
const folded = details.filter(d => !d.open && d.querySelector('summary')).length;
const wide = Array.from(document.querySelectorAll('article pre')).filter(visible)
    .filter(p => p.scrollWidth > p.clientWidth + 1).map(p => p.textContent.split('\\n')[0].slice(0, 80));
const code = Array.from(document.querySelectorAll('article .cell pre')).map(p => p.textContent).join('\\n');
const nav = document.querySelector('.bd-sidebar-primary nav.bd-links');
const sidebar = nav ? Array.from(nav.querySelectorAll('a.reference.internal')).map(a => a.href.split('#')[0]) : null;
// what a learner would open: every dropdown and toggle (after the screenshot), so hidden figures count
document.querySelectorAll('details').forEach(d => d.open = true);
document.querySelectorAll('.toggle-hidden').forEach(e => e.classList.remove('toggle-hidden'));
const article = document.querySelector('article.bd-article') || main;
const images = article ? Array.from(article.querySelectorAll('img')).map(img => ({
    src: img.currentSrc || img.src, natural: [img.naturalWidth, img.naturalHeight], rendered: box(img)})) : [];
const math = main ? Array.from(main.querySelectorAll('.math')) : [];
let text = '';
let tracebacks = [];
if (main) {
  const clone = main.cloneNode(true);
  clone.querySelectorAll('pre, code, script, style, mjx-container, mjx-assistive-mml, .tag_raises-exception')
      .forEach(e => e.remove());
  text = clone.textContent;
  const live = main.cloneNode(true);
  live.querySelectorAll('.tag_raises-exception').forEach(e => e.remove());
  tracebacks = Array.from(live.querySelectorAll('.output.traceback, .output.error'))
    .map(e => e.textContent.slice(0, 300));
  const header = 'Traceback (most recent call last)';
  if (live.textContent.includes(header)) tracebacks.push(header);
}
const launch = document.querySelector('.dropdown-launch-buttons');
return {
  title: document.title,
  has_main: !!main,
  sidebar: sidebar,
  sidebar_box: nav ? box(nav) : null,
  images: images,
  math: math.length,
  math_unrendered: math.filter(e => !e.querySelector('mjx-container')).map(e => e.textContent.slice(0, 80)),
  mjx: main ? main.querySelectorAll('mjx-container').length : 0,
  mjx_errors: main ? Array.from(main.querySelectorAll('mjx-merror')).map(e => e.textContent.slice(0, 80)) : [],
  raw_math: ['$$', '\\\\[', '\\\\('].filter(d => text.includes(d)),
  tracebacks: tracebacks,
  colab: Array.from(document.querySelectorAll('a[href]')).map(a => a.href).filter(h => h.startsWith(arguments[0])),
  launch_box: launch ? box(launch) : null,
  repository_links: Array.from(document.querySelectorAll('a[href]')).map(a => a.href)
      .filter(h => h.startsWith(arguments[1]) || h.startsWith('https://colab.research.google.com')),
  searches: searches,
  details: details.length,
  folded: folded,
  wide: wide,
  colab_install: code.includes('google.colab'),
};
"""


def _screenshot(driver, path: Path, window=WINDOW, mobile: bool = False, scale: int = 1) -> None:
    """A full-page PNG (up to MAX_SCREENSHOT_HEIGHT CSS pixels high): the window made as tall as the page;
    ``mobile`` as a phone shows it (the viewport meta honoured), ``scale`` device pixels per CSS pixel."""
    height = driver.execute_script("return document.documentElement.scrollHeight")
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", {
        "width": window[0], "height": min(max(height, window[1]), MAX_SCREENSHOT_HEIGHT),
        "deviceScaleFactor": scale, "mobile": mobile})
    try:
        shot = driver.execute_cdp_cmd("Page.captureScreenshot", {"format": "png"})
    finally:
        driver.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})
    path.write_bytes(base64.b64decode(shot["data"]))


def _network_problems(performance_log: list, base: str) -> list[str]:
    """Failed requests, error statuses and requests that leave the site, from Chromium's network events
    (only the requests of a page of the site: not those of the browser's own start page)."""
    problems, urls = [], {}
    for entry in performance_log:
        message = json.loads(entry["message"])["message"]
        method, params = message.get("method"), message.get("params", {})
        if method == "Network.requestWillBeSent" and params.get("documentURL", "").startswith(base):
            url = params["request"]["url"]
            urls[params["requestId"]] = url
            if url.split(":")[0] in ("http", "https", "ws", "wss") and not url.startswith(base):
                problems.append(f"request leaves the site (fails offline): {url}")
        elif method == "Network.responseReceived" and params["requestId"] in urls:
            status = params["response"]["status"]
            if status >= 400:
                problems.append(f"HTTP {status}: {params['response']['url']}")
        elif method == "Network.loadingFailed" and params["requestId"] in urls and not params.get("canceled"):
            problems.append(f"request failed ({params.get('errorText')}): {urls[params['requestId']]}")
    return problems


# ---------------------------------------------------------------------------------------------------
# the tests


def test_mathjax_is_served_from_the_site(site):
    """Every page with math loads MathJax from _static (no CDN), and that file is in the built site."""
    problems, pages_with_math = [], 0
    for path in sorted(site.rglob("*.html")):
        page, text = path.relative_to(site), path.read_text(encoding="utf-8")
        cdn = re.findall(r'src="(https?://[^"]*mathjax[^"]*)"', text, flags=re.IGNORECASE)
        if cdn:
            problems.append(f"{page} loads MathJax from {cdn[0]}")
        if 'class="math' in text:
            pages_with_math += 1
            local = "../" * (len(page.parts) - 1) + "_static/mathjax/tex-chtml.js"
            if f'src="{local}"' not in text:
                problems.append(f"{page} has math but does not load {local}")
    assert not problems, "\n".join(problems)
    assert pages_with_math > 0, "no page has math: the check above tested nothing"
    assert (site / "_static" / "mathjax" / "tex-chtml.js").is_file()
    assert any((site / "_static" / "mathjax" / "output" / "chtml" / "fonts").rglob("*.woff"))


@pytest.mark.browser
@pytest.mark.parametrize("page", PAGES)
def test_page_in_the_browser(page, browser, site, server):
    base, requests = server
    url = urllib.parse.urljoin(base, f"{page}.html")
    screenshot = SCREENSHOTS / (page.replace("/", "__") + ".png")
    browser.get_log("browser"), browser.get_log("performance")  # drop what earlier pages left
    first_request = len(requests)

    browser.get(url)
    waited = browser.execute_async_script(WAIT_FOR_PAGE)
    _screenshot(browser, screenshot)
    colab_prefix = (CONFIG["launch_buttons"]["colab_url"] or "https://colab.research.google.com").rstrip("/") + "/"
    info = browser.execute_script(INSPECT_PAGE, colab_prefix, CONFIG["repository"]["url"])
    console = browser.get_log("browser")
    network = browser.get_log("performance")

    problems = [] if waited == "ok" else [waited]
    problems += [f"console {e['level']}: {e['message']}" for e in console if e["level"] == "SEVERE"]
    problems += _network_problems(network, base)
    problems += [f"server answered {status}: {path}" for path, status in requests[first_request:]
                 if status >= 400]
    if not info["has_main"]:
        problems.append("no <main> content element")

    # the sidebar: every page of _toc.yml, in order, and visible
    sidebar = [link.removeprefix(base).removesuffix(".html") for link in info["sidebar"] or []]
    if sidebar != PAGES:
        problems.append(f"the sidebar lists {sidebar}, not the pages of _toc.yml in order: {PAGES}")
    if not info["sidebar_box"] or min(info["sidebar_box"]) <= 0:
        problems.append(f"the sidebar is not visible at {WINDOW[0]}x{WINDOW[1]}")

    # figures
    for img in info["images"]:
        if min(img["natural"]) <= 0:
            problems.append(f"image not loaded: {img['src']}")
        elif min(img["rendered"]) <= 0:
            problems.append(f"image rendered with size {img['rendered']}: {img['src']}")

    # math
    if info["math"] and info["mjx"] == 0:
        problems.append(f"{info['math']} math elements but no MathJax output (mjx-container)")
    problems += [f"math not typeset: {m!r}" for m in info["math_unrendered"]]
    problems += [f"MathJax error: {m!r}" for m in info["mjx_errors"]]
    problems += [f"raw math delimiter {d!r} left in the page text" for d in info["raw_math"]]

    # no error output
    problems += [f"error traceback on the page: {t!r}" for t in info["tracebacks"]]

    # one search box, no Colab install cell, no block wider than its column, the answers folded
    if info["searches"] != 1:
        problems.append(f"{info['searches']} search boxes, not one")
    source = source_of(page)
    if info["colab_install"]:
        problems.append("the Colab install cell is on the page (tag it remove-cell)")
    problems += [f"a code or output block wider than its column (does not wrap): {w!r}" for w in info["wide"]]
    # three in "Going deeper: check your understanding" (test_lesson_text.py), and a Going deeper section may fold more
    if source.parent.name == "chapters" and not (info["details"] == info["folded"] >= 3):
        problems.append(f"{info['details']} <details> ({info['folded']} folded), not 3 or more, all folded")

    # Colab: no button while the address is the placeholder; once set, a notebook page links to its own
    # notebook, and a Colab link always opens a repository notebook
    if CONFIG["repository"]["url"] == PLACEHOLDER:
        if BUTTONS:
            problems.append("_config.yml shows the repository buttons for the placeholder address")
        problems += [f"a link to the placeholder repository or Colab: {link}" for link in info["repository_links"]]
    elif source.suffix == ".ipynb":
        want = expected_colab_url(source.relative_to(ROOT).as_posix())
        if want not in info["colab"]:
            problems.append(f"no 'Open in Colab' link to {want} (links: {info['colab']})")
        if not info["launch_box"] or min(info["launch_box"]) <= 0:
            problems.append("the launch (Colab) button is not visible")
    prefix = expected_colab_url("") if CONFIG["launch_buttons"]["colab_url"] else ""
    for link in info["colab"] if prefix else []:
        path = link[len(prefix):] if link.startswith(prefix) else None
        if path is None or not path.endswith(".ipynb") or not (ROOT / path).is_file():
            problems.append(f"Colab link does not open a notebook (.ipynb) of the repository, the only "
                            f"files Colab opens: {link}")

    assert not problems, (f"{url} ({info['title']!r}), screenshot {screenshot}:\n  "
                          + "\n  ".join(problems))


@pytest.mark.browser
def test_some_page_has_math_and_figures(browser, site, server):
    """Guard against checks that pass vacuously: the intro has typeset math, a chapter has figures."""
    base, _ = server
    browser.get(urllib.parse.urljoin(base, f"{PAGES[0]}.html"))
    browser.execute_async_script(WAIT_FOR_PAGE)
    assert browser.execute_script("return document.querySelectorAll('main mjx-container').length") > 0
    chapters = [p for p in PAGES if source_of(p).suffix == ".ipynb"]
    figures = 0
    for page in chapters:
        browser.get(urllib.parse.urljoin(base, f"{page}.html"))
        figures += browser.execute_script("return document.querySelectorAll('article.bd-article img').length")
        if figures:
            break
    assert figures > 0


@pytest.mark.browser
def test_streamed_tokens_show_as_printed(browser, site, server):
    """Chapter 5's streaming cell prints each token with ``end=""``: one stream chunk per token. The page
    shows them joined as printed (as JupyterLab and Colab do), not one chunk per line."""
    import nbformat

    page = "chapters/05_generation_loop"
    nb = nbformat.read(source_of(page), as_version=4)
    cell = next(c for c in nb.cells if c.cell_type == "code" and "on_token=print_token" in c.source)
    chunks = [o.text for o in cell.outputs if o.output_type == "stream" and o.name == "stdout"]
    printed = "".join(chunks)
    assert len(chunks) > 20 and printed.count("\n") < 10  # many chunks, few lines: the case to show
    base, _ = server
    browser.get(urllib.parse.urljoin(base, f"{page}.html"))
    browser.execute_async_script(WAIT_FOR_PAGE)
    shown = browser.execute_script(
        "return Array.from(document.querySelectorAll('article .cell_output pre, article .output pre'))"
        ".map(p => p.textContent)")
    match = [text for text in shown if "calls, one per step" in text]
    assert len(match) == 1, shown
    assert match[0].strip("\n") == printed.strip("\n"), (match[0], printed)
    first_line = printed.split("\n")[1]  # the tokens after the prompt's "ROMEO:\n", on one line
    assert len(first_line.split()) > 5 and first_line in match[0].split("\n"), match[0]


# ---------------------------------------------------------------------------------------------------
# the site, audited: accessibility (axe-core) on every page, links and anchors, the theme's buttons

AXE = ROOT / "node_modules" / "axe-core" / "axe.min.js"  # package-lock.json pins it; npm ci installs it
AUDITED = PAGES + ["search", "genindex"]  # every page of the site: the toc's and Sphinx's own two
LINK_LIST = ROOT / "_build" / "external_links.txt"

RUN_AXE = """
const done = arguments[arguments.length - 1];
// The theme's colour transitions first run their course (a page opened in another mode than the last one
// fades its buttons' colours in for a fraction of a second, and halfway they fail the contrast rule).
const finite = document.getAnimations().filter(a => a.effect && a.effect.getTiming().iterations !== Infinity);
Promise.all(finite.map(a => a.finished.catch(() => null)))
.then(() => axe.run(document, {resultTypes: ['violations']})).then(r => done({
  rules_passed: r.passes.length,
  violations: r.violations.filter(v => ['serious', 'critical'].includes(v.impact)).map(v =>
      `${v.impact} ${v.id} (${v.help}): ` + v.nodes.slice(0, 3).map(n => n.target.join(' ')
          + (n.any.length && n.any[0].message ? ` [${n.any[0].message}]` : '')).join('; ')),
}), err => done({error: String(err)}));
"""


def _axe_violations(browser) -> list[str]:
    """axe-core's serious and critical violations on the page as it is now (injected by the test: the site
    does not hold axe-core, so no page of it asks for it)."""
    if not AXE.is_file():
        pytest.fail(f"{AXE} is missing: run `bash scripts/setup.sh` (npm ci installs the pinned axe-core)")
    if not browser.execute_script("return typeof axe !== 'undefined'"):
        browser.execute_script(AXE.read_text(encoding="utf-8"))
    result = browser.execute_async_script(RUN_AXE)
    assert "error" not in result, result
    assert result["rules_passed"] > 10, result  # axe really looked at the page
    return result["violations"]


def _set_mode(browser, mode: str) -> None:
    """The theme's colour mode for the pages opened next (pydata-sphinx-theme reads it from localStorage)."""
    browser.execute_script("localStorage.setItem('mode', arguments[0])", mode)


def test_the_audit_covers_every_page(site):
    """AUDITED is every HTML page of the built site (index.html only redirects to the intro)."""
    built = sorted(p.relative_to(site).with_suffix("").as_posix() for p in site.rglob("*.html")
                   if p.relative_to(site).parts[0] != "_static")
    assert built == sorted(AUDITED + ["index"])


@pytest.mark.browser
@pytest.mark.parametrize("page", AUDITED)
def test_page_is_accessible(page, browser, site, server):
    """axe-core on the page, in the theme's light and dark modes: no serious or critical violation. The
    theme had two (label-content-name-mismatch, on its search and colour-mode buttons), and the references
    page one (aria-required-children: docutils' doc-biblioentry items in a list), fixed by _static/a11y.js;
    no exception is allowed."""
    base, _ = server
    problems = []
    browser.get(urllib.parse.urljoin(base, f"{page}.html"))
    try:
        for mode in ("light", "dark"):
            _set_mode(browser, mode)
            browser.refresh()
            browser.execute_async_script(WAIT_FOR_PAGE)
            assert browser.execute_script("return document.documentElement.dataset.theme") == mode
            problems += [f"{mode} mode: {v}" for v in _axe_violations(browser)]
    finally:
        _set_mode(browser, "light")
    assert not problems, f"{page}:\n  " + "\n  ".join(problems)


@pytest.mark.browser
def test_the_audit_finds_a_planted_violation(browser, site, server):
    """The audit can fail: an image with no alt text and a button with no name, put into a page, are
    reported (both are critical in axe-core)."""
    base, _ = server
    browser.get(urllib.parse.urljoin(base, f"{PAGES[0]}.html"))
    browser.execute_async_script(WAIT_FOR_PAGE)
    assert _axe_violations(browser) == []
    browser.execute_script("""const article = document.querySelector('article');
        article.insertAdjacentHTML('beforeend', '<img src="_static/favicon.svg"><button type="button"></button>');""")
    found = " ".join(_axe_violations(browser))
    assert "critical image-alt" in found and "critical button-name" in found, found


class _Anchors(html.parser.HTMLParser):
    """A page's link targets (every id, and the name of an <a>) and its links (href and src)."""

    def __init__(self):
        super().__init__()
        self.ids, self.links = set(), []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if attrs.get("id"):
            self.ids.add(attrs["id"])
        if tag == "a" and attrs.get("name"):
            self.ids.add(attrs["name"])
        for key in ("href", "src"):
            if attrs.get(key) is not None:
                self.links.append(attrs[key])


def check_links(site: Path) -> tuple[list[str], dict[str, list[str]], dict[str, int]]:
    """Every link of every page of a built site, offline: (problems, the external links and the pages that
    have them, how many internal links to files and to anchors were checked). An internal link must name a file
    of the site and, with a #fragment into a page, an id (or <a name>) of that page. Links off the site (http, https,
    mailto) are listed, not fetched."""
    origin = "http://site.invalid/"  # pages are resolved as if served from here
    parsed = {}

    def parse(path: Path) -> _Anchors:
        if path not in parsed:
            parsed[path] = _Anchors()
            parsed[path].feed(path.read_text(encoding="utf-8"))
        return parsed[path]

    problems, external, checked = [], {}, {"files": 0, "anchors": 0}
    pages = sorted(p for p in site.rglob("*.html") if p.relative_to(site).parts[0] != "_static")
    for page in pages:
        name = page.relative_to(site).as_posix()
        for link in parse(page).links:
            url = urllib.parse.urljoin(origin + name, link.strip())
            parts = urllib.parse.urlsplit(url)
            if parts.scheme == "data":
                continue  # inline: nothing to fetch
            if not url.startswith(origin):
                if parts.scheme in ("http", "https", "mailto"):
                    external.setdefault(url, []).append(name)
                else:
                    problems.append(f"{name}: a link neither to the site nor to the web: {link}")
                continue
            checked["anchors" if parts.fragment else "files"] += 1
            target = urllib.parse.unquote(parts.path.removeprefix("/"))
            path = site / (target + "index.html" if target.endswith("/") or not target else target)
            if not path.is_file():
                problems.append(f"{name}: {link} names no file of the site")
            elif parts.fragment and path.suffix == ".html" \
                    and urllib.parse.unquote(parts.fragment) not in parse(path).ids:
                problems.append(f"{name}: {link}: no id {parts.fragment!r} in {path.relative_to(site)}")
    return problems, external, checked


def test_links_check_finds_what_is_broken(tmp_path):
    """The link check itself, on a small site: a missing page and a missing anchor are reported, a good
    link and anchor are not, and an external link is listed."""
    (tmp_path / "a.html").write_text('<a href="b.html#there">ok</a> <a href="b.html#nowhere">bad anchor</a> '
                                     '<a href="sub/missing.html">bad page</a> <a href="#top">ok</a> '
                                     '<img src="data:image/png;base64,AAAA"> <a href="https://example.org/x">off</a>'
                                     '<p id="top"></p>')
    (tmp_path / "b.html").write_text('<h1 id="there">There</h1> <a href="a.html">back</a>')
    problems, external, checked = check_links(tmp_path)
    assert checked == {"files": 2, "anchors": 3}, checked
    assert len(problems) == 2, problems
    assert "no id 'nowhere' in b.html" in problems[0] and "sub/missing.html names no file" in problems[1]
    assert external == {"https://example.org/x": ["a.html"]}


def test_links_and_anchors_resolve(site, terminal_summary):
    """Every internal link and anchor of the built site resolves (parsed from the HTML, offline); the links
    off the site are written to _build/external_links.txt, not fetched."""
    problems, external, checked = check_links(site)
    assert not problems, "\n".join(problems)
    LINK_LIST.parent.mkdir(exist_ok=True)
    LINK_LIST.write_text("".join(f"{url}\t{len(pages)} link(s), first on {pages[0]}\n"
                                 for url, pages in sorted(external.items())))
    terminal_summary.append(f"test_website links: {checked['files']} internal links to files and "
                            f"{checked['anchors']} to anchors resolve; {len(external)} external links listed "
                            f"(not fetched) in {LINK_LIST}")
    # the check saw the site's links: at least the sidebar's to every page from every page, and anchors
    assert checked["files"] > len(AUDITED) * len(PAGES) and checked["anchors"] > 100, checked


def _visible(browser, selector: str):
    """The one visible element matching selector (the theme draws some buttons twice, one hidden)."""
    from selenium.webdriver.common.by import By

    shown = [e for e in browser.find_elements(By.CSS_SELECTOR, selector) if e.is_displayed()]
    assert len(shown) == 1, f"{len(shown)} visible {selector}"
    return shown[0]


@pytest.mark.browser
def test_theme_search_finds_pages(browser, site, server):
    """The theme's search: Ctrl+K and the search button open the search field; a query submitted with Enter
    lists the pages that have the word (chapter 4 for "softmax"), and a word no page has lists none."""
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support.ui import WebDriverWait

    base, _ = server
    browser.get(urllib.parse.urljoin(base, f"{PAGES[0]}.html"))
    browser.execute_async_script(WAIT_FOR_PAGE)
    ActionChains(browser).key_down(Keys.CONTROL).send_keys("k").key_up(Keys.CONTROL).perform()
    assert browser.switch_to.active_element.get_attribute("name") == "q"  # Ctrl+K: the field has the focus

    def search(word: str) -> list[str]:
        browser.get(urllib.parse.urljoin(base, f"{PAGES[0]}.html"))
        _visible(browser, ".search-button-field").click()
        field = browser.switch_to.active_element
        assert field.get_attribute("name") == "q"
        field.send_keys(word, Keys.ENTER)
        # Sphinx's search titles its results "Search Results" once it has finished, found or not
        WebDriverWait(browser, 30).until(lambda d: d.execute_script(
            "const h = document.querySelector('#search-results h2'); return h && h.textContent === 'Search Results'"))
        assert browser.current_url == urllib.parse.urljoin(base, f"search.html?q={word}")
        return browser.execute_script(
            "return Array.from(document.querySelectorAll('#search-results li a')).map(a => a.href.split('#')[0])")

    found = search("softmax")
    assert urllib.parse.urljoin(base, "chapters/04_logit_slicing.html") in found, found
    assert all(link.startswith(base) for link in found), found
    assert search("qzxjvwkq") == []


@pytest.mark.browser
def test_theme_dark_mode_switches_and_stays(browser, site, server):
    """The theme's colour-mode button: pressed, it goes through the modes, dark among them, where the page's
    background turns dark; the mode stays on the next page opened; the button's name says the mode."""
    base, _ = server
    page = urllib.parse.urljoin(base, "chapters/05_generation_loop.html")
    luminance = """const [r, g, b] = getComputedStyle(document.body).backgroundColor.match(/\\d+/g).map(Number);
                   return (0.299 * r + 0.587 * g + 0.114 * b) / 255;"""
    try:
        browser.get(page)
        browser.execute_async_script(WAIT_FOR_PAGE)
        assert browser.execute_script("return document.documentElement.dataset.theme") == "light"
        assert browser.execute_script(luminance) > 0.9
        seen = []
        for _ in range(3):  # the theme cycles through three modes
            _visible(browser, ".theme-switch-button").click()
            mode = browser.execute_script("return document.documentElement.dataset.mode")
            seen.append(mode)
            label = _visible(browser, ".theme-switch-button").get_attribute("aria-label")
            assert label == "Color mode: " + {"auto": "system settings"}.get(mode, mode), label
            if mode == "dark":
                assert browser.execute_script("return document.documentElement.dataset.theme") == "dark"
                assert browser.execute_script(luminance) < 0.2
                browser.get(urllib.parse.urljoin(base, "live_loop.html"))  # another page: still dark
                assert browser.execute_script("return document.documentElement.dataset.theme") == "dark"
                assert browser.execute_script(luminance) < 0.2
        assert sorted(seen) == ["auto", "dark", "light"], seen
    finally:
        _set_mode(browser, "light")


@pytest.mark.browser
def test_theme_download_buttons(browser, site, server, tmp_path):
    """The theme's download menu on every page of the toc: its source link gives the page's own source
    file (the notebook or the Markdown, byte for byte); on a chapter, a click downloads it, and the .pdf
    button opens the browser's print dialog, whose print layout shows the article without the sidebars."""

    base, _ = server
    fetch = """const done = arguments[arguments.length - 1];
               fetch(arguments[0]).then(r => r.text()).then(done, e => done('fetch failed: ' + e));"""
    problems = []
    for page in PAGES:
        browser.get(urllib.parse.urljoin(base, f"{page}.html"))
        _visible(browser, ".dropdown-download-buttons .dropdown-toggle").click()
        link = _visible(browser, ".dropdown-download-buttons a.btn-download-source-button")
        source = source_of(page)
        want = urllib.parse.urljoin(base, "_sources/" + source.relative_to(ROOT).as_posix())
        if link.get_attribute("href") != want:
            problems.append(f"{page}: the download link is {link.get_attribute('href')}, not {want}")
        elif browser.execute_async_script(fetch, want) != source.read_text(encoding="utf-8"):
            problems.append(f"{page}: {want} is not {source.relative_to(ROOT)}")
    assert not problems, "\n".join(problems)

    page = "chapters/04_logit_slicing"
    browser.execute_cdp_cmd("Browser.setDownloadBehavior", {"behavior": "allow", "downloadPath": str(tmp_path)})
    try:
        browser.get(urllib.parse.urljoin(base, f"{page}.html"))
        _visible(browser, ".dropdown-download-buttons .dropdown-toggle").click()
        _visible(browser, ".dropdown-download-buttons a.btn-download-source-button").click()
        downloaded = tmp_path / source_of(page).name
        for _ in range(100):
            if downloaded.is_file() and downloaded.stat().st_size == source_of(page).stat().st_size:
                break
            time.sleep(0.1)
        assert downloaded.read_bytes() == source_of(page).read_bytes()
    finally:
        browser.execute_cdp_cmd("Browser.setDownloadBehavior", {"behavior": "default"})
        for handle in browser.window_handles[1:]:  # the link opens a tab (target=_blank): close it
            browser.switch_to.window(handle)
            browser.close()
        browser.switch_to.window(browser.window_handles[0])

    browser.execute_script("window.print = () => { window.printed = (window.printed || 0) + 1; };")
    _visible(browser, ".dropdown-download-buttons .dropdown-toggle").click()
    _visible(browser, ".dropdown-download-buttons .btn-download-pdf-button").click()
    assert browser.execute_script("return window.printed") == 1
    browser.execute_cdp_cmd("Emulation.setEmulatedMedia", {"media": "print"})
    try:
        shown = browser.execute_script("""const shown = s => { const e = document.querySelector(s);
            return !!e && getComputedStyle(e).display !== 'none' && e.getBoundingClientRect().height > 0; };
            return [shown('article.bd-article'), shown('.bd-sidebar-primary'), shown('.bd-sidebar-secondary')];""")
    finally:
        browser.execute_cdp_cmd("Emulation.setEmulatedMedia", {"media": ""})
    assert shown == [True, False, False], shown


# ---------------------------------------------------------------------------------------------------
# figure text, measured on a screenshot

MIN_TEXT_PX = 10  # the smallest readable figure text at 1280 px: 10 CSS pixels per em
DIGIT_HEIGHT = 0.73  # DejaVu Sans (matplotlib's font): digits and capitals are 0.73 em high


def glyph_sizes(png) -> list[int]:
    """The size in pixels, max(height, width), of each glyph-like blob of grey-to-black ink in an image:
    8-connected pixels darker than 150 (of 255) and nearly colourless (so lines, bars and heatmap cells in
    colour are not ink), 3 to 40 px, not longer than 2.5 times their thickness (axes and ticks are)."""
    import numpy as np

    rgb = np.asarray(png.convert("RGB")).astype(int)
    ink = ((0.299 * rgb[..., 0] + 0.587 * rgb[..., 1] + 0.114 * rgb[..., 2]) < 150) \
        & (rgb.max(-1) - rgb.min(-1) < 40)
    height, width = ink.shape
    seen = np.zeros_like(ink)
    sizes = []
    for y0, x0 in zip(*map(np.ndarray.tolist, np.nonzero(ink))):
        if seen[y0, x0]:
            continue
        seen[y0, x0] = True
        stack, n, top, bottom, left, right = [(y0, x0)], 0, y0, y0, x0, x0
        while stack:
            y, x = stack.pop()
            n += 1
            top, bottom, left, right = min(top, y), max(bottom, y), min(left, x), max(right, x)
            for yy in (y - 1, y, y + 1):
                for xx in (x - 1, x, x + 1):
                    if 0 <= yy < height and 0 <= xx < width and ink[yy, xx] and not seen[yy, xx]:
                        seen[yy, xx] = True
                        stack.append((yy, xx))
        h, w = bottom - top + 1, right - left + 1
        if 3 <= max(h, w) <= 40 and n >= 4 and max(h, w) <= 2.5 * min(h, w):
            sizes.append(max(h, w))
    return sizes


def text_px(png) -> float | None:
    """The figure's body text (tick labels, mostly), in CSS pixels per em: the mean size of the larger half
    of its glyphs (digits, capitals, ascenders: 0.73 em) over 0.73. None with under 10 glyphs. Checked
    against matplotlib figures of 10-point text shown from 480 to 856 px wide: within 1 px of the truth."""
    import numpy as np

    sizes = np.array(glyph_sizes(png))
    if len(sizes) < 10:
        return None
    return float(sizes[sizes >= np.median(sizes)].mean()) / DIGIT_HEIGHT


def test_text_px_tells_small_from_readable():
    """The measure itself: 10-point text drawn by matplotlib at 100 dpi (13.9 px) and shown at 100%, 70%
    and 50% of its size reads about 13.9, 9.7 and 6.9 px."""
    import io

    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from PIL import Image

    fig, ax = plt.subplots(figsize=(6, 3), dpi=100)
    ax.plot(range(30), [x * x for x in range(30)])
    ax.set_xticks(range(0, 30, 2))
    ax.set_xlabel("tokens generated so far")
    ax.set_ylabel("positions computed")
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    plt.close(fig)
    image = Image.open(buf)
    for scale, want in ((1.0, 13.9), (0.7, 9.7), (0.5, 6.9)):
        shown = image.resize((round(image.width * scale), round(image.height * scale)), Image.LANCZOS)
        assert abs(text_px(shown) - want) < 1.2, (scale, text_px(shown))


@pytest.mark.browser
def test_figure_text_is_readable(browser, site, server, terminal_summary):
    """Every figure of every page, as Chromium shows it at 1280 px: a screenshot of the image element,
    whose text (``text_px``) is at least MIN_TEXT_PX."""
    import io

    from PIL import Image
    from selenium.webdriver.common.by import By

    base, _ = server
    measured, problems = [], []
    for page in PAGES:
        browser.get(urllib.parse.urljoin(base, f"{page}.html"))
        browser.execute_async_script(WAIT_FOR_PAGE)
        for k, img in enumerate(browser.find_elements(By.CSS_SELECTOR, "article.bd-article img")):
            browser.execute_script("arguments[0].scrollIntoView({block: 'center'})", img)
            shot = Image.open(io.BytesIO(img.screenshot_as_png))
            size = text_px(shot)
            name = f"{page} figure {k + 1} ({shot.width} px wide)"
            if size is None:
                continue  # no text to read (or too little to measure)
            measured.append(f"{name}: {size:.1f} px")
            if size < MIN_TEXT_PX:
                problems.append(f"{name}: text about {size:.1f} px, under {MIN_TEXT_PX}")
    terminal_summary.append("test_website figure text: " + "; ".join(measured))
    assert len(measured) >= 10, measured  # the chapters' figures were found and measured
    assert not problems, "\n".join(problems)


# ---------------------------------------------------------------------------------------------------
# the live page (live_loop.md): the shipped model running in the page, tested against nexttoken

LIVE_PAGE = "live_loop"
LIVE_PROMPTS = ["ROMEO:\n", "First Citizen:\n", "JULIET:\nO Romeo, Romeo! wherefore art thou", "To be, or not",
                "KING HENRY VI:\nMy lords,", "What say you?", "  two spaces,\ta tab\n\n", "It's 1234 o'clock",
                "Good morrow", "O", "<|endoftext|>", "the " * 125]  # the last one crosses the 128-token window
LIVE_STEPS = 20


def _python_generate(ids: list[int], n: int) -> list[int]:
    import torch

    import nexttoken
    return nexttoken.generate(_pretrained(), torch.tensor([ids]), n, eos_token_id=50256)[0].tolist()


@functools.cache
def _pretrained():
    import nexttoken
    return nexttoken.load_pretrained()


def _encode(text: str) -> list[int]:
    import nexttoken
    return nexttoken.gpt2_tokenizer().encode(text, allowed_special="all")


def test_live_page_gets_exactly_its_files(site):
    """The build copies into _static/live exactly the files the page loads (_ext/live_page.py)."""
    sys.path.insert(0, str(ROOT / "_ext"))
    try:
        from live_page import FILES
    finally:
        sys.path.pop(0)
    live = site / "_static" / "live"
    assert sorted(p.name for p in live.iterdir()) == sorted(FILES)
    assert json.loads((live / "model.json").read_text())["onnx_bytes"] == (live / "model.onnx").stat().st_size
    assert 'src="_static/live/live.js"' in (site / f"{LIVE_PAGE}.html").read_text(encoding="utf-8")
    # the sizes the page states are the files'
    text = " ".join((ROOT / f"{LIVE_PAGE}.md").read_text(encoding="utf-8").split())
    size = lambda name: (live / name).stat().st_size / 1e6  # noqa: E731
    total = sum(p.stat().st_size for p in live.iterdir()) / 1e6
    for stated in (f"about {total:.0f} MB", f"the model, {size('model.onnx'):.1f} MB",
                   f"binary, {size('ort-wasm-simd-threaded.wasm'):.1f} MB"):
        assert stated in text, (stated, total)
    assert f"about {total:.0f} MB, from this site" in (ROOT / "live" / "live.js").read_text()


def test_citation_links_land_on_their_entries(site):
    """Every link of the built site to an entry of the references page (a notebook's plain Markdown
    citation, [Welleck et al. (2020)](../references.md#welleck2020)) lands on that entry: an element
    of references.html with that id, made by sphinxcontrib-bibtex from references.bib
    (_ext/citations.py, tests/book/test_citations.py)."""
    from html.parser import HTMLParser

    class Page(HTMLParser):
        def __init__(self):
            super().__init__()
            self.hrefs, self.ids = [], {}

        def handle_starttag(self, tag, attrs):
            attrs = dict(attrs)
            if tag == "a" and attrs.get("href"):
                self.hrefs.append(attrs["href"])
            if attrs.get("id"):
                self.ids[attrs["id"]] = (tag, attrs.get("class", ""), attrs.get("role", ""))

    def parse(path):
        page = Page()
        page.feed(path.read_text(encoding="utf-8"))
        return page

    references = site / "references.html"
    entries = parse(references).ids
    cited, lost = {}, []
    for path in sorted(site.rglob("*.html")):
        for href in parse(path).hrefs:
            url = urllib.parse.urlparse(href)
            if url.scheme or not url.fragment or (path.parent / url.path).resolve() != references.resolve():
                continue
            where = entries.get(url.fragment)
            if where and where[0] == "div" and "citation" in where[1].split() and where[2] == "doc-biblioentry":
                cited.setdefault(path.relative_to(site).as_posix(), []).append(url.fragment)
            else:
                lost.append(f"{path.relative_to(site)}: {href} -> {where}")
    assert not lost, lost
    # and each page's citations are all there: the same links as in its source
    from helpers import citation_links

    written = {}
    for page in PAGES:
        fragments = sorted(f for _, _, f in citation_links(source_of(page)))
        if fragments:
            written[f"{page}.html"] = fragments
    assert {page: sorted(f) for page, f in cited.items()} == written
    assert len([p for p in written if p.startswith("chapters/")]) == 7


@pytest.mark.browser
def test_live_page_from_a_file_says_how_to_serve_it(browser, site):
    """Opened from file://, where browsers block the WASM and model fetches, the page says to serve the
    site and its buttons are off."""
    from selenium.webdriver.common.by import By

    browser.get((site / f"{LIVE_PAGE}.html").as_uri())
    warning = browser.find_element(By.ID, "live-file-warning")
    assert warning.is_displayed() and "python3 -m http.server -d _build/html" in warning.text
    assert all(not browser.find_element(By.ID, b).is_enabled()
               for b in ("live-load", "live-step", "live-run", "live-reset"))


@pytest.mark.browser
def test_live_page_built_without_node_says_it_has_no_live_files(browser, site, tmp_path):
    """A site built without Node: the built site with its _static/live/ made again by the build step
    (_ext/live_page.py's copy_assets) from a source folder without node_modules, so live.js alone. Each of
    Load, Step and Run then says that this build has no live files (not a bare "could not load")."""
    from types import SimpleNamespace

    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    live_page = load_script("_ext/live_page.py")
    source, html = tmp_path / "source", tmp_path / "html"  # source: the page's code, no node_modules
    (source / "live").mkdir(parents=True)
    shutil.copyfile(ROOT / "live" / "live.js", source / "live" / "live.js")
    shutil.copytree(site, html, ignore=lambda folder, names: names if Path(folder).name == "live" else [])
    live_page.copy_assets(SimpleNamespace(srcdir=str(source), outdir=str(html),
                                          builder=SimpleNamespace(format="html")), None)
    assert sorted(p.name for p in (html / "_static" / "live").iterdir()) == ["live.js"]
    handler = type("Handler", (_Handler,), {"log": [], "lock": threading.Lock()})
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(handler, directory=str(html)))
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    said = {}
    try:
        for button in ("live-load", "live-step", "live-run"):
            browser.get(f"http://127.0.0.1:{httpd.server_address[1]}/{LIVE_PAGE}.html")
            browser.execute_async_script(WAIT_FOR_PAGE)
            browser.find_element(By.ID, button).click()
            status = browser.find_element(By.ID, "live-status")
            WebDriverWait(browser, 30).until(lambda d: status.text.startswith(("Error", "Loading failed")))
            time.sleep(0.5)  # nothing else overwrites it afterwards
            said[button] = status.text
            assert browser.find_element(By.ID, "live-step").is_enabled()  # the buttons work again
    finally:
        httpd.shutdown()
        httpd.server_close()
    for button, text in said.items():
        assert text.startswith("Loading failed: could not load") and "has no live files" in text, (button, text)


@pytest.mark.browser
def test_live_page_sampling_repeats_with_its_seed(browser, site, server):
    """Sampling with a seed: the same seed gives the same tokens again (after Reset), another seed others."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    base, _ = server
    browser.get(urllib.parse.urljoin(base, f"{LIVE_PAGE}.html"))
    browser.execute_async_script(WAIT_FOR_PAGE)
    field = lambda name: browser.find_element(By.ID, name)  # noqa: E731
    field("live-max").clear()
    field("live-max").send_keys("8")
    field("live-sample").click()
    assert field("live-seed").is_enabled() and field("live-temperature").is_enabled()

    def run(seed: int) -> list[int]:
        field("live-reset").click()
        field("live-seed").clear()
        field("live-seed").send_keys(str(seed))
        field("live-run").click()
        WebDriverWait(browser, 120).until(lambda d: field("live-loop").get_attribute("data-state") == "done"
                                          or field("live-status").text.startswith(("Error", "Loading failed")))
        assert "sampled (temperature 1)" in field("live-selected").text, field("live-status").text
        return json.loads(field("live-row").get_attribute("data-ids"))

    first, again, other = run(3), run(3), run(4)
    assert first == again
    assert first != other  # deterministic: these two seeds' draws differ (a fixed fact, not a chance)


@pytest.mark.browser
def test_live_page_runs_the_loop_with_the_keyboard(browser, site, server, terminal_summary):
    """Type a prompt, press Run with the keyboard: the page's ids are nexttoken.generate's, token for
    token; the cache comparison adds up the run's work; nothing heavy loads before a button is pressed, no
    request leaves the site, and what the run drew passes the accessibility audit in both colour modes."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support.ui import WebDriverWait

    base, requests = server
    browser.get_log("browser"), browser.get_log("performance")
    first = len(requests)
    # every file the page asks for reaches the server: none from the cache of an earlier test's visit
    browser.execute_cdp_cmd("Network.setCacheDisabled", {"cacheDisabled": True})
    try:
        browser.get(urllib.parse.urljoin(base, f"{LIVE_PAGE}.html"))
        browser.execute_async_script(WAIT_FOR_PAGE)
    finally:
        browser.execute_cdp_cmd("Network.setCacheDisabled", {"cacheDisabled": False})
    loaded = [path for path, _ in requests[first:]]
    assert any(p.endswith("/_static/live/live.js") for p in loaded), loaded
    heavy = [p for p in loaded if re.search(r"model\.onnx|\.wasm|ort\.|tiktoken", p)]
    assert not heavy, f"loaded before any button was pressed: {heavy}"

    prompt, steps = "ROMEO:\nWhat light", 12
    box = browser.find_element(By.ID, "live-prompt")
    box.send_keys(Keys.CONTROL, "a")
    box.send_keys(Keys.DELETE)
    box.send_keys(prompt)  # the textarea takes "\n" as Enter: a new line
    count = browser.find_element(By.ID, "live-max")
    count.send_keys(Keys.CONTROL, "a")
    count.send_keys(str(steps))
    # from the max-tokens box to Run with Tab alone: the sampling box, its disabled fieldset is skipped
    browser.switch_to.active_element.send_keys(Keys.TAB)
    assert browser.switch_to.active_element.get_attribute("id") == "live-sample"
    for want in ("live-load", "live-step", "live-run"):
        browser.switch_to.active_element.send_keys(Keys.TAB)
        assert browser.switch_to.active_element.get_attribute("id") == want
    browser.switch_to.active_element.send_keys(Keys.ENTER)
    WebDriverWait(browser, 300).until(
        lambda d: d.find_element(By.ID, "live-loop").get_attribute("data-state") == "done"
        or d.find_element(By.ID, "live-status").text.startswith(("Error", "Loading failed")))
    status = browser.find_element(By.ID, "live-status").text
    page_ids = json.loads(browser.find_element(By.ID, "live-row").get_attribute("data-ids"))
    prompt_ids = json.loads(browser.find_element(By.ID, "live-prompt-ids").get_attribute("data-ids"))
    trace = browser.find_elements(By.CSS_SELECTOR, "#live-trace-body tr")
    bars = browser.find_elements(By.CSS_SELECTOR, "#live-bars tr")
    shape = browser.find_element(By.ID, "live-shape").text
    # the attention view: hidden until its box is ticked (with the keyboard), then one shaded token per position
    attention = browser.find_element(By.ID, "live-attention")
    assert not attention.is_displayed()
    browser.find_element(By.ID, "live-attention-toggle").send_keys(Keys.SPACE)
    attended = browser.find_elements(By.CSS_SELECTOR, "#live-attention-tokens .live-attended")
    assert attention.is_displayed() and len(attended) == len(page_ids) - 1  # the last step's window
    # the cache comparison: hidden until its box is ticked; then the last step's work and the run's
    comparison = browser.find_element(By.ID, "live-cache")
    assert not comparison.is_displayed()
    browser.find_element(By.ID, "live-cache-toggle").send_keys(Keys.SPACE)
    work_rows = [[c.text for c in r.find_elements(By.CSS_SELECTOR, "th, td")]
                 for r in browser.find_elements(By.CSS_SELECTOR, "#live-cache-body tr")]
    cache_run = json.loads(comparison.get_attribute("data-run"))
    _screenshot(browser, SCREENSHOTS / "live_loop__attention.png")
    _screenshot(browser, SCREENSHOTS / "live_loop__after_run.png")
    # what the run drew (bars, trace, the shaded tokens) passes the audit too, in both colour modes
    audit = [f"light mode: {v}" for v in _axe_violations(browser)]
    try:
        for _ in range(3):  # the theme's button cycles through its three modes: press it until dark
            if browser.execute_script("return document.documentElement.dataset.theme") == "dark":
                break
            _visible(browser, ".theme-switch-button").click()
        audit += [f"dark mode: {v}" for v in _axe_violations(browser)]
    finally:
        _set_mode(browser, "light")
    assert not audit, "\n".join(audit)

    assert prompt_ids == _encode(prompt), status
    want = _python_generate(prompt_ids, steps)
    assert page_ids == want, status
    assert len(trace) == len(want) - len(prompt_ids) and len(bars) == 10
    assert f"[1, {len(want) - 1}, 50257]" in shape  # the last step's forward pass saw all but the new id
    assert comparison.is_displayed() and work_rows[0] == ["positions run through the model", str(len(want) - 1), "1"]
    info = json.loads((site / "_static" / "live" / "model.json").read_text())
    macs = lambda q, k: q * (info["block_macs_per_position"] + info["head_macs_per_position"]) \
        + q * k * info["attention_macs_per_pair"]  # noqa: E731
    before = range(len(prompt_ids), len(want))  # the ids each step ran on (all within the window here)
    assert cache_run == {"none": sum(macs(n, n) for n in before),
                         "cache": macs(len(prompt_ids), len(prompt_ids)) + sum(macs(1, n) for n in before[1:])}
    stopped_by = "<|endoftext|>" if want[-1] == 50256 else f"max_new_tokens ({steps}) reached"
    assert "Stopped:" in status and stopped_by in status, status
    problems = _network_problems(browser.get_log("performance"), base)
    problems += [f"console {e['level']}: {e['message']}" for e in browser.get_log("browser") if e["level"] == "SEVERE"]
    problems += [f"server answered {s}: {p}" for p, s in requests[first:] if s >= 400]
    assert not problems, "\n".join(problems)
    terminal_summary.append(f"test_website live page: {status}")


@pytest.mark.browser
def test_live_page_handle_matches_nexttoken(browser, site, server, terminal_summary):
    """window.nexttokenDemo on a dozen prompts: its greedy ids are nexttoken.generate's (eos 50256), its
    top-10 probabilities are Python's softmax within 1e-4 and its attention row (the last layer's, per head)
    is the model's within 1e-4; every request stays on the site."""
    base, requests = server
    browser.get_log("browser"), browser.get_log("performance")
    first = len(requests)
    # no cache: count every byte, as on a first visit
    browser.execute_cdp_cmd("Network.setCacheDisabled", {"cacheDisabled": True})
    try:
        browser.get(urllib.parse.urljoin(base, f"{LIVE_PAGE}.html"))
        browser.execute_async_script(WAIT_FOR_PAGE)
        _check_handle(browser, site, base, requests, first, terminal_summary)
    finally:
        browser.execute_cdp_cmd("Network.setCacheDisabled", {"cacheDisabled": False})


def _check_handle(browser, site, base, requests, first, terminal_summary):
    import time

    import torch

    call = "const done = arguments[arguments.length - 1]; {} .then(done, e => done({{error: String(e)}}));"
    started = time.perf_counter()
    assert browser.execute_async_script(call.format("nexttokenDemo.load().then(() => 'ok')")) == "ok"
    load_s = time.perf_counter() - started
    model = _pretrained()
    mismatches, steps, step_s = [], 0, 0.0
    for prompt in LIVE_PROMPTS:
        ids = _encode(prompt)
        assert browser.execute_async_script(call.format("nexttokenDemo.encode(arguments[0])"), prompt) == ids
        t0 = time.perf_counter()
        got = browser.execute_async_script(call.format("nexttokenDemo.generate(arguments[0], arguments[1])"),
                                           prompt, LIVE_STEPS)
        step_s += time.perf_counter() - t0
        want = _python_generate(ids, LIVE_STEPS)
        steps += len(want) - len(ids)
        if got != want:
            mismatches.append(f"{prompt!r}: page {got[len(ids):]}, python {want[len(ids):]}")
        top = browser.execute_async_script(call.format("nexttokenDemo.topk(arguments[0], 10)"), prompt)
        with torch.no_grad():
            probs = torch.softmax(model(torch.tensor([ids[-128:]]))[0, -1], -1)
        p, i = probs.topk(10)
        assert [t["id"] for t in top] == i.tolist(), prompt
        assert max(abs(t["prob"] - q) for t, q in zip(top, p.tolist())) < 1e-4, prompt
        heads = browser.execute_async_script(call.format("nexttokenDemo.attention(arguments[0])"), prompt)
        with torch.no_grad():
            _, attention = model(torch.tensor([ids[-128:]]), return_attention=True)
        want_heads = attention[-1][0, :, -1, :]  # the last layer, the last query: (heads, T)
        assert torch.tensor(heads).shape == want_heads.shape, prompt
        assert (torch.tensor(heads) - want_heads).abs().max() < 1e-4, prompt
    assert not mismatches, "\n".join(mismatches)
    _check_work_counts(browser, call, model)
    network = browser.get_log("performance")
    problems = _network_problems(network, base)
    problems += [f"server answered {s}: {p}" for p, s in requests[first:] if s >= 400]
    assert not problems, "\n".join(problems)
    downloaded = _bytes_received(network, base)
    files = sum(p.stat().st_size for p in (site / "_static" / "live").iterdir())
    assert downloaded > files, (downloaded, files)  # every file of _static/live came over the network
    terminal_summary.append(f"test_website live page: {downloaded / 1e6:.1f} MB received, no cache (the page "
                            f"and its theme too); loaded in {load_s:.1f} s; {steps} greedy steps in {step_s:.1f} s "
                            f"({1000 * step_s / max(steps, 1):.0f} ms a step, whole-window recompute)")


def _check_work_counts(browser, call, model):
    """The page's cache comparison (nexttokenDemo.work) against what nexttoken.generate really runs: with
    use_cache=True, every forward pass's new positions q and attended positions k, recorded, priced with
    export_onnx.work_counts (held to torch's FLOP counter in test_live_export.py); without, the window."""
    import torch

    import nexttoken
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        from export_onnx import work_counts
    finally:
        sys.path.pop(0)
    w = work_counts(model)
    macs = lambda q, k: q * (w["block_macs_per_position"] + w["head_macs_per_position"]) \
        + q * k * w["attention_macs_per_pair"]  # noqa: E731
    runs, seen = [], set()  # (q, k) of each forward pass; which kinds of step the prompts gave
    real = model.forward_unchecked

    def recorded(input_ids, mask=None, *args, cache=None, **kwargs):
        before = len(cache) if cache is not None else 0  # positions already in the cache
        runs.append((input_ids.shape[1], before + input_ids.shape[1]))
        return real(input_ids, mask, *args, cache=cache, **kwargs)

    model.forward_unchecked = recorded
    try:
        for prompt in ("ROMEO:\n", "the " * 125):  # the second one outgrows the window
            runs.clear()
            ids = _encode(prompt)
            out = nexttoken.generate(model, torch.tensor([ids]), 8, use_cache=True)[0].tolist()
            for step, n in enumerate(range(len(ids), len(out))):
                page = browser.execute_async_script(call.format("nexttokenDemo.work(arguments[0], arguments[1])"),
                                                    n, step == 0)
                q, k = runs[step]
                T = min(n, model.config.context_length)
                seen.add("prompt" if step == 0 else "past the window" if n > T else "one new position")
                assert page["cache"]["q"] == q and page["cache"]["k"] == k, (prompt, n, page, runs[step])
                assert page["cache"]["macs"] == macs(q, k) and page["none"]["macs"] == macs(T, T), (prompt, n, page)
    finally:
        del model.forward_unchecked  # the class's method again
    assert seen == {"prompt", "one new position", "past the window"}, seen


def _bytes_received(performance_log: list, base: str) -> int:
    """The bytes a page of the site received over the network (Chromium's encodedDataLength)."""
    ours, total = set(), 0
    for entry in performance_log:
        message = json.loads(entry["message"])["message"]
        method, params = message.get("method"), message.get("params", {})
        if method == "Network.requestWillBeSent" and params.get("documentURL", "").startswith(base):
            ours.add(params["requestId"])
        elif method == "Network.loadingFinished" and params.get("requestId") in ours:
            total += int(params.get("encodedDataLength", 0))
    return total


@pytest.mark.browser
def test_measure_live_page_reads_the_page(browser, site, server):
    """scripts/measure_live_page.py's in-page measures, on the test's site: a run of three greedy steps,
    its times positive and in order (the load within the time to the first token), and the files fetched
    after the press exactly the live page's heavy ones (live.js comes with the page), every byte of them."""

    script = load_script("scripts/measure_live_page.py")
    base, _ = server
    prompt = "To be, or not"
    want = _python_generate(_encode(prompt), 3)
    browser.execute_cdp_cmd("Network.setCacheDisabled", {"cacheDisabled": True})
    try:
        r = script.measure(browser, urllib.parse.urljoin(base, script.PAGE), 3, prompt)
    finally:
        browser.execute_cdp_cmd("Network.setCacheDisabled", {"cacheDisabled": False})
    assert r["steps"] == len(want) - len(_encode(prompt)) == 3, r
    assert 0 < r["load_ms"] < r["first_token_ms"] and r["step_ms"] > 0, r
    assert r["context"] == (len(_encode(prompt)), len(_encode(prompt)) + 2), r
    pressed = [p for p in (site / "_static" / "live").iterdir() if p.name != "live.js"]  # live.js: with the page
    assert sorted(name for name, _ in r["files"]) == sorted(p.name for p in pressed), r["files"]
    assert r["after"] >= sum(p.stat().st_size for p in pressed) and r["before"] > 0, r


PHONE = (375, 740)  # a small phone's screen, in CSS pixels

FITS = """
const W = window.innerWidth;
const shown = e => { const r = e.getBoundingClientRect(); return r.width > 0 && r.height > 0
    && getComputedStyle(e).visibility !== 'hidden'; };
const sticking = e => { const r = e.getBoundingClientRect(); return r.left < -0.5 || r.right > W + 0.5; };
const name = e => e.tagName.toLowerCase() + (e.id ? '#' + e.id : '') + (e.className ? '.' + e.className : '');
const controls = Array.from(document.querySelectorAll(
    '#live-loop textarea, #live-loop input, #live-loop button, #live-loop label, #live-loop output'))
    .filter(e => !e.closest('[hidden]'));  // the step's view is hidden until the first step
return {
  width: W, scale: window.visualViewport.scale, scroll_width: document.scrollingElement.scrollWidth,
  wider: Array.from(document.querySelectorAll('#live-loop *')).filter(shown).filter(sticking).map(name),
  hidden_controls: controls.filter(e => !shown(e)).map(name),
  off_screen_controls: controls.filter(shown).filter(sticking).map(name),
  controls: controls.length,
  rows: document.querySelectorAll('#live-trace-body tr').length,
};
"""


@pytest.mark.browser
def test_live_page_fits_a_phone(browser, site, server):
    """At a phone's width (375 x 740 as a phone shows it: the viewport meta honoured), after a run with the
    attention view and the cache comparison open: the page does not scroll sideways, the browser did not zoom out
    to fit it, nothing of the live page sticks out of the screen, and every control is shown, whole, on screen.
    Screenshots of the page after the run at that width and at WINDOW's are saved."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    base, _ = server
    field = lambda name: browser.find_element(By.ID, name)  # noqa: E731
    browser.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", {
        "width": PHONE[0], "height": PHONE[1], "deviceScaleFactor": 2, "mobile": True})
    try:
        browser.get(urllib.parse.urljoin(base, f"{LIVE_PAGE}.html"))
        browser.execute_async_script(WAIT_FOR_PAGE)
        before = browser.execute_script(FITS)
        # a prompt whose tokens run long ("<|endoftext|>" in the trace), a few steps, the attention view open
        browser.execute_script("arguments[0].value = arguments[1]", field("live-prompt"),
                               "JULIET:\nO Romeo, Romeo! wherefore art thou")
        field("live-max").clear()
        field("live-max").send_keys("6")
        field("live-run").click()
        WebDriverWait(browser, 120).until(lambda d: field("live-loop").get_attribute("data-state") == "done"
                                          or field("live-status").text.startswith(("Error", "Loading failed")))
        field("live-attention-toggle").click()
        field("live-cache-toggle").click()
        after = browser.execute_script(FITS)
        _screenshot(browser, SCREENSHOTS / "live_loop__phone.png", PHONE, mobile=True, scale=2)
    finally:
        browser.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})
    _screenshot(browser, SCREENSHOTS / "live_loop__desktop.png")
    assert after["rows"] > 0, field("live-status").text
    for when, info in (("as opened", before), ("after a run", after)):
        assert info["width"] == PHONE[0] and info["scale"] == 1, (when, info)  # not zoomed out to fit
        assert info["scroll_width"] <= info["width"], (when, info)
        assert not info["wider"], (when, info)
        assert info["controls"] >= 15 and not info["hidden_controls"] and not info["off_screen_controls"], (when, info)


PHONE_WIDTH = 390  # the phone, in CSS pixels

ON_A_PHONE = """
const W = window.innerWidth;
const out = e => e.getBoundingClientRect().right > W + 0.5 || e.getBoundingClientRect().left < -0.5;
// the nearest box around e that scrolls sideways and has more to show than it shows, or null
const scroller = e => { for (let p = e; p && p !== document.body; p = p.parentElement)
    if (['auto', 'scroll'].includes(getComputedStyle(p).overflowX) && p.scrollWidth > p.clientWidth + 1) return p;
    return null; };
// its hint that it scrolls: a shadow drawn in its background, or a line under it naming the scroll
const hint = box => ({shadow: getComputedStyle(box).backgroundImage.includes('gradient'),
                      line: getComputedStyle(box, '::after').content});
const cut = (e, name) => {
  const box = scroller(e);
  return box ? {name, out: out(box), ...hint(box)} : {name, out: out(e)};
};
const maths = Array.from(document.querySelectorAll('article mjx-container'));
const images = Array.from(document.querySelectorAll('article img'));
const svgs = images.filter(i => i.src.endsWith('.svg'))
    .map(i => ({src: i.src.split('/').pop(), width: i.getBoundingClientRect().width}));
const plots = images.filter(i => !i.src.endsWith('.svg'))
    .map(i => ({src: i.src.split('/').pop(), width: i.getBoundingClientRect().width, natural: i.naturalWidth}));
const label = e => e.textContent.replace(/\\s+/g, ' ').trim().slice(0, 40);
return {width: W, scroll_width: document.scrollingElement.scrollWidth, maths: maths.length,
        maths_out: maths.filter(out).map(label), svgs, plots,
        tables: document.querySelectorAll('article table').length,
        boxes: [...maths.filter(m => m.getAttribute('display') === 'true').map(m => cut(m.firstElementChild, label(m))),
                ...Array.from(document.querySelectorAll('article table')).map(t => cut(t, label(t))),
                ...images.map(i => cut(i, i.src.split('/').pop()))].filter(b => b.out || 'shadow' in b)};
"""


def _smallest_svg_text(name: str) -> float:
    """The smallest font size in an SVG of _static, in view-box units per view-box width (as a fraction)."""
    svg = (ROOT / "_static" / name).read_text()
    width = float(re.search(r'viewBox="[\d.]+ [\d.]+ ([\d.]+) ', svg).group(1))
    return min(float(s) for s in re.findall(r"font-size: ?([\d.]+)px", svg)) / width


@pytest.mark.browser
def test_phone_maths_stays_in_the_column_and_figure_text_is_readable(browser, site, server):
    """At 390 CSS px, as a phone shows the pages: no formula of any chapter, the intro or the notation page
    reaches past the screen's edge (a wide one scrolls in its own box), the page does not scroll sideways,
    and the smallest text of every SVG figure is drawn at least 10 px tall. No display formula, table or
    figure is cut by the screen's edge: one wider than the column scrolls in its own box, which lies on the
    screen and shows that it scrolls (a formula or table by a shadow at its edge, a figure by a line under
    it saying so). A plot of a cell's output is drawn at 3/4 of its own size or more (matplotlib's 10 pt
    text, 14 px at 100 dpi, at least 10 px), and the wide ones (chapter 5's two panels) scroll."""
    base, _ = server
    pages = [p for p in PAGES if p.startswith("chapters/")] + ["intro", "notation"]
    seen = {}
    browser.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", {
        "width": PHONE_WIDTH, "height": 844, "deviceScaleFactor": 2, "mobile": True})
    try:
        for page in pages:
            browser.get(urllib.parse.urljoin(base, f"{page}.html"))
            browser.execute_async_script(WAIT_FOR_PAGE)
            seen[page] = browser.execute_script(ON_A_PHONE)
    finally:
        browser.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})
    assert sum(info["maths"] for info in seen.values()) > 50  # the pages' maths was typeset
    figures = 0
    for page, info in seen.items():
        assert info["width"] == PHONE_WIDTH and info["scroll_width"] <= PHONE_WIDTH, (page, info)
        assert not info["maths_out"], f"{page}: formulas past the screen's edge: {info['maths_out']}"
        for svg in info["svgs"]:
            figures += 1
            smallest = svg["width"] * _smallest_svg_text(svg["src"])
            assert smallest >= 10, f"{page}: {svg['src']}'s smallest text is {smallest:.1f} px tall"
    assert figures >= 2  # the loop figure, in the intro and in chapter 5
    boxes = [(page, box) for page, info in seen.items() for box in info["boxes"]]
    assert not [b for b in boxes if b[1]["out"]], "past the screen's edge, not in a scrolling box"
    assert {page for page, box in boxes} >= {"chapters/01_chain_rule", "chapters/05_generation_loop"}
    assert any("opened in" in box["name"] for page, box in boxes)  # chapter 1's table of the loop's lines
    for page, box in boxes:
        figure = box["name"].endswith((".svg", ".png", ".jpg", ".jpeg"))
        if figure:
            assert "scrolls sideways" in box["line"], f"{page}: {box['name']} scrolls with no line saying so"
        else:
            assert box["shadow"], f"{page}: {box['name']!r} scrolls with no shadow at its edge"
    assert sum(info["tables"] for info in seen.values()) >= 5
    plots = [(page, plot) for page, info in seen.items() for plot in info["plots"]]
    assert len(plots) >= 5 and any(plot["natural"] > PHONE_WIDTH for page, plot in plots)
    for page, plot in plots:
        assert plot["width"] >= 0.75 * plot["natural"] - 0.5, f"{page}: {plot['src']} shrunk: {plot}"


@pytest.mark.browser
def test_the_grading_class_report_opens_offline_with_its_plots(browser, tmp_path):
    """The batch grader's class report (issue 66; built from rows here, from a graded batch in
    tests/grading/test_grade_class.py), opened from a file: its histogram and each task's pass-rate bar are
    drawn, and it asks for nothing (no request) and logs no error."""
    from nexttoken.grading import report, rows as graded

    rows = [graded.task_row(f"s{i}.ipynb", f"ch05.q{q}", int(i >= q), 1, "passed" if i >= q else "failed",
                          "all 8 tests passed" if i >= q else "the output has the wrong shape")
            for i in range(4) for q in (1, 2, 3)]
    path = tmp_path / "g-report.html"
    path.write_text(report.page("g.csv", rows, 3, [], tmp_path / "g-explanations.csv"), encoding="utf-8")
    browser.get_log("browser")  # drop what earlier pages left
    browser.get(path.as_uri())
    drawn = browser.execute_script("return Array.from(document.querySelectorAll('svg rect.bar')).map(r => "
                                   "r.getBoundingClientRect().width * r.getBoundingClientRect().height)")
    assert len(drawn) == 4 + 3 and all(a > 0 for a in drawn)  # a bar for 0 to 3 points, a pass rate per task
    assert browser.execute_script("return performance.getEntriesByType('resource').length") == 0
    assert [e for e in browser.get_log("browser") if e["level"] == "SEVERE"] == []


@pytest.mark.browser
def test_the_class_reports_reteach_list_shows_wrong_apart_from_unattempted_and_the_copies(browser, tmp_path):
    """The report opened in a browser: its reteach list holds the mistakes of those who attempted a task
    (not the stubs left unwritten, which are under "Not attempted"), and the identical notebooks are named."""
    from nexttoken.exercises import chapter
    from nexttoken.grading import report, rows as graded

    core = f"ch05.{chapter('ch05').CORE[0]}"
    wrong, stub = "your loop appended the token before it scored it", "still raises NotImplementedError"
    rows = [graded.task_row(f"s{i}.ipynb", core, 0, 1, *(("failed", wrong) if i < 2 else ("not_implemented", stub)))
            for i in range(4)]
    explained = [dict(submission=f"s{i}.ipynb", chapter="ch05", status="no_answer", answer="",
                      notebook_sha256="same" if i in (0, 3) else str(i)) for i in range(4)]
    path = tmp_path / "g-report.html"
    path.write_text(report.page("Chapter 5 (42)", rows, 1, explained, tmp_path / "g-explanations.csv"),
                    encoding="utf-8")
    browser.get(path.as_uri())
    text = browser.execute_script
    reteach = text("return document.getElementById('reteach').innerText")
    assert f"2 of 2 submissions who attempted {core} (core): {wrong}" in reteach and "NotImplemented" not in reteach
    not_attempted = text("return document.getElementById('not-attempted').nextElementSibling.innerText")
    assert f"{core} (core): 2 of 4" in not_attempted
    assert text("return document.getElementById('same-bytes').innerText").strip() == "s0.ipynb, s3.ipynb"
    assert text("return document.querySelector('h1').innerText") == "Class report: Chapter 5 (42)"
