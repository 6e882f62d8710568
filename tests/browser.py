"""A real headless Chromium for browser tests: Debian's `chromium` + `chromium-driver`, driven by Selenium.

Nothing is downloaded at run time (Selenium Manager is bypassed by naming the system driver).
Without the packages a browser test is skipped with the install line, unless AURA_REQUIRE_BROWSER=1
(set by .ci/run), where a missing browser fails the test instead.
"""
from __future__ import annotations

import os
import shutil

import pytest

INSTALL = "apt-get install chromium chromium-driver"


def _binaries() -> tuple[str, str] | None:
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver")
    return (browser, driver) if browser and driver else None


def new_driver(width: int = 1280, height: int = 900):
    """A fresh headless Chromium session (its own profile, so closing it is closing the tab and the browser)."""
    found = _binaries()
    if found is None:
        if os.environ.get("AURA_REQUIRE_BROWSER") == "1":
            pytest.fail(f"headless Chromium is required here but missing: {INSTALL}")
        pytest.skip(f"needs Debian's chromium and chromium-driver ({INSTALL})")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    browser, driver = found
    opts = webdriver.ChromeOptions()
    opts.binary_location = browser
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                f"--window-size={width},{height}"):
        opts.add_argument(arg)
    return webdriver.Chrome(service=Service(executable_path=driver), options=opts)


@pytest.fixture
def browser():
    drv = new_driver()
    try:
        yield drv
    finally:
        drv.quit()
