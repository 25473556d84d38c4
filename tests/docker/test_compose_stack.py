"""docker-compose.yml for real: built, started from nothing, searched, broken and torn down.

A real Docker Engine (``bash scripts/docker.sh start``) and the local base images
(``scripts/docker.sh base-images``: this machine reaches no registry) substituted through the
variables the compose file and the Dockerfile take, and nothing else. The stack starts from
empty volumes: the first-run service generates a (small) demo, trains its model on CPU and
indexes it into the stack's Elasticsearch; then the API must answer with what a brute-force
oracle over the indexed documents ranks first, render /docs in Chromium, and report a wrong model
or images folder on /ready instead of restarting. `down -v` must leave nothing behind.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run"]


def published_port(variable: str) -> int:
    """The variable's port, else one the kernel says is free now: two runs of this module at once
    (two engineers, or CI beside one) get different ports, as they get different project names."""
    if os.environ.get(variable):
        return int(os.environ[variable])
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


API_PORT = published_port("VSPARTA_TEST_API_PORT")
ES_PORT = published_port("VSPARTA_TEST_COMPOSE_ES_PORT")
OS_API_PORT = published_port("VSPARTA_TEST_OS_API_PORT")
OS_PORT = published_port("VSPARTA_TEST_COMPOSE_OS_PORT")
# Every profile whose services a test starts: `down` removes only the containers of active ones.
PROFILES = ["--profile", "index", "--profile", "opensearch"]
# Objects the demo's scenes show (the whole catalog since issue 30; the four subgroups it had before).
QUERIES = ["a banana next to a cupcake", "a red apple", "a sunflower above a bird"]
TRAIN_SCENES = int(os.environ.get("VSPARTA_TEST_DEMO_TRAIN_IMAGES", "400"))
TEST_SCENES = 60

pytestmark = [pytest.mark.compose, pytest.mark.slow]


def compose_command() -> list[str]:
    """Debian's docker-compose 1.29, or the Compose v2 plugin where that is what is installed."""
    if shutil.which("docker-compose"):
        return ["docker-compose"]
    return ["docker", "compose"]


def docker_answers() -> bool:
    if not shutil.which("docker"):
        return False
    probe = subprocess.run(["docker", "version", "--format", "{{.Server.Version}}"], capture_output=True)
    return probe.returncode == 0


def http(
    url: str, body: dict[str, Any] | None = None, timeout: float = 10
) -> tuple[int, dict[str, str], Any]:
    """(status, headers, parsed JSON body) of one request; HTTP errors are answers too."""
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return resp.status, dict(resp.headers), json.loads(resp.read() or b"null")
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers), json.loads(exc.read() or b"null")


@dataclass
class Stack:
    project: str
    env: dict[str, str]
    api_url: str
    es_url: str
    os_api_url: str = f"http://127.0.0.1:{OS_API_PORT}"
    os_url: str = f"http://127.0.0.1:{OS_PORT}"

    def compose(self, *args: str, env: dict[str, str] | None = None, timeout: float = 600) -> str:
        cmd = [*compose_command(), "-p", self.project, *args]
        proc = subprocess.run(
            cmd, cwd=REPO, env={**self.env, **(env or {})}, capture_output=True, text=True, timeout=timeout
        )
        assert proc.returncode == 0, (
            f"{' '.join(cmd)} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}"
        )
        return proc.stdout + proc.stderr

    def container(self, service: str) -> str:
        cid = self.compose("ps", "-a", "-q", service).strip().splitlines()
        assert cid, f"no container for {service}"
        return cid[-1]

    def logs(self, service: str) -> str:
        return self.compose("logs", "--no-color", service)

    def leftovers(self) -> dict[str, list[str]]:
        """Containers, networks and volumes Docker still holds for this project."""
        label = f"label=com.docker.compose.project={self.project}"
        found = {}
        for kind in ("container", "network", "volume"):
            args = ["docker", kind, "ls", "-q", "--filter", label]
            if kind == "container":
                args.insert(3, "-a")
            found[kind] = subprocess.run(args, capture_output=True, text=True, check=True).stdout.split()
        return found


def stack_env() -> dict[str, str]:
    """The local base images (scripts/docker.sh env), this project's ports and a small demo."""
    out = subprocess.run(
        ["bash", "scripts/docker.sh", "env"], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout
    env = dict(os.environ)
    for line in out.splitlines():
        key, _, value = line.removeprefix("export ").partition("=")
        env[key] = value
    env.update(
        API_PORT=str(API_PORT),
        ES_PORT=str(ES_PORT),
        API_OPENSEARCH_PORT=str(OS_API_PORT),
        OPENSEARCH_PORT=str(OS_PORT),
        ES_JAVA_OPTS="-Xms512m -Xmx512m",
        OPENSEARCH_JAVA_OPTS="-Xms512m -Xmx512m",
        VSPARTA_DEMO_TRAIN_IMAGES=str(TRAIN_SCENES),
        VSPARTA_DEMO_TEST_IMAGES=str(TEST_SCENES),
        VSPARTA_DEMO_EPOCHS=os.environ.get("VSPARTA_TEST_DEMO_EPOCHS", "2"),
    )
    for var in ("VSPARTA_IMAGES", "VSPARTA_MODEL", "VSPARTA_INDEX", "VSPARTA_OUT"):
        env.pop(var, None)  # from nothing: the demo volumes
    return env


def wait_ready(stack: Stack, timeout_s: float = 300, service: str = "api") -> None:
    url = stack.os_api_url if service == "api-opensearch" else stack.api_url
    deadline = time.monotonic() + timeout_s
    last: Any = None
    while time.monotonic() < deadline:
        try:
            status, _, last = http(f"{url}/ready", timeout=5)
            if status == 200:
                return
        except (urllib.error.URLError, OSError, ValueError) as exc:
            last = exc
        time.sleep(2)
    pytest.fail(f"{service} was not ready within {timeout_s:.0f}s: {last}\n{stack.logs(service)[-3000:]}")


@pytest.fixture(scope="session")
def need_service(pytestconfig: pytest.Config) -> Any:
    """``require_service`` of tests/conftest.py (skip locally, fail in CI)."""
    for plugin in pytestconfig.pluginmanager.get_plugins():
        if callable(getattr(plugin, "require_service", None)):
            return plugin.require_service
    raise RuntimeError("require_service not found in tests/conftest.py")


@pytest.fixture(scope="module")
def stack(need_service: Any) -> Iterator[Stack]:
    need_service(docker_answers(), "a Docker Engine", "run `bash scripts/docker.sh start` as root")
    subprocess.run(["bash", "scripts/docker.sh", "base-images"], cwd=REPO, check=True, timeout=1800)
    project = f"vsparta-test-{uuid.uuid4().hex[:8]}"
    stack = Stack(project, stack_env(), f"http://127.0.0.1:{API_PORT}", f"http://127.0.0.1:{ES_PORT}")
    try:
        stack.compose("build", "first-run", "api", timeout=1800)
        try:
            stack.compose("up", "-d", timeout=1800)
        except AssertionError:
            print(stack.compose("logs", "--no-color", "--tail", "60"))
            raise
        wait_ready(stack)
        yield stack
    finally:
        subprocess.run(
            [*compose_command(), "-p", project, *PROFILES, "down", "-v", "--remove-orphans"],
            cwd=REPO,
            env=stack.env,
            capture_output=True,
            timeout=300,
        )
        # the images this build superseded (~1.6 GB a run): a test machine must not fill its disk
        subprocess.run(["bash", "scripts/docker.sh", "prune"], cwd=REPO, check=True, timeout=300)


@pytest.fixture(scope="module")
def served_model(stack: Stack, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The model first-run trained, copied out of the API container (what the API tokenizes with)."""
    dest = tmp_path_factory.mktemp("served-model")
    subprocess.run(["docker", "cp", f"{stack.container('api')}:/models/model/.", str(dest)], check=True)
    assert (dest / "tokenizer.json").is_file()
    return dest


def indexed_documents(es_url: str, alias: str, scheme: str = "") -> list[Any]:
    """Every document of the alias, read back through the engine's own client (``scheme``
    ``opensearch+`` for an OpenSearch node)."""
    from vsparta.termindex import open_index

    status, _, body = http(f"{es_url}/{alias}/_search?size=10000&_source=false")
    assert status == 200, body
    index = open_index(f"{scheme}{es_url}/{alias}")
    try:
        return [index.get(hit["_id"]) for hit in body["hits"]["hits"]]
    finally:
        index.close()


def test_first_run_indexed_the_demo_and_search_ranks_like_the_oracle(
    stack: Stack, served_model: Path
) -> None:
    first_run = json.loads(subprocess.check_output(["docker", "inspect", stack.container("first-run")]))[0]
    assert first_run["State"]["ExitCode"] == 0
    docs = indexed_documents(stack.es_url, "vsparta")
    assert_ranks_like_the_oracle(stack.api_url, docs, served_model)
    # an image URL the page shows is served from the demo volume
    status, _, body = http(f"{stack.api_url}/search", {"query": QUERIES[0], "k": 1, "require_match": False})
    url = body["results"][0]["image_url"]
    with urllib.request.urlopen(f"{stack.api_url}{url}" if url.startswith("/") else url, timeout=10) as resp:
        assert resp.status == 200 and len(resp.read()) > 100


def assert_ranks_like_the_oracle(api_url: str, docs: list[Any], served_model: Path) -> None:
    """The API's top 5 for each query: scores as a brute-force oracle over the indexed documents
    (at the engines' 9-bit rounding) gives them, its first result one the oracle ranks first."""
    from vsparta.model.query_tokenizer import QueryTokenizer
    from vsparta.termindex.oracle import BruteForceOracle, round_like_elasticsearch

    assert len(docs) == TRAIN_SCENES + TEST_SCENES  # as `vsparta demo`: training and test scenes, each once
    assert {d.id.split("-")[0] for d in docs} == {"train", "test"}
    oracle = BruteForceOracle(docs, round_weights=round_like_elasticsearch)
    tokenizer = QueryTokenizer.from_pretrained(served_model)
    for text in QUERIES:
        # the ranking itself: the match rule (service/matching.py) would leave out weak results
        status, _, body = http(f"{api_url}/search", {"query": text, "k": 5, "require_match": False})
        assert status == 200, body
        got = [(r["id"], r["score"]) for r in body["results"]]
        want = [(h.id, h.score) for h in oracle.search(tokenizer.query_weights(text), k=5)]
        assert got, f"no results for {text!r}"
        # the API's top result is one the oracle ranks first (ties may come in either order)
        every = {h.id: h.score for h in oracle.search(tokenizer.query_weights(text), k=len(docs))}
        assert every[got[0][0]] == pytest.approx(want[0][1], rel=1e-5), (text, got, want)
        assert [s for _, s in got] == pytest.approx([s for _, s in want], rel=1e-4), (text, got, want)


def test_docs_render_in_chromium_and_run_a_search(stack: Stack, need_service: Any) -> None:
    need_service(
        Path(CHROMIUM).exists(), f"Chromium at {CHROMIUM}", "run `bash scripts/install-system-deps.sh`"
    )
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            errors: list[str] = []
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            page.goto(stack.api_url + "/docs")
            op = page.locator(".opblock-post:has(.opblock-summary-path[data-path='/search'])")
            op.wait_for(timeout=30_000)
            assert "Unable to render" not in page.content()
            op.locator(".opblock-summary").first.click()
            op.get_by_role("button", name="Try it out").click()
            body = {"query": QUERIES[0], "k": 3, "require_match": False}
            op.locator(".body-param textarea").fill(json.dumps(body))
            op.get_by_role("button", name="Execute").click()
            status = op.locator(".live-responses-table tbody .response-col_status").first
            status.wait_for(timeout=30_000)
            assert status.inner_text().strip() == "200"
            shown = op.locator(".live-responses-table tbody .response-col_description pre").first.inner_text()
            assert '"results"' in shown and ('"id": "test-' in shown or '"id": "train-' in shown)
            assert errors == []
        finally:
            browser.close()


def test_indexer_container_loads_a_folder(stack: Stack, served_model: Path, tmp_path: Path) -> None:
    scenes = tmp_path / "scenes"
    subprocess.run(
        [str(Path(sys.executable).with_name("vsparta")), "scenes", "--out", str(scenes), "--train", "0",
         "--val", "0", "--test", "7", "--seed", "3", "--no-progress"],
        check=True,
        capture_output=True,
    )  # fmt: skip
    folder = scenes / "images"
    n_images = sum(1 for p in folder.rglob("*") if p.is_file())
    assert n_images == 7
    alias = f"folder-{uuid.uuid4().hex[:8]}"
    env = {"VSPARTA_IMAGES": str(folder), "VSPARTA_MODEL": str(served_model), "VSPARTA_INDEX": alias,
           "VSPARTA_OUT": str(tmp_path / "out")}  # fmt: skip
    stack.compose("--profile", "index", "run", "--rm", "indexer", env=env, timeout=600)
    docs = indexed_documents(stack.es_url, alias)
    assert len(docs) == n_images and all(d.weights for d in docs)
    again = stack.compose("--profile", "index", "run", "--rm", "indexer", env=env, timeout=600)
    assert len(indexed_documents(stack.es_url, alias)) == n_images, again  # --resume: nothing twice
    assert not subprocess.run(
        ["docker", "ps", "-a", "-q", "--filter", f"label=com.docker.compose.project={stack.project}",
         "--filter", "label=com.docker.compose.service=indexer"],
        capture_output=True, text=True, check=True,
    ).stdout.split()  # fmt: skip


@pytest.mark.parametrize(
    ("variable", "folder", "reason"),
    [
        ("VSPARTA_MODEL", "empty-model", "no tokenizer.json"),
        ("VSPARTA_IMAGES", "no-such-images", "is missing or empty"),
    ],
)
def test_wrong_folder_answers_503_saying_why_without_restarting(
    stack: Stack, tmp_path: Path, variable: str, folder: str, reason: str
) -> None:
    path = tmp_path / folder
    if variable == "VSPARTA_MODEL":
        path.mkdir()
    try:
        stack.compose("up", "-d", "--no-deps", "api", env={variable: str(path)})
        deadline = time.monotonic() + 120
        status, headers, body = 0, {}, None
        while time.monotonic() < deadline:
            try:
                status, headers, body = http(f"{stack.api_url}/ready", timeout=5)
                if status == 503:
                    break
            except (urllib.error.URLError, OSError, ValueError):
                pass
            time.sleep(1)
        assert status == 503 and reason in body["detail"] and variable in body["detail"], body
        assert "Retry-After" in headers or "retry-after" in headers
        status, _, body = http(f"{stack.api_url}/search", {"query": "a red circle"})
        assert status == 503 and reason in body["detail"]
        time.sleep(12)  # past a health-check interval: still the same process, not a restart loop
        state = json.loads(subprocess.check_output(["docker", "inspect", stack.container("api")]))[0]
        assert state["State"]["Running"] and state["RestartCount"] == 0
        said = [line for line in stack.logs("api").splitlines() if "not ready:" in line]
        assert len(said) == 1 and reason in said[0], said
    finally:
        stack.compose("up", "-d", "--no-deps", "api")
        wait_ready(stack)


def test_opensearch_profile_serves_search_from_opensearch(stack: Stack, served_model: Path) -> None:
    """``--profile opensearch up -d api-opensearch`` in the same project: the images are the ones
    already built and the demo volumes already hold the scenes and the model, so first-run only
    indexes, into OpenSearch this time; its API answers as the oracle over what OpenSearch holds."""
    try:
        stack.compose("--profile", "opensearch", "up", "-d", "api-opensearch", timeout=1200)
    except AssertionError:
        print(stack.compose("--profile", "opensearch", "logs", "--no-color", "--tail", "60"))
        raise
    wait_ready(stack, service="api-opensearch")
    first_run = stack.container("first-run-opensearch")
    assert json.loads(subprocess.check_output(["docker", "inspect", first_run]))[0]["State"]["ExitCode"] == 0
    status, _, info = http(stack.os_url)
    assert status == 200 and info["version"].get("distribution") == "opensearch", info
    docs = indexed_documents(stack.os_url, "vsparta", scheme="opensearch+")
    assert_ranks_like_the_oracle(stack.os_api_url, docs, served_model)
    status, _, ready = http(f"{stack.os_api_url}/ready")
    assert status == 200 and "60 documents" in json.dumps(ready), ready


def test_down_leaves_no_container_network_or_volume(stack: Stack) -> None:
    assert all(stack.leftovers().values())  # the stack is there before
    stack.compose(*PROFILES, "down", "-v", "--remove-orphans")
    assert stack.leftovers() == {"container": [], "network": [], "volume": []}
    # superseded builds go too; the images the stack runs stay
    subprocess.run(["bash", "scripts/docker.sh", "prune"], cwd=REPO, check=True, timeout=300)

    def images(*filters: str) -> list[str]:
        flags = [arg for f in filters for arg in ("--filter", f)]
        return subprocess.check_output(["docker", "images", "-q", *flags], text=True).split()

    assert images("dangling=true", "label=io.vsparta.image") == []
    assert len(images("label=io.vsparta.image=service", "dangling=false")) >= 1
    assert len(images("label=io.vsparta.image=indexer", "dangling=false")) >= 1
