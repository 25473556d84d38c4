"""A client generated from the served OpenAPI document searches with typed request models (24.5).

openapi-python-client (the test extra) generates a package from a running `vsparta serve`'s
``/openapi.json``, as a user would; the test imports it and searches with ``SearchRequest``.
"""

from __future__ import annotations

import importlib
import json
import os
import shutil
import subprocess
import sys
import urllib.request
from pathlib import Path

from service_testdata import Corpus, running_server, serve_args


def _generate(url: str, out: Path) -> None:
    cli = shutil.which("openapi-python-client", path=str(Path(sys.executable).parent)) or shutil.which(
        "openapi-python-client"
    )
    assert cli, "openapi-python-client is in the test extra: pip install -e '.[test]'"
    spec = out.parent / "openapi.json"
    with urllib.request.urlopen(f"{url}/openapi.json", timeout=10) as r:
        spec.write_bytes(r.read())
    run = subprocess.run(
        [cli, "generate", "--path", str(spec), "--output-path", str(out), "--meta", "none"],
        capture_output=True,
        text=True,
        timeout=120,
        # its post-generation hooks run `ruff` by name: the one installed beside it
        env={**os.environ, "PATH": f"{Path(cli).parent}{os.pathsep}{os.environ.get('PATH', '')}"},
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert "SearchRequest" not in run.stdout  # no warning about the request body


def test_generated_client_has_a_typed_search_request_and_searches(
    corpus: Corpus, embedded_spec: str, tmp_path: Path
) -> None:
    package = tmp_path / "vsparta_generated_client"
    with running_server(serve_args(corpus, embedded_spec)) as (url, _proc):
        _generate(url, package)
        sys.path.insert(0, str(tmp_path))
        try:
            client_mod = importlib.import_module("vsparta_generated_client.client")
            models = importlib.import_module("vsparta_generated_client.models")
            search = importlib.import_module("vsparta_generated_client.api.search.search_search_post")
            client = client_mod.Client(base_url=url)
            source = (package / "api" / "search" / "search_search_post.py").read_text()
            assert "body: SearchRequest," in source  # typed, not Any

            by_text = search.sync(
                client=client, body=models.SearchRequest(query="red cube", k=3, explain=True)
            )
            assert isinstance(by_text, models.SearchResponse), by_text
            assert by_text.results[0].id == "red-cube"
            assert by_text.query_tokens == ["red", "cube"]
            assert {t.token for t in by_text.results[0].terms} == {"red", "cube"}

            terms = models.SearchRequestTerms.from_dict({"blue": 1.0, "sphere": 2.0})
            by_terms = search.sync(client=client, body=models.SearchRequest(terms=terms, k=2))
            assert isinstance(by_terms, models.SearchResponse)
            assert by_terms.results[0].id == "blue-sphere"

            # the server's rule (exactly one of query and terms) reaches the client as its typed 422
            both = search.sync_detailed(client=client, body=models.SearchRequest(query="red", terms=terms))
            assert both.status_code == 422
            assert isinstance(both.parsed, models.HTTPValidationError)
            assert "not both" in json.loads(both.content)["detail"][0]["msg"]
        finally:
            sys.path.remove(str(tmp_path))
            for name in [m for m in sys.modules if m.startswith("vsparta_generated_client")]:
                del sys.modules[name]
