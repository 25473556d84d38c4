"""The first command on a fresh machine (issue 31): a clean clone of the repository in a fresh
Debian container and `bash scripts/demo.sh`, nothing else, until it serves.

The container is the local Debian base image (``scripts/docker.sh debian-image``: debootstrap's
minbase bookworm with python3, python3-venv, ca-certificates and curl only; no registry is
reachable here), so fonts-noto-color-emoji and unicode-data, which the object scenes draw from, are
not there: the script must install them itself (as root) before the Python packages, or, as another
user, name them in one sentence and stop. It reaches PyPI and Debian's mirror through the host's
network (``--network host``) and the host's CA bundle. The demo runs at a small size (its steps are
the full demo's); the install it made is then asked for every subcommand's ``--help``, and the
serving process must hold no torch.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from vsparta.cli import SUBCOMMANDS

REPO = Path(__file__).resolve().parents[2]
IMAGE = "vsparta-local/debian:bookworm"
HOST_CA = Path(os.environ.get("VSPARTA_CA_BUNDLE", "/etc/ssl/certs/ca-certificates.crt"))
SMALL_DEMO = ["--train-images", "200", "--test-images", "40", "--epochs", "1", "--no-progress"]
SYSTEM_PACKAGES = ("fonts-noto-color-emoji", "unicode-data")

pytestmark = [pytest.mark.compose, pytest.mark.slow]


def docker(*args: str, timeout: float = 600, check: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(["docker", *args], capture_output=True, text=True, timeout=timeout)
    assert not check or proc.returncode == 0, f"docker {' '.join(args)}: {proc.stdout}\n{proc.stderr}"
    return proc


def docker_answers() -> bool:
    return bool(shutil.which("docker")) and docker("version", check=False).returncode == 0


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Machine:
    """A fresh container holding a clone of the repository in /src."""

    name: str

    def logs(self) -> str:
        proc = docker("logs", self.name, check=False)
        return proc.stdout + proc.stderr

    def running(self) -> bool:
        state = json.loads(docker("inspect", self.name).stdout)[0]["State"]
        return bool(state["Running"])

    def run(self, *command: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        return docker("exec", self.name, *command, timeout=timeout, check=False)


@pytest.fixture(scope="module")
def clone(require: Callable[[bool, str, str], None], tmp_path_factory: pytest.TempPathFactory) -> Path:
    require(docker_answers(), "a Docker Engine", "run `bash scripts/docker.sh start` as root")
    subprocess.run(["bash", "scripts/docker.sh", "debian-image"], cwd=REPO, check=True, timeout=1800)
    dest = tmp_path_factory.mktemp("fresh") / "vsparta"
    subprocess.run(["git", "clone", "--quiet", "--no-hardlinks", str(REPO), str(dest)], check=True)
    return dest


@contextlib.contextmanager
def machine(clone: Path, *command: str, user: str | None = None) -> Iterator[Machine]:
    """A fresh container of the Debian image running ``command`` in /src (the clone, copied in)."""
    name = f"vsparta-fresh-{uuid.uuid4().hex[:8]}"
    args = ["create", "--init", "--network", "host", "--name", name, "--workdir", "/src"]
    if HOST_CA.is_file():  # builds behind a TLS-intercepting proxy reach PyPI only with it
        inside = "/etc/ssl/certs/host-ca.crt"
        args += ["-v", f"{HOST_CA}:{inside}:ro", "-e", f"PIP_CERT={inside}"]
    if user is not None:
        args += ["--user", user]
    docker(*args, IMAGE, *command)
    try:
        docker("cp", f"{clone}/.", f"{name}:/src")
        docker("start", name)
        yield Machine(name)
    finally:
        docker("rm", "-f", name, check=False)


@pytest.mark.timeout(300)
def test_as_another_user_it_names_the_packages_in_one_sentence_before_pip(clone: Path) -> None:
    with machine(clone, "bash", "scripts/demo.sh", user="65534") as box:
        for _ in range(120):
            if not box.running():
                break
            time.sleep(0.5)
        state = json.loads(docker("inspect", box.name).stdout)[0]["State"]
        out = box.logs()
        assert not state["Running"] and state["ExitCode"] == 1, out
        assert out.strip().count("\n") == 0, out  # one sentence, no pip output
        assert out.startswith("missing system packages: " + " ".join(SYSTEM_PACKAGES)), out
        assert "sudo apt-get install -y" in out


@pytest.mark.timeout(2700)
def test_demo_sh_alone_serves_on_a_fresh_debian(clone: Path, answers: Callable[[str], bool]) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}/"
    demo = ["bash", "scripts/demo.sh", "--out", "/tmp/demo", "--port", str(port), *SMALL_DEMO]
    with machine(clone, *demo) as box:
        assert box.run("test", "-e", "/usr/share/fonts/truetype/noto/NotoColorEmoji.ttf").returncode == 1
        deadline = time.monotonic() + 2400
        while not answers(url + "health"):
            assert box.running(), box.logs()[-6000:]
            assert time.monotonic() < deadline, box.logs()[-6000:]
            time.sleep(2)
        logs = box.logs()
        assert "installing the system packages " + " ".join(SYSTEM_PACKAGES) in logs
        for _ in range(40):
            if f"demo: serving on {url}" in box.logs():
                break
            time.sleep(0.5)
        assert f"demo: serving on {url}" in box.logs(), box.logs()[-3000:]
        body = json.dumps({"query": "a banana", "require_match": False}).encode()  # any ranked image
        request = urllib.request.Request(url + "search", body, {"content-type": "application/json"})
        with urllib.request.urlopen(request, timeout=10) as resp:
            assert resp.status == 200 and json.load(resp)["results"]
        _serving_process_has_no_torch(box)
        _every_help_works_in_this_install(box)


def _serving_process_has_no_torch(box: Machine) -> None:
    """The process running `python -m vsparta.cli serve` (what the demo became) maps no torch library."""
    script = (
        'for p in /proc/[0-9]*; do [ "${p#/proc/}" = "$$" ] && continue; '
        "tr '\\0' ' ' < $p/cmdline 2>/dev/null | grep -q 'python[^ ]* -m vsparta.cli serve' "
        "&& { grep -c torch $p/maps; grep VmRSS $p/status; }; done; true"
    )
    found = box.run("bash", "-c", script).stdout.split("\n")
    assert len(found) >= 2 and found[0].strip() == "0", found  # one such process, no torch mapped
    print(f"serving process on a fresh Debian, small demo index: {found[1].strip()}")


def _every_help_works_in_this_install(box: Machine) -> None:
    """The first command's install (model and service extras): each subcommand's --help, and the
    benchmarks (not installed) say in one sentence how to get them."""
    vsparta = "/src/.venv/bin/vsparta"
    for name in SUBCOMMANDS:
        if name == "bench":
            continue
        proc = box.run(vsparta, name, "--help")
        assert proc.returncode == 0 and f"usage: vsparta {name}" in proc.stdout, (name, proc.stderr)
    for argv in (["bench", "--help"], ["bench", "indexing", "--help"]):
        proc = box.run(vsparta, *argv)
        assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
        assert proc.stderr.startswith("vsparta bench: error: the benchmarks are a package of their own")
        assert proc.stderr.count("\n") == 1 and "pip install -e ./bench" in proc.stderr
