"""The web page in headless Chromium (Debian's /usr/bin/chromium driven by Playwright).

A real `vsparta serve` process over a real embedded index: type a query, see result cards with
their matched words, click "More like this"; the message shown when the backend is down; and
the API docs (Swagger UI, ReDoc) rendering the OpenAPI 3.1 document and running a search.
Set VSPARTA_TEST_SCREENSHOT=/path.png to keep a screenshot of the results page.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from service_testdata import Corpus, running_server, serve_args

CHROMIUM = "/usr/bin/chromium"
LAUNCH_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def browser(need_service: Callable[[bool, str, str], None]) -> Iterator[Any]:
    need_service(
        Path(CHROMIUM).exists(), f"Chromium at {CHROMIUM}", "run `bash scripts/install-system-deps.sh`"
    )
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=LAUNCH_ARGS)
        yield b
        b.close()


def test_search_page_shows_results_and_more_like_this(
    browser: Any, corpus: Corpus, embedded_spec: str, tmp_path: Path
) -> None:
    with running_server(serve_args(corpus, embedded_spec)) as (url, _proc):
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.goto(url + "/")
        assert page.title() == "VisualSparta image search"
        box = page.get_by_label("Describe the image you are looking for")
        box.fill("red cube")
        page.get_by_role("button", name="Search", exact=True).click()
        cards = page.locator("#results .card")
        cards.first.wait_for(timeout=15_000)
        assert cards.count() == 6  # red-cube, 2 other reds, 3 other cubes
        first = cards.first
        assert first.get_attribute("data-id") == "red-cube"
        chips = first.locator(".terms .term > span:first-child").all_inner_texts()
        assert chips == ["cube", "red"] or chips == ["red", "cube"]
        assert "result" in page.locator("#status").inner_text()
        # thumbnails really loaded (served, decoded by the browser)
        page.wait_for_function(
            "() => [...document.querySelectorAll('#results .thumb')]"
            ".every(i => i.complete && i.naturalWidth > 0)",
            timeout=15_000,
        )
        shot = Path(os.environ.get("VSPARTA_TEST_SCREENSHOT", tmp_path / "service-page.png"))
        page.screenshot(path=str(shot), full_page=True)
        assert shot.stat().st_size > 10_000

        page.get_by_role("button", name="More images like red-cube").click()
        page.locator("#context").wait_for(state="visible", timeout=15_000)
        # what the results are like: the image, its caption and whole words; the old text is gone
        assert page.locator("#context-text").inner_text() == "Images like red-cube: “a large red cube”"
        assert page.locator("#context-words").inner_text() == "Similar in: cube, red, large, object"
        assert page.locator("#context-image").is_visible()
        assert box.input_value() == ""
        page.wait_for_function(
            "() => document.querySelector('#results .card') && "
            "![...document.querySelectorAll('#results .card')].some(c => c.dataset.id === 'red-cube')",
            timeout=15_000,
        )
        similar_ids = page.locator("#results .card").evaluate_all("cs => cs.map(c => c.dataset.id)")
        assert similar_ids and "red-cube" not in similar_ids
        assert "like=red-cube" in page.url
        chips = page.locator("#results .terms .term > span:first-child").all_inner_texts()
        assert chips and all(c.isalpha() for c in chips)  # words, never "##s" or "."
        page.get_by_role("button", name="Back to text search").click()
        page.locator("#results .card[data-id='red-cube']").wait_for(timeout=15_000)
        assert box.input_value() == "red cube" and page.locator("#context").is_hidden()

        # what the index holds of each word, in words (the engine's own counts)
        box.fill("zebra")
        page.get_by_role("button", name="Search", exact=True).click()
        page.get_by_text("No match for “zebra”.").wait_for(timeout=15_000)
        assert page.locator("#results .card").count() == 0
        assert page.locator("#word-notes li").all_inner_texts() == ["No image has zebra."]
        assert page.locator("#word-notes em").all_inner_texts() == ["zebra"]
        box.fill("object")
        page.get_by_role("button", name="Search", exact=True).click()
        page.get_by_text("No match for “object”.").wait_for(timeout=15_000)
        notes = page.locator("#word-notes li").all_inner_texts()
        assert notes == ["object is in 12 of the 19 images and does not rank."]
        box.fill("red zebra")
        page.get_by_role("button", name="Search", exact=True).click()
        page.locator("#results .card[data-id='red-cube']").wait_for(timeout=15_000)
        assert page.locator("#results .card").count() == 3  # the red ones; zebra found nothing
        assert page.locator("#word-notes li").all_inner_texts() == ["No image has zebra."]
        box.fill("bluebird")  # blue ##bird: the blue images hold "blue", none "##bird"
        page.get_by_role("button", name="Search", exact=True).click()
        page.get_by_text("No match for “bluebird”.").wait_for(timeout=15_000)
        notes = page.locator("#word-notes li").all_inner_texts()
        assert notes == ["No image holds every piece of bluebird (blue ##bird)."]

        # the weightings come from the service's registry (GET /search/options), not from the page
        from vsparta.termindex.weightings.registry import WEIGHTINGS

        weights = page.get_by_label("Weights")
        assert weights.locator("option").all_inner_texts() == list(WEIGHTINGS.names())
        assert weights.input_value() == "counts"
        weights.select_option("idf")
        box.fill("red cube")
        page.get_by_role("button", name="Search", exact=True).click()
        page.get_by_text("words weighted by idf").wait_for(timeout=15_000)
        assert errors == []


def test_page_says_backend_unavailable_and_retries(browser: Any, corpus: Corpus, tmp_path: Path) -> None:
    missing = f"embedded:{tmp_path / 'no-index-yet'}"
    with running_server([*serve_args(corpus, missing), "--wait-for-index"]) as (url, _proc):
        page = browser.new_page()
        page.goto(url + "/?q=red+cube")
        status = page.locator("#status")
        page.get_by_text("Search backend unavailable, retrying").wait_for(timeout=15_000)
        assert "error" in (status.get_attribute("class") or "")
        # the index appears: the page's own retry succeeds without a reload
        from vsparta.termindex import open_index

        index = open_index(missing, create=True)
        index.upsert(corpus.docs)
        index.close()
        # opening compiles the engine's kernels on first use (cached on disk after): allow a loaded CI
        page.locator("#results .card").first.wait_for(timeout=90_000)
        assert page.locator("#results .card").first.get_attribute("data-id") == "red-cube"


def test_swagger_ui_renders_and_try_it_out_runs_a_search(
    browser: Any, corpus: Corpus, embedded_spec: str
) -> None:
    with running_server(serve_args(corpus, embedded_spec)) as (url, _proc):
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.goto(url + "/docs")
        op = page.locator(".opblock-post:has(.opblock-summary-path[data-path='/search'])")
        op.wait_for(timeout=20_000)
        assert "Unable to render" not in page.content()
        paths = page.locator(".opblock-summary-path").all_inner_texts()
        assert "/search" in paths and "/images/{doc_id}/similar" in paths
        assert op.locator(".opblock-summary-method").inner_text() == "POST"

        op.locator(".opblock-summary").first.click()
        op.get_by_role("button", name="Try it out").click()
        body = op.locator(".body-param textarea")
        body.fill('{"query": "red cube", "k": 3, "fields": ["metadata.caption"]}')
        op.get_by_role("button", name="Execute").click()
        live = op.locator(".live-responses-table")
        status = live.locator("tbody .response-col_status").first
        status.wait_for(timeout=20_000)
        assert status.inner_text().strip() == "200"
        shown = live.locator("tbody .response-col_description pre").first.inner_text()
        assert '"id": "red-cube"' in shown and '"caption": "a large red cube"' in shown
        assert str(corpus.image_root) not in shown  # ids and URLs, never server paths
        assert errors == []


def test_redoc_renders_the_api(browser: Any, corpus: Corpus, embedded_spec: str) -> None:
    with running_server(serve_args(corpus, embedded_spec)) as (url, _proc):
        page = browser.new_page()
        page.goto(url + "/redoc")
        page.get_by_role("heading", name="Search images by text or weighted tokens").wait_for(timeout=20_000)
        assert "/search" in page.content()
