"""What every browser test needs: `trainrig serve` in its own process, the system's Chromium through Playwright,
a folder for screenshots, and small helpers to open a page and read the CLI's answer.

Playwright's own browser download does not work on machines without internet, so this drives the system's
Chromium (`apt-get install chromium`; or set TRAINRIG_CHROMIUM). Screenshots land in artifacts/web/ (or
$TRAINRIG_TEST_ARTIFACTS). The fixtures are re-exported by conftest.py, so any browser test module can use them.
"""

from __future__ import annotations

import http.client
import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

REPO = Path(__file__).parents[2]
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
LAPTOP = {"width": 1366, "height": 900}
PHONE = {"width": 390, "height": 844}


def chromium_path() -> str | None:
    candidates = [os.environ.get("TRAINRIG_CHROMIUM"), shutil.which("chromium"), shutil.which("chromium-browser"),
                  "/usr/bin/chromium"]
    return next((c for c in candidates if c and Path(c).is_file()), None)


needs_chromium = pytest.mark.skipif(chromium_path() is None, reason="no Chromium: apt-get install chromium")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def get(url: str, timeout_s: float = 5.0) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as answer:
            return answer.status, answer.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


def post_json(url: str, body: bytes, headers: dict[str, str] | None = None) -> tuple[int, dict]:
    request = urllib.request.Request(url, data=body, method="POST",
                                     headers={"content-type": "application/json", **(headers or {})})
    try:
        with urllib.request.urlopen(request, timeout=60) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def declare_huge_body(url: str) -> tuple[int, dict]:
    """Announce a 2 MB body and read the answer before sending it: the cap acts on the declared size."""
    connection = http.client.HTTPConnection(url.removeprefix("http://"), timeout=30)
    try:
        connection.putrequest("POST", "/api/estimate")
        connection.putheader("content-type", "application/json")
        connection.putheader("content-length", str(2_000_000))
        connection.endheaders()
        answer = connection.getresponse()
        return answer.status, json.loads(answer.read())
    finally:
        connection.close()


@pytest.fixture(scope="module")
def server():
    """`python -m trainrig serve` on a free port; its URL once it answers."""
    port = free_port()
    process = subprocess.Popen([sys.executable, "-m", "trainrig", "serve", "--port", str(port)],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    url = f"http://127.0.0.1:{port}"
    deadline_s = time.monotonic() + 60
    while time.monotonic() < deadline_s:
        try:
            if get(f"{url}/api/gpus", 2)[0] == 200:
                break
        except OSError:
            time.sleep(0.2)
    else:
        process.kill()
        pytest.fail(f"trainrig serve did not answer: {process.communicate()[0]}")
    yield url
    process.terminate()
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


@pytest.fixture(scope="module")
def artifacts() -> Path:
    folder = Path(os.environ.get("TRAINRIG_TEST_ARTIFACTS", REPO / "artifacts" / "web"))
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def cli(*args: str) -> dict:
    """The real command line's --json, as a user would run it."""
    result = subprocess.run([sys.executable, "-m", "trainrig", *args, "--json"], capture_output=True, text=True,
                            timeout=120)
    assert result.returncode in (0, 1), result.stderr
    return json.loads(result.stdout)


def open_page(browser, url: str, viewport: dict):
    page = browser.new_page(viewport=viewport, accept_downloads=True)
    problems: list[str] = []
    page.on("pageerror", lambda error: problems.append(str(error)))
    page.on("console", lambda message: problems.append(message.text) if message.type == "error" else None)
    page.goto(url)
    page.wait_for_selector("body[data-ready='1']", timeout=30_000)
    return page, problems


def fits_the_screen(page) -> bool:
    return page.evaluate("document.documentElement.scrollWidth <= window.innerWidth + 1")
