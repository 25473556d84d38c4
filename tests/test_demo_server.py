"""`vsparta demo` serves as the service does: once its index is built it becomes `vsparta serve`
(``vsparta.demo_server``), so the serving process holds no torch, and Ctrl-C stops it (issue 31)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

import pytest

from vsparta.cli import main


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_the_demo_serves_from_a_process_without_torch(tmp_path: Path, answers: Callable[[str], bool]) -> None:
    from vsparta.model.configuration import config_from_spec
    from vsparta.model.modeling import build_model

    scenes, model = tmp_path / "scenes", tmp_path / "model"
    assert main(["scenes", "--kind", "shapes", "--out", str(scenes), "--train", "6", "--val", "0",
                 "--test", "4", "--size", "32", "--no-progress"]) == 0  # fmt: skip
    build_model(config_from_spec("tiny")).save_pretrained(model)
    port = _free_port()
    url = f"http://127.0.0.1:{port}/"
    log = tmp_path / "demo.log"
    with log.open("w") as err:
        demo = subprocess.Popen(
            [sys.executable, "-m", "vsparta.cli", "demo", "--out", str(tmp_path / "out"), "--scenes",
             str(scenes), "--model", str(model), "--port", str(port), "--no-progress"],
            stdout=err, stderr=err,
        )  # fmt: skip
    try:
        deadline = time.monotonic() + 300
        while not answers(url + "health"):
            assert demo.poll() is None, log.read_text()
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.5)
        # The process that answers is the demo's own (same id), now running `vsparta serve` alone.
        cmdline = Path(f"/proc/{demo.pid}/cmdline").read_bytes().split(b"\0")
        assert cmdline[1:4] == [b"-m", b"vsparta.cli", b"serve"], cmdline
        maps = Path(f"/proc/{demo.pid}/maps").read_text()
        assert "libtorch" not in maps and "/torch/" not in maps
        request = urllib.request.Request(
            url + "search", json.dumps({"query": "red"}).encode(), {"content-type": "application/json"}
        )
        with urllib.request.urlopen(request, timeout=10) as resp:
            assert resp.status == 200 and "results" in json.load(resp)
        for _ in range(40):  # the announcer logs the address once /health answers, then exits
            if "demo: serving on " + url in log.read_text():
                break
            time.sleep(0.25)
        assert "demo: serving on " + url in log.read_text(), log.read_text()
        os.kill(demo.pid, signal.SIGINT)  # Ctrl-C reaches the server itself
        assert demo.wait(30) == 0, log.read_text()
    finally:
        if demo.poll() is None:
            demo.kill()
            demo.wait()
    text = log.read_text()
    assert text.count("demo: serving on") == 1 and "Traceback" not in text, text
