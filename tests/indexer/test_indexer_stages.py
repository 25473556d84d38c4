"""The job's stages are builders (``indexer.stages.Stages``): each can be swapped on its own, and
the backend spec is parsed once on the way into a job (issue 33)."""

from __future__ import annotations

import contextlib
import dataclasses
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import numpy as np
import pytest

from vsparta.indexer.batch import TermBatch
from vsparta.indexer.decoder import DecodePool, Decoder
from vsparta.indexer.items import Held, WorkItem
from vsparta.indexer.runner import IndexConfig, IndexJob, run_index
from vsparta.indexer.stages import Stages, build_decoder, read_input
from vsparta.termindex import open_index, registry


class MemorySink:
    """A sink of the writer stage that keeps what it is given: any object with the six methods."""

    def __init__(self) -> None:
        self.docs: dict[str, dict[int, float]] = {}
        self.bulk_entered = self.finished = 0

    def write(self, batch: TermBatch) -> None:
        for i, doc_id in enumerate(batch.ids):
            ids, weights = batch.row(i)
            self.docs[doc_id] = dict(zip(ids.tolist(), weights.tolist(), strict=True))

    def existing(self, items: Sequence[WorkItem]) -> dict[str, Held]:
        return {it.id: Held.AS_GIVEN for it in items if it.id in self.docs}  # keeps no metadata to compare

    @contextlib.contextmanager
    def bulk(self) -> Iterator[None]:
        self.bulk_entered += 1
        yield

    def finish(self) -> str | None:
        self.finished += 1
        return f"{len(self.docs)} documents in memory"

    def unlisted(self, listed: set[str], mine: Callable[[str], bool]) -> set[str]:
        return {i for i in self.docs if i not in listed and mine(i)}

    def remove(self, ids: set[str]) -> None:
        for doc_id in ids:
            del self.docs[doc_id]


def _config(root: Path, **kw) -> IndexConfig:
    return IndexConfig(input=root, workers=0, batch_size=3, progress=False, max_pixels=200_000, **kw)


def test_every_stage_can_be_swapped(image_folder: Path, tmp_path: Path, colour_encoder, read_export) -> None:
    """A reader of the folder's first five images, a decoder counting what it decodes and a writer
    into memory, beside the default stages: the same documents as the default job writes."""
    run_index(_config(image_folder, export_jsonl=tmp_path / "default"), encoder=colour_encoder)
    exported = read_export(tmp_path / "default")
    # the export's weights read back as the float32 the engines are given
    expected = {
        k: {int(t[3:]): float(np.float32(w)) for t, w in d["terms"].items()} for k, d in exported.items()
    }
    assert len(expected) == 12

    def first_five(config: IndexConfig, fmt: str) -> Iterator[WorkItem]:
        items = [it for it in read_input(config, fmt) if it.rejected is None and "bad/" not in it.location]
        return iter(items[:5])

    decoded: list[str] = []

    def counting_decoder(config: IndexConfig, encoder, pool: DecodePool) -> Decoder:
        decoder = build_decoder(config, encoder, pool)
        iter_decoded = decoder.iter_decoded

        def counted(items, stop=None):
            for d in iter_decoded(items, stop):
                decoded.append(d.item.id)
                yield d

        decoder.iter_decoded = counted  # type: ignore[method-assign]
        return decoder

    sink = MemorySink()

    @contextlib.contextmanager
    def into_memory(config: IndexConfig, id_to_token: Callable[[int], str], stop: threading.Event):
        assert id_to_token(7) == "tok7"  # the encoder stage's vocabulary
        yield [sink]

    stages = Stages(reader=first_five, decoder=counting_decoder, writer=into_memory)
    summary = IndexJob(_config(image_folder, export_jsonl=tmp_path / "unused"), stages=stages,
                       encoder=colour_encoder).run()  # fmt: skip
    assert summary.indexed == 5 and summary.total == 5 and summary.failed == 0
    assert sorted(decoded) == sorted(sink.docs)
    assert len(sink.docs) == 5 and sink.docs == {k: v for k, v in expected.items() if k in sink.docs}
    assert sink.bulk_entered == sink.finished == 1 and summary.engine_notes == ["5 documents in memory"]
    assert not (tmp_path / "unused").exists()  # the default writer (and its export) never ran

    again = IndexJob(_config(image_folder, resume=True, export_jsonl=tmp_path / "unused"),
                     stages=stages, encoder=colour_encoder).run()  # fmt: skip
    assert again.skipped == 5 and again.indexed == 0  # --resume asks the swapped sink


def test_a_writer_without_outputs_is_refused(image_folder: Path, tmp_path: Path, colour_encoder) -> None:
    @contextlib.contextmanager
    def nowhere(*_args) -> Iterator[list]:
        yield []

    job = IndexJob(_config(image_folder, export_jsonl=tmp_path / "e"), stages=Stages(writer=nowhere),
                   encoder=colour_encoder)  # fmt: skip
    with pytest.raises(ValueError, match="the writer stage has no outputs"):
        job.run()


def test_the_backend_spec_is_parsed_once_on_the_way_into_a_job(
    image_folder: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`vsparta index` parses --backend once; the job, the engine options and the opener take the
    parsed spec (they parsed it three times before)."""
    from vsparta.cli import main

    registry.engines()
    embedded = registry.engine("embedded")
    parsed: list[str] = []

    def parse(text: str):
        parsed.append(text)
        return embedded.parse(text)

    monkeypatch.setitem(registry._ENGINES, "embedded", dataclasses.replace(embedded, parse=parse))
    spec = f"embedded:{tmp_path / 'index'}"
    assert main(["index", str(image_folder), "--fake-encoder", "--fake-image-size", "8", "--workers", "0",
                 "--max-pixels", "200000", "--backend", spec, "--no-progress"]) == 0  # fmt: skip
    assert parsed == [spec]
    with open_index(spec) as index:
        assert index.count() == 12


def test_a_spec_string_given_to_the_config_is_parsed_there(tmp_path: Path) -> None:
    config = _config(tmp_path, backend=f"embedded:{tmp_path / 'i'}")
    assert config.backend == registry.parse_spec(f"embedded:{tmp_path / 'i'}")
    with pytest.raises(ValueError, match="unknown backend 'embeded:/x'"):
        _config(tmp_path, backend="embeded:/x")
