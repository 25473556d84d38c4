"""The demo: rebuilds an index in an older on-disk format, resumes only what it started, and gives
its address only once the server answers."""

from __future__ import annotations

import argparse
import json
import logging
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import pytest

from vsparta.demo import _drop_outdated_index, _train_argv, add_arguments
from vsparta.demo_server import announce_when_ready
from vsparta.termindex.base import TermDocument
from vsparta.termindex.embedded.format import FORMAT_VERSION, MANIFEST
from vsparta.termindex.embedded.index import EmbeddedIndex


def test_index_in_an_older_format_is_removed_a_current_one_kept(tmp_path: Path) -> None:
    current, old = tmp_path / "current", tmp_path / "old"
    for path in (current, old):
        with EmbeddedIndex(path, create=True) as index:
            index.upsert([TermDocument("a", {1: 1.0})])
    manifest = json.loads((old / MANIFEST).read_text())
    (old / MANIFEST).write_text(json.dumps(manifest | {"version": FORMAT_VERSION - 1}))
    _drop_outdated_index(current)
    _drop_outdated_index(old)
    _drop_outdated_index(tmp_path / "missing")
    assert not old.exists()
    with EmbeddedIndex(current) as index:
        assert index.count() == 1


def _demo_args(**overrides: object) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return argparse.Namespace(**vars(parser.parse_args([])) | overrides)


def test_a_fresh_demo_trains_without_resume_a_rerun_resumes(tmp_path: Path) -> None:
    model_dir = tmp_path / "model"
    argv = _train_argv(_demo_args(), tmp_path / "scenes", model_dir)
    assert "--resume" not in argv and "--no-progress" not in argv  # no "no checkpoint" warning
    from vsparta.model.train import TRAINER_STATE

    (model_dir / "checkpoint-epoch-2").mkdir(parents=True)
    (model_dir / "checkpoint-epoch-2" / TRAINER_STATE).write_bytes(b"")  # what train() looks for
    argv = _train_argv(_demo_args(progress=False), tmp_path / "scenes", model_dir)
    assert argv[-2:] == ["--resume", "--no-progress"]


def test_the_loss_weights_reach_the_train_command_only_when_given(tmp_path: Path) -> None:
    from vsparta.cli import build_parser

    (tmp_path / "scenes").mkdir()
    (tmp_path / "scenes" / "train.jsonl").write_text("")  # the train command checks it exists
    plain = _train_argv(_demo_args(), tmp_path / "scenes", tmp_path / "model")
    assert "--presence-weight" not in plain and "--sparsity-weight" not in plain  # the preset's
    argv = _train_argv(
        _demo_args(presence_weight=1.0, sparsity_weight=0.0), tmp_path / "scenes", tmp_path / "model"
    )
    args = build_parser(argv)[0].parse_args(argv)  # the train command takes what the demo passes
    assert (args.presence_weight, args.sparsity_weight) == (1.0, 0.0)


class _Health(BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        self.send_response(200 if self.path == "/health" else 404)
        self.end_headers()
        self.wfile.write(b'{"status":"ok"}')

    def log_message(self, *args: object) -> None:
        pass


def test_the_address_is_announced_only_once_health_answers(caplog: pytest.LogCaptureFixture) -> None:
    with socket.socket() as s:  # a free port, nothing listening yet
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"http://127.0.0.1:{port}/"
    stop = threading.Event()
    caplog.set_level(logging.INFO, logger="vsparta.demo_server")
    announcer = threading.Thread(target=announce_when_ready, args=(url, stop, "a query", 30.0))
    announcer.start()
    time.sleep(1.0)
    assert not [r for r in caplog.records if "serving on" in r.getMessage()]  # server not up yet
    server = HTTPServer(("127.0.0.1", port), _Health)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        announcer.join(timeout=10)
        assert not announcer.is_alive()
    finally:
        stop.set()
        server.shutdown()
        server.server_close()
    [record] = [r for r in caplog.records if "serving on" in r.getMessage()]
    assert url in record.getMessage()


def test_the_pages_examples_name_objects_of_the_demo_set() -> None:
    """Every example link of the page names an object (or category) the demo's scenes show."""
    from vsparta.demo import DEMO_GROUPS, EXAMPLE_QUERY
    from vsparta.scenes.emoji_catalog import select
    from vsparta.scenes.object_words import plural
    from vsparta.service.routes import page_examples

    examples = page_examples()
    assert len(examples) >= 4 and EXAMPLE_QUERY in examples
    groups = tuple(g for g in DEMO_GROUPS.split(",") if g)  # none: the whole catalog
    words = {w for o in select(groups) for p in (*o.phrases, *o.categories) for w in p.split()}
    words |= {plural(w) for w in words}
    for query in examples:
        assert set(query.split()) & words, query


def test_the_stacks_first_run_chains_the_same_demo_into_its_own_folders(tmp_path: Path) -> None:
    """What docker/first-run.sh asks of `vsparta demo`: the scenes in the stack's volume, a model
    already there (no training), Elasticsearch as the index, no server; or training only."""
    from vsparta.demo import run

    scenes, model = tmp_path / "images", tmp_path / "model"
    (scenes).mkdir()
    (scenes / "test.jsonl").write_text("")  # generated by an earlier run: reused
    ran: list[list[str]] = []
    args = _demo_args(out=tmp_path / "work", scenes=scenes, model=model, backend="http://es:9200/vs",
                      no_serve=True, run_command=lambda argv: ran.append(argv) or 0)  # fmt: skip
    assert run(args) == 0
    assert [a[0] for a in ran] == ["index", "index", "eval"]  # no scenes, no training, no server
    assert all(a[a.index("--backend") + 1] == "http://es:9200/vs" for a in ran[:2])
    assert all(a[a.index("--model") + 1] == str(model) for a in ran)
    ran.clear()
    fresh = _demo_args(out=tmp_path / "new", scenes=tmp_path / "fresh", no_index=True,
                       run_command=lambda argv: ran.append(argv) or 0)  # fmt: skip
    assert run(fresh) == 0
    assert [a[0] for a in ran] == ["scenes", "train", "eval"]
    assert ran[0][ran[0].index("--out") + 1] == str(tmp_path / "fresh")
    assert ran[0][ran[0].index("--kind") + 1] == "objects" and "--groups" not in ran[0]  # all of them
    assert ran[1][ran[1].index("--config") + 1] == "lite0-128"  # the pretrained stem's recipe
