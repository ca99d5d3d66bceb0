"""A real headless Chromium for the viewer's tests, driven by Selenium through Debian's chromedriver.

Debian's ``chromium-driver`` is built from the same source as its ``chromium``, so
the two always match and nothing is downloaded. Without them the tests skip and
say how to install them; CI (``.ci/run``) installs them first.

The browser reaches loopback only: every other address goes to a proxy that does
not exist, so a page that needed the network (a CDN, a font) would fail here.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from typing import Any

import pytest
from viewer.viewer_helpers import REBOUND

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
INSTALL_HINT = (
    "the viewer's browser tests need Debian's chromium and chromium-driver: "
    "apt-get install -y chromium chromium-driver (as root), and selenium: pip install -e '.[test]'"
)


@pytest.fixture(scope="session")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """One headless Chromium for the session (each test's service has its own origin, so nothing carries over)."""
    if not (os.path.exists(CHROMIUM) and os.path.exists(CHROMEDRIVER)):
        pytest.skip(f"no browser: {INSTALL_HINT}")
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        pytest.skip(f"selenium is not installed: {INSTALL_HINT}")
    profile = tmp_path_factory.mktemp("chromium-profile")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in (
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={profile}",
        "--window-size=1400,900",
        # Loopback bypasses a proxy by default; everything else goes nowhere.
        "--proxy-server=http://127.0.0.1:9",
        # A name of the attacker's that resolves to loopback, as after DNS rebinding (test_viewer_pages.py).
        f"--host-resolver-rules=MAP {REBOUND} 127.0.0.1",
        f"--proxy-bypass-list={REBOUND}",
    ):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(20)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    """The browser with a blank tab; after the test, no script error may be in its console.

    Refused requests (401, 403, 429) are logged by the browser too, as failed loads:
    those are what some tests ask for, so they are the one kind let through.
    """
    browser.get("about:blank")
    browser.get_log("browser")
    yield browser
    errors = [
        entry["message"]
        for entry in browser.get_log("browser")
        if entry["level"] == "SEVERE" and "Failed to load resource" not in entry["message"]
    ]
    assert errors == [], errors
