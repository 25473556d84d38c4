"""The work a cluster does while it is broken: a ``vsparta index`` load into the served index and
query streams through a ``vsparta serve``, both real processes of the command line, given the
cluster's every node in one multi-host spec.

A load writes term documents (``vsparta index FILE.jsonl --tokenizer``) with ``--export-jsonl``:
the exporter writes a document only after the engine acknowledged it, so the export's ids are the
documents the job reported indexed. The streams record every answer (status, ids and scores) for
``fault_checks`` to hold against the oracle.
"""

from __future__ import annotations

import http.client
import json
import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

log = logging.getLogger(__name__)

WORDS = [f"w{i}" for i in range(300)]
SPECIAL = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
TOKEN_ID = {w: i + len(SPECIAL) for i, w in enumerate(WORDS)}  # the tokenizer's ids of WORDS


def tokenizer_folder(parent: Path) -> Path:
    """A real WordPiece tokenizer knowing ``WORDS``: what ``--tokenizer`` and ``serve --model`` read."""
    from tokenizers import Tokenizer, models, pre_tokenizers

    tok = Tokenizer(models.WordPiece({w: i for i, w in enumerate([*SPECIAL, *WORDS])}, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    out = parent / "tokenizer"
    out.mkdir(parents=True, exist_ok=True)
    tok.save(str(out / "tokenizer.json"))
    return out


def term_documents(n: int, seed: int, prefix: str) -> list[dict[str, Any]]:
    """``n`` term documents ``{id, terms: {word: weight}, metadata}`` over ``WORDS`` (20-60 words)."""
    rng = np.random.default_rng(seed)
    docs = []
    for i in range(n):
        words = rng.choice(len(WORDS), size=int(rng.integers(20, 60)), replace=False)
        weights = np.exp(rng.normal(-0.5, 1.0, size=len(words))).astype(np.float32)
        terms = {WORDS[w]: float(x) for w, x in zip(words, weights, strict=True)}
        docs.append({"id": f"{prefix}-{i:06d}", "terms": terms, "metadata": {"i": i}})
    return docs


def write_jsonl(path: Path, docs: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(d) + "\n" for d in docs))
    return path


def queries(n: int, seed: int) -> list[str]:
    rng = np.random.default_rng(seed)
    return [" ".join(rng.choice(WORDS, size=int(rng.integers(2, 6)))) for _ in range(n)]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def vsparta(*args: str) -> list[str]:
    """The ``vsparta`` console script of this environment (beside its Python), with ``args``."""
    return [str(Path(sys.executable).with_name("vsparta")), *args]


@dataclass
class LoadJob:
    """One ``vsparta index`` process loading ``source`` into ``spec`` (``--resume`` when asked)."""

    source: Path
    spec: str
    tokenizer: Path
    work: Path
    resume: bool = False
    extra: list[str] = field(default_factory=list)  # more `vsparta index` flags
    proc: subprocess.Popen[str] | None = None
    started: float = 0.0
    ended: float = 0.0
    output: str = ""

    @property
    def export(self) -> Path:
        return self.work / "export"

    @property
    def failures(self) -> Path:
        return self.work / f"failures-{int(self.started * 1000)}.jsonl"

    def start(self) -> LoadJob:
        self.work.mkdir(parents=True, exist_ok=True)
        self.started = time.monotonic()
        argv = vsparta("index", str(self.source), "--tokenizer", str(self.tokenizer), "--backend", self.spec,
                       "--workers", "0", "--no-progress", "--export-jsonl", str(self.export),
                       "--failures", str(self.failures), *(["--resume"] if self.resume else []),
                       *self.extra)  # fmt: skip
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        log.info("load started: %s%s", self.source.name, " (--resume)" if self.resume else "")
        return self

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def wait(self, timeout_s: float = 900) -> int:
        assert self.proc is not None
        try:
            self.output, _ = self.proc.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.output, _ = self.proc.communicate()
            raise
        self.ended = time.monotonic()
        code = int(self.proc.returncode)
        log.info("load ended with exit %d after %.0fs: %s", code, self.ended - self.started, self.last_line())
        return code

    def last_line(self) -> str:
        lines = [x for x in self.output.splitlines() if x.strip()]
        return lines[-1][-300:] if lines else ""

    def exported_ids(self) -> set[str]:
        """Ids the job reported indexed: the exporter writes a document after the engine acked it."""
        ids: set[str] = set()
        for part in sorted(self.export.glob("*.jsonl")) if self.export.is_dir() else []:
            for line in part.read_text().splitlines():
                if line.strip():
                    ids.add(json.loads(line)["id"])
        return ids

    def not_written(self) -> list[dict[str, Any]]:
        """The job's ``--failures`` lines for documents the engine refused after its retries."""
        if not self.failures.exists():
            return []
        rows = [json.loads(x) for x in self.failures.read_text().splitlines() if x.strip()]
        return [r for r in rows if r.get("reason") == "not_written"]

    def stop(self) -> None:
        if self.running():
            assert self.proc is not None
            self.proc.kill()
            self.proc.communicate()


class Server:
    """``vsparta serve`` on a free port over ``spec``; ``ready()`` waits for /ready to answer 200."""

    def __init__(self, spec: str, tokenizer: Path, log_path: Path, engine_timeout_s: float = 3) -> None:
        self.port = free_port()
        env = os.environ | {"VSPARTA_RETRY_AFTER_S": "1"}
        self._log = log_path.open("w")
        argv = vsparta("serve", "--backend", spec, "--model", str(tokenizer), "--port", str(self.port),
                       "--engine-timeout", str(engine_timeout_s))  # fmt: skip
        self.proc = subprocess.Popen(argv, stdout=self._log, stderr=subprocess.STDOUT, env=env, text=True)

    def request(self, method: str, path: str, body: Any = None, timeout: float = 30) -> tuple[int, Any]:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        try:
            data = None if body is None else json.dumps(body)
            conn.request(method, path, body=data, headers={"content-type": "application/json"})
            r = conn.getresponse()
            return r.status, json.loads(r.read() or b"null")
        finally:
            conn.close()

    def ready(self, timeout_s: float = 120) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"vsparta serve exited {self.proc.returncode}")
            try:
                if self.request("GET", "/ready", timeout=5)[0] == 200:
                    return
            except OSError:
                pass
            time.sleep(0.5)
        raise TimeoutError("vsparta serve was not ready in time")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._log.close()


@dataclass
class Answer:
    sent: float
    took: float
    query: int
    status: int
    hits: list[tuple[str, float]] = field(default_factory=list)


class QueryStream(threading.Thread):
    """``POST /search`` in a loop (one kept-alive connection, reopened after an error), each
    answer recorded with when it was sent; k = 10."""

    def __init__(self, port: int, texts: list[str], offset: int = 0) -> None:
        super().__init__(name=f"query-stream-{offset}", daemon=True)
        self.port, self.texts, self.offset = port, texts, offset
        self.answers: list[Answer] = []
        self.halt = threading.Event()

    def run(self) -> None:
        i = self.offset
        conn: http.client.HTTPConnection | None = None
        while not self.halt.is_set():
            q = i % len(self.texts)
            i += 1
            t0 = time.monotonic()
            try:
                conn = conn or http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
                body = json.dumps({"query": self.texts[q], "k": 10})
                conn.request("POST", "/search", body=body, headers={"content-type": "application/json"})
                r = conn.getresponse()
                data = json.loads(r.read() or b"null")
            except (OSError, http.client.HTTPException, ValueError):
                conn = None  # the service itself did not answer: recorded as status 0
                self.answers.append(Answer(t0, time.monotonic() - t0, q, 0))
                time.sleep(0.2)
                continue
            hits = [(h["id"], float(h["score"])) for h in data["results"]] if r.status == 200 else []
            self.answers.append(Answer(t0, time.monotonic() - t0, q, r.status, hits))
            if r.status != 200:
                time.sleep(0.05)

    def stop(self) -> None:
        self.halt.set()
        self.join(timeout=90)

    def between(self, t0: float, t1: float) -> Iterator[Answer]:
        return (a for a in self.answers if t0 <= a.sent < t1)
