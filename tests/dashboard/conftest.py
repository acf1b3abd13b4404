"""A real ``bolide standalone`` (name server, broker, /metrics, dashboard) for the dashboard
tests, and Debian's Chromium driven by Playwright (never a downloaded browser)."""

from __future__ import annotations

import os
import selectors
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from playwright.async_api import BrowserContext, Page, async_playwright, expect

from bolide.base.children import child_environment

BOLIDE = str(Path(sys.executable).parent / "bolide")
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
PROCESS_GUARD_S = 60.0
"""Guard on the server's start and stop: fails a hung test instead of blocking it."""
PAGE_WAIT_MS = 30_000
"""Guard on each browser assertion and action (Playwright's own defaults: 5 s, 30 s). A page
that renders a broker's answer can take seconds on a loaded 2-core CI machine; an
assertion that holds returns at once, so only a failing test pays the whole guard."""
SCREENSHOT_DIR_VARIABLE = "BOLIDE_DASHBOARD_SCREENSHOTS"
"""When set, the journeys also save their screenshots there (docs/images for the docs)."""


@dataclass(frozen=True)
class Standalone:
    namesrv: str
    broker: str
    metrics: str
    dashboard: str

    @property
    def url(self) -> str:
        return f"http://{self.dashboard}"


def _read_ready_line(process: subprocess.Popen[bytes]) -> str:
    assert process.stdout is not None
    with selectors.DefaultSelector() as selector:
        selector.register(process.stdout, selectors.EVENT_READ)
        if not selector.select(PROCESS_GUARD_S):
            raise TimeoutError("bolide standalone printed no ready line")
    return process.stdout.readline().decode().strip()


@pytest.fixture(scope="module")
def standalone(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Standalone]:
    """``bolide standalone`` on free ports, stopped (SIGTERM) after the module's tests."""
    data = tmp_path_factory.mktemp("dashboard-standalone")
    process = subprocess.Popen(
        [BOLIDE, "standalone", "--namesrv-port", "0", "--broker-port", "0",
         "--no-proxy", "--metrics-port", "0", "--dashboard-port", "0",
         "--data-dir", str(data / "data")],
        cwd=data,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=child_environment(),  # a killed pytest leaves no server behind (issue 30)
    )  # fmt: skip
    try:
        ready = _read_ready_line(process)
        fields = dict(part.split("=", 1) for part in ready.split()[2:])
        yield Standalone(
            fields["namesrv"], fields["broker"], fields["metrics"], fields["dashboard"]
        )
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(PROCESS_GUARD_S)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        if process.stdout is not None:
            process.stdout.close()


def _require_chromium() -> None:
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: `make test` installs Debian's chromium")


@pytest.fixture
async def browser(tmp_path: Path) -> AsyncIterator[BrowserContext]:
    """Headless Chromium with a fresh profile in the test's directory."""
    _require_chromium()
    async with async_playwright() as playwright:
        context = await playwright.chromium.launch_persistent_context(
            str(tmp_path / "chromium-profile"),
            executable_path=CHROMIUM,
            headless=True,
            args=CHROMIUM_ARGS,
            viewport={"width": 1280, "height": 860},
        )
        context.set_default_timeout(PAGE_WAIT_MS)
        expect.set_options(timeout=PAGE_WAIT_MS)
        try:
            yield context
        finally:
            await context.close()


@pytest.fixture
async def page(browser: BrowserContext) -> Page:
    return await browser.new_page()


class Screenshots:
    """Saves full-page screenshots in the test's directory (and in $BOLIDE_DASHBOARD_SCREENSHOTS
    when set); returns the paths so a test can check they were written."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.extra = os.environ.get(SCREENSHOT_DIR_VARIABLE)

    async def take(self, page: Page, name: str) -> Path:
        path = self.directory / f"dashboard-{name}.png"
        image = await page.screenshot(path=str(path), full_page=True)
        if self.extra:
            _copy(image, Path(self.extra) / path.name)
        return path


def _copy(image: bytes, target: Path) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(image)


@pytest.fixture
def screenshots(tmp_path: Path) -> Screenshots:
    return Screenshots(tmp_path)
