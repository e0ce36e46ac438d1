"""Fixtures of the frontend tests (tests/comfy/test_editor_*.py, test_workflows_browser.py): one headless Chromium per
module, and a fresh page per test whose last view is kept as `<tmp_path>/page_at_end.png` (pytest keeps the last
runs' tmp_path folders: the screenshots are the tests' artifacts, next to the ones a test saves itself)."""
from __future__ import annotations

import pytest

from tests.comfy import frontend


@pytest.fixture(scope="module")
def browser(comfy):
    with frontend.chromium(comfy) as b:
        yield b


@pytest.fixture
def editor(browser, comfy, tmp_path):
    """(page, log, startup): the editor opened on the test server, its console log, and the problems logged while
    it started (then cleared from the log)."""
    context, page, log = frontend.open_page(browser, comfy.url)
    startup = log.problems()
    log.clear()
    try:
        yield page, log, startup
    finally:
        try:
            page.screenshot(path=str(tmp_path / "page_at_end.png"))
        finally:
            context.close()


@pytest.fixture
def page(editor):
    return editor[0]
