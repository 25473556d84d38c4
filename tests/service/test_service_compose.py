"""docker-compose.yml and Dockerfile, checked without a Docker engine (none on these machines).

The structure is asserted on the parsed YAML; `docker compose config` (or Debian's
`docker-compose`) validates the file against the Compose schema offline. Building images and
running the stack could not be done here.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from service.settings import ServiceSettings

REPO = Path(__file__).resolve().parents[2]
ES_VERSION = "7.17.29"


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    return yaml.safe_load((REPO / "docker-compose.yml").read_text())


def mount_target(volume: str) -> str:
    """Container path of a ``host:container[:mode]`` volume whose host part may be ``${VAR:-default}``."""
    return re.sub(r"\$\{[^}]*\}", "HOST", volume).split(":")[1]


def pip_installs(stage: list[tuple[str, str]]) -> list[str]:
    """The ``pip install ...`` commands of a stage's RUN lines (up to the next ``&&``)."""
    runs = " && ".join(a for i, a in stage if i == "RUN")
    return [c.strip() for c in runs.split("&&") if c.strip().startswith("pip install")]


def dockerfile_stages() -> dict[str, list[tuple[str, str]]]:
    """Stage name -> [(INSTRUCTION, arguments)], continuation lines joined."""
    text = re.sub(r"\\\n", " ", (REPO / "Dockerfile").read_text())
    stages: dict[str, list[tuple[str, str]]] = {}
    current: list[tuple[str, str]] | None = None
    known = {
        "FROM", "RUN", "CMD", "LABEL", "EXPOSE", "ENV", "ADD", "COPY", "ENTRYPOINT", "VOLUME",
        "USER", "WORKDIR", "ARG", "ONBUILD", "STOPSIGNAL", "HEALTHCHECK", "SHELL",
    }  # fmt: skip
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        instr, _, args = line.partition(" ")
        assert instr.upper() in known and instr == instr.upper(), f"unknown instruction: {line}"
        if instr == "FROM":
            m = re.fullmatch(r"(\S+) AS (\w+)", args.strip())
            assert m, f"every stage is named: {line}"
            current = stages.setdefault(m.group(2), [])
        if instr == "ARG" and current is None:
            continue  # global build arguments before the first FROM
        assert current is not None, f"instruction before FROM: {line}"
        current.append((instr, args.strip()))
    return stages


def test_elasticsearch_is_pinned_healthchecked_and_local(compose: dict[str, Any]) -> None:
    es = compose["services"]["elasticsearch"]
    assert es["image"] == f"docker.elastic.co/elasticsearch/elasticsearch:{ES_VERSION}"
    assert es["environment"]["discovery.type"] == "single-node"
    assert "_cluster/health" in " ".join(es["healthcheck"]["test"])
    assert any(v.endswith(":/usr/share/elasticsearch/data") for v in es["volumes"])
    assert "esdata" in compose["volumes"]


def test_ports_are_published_on_localhost_only(compose: dict[str, Any]) -> None:
    published = [(name, p) for name, s in compose["services"].items() for p in s.get("ports", [])]
    assert {name for name, _ in published} == {"elasticsearch", "api"}
    for name, port in published:
        assert str(port).startswith("127.0.0.1:"), f"{name} publishes {port} beyond localhost"


def test_api_waits_for_healthy_elasticsearch_and_is_healthchecked(compose: dict[str, Any]) -> None:
    api = compose["services"]["api"]
    assert api["build"]["target"] == "service"
    assert api["depends_on"]["elasticsearch"]["condition"] == "service_healthy"
    assert "/health" in " ".join(api["healthcheck"]["test"])
    assert api["environment"]["VSPARTA_BACKEND"].startswith("http://elasticsearch:9200/")


def test_api_environment_is_valid_service_settings(
    compose: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    env = compose["services"]["api"]["environment"]
    assert all(k.startswith("VSPARTA_") for k in env)
    fields = {f"VSPARTA_{name.upper()}" for name in ServiceSettings.model_fields}
    assert set(env) <= fields, set(env) - fields  # no misspelled variable silently ignored
    for key, value in env.items():
        monkeypatch.setenv(key, str(value))
    settings = ServiceSettings()
    assert settings.backend == env["VSPARTA_BACKEND"]
    assert [str(p) for p in settings.image_roots] == ["/data/images"]
    mounts = {mount_target(v) for v in compose["services"]["api"]["volumes"]}
    assert {"/data/images", "/models/model"} <= mounts


def test_indexer_is_a_gpu_job_under_a_profile(compose: dict[str, Any]) -> None:
    indexer = compose["services"]["indexer"]
    assert indexer["profiles"] == ["index"]
    assert indexer["build"]["target"] == "indexer"
    devices = indexer["deploy"]["resources"]["reservations"]["devices"]
    assert devices[0]["driver"] == "nvidia" and "gpu" in devices[0]["capabilities"]
    assert indexer["command"][0] == "index"
    assert any(mount_target(v) == "/data/images" and v.endswith(":ro") for v in indexer["volumes"])
    for name, service in compose["services"].items():
        if name != "indexer":
            assert "profiles" not in service  # `docker compose up` starts them


def test_dockerfile_service_image_has_no_torch_and_indexer_has(compose: dict[str, Any]) -> None:
    stages = dockerfile_stages()
    assert {"service", "indexer"} <= set(stages)
    assert list(stages)[-1] == "service"  # a plain `docker build .` gives the small image
    installs = pip_installs(stages["service"])
    assert installs and all("[service]" in c for c in installs)
    for command in installs:
        assert not re.search(r"torch|transformers|\[model|\[all", command), command
    assert any(i == "HEALTHCHECK" and "/health" in a for i, a in stages["service"])
    assert any(i == "USER" and a != "root" for i, a in stages["service"])
    assert any(i == "CMD" and "serve" in a for i, a in stages["service"])
    indexer_from = next(a for i, a in stages["indexer"] if i == "FROM")
    arg = re.search(r"ARG TORCH_IMAGE=(\S+)", (REPO / "Dockerfile").read_text())
    assert arg and "cuda" in arg.group(1) and "${TORCH_IMAGE}" in indexer_from
    assert any("[model" in c for c in pip_installs(stages["indexer"]))
    # each compose build target exists in the Dockerfile
    for service in compose["services"].values():
        if "build" in service:
            assert service["build"]["target"] in stages


def _compose_command() -> list[str] | None:
    if shutil.which("docker"):
        probe = subprocess.run(["docker", "compose", "version"], capture_output=True, text=True)
        if probe.returncode == 0:
            return ["docker", "compose"]
    if shutil.which("docker-compose"):
        return ["docker-compose"]
    return None


def test_docker_compose_config_validates_offline(need_service: Callable[[bool, str, str], None]) -> None:
    cmd = _compose_command()
    need_service(cmd is not None, "docker compose", "install Debian's docker-compose or the compose plugin")
    assert cmd is not None
    for profile in ([], ["--profile", "index"]):
        proc = subprocess.run(
            [*cmd, "-f", str(REPO / "docker-compose.yml"), *profile, "config"],
            capture_output=True,
            text=True,
            cwd=REPO,
            timeout=60,
        )
        assert proc.returncode == 0, proc.stderr
        resolved = yaml.safe_load(proc.stdout)
        expected = {"elasticsearch", "api"} | ({"indexer"} if profile else set())
        assert expected <= set(resolved["services"])
        ports = [str(p) for s in resolved["services"].values() for p in s.get("ports", [])]
        assert ports and all("127.0.0.1" in p for p in ports)


@pytest.mark.elasticsearch
def test_compose_pins_the_elasticsearch_version_the_tests_ran_against(es_url: str) -> None:
    with urllib.request.urlopen(es_url, timeout=5) as r:
        assert json.load(r)["version"]["number"] == ES_VERSION
