"""The HTML report in a real browser: Debian's headless Chromium driven by selenium (chromium-driver). A missing
browser fails the test (make system-deps installs it), it never skips."""
from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path


@dataclass
class Page:
    title: str
    console: list[dict]          # every browser console entry (level, message)
    plots: list[tuple[float, float]]   # (width, height) of every <svg> as laid out
    screenshot: Path


def open_report(path: Path, screenshot: Path) -> Page:
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    browser, driver_bin = shutil.which("chromium"), shutil.which("chromedriver")
    if not browser or not driver_bin:
        raise RuntimeError("chromium / chromedriver not found: install Debian's chromium and chromium-driver "
                           "(make system-deps)")
    options = Options()
    options.binary_location = browser
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--window-size=1400,1000"):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(driver_bin), options=options)
    try:
        driver.get(Path(path).resolve().as_uri())
        plots = [(e.rect["width"], e.rect["height"]) for e in driver.find_elements("css selector", "svg")]
        driver.save_screenshot(str(screenshot))
        return Page(driver.title, driver.get_log("browser"), plots, screenshot)
    finally:
        driver.quit()
