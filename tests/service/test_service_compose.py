"""docker-compose.yml and Dockerfile, checked without a Docker engine.

The structure is asserted on the parsed YAML; `docker compose config` (or Debian's
`docker-compose`) validates the file against the Compose schema offline. Building the images and
running the stack on a real engine is tests/docker/test_compose_stack.py (marker `compose`).
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
from urllib.parse import urlsplit

import pytest
import yaml

from vsparta.service.settings import ServiceSettings
from vsparta.termindex import parse_spec

REPO = Path(__file__).resolve().parents[2]


def script_es_version() -> str:
    """The version scripts/elasticsearch.sh installs: the one the test suite runs against."""
    text = (REPO / "scripts/elasticsearch.sh").read_text()
    m = re.search(r"VERSION=\$\{VSPARTA_ES_VERSION:-([0-9.]+)\}", text)
    assert m, "scripts/elasticsearch.sh names no default version"
    return m.group(1)


def default_of(value: str) -> str:
    """``${VAR:-default}`` -> ``default`` (what the file means when the variable is unset)."""
    return re.sub(r"\$\{[^:}]*:-([^}]*)\}", r"\1", str(value))


def es_services(compose: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Every Elasticsearch node of the file (single node and cluster nodes), by its image (the
    cluster's namespace holder runs the same image with another entrypoint: not a node)."""
    return {
        name: s
        for name, s in compose["services"].items()
        if default_of(s.get("image", "")).startswith("docker.elastic.co/elasticsearch/")
        and "entrypoint" not in s
    }


def backend_services(compose: dict[str, Any], api: str) -> dict[str, dict[str, Any]]:
    """The compose services an API's VSPARTA_BACKEND names (every node of its host list): a
    service reached by name on 9200, or a node sharing the API's network namespace reached on
    127.0.0.1 at its own ``http.port``."""
    service = compose["services"][api]
    spec = parse_spec(default_of(service["environment"]["VSPARTA_BACKEND"]))
    found = {}
    for node in spec.location.split(","):
        url = urlsplit(node)
        if url.hostname in compose["services"]:
            assert url.port == 9200, url
            found[url.hostname or ""] = compose["services"][url.hostname or ""]
            continue
        assert url.hostname == "127.0.0.1" and service.get("network_mode"), url  # a shared namespace
        (name,) = [n for n, s in es_services(compose).items()
                   if s.get("network_mode") == service["network_mode"]
                   and int(s["environment"].get("http.port", 9200)) == url.port]  # fmt: skip
        found[name] = compose["services"][name]
    return found


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


def test_every_elasticsearch_runs_the_tested_version_keeps_data_and_is_healthchecked(
    compose: dict[str, Any],
) -> None:
    nodes = es_services(compose)
    assert {"elasticsearch", "es01", "es02", "es03"} <= set(nodes)
    volumes = []
    for name, es in nodes.items():
        assert default_of(es["image"]).rsplit(":", 1)[1] == script_es_version(), name
        assert "_cluster/health" in " ".join(es["healthcheck"]["test"]), name
        data = [v for v in es["volumes"] if v.endswith(":/usr/share/elasticsearch/data")]
        assert len(data) == 1 and data[0].split(":")[0] in compose["volumes"], name
        volumes.append(data[0].split(":")[0])
    assert len(set(volumes)) == len(volumes), "two nodes share a data volume"


def test_cluster_profile_nodes_discover_each_other_and_bootstrap_together(compose: dict[str, Any]) -> None:
    """The cluster's nodes share one network namespace (cluster-net's, which publishes the ports)
    with their transport on loopback (no production bootstrap checks), each on its own ports;
    every node seeds from all of them and bootstraps from the same list of node names; the single
    node stays a single node outside the profile, so plain `up` is unchanged."""
    nodes = {n: s for n, s in es_services(compose).items() if "cluster" in s.get("profiles", [])}
    assert len(nodes) == 3
    names = {s["environment"]["node.name"] for s in nodes.values()}
    assert names == set(nodes)  # node names are the service names
    transports = {f"127.0.0.1:{s['environment']['transport.port']}" for s in nodes.values()}
    http = {s["environment"]["http.port"] for s in nodes.values()}
    assert len(transports) == len(http) == 3
    for es in nodes.values():
        env = es["environment"]
        assert es["network_mode"] == "service:cluster-net" and env["transport.host"] == "127.0.0.1"
        assert set(env["discovery.seed_hosts"].split(",")) == transports
        assert set(env["cluster.initial_master_nodes"].split(",")) == names
        assert "discovery.type" not in env
        assert f"127.0.0.1:{env['http.port']}/" in " ".join(es["healthcheck"]["test"])  # its own port
    holder = compose["services"]["cluster-net"]
    assert holder["profiles"] == ["cluster"] and "ports" in holder
    published = {str(p).rsplit(":", 1)[1] for p in holder["ports"]}
    assert http <= published  # every node's HTTP port reaches the host
    assert len({s["environment"]["cluster.name"] for s in nodes.values()}) == 1
    single = compose["services"]["elasticsearch"]
    assert "profiles" not in single and single["environment"]["discovery.type"] == "single-node"
    assert set(backend_services(compose, "api-cluster")) == set(nodes)  # the API knows every node
    waits = compose["services"]["api-cluster"]["depends_on"]
    assert set(waits) == set(nodes) and all(w["condition"] == "service_healthy" for w in waits.values())


def test_ports_are_published_on_localhost_only(compose: dict[str, Any]) -> None:
    published = [(name, p) for name, s in compose["services"].items() for p in s.get("ports", [])]
    assert published
    for name, port in published:
        assert str(port).startswith("127.0.0.1:"), f"{name} publishes {port} beyond localhost"
    # The default stack and the cluster profile can run side by side: no host port twice.
    host_ports = [re.sub(r"\$\{[^:}]*:-([^}]*)\}", r"\1", str(p)).split(":")[1] for _, p in published]
    assert len(set(host_ports)) == len(host_ports), host_ports


def test_api_waits_for_healthy_elasticsearch_and_is_healthchecked(compose: dict[str, Any]) -> None:
    for name in ("api", "api-cluster"):
        api = compose["services"][name]
        assert api["build"]["target"] == "service"
        for host in backend_services(compose, name):  # the backend is services of this file ...
            assert api["depends_on"][host]["condition"] == "service_healthy"  # ... awaited healthy
        assert "/health" in " ".join(api["healthcheck"]["test"])


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


def test_indexer_runs_on_the_cpu_and_on_a_gpu_with_the_override_file(compose: dict[str, Any]) -> None:
    """A GPU reservation in the main file would stop the job on every machine without the NVIDIA
    runtime; docker-compose.gpu.yml adds it for those that have one."""
    indexer = compose["services"]["indexer"]
    assert indexer["profiles"] == ["index"]
    assert indexer["build"]["target"] == "indexer"
    assert "deploy" not in indexer
    gpu = yaml.safe_load((REPO / "docker-compose.gpu.yml").read_text())
    devices = gpu["services"]["indexer"]["deploy"]["resources"]["reservations"]["devices"]
    assert devices[0]["driver"] == "nvidia" and "gpu" in devices[0]["capabilities"]
    assert indexer["command"][0] == "index"
    assert any(mount_target(v) == "/data/images" and v.endswith(":ro") for v in indexer["volumes"])
    assert "profiles" not in compose["services"]["elasticsearch"]  # `docker compose up` starts them
    assert "profiles" not in compose["services"]["api"]


def test_every_base_image_is_a_variable_defaulting_to_the_official_image(compose: dict[str, Any]) -> None:
    """Tests substitute local base images (scripts/docker.sh) through these and nothing else."""
    text = (REPO / "Dockerfile").read_text()
    froms = re.findall(r"^FROM (\S+)", text, flags=re.M)
    assert froms and all(f.startswith("${") for f in froms), froms
    args = dict(re.findall(r"^ARG (\w+)=(\S+)", text, flags=re.M))
    assert args["PYTHON_IMAGE"] == "python:${PYTHON_VERSION}-slim"
    assert args["TORCH_IMAGE"].startswith("pytorch/pytorch:")
    build_args = compose["x-build"]["args"]
    assert default_of(build_args["PYTHON_IMAGE"]) == "python:3.11-slim"
    assert default_of(build_args["TORCH_IMAGE"]) == args["TORCH_IMAGE"]
    official = {"opensearch": "opensearchproject/opensearch:"}  # the rest: Elastic's registry
    for name, service in compose["services"].items():
        image = str(service.get("image", ""))
        if "build" not in service:
            registry = official.get(name, "docker.elastic.co/")
            assert image.startswith("${") and default_of(image).startswith(registry), name


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
    for profile in ([], ["--profile", "index"], ["--profile", "cluster"]):
        proc = subprocess.run(
            [*cmd, "-f", str(REPO / "docker-compose.yml"), *profile, "config"],
            capture_output=True,
            text=True,
            cwd=REPO,
            timeout=60,
        )
        assert proc.returncode == 0, proc.stderr
        resolved = yaml.safe_load(proc.stdout)
        extra = {"index": {"indexer"}, "cluster": {"cluster-net", "es01", "es02", "es03", "api-cluster"}}
        expected = {"elasticsearch", "api"} | (extra[profile[1]] if profile else set())
        assert expected <= set(resolved["services"])
        for name, services in extra.items():  # profiled services stay out of a plain `up`
            for service in services:
                assert resolved["services"][service].get("profiles") == [name], service
        ports = [str(p) for s in resolved["services"].values() for p in s.get("ports", [])]
        assert ports and all("127.0.0.1" in p for p in ports)


@pytest.mark.elasticsearch
def test_compose_pins_the_elasticsearch_version_the_tests_ran_against(es_url: str) -> None:
    with urllib.request.urlopen(es_url, timeout=5) as r:
        assert json.load(r)["version"]["number"] == script_es_version()
