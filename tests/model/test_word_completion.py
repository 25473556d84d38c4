"""Words no training caption used take their nearest caption word's vector (``model.word_completion``,
``vsparta complete-words``): the nearness, the floor chosen on held-out caption words, the command."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import TINY

from vsparta.cli import main
from vsparta.model.configuration import DEFAULT_TEXT_MODEL
from vsparta.model.word_completion import (
    MIN_BIN_WORDS,
    HeldOutWords,
    choose_floor,
    completion,
    nearest_ids,
    word_hits,
)


def test_the_nearest_id_is_another_one_and_by_cosine() -> None:
    source = torch.tensor([[1.0, 0.0], [1.0, 0.1], [0.0, 1.0], [0.0, 3.0]])
    cosine, nearest = nearest_ids(source, [0, 2, 3], [0, 1, 3])
    assert nearest.tolist() == [1, 3, 1]  # never itself; the length of a vector does not count
    assert cosine[0] == pytest.approx(
        float(torch.nn.functional.cosine_similarity(source[0], source[1], dim=0))
    )
    assert cosine[1] == pytest.approx(1.0)


def _held(bands: list[tuple[float, float, float]]) -> HeldOutWords:
    """``(cosine, copied hit share, trained hit share)`` per band, ``2 * MIN_BIN_WORDS`` words each."""
    held = HeldOutWords()
    n = 2 * MIN_BIN_WORDS
    for cos, copied, trained in bands:
        held.cosine += [cos] * n
        held.hit_copied += [k < copied * n for k in range(n)]
        held.hit_trained += [k < trained * n for k in range(n)]
        held.ids += list(range(len(held.ids), len(held.ids) + n))
    return held


def test_the_floor_is_the_lowest_from_which_every_bin_keeps_half_the_trained_hits() -> None:
    held = _held([(0.95, 0.9, 1.0), (0.75, 0.6, 1.0), (0.55, 0.4, 1.0), (0.35, 0.6, 1.0)])
    assert choose_floor(held) == 0.7  # 0.5-0.6 recovers 0.4 < 0.5: below it nothing, though 0.3 would pass
    rows = held.bins()
    assert [r["from"] for r in rows[:3]] == [0.9, 0.7, 0.5] and all(r["words"] >= MIN_BIN_WORDS for r in rows)
    assert choose_floor(_held([(0.95, 0.2, 1.0), (0.75, 0.9, 1.0)])) is None  # the nearest words fail


def test_a_word_hits_when_one_of_its_images_is_among_the_first_five() -> None:
    h = torch.zeros(8, 2, 3)
    h[:, 0, 0] = torch.arange(8.0)  # image 7 answers word 0 most, then 6, 5...
    h[3, 1, 1] = 5.0  # only image 3 holds word 1
    mask = torch.ones(8, 2, dtype=torch.bool)
    vectors = torch.tensor([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 1.0, 0.0]])
    bias = torch.tensor([0.0, 0.0, -6.0])  # word 2: below zero everywhere, so nothing is returned
    hits = word_hits(vectors, bias, h, mask, [np.array([1]), np.array([3]), np.array([3])])
    assert hits == [False, True, False]
    assert word_hits(vectors[:1], bias[:1], h, mask, [np.array([4])]) == [True]


def test_completion_leaves_out_the_words_far_from_every_caption_word() -> None:
    source = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 0.05], [-1.0, -1.0], [0.1, 1.0]])
    assert completion(source, [0, 1], [2, 3, 4], floor=0.9) == ([2, 4], [0, 1])


COLOURS = {
    "red": (220, 30, 30),
    "green": (30, 180, 40),
    "blue": (30, 60, 220),
    "yellow": (230, 210, 30),
    "orange": (250, 140, 0),
    "purple": (130, 30, 160),
    "pink": (250, 150, 200),
    "brown": (120, 70, 20),
    "black": (10, 10, 10),
    "white": (255, 255, 255),
    "gray": (128, 128, 128),
    "cyan": (0, 220, 220),
}


def _colour_scenes(root: Path) -> Path:
    """24 squares of 12 colours on a grey-blue ground, two sizes: each colour word names 2 of 24."""
    from PIL import Image, ImageDraw

    from vsparta.core.manifest import ManifestRecord, write_manifest

    root.mkdir(parents=True, exist_ok=True)
    records = []
    for name, rgb in COLOURS.items():
        for big in (False, True):
            im = Image.new("RGB", (32, 32), (90, 110, 140))
            ImageDraw.Draw(im).rectangle((4, 4, 28, 28) if big else (10, 10, 22, 22), fill=rgb)
            path = root / f"{name}-{int(big)}.png"
            im.save(path)
            size = "big" if big else "small"
            records.append(ManifestRecord(path.stem, path, [f"a {size} {name} square", f"{name} square"]))
    return write_manifest(root / "manifest.jsonl", records)


@pytest.fixture(scope="module")
def colour_manifest(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _colour_scenes(tmp_path_factory.mktemp("colours"))


@pytest.fixture(scope="module")
def trained(colour_manifest: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny model whose word table started from MiniLM's, trained until it knows the colours."""
    out = tmp_path_factory.mktemp("completion")
    config = out / "config.json"
    config.write_text(json.dumps({**TINY, "word_embeddings_from": DEFAULT_TEXT_MODEL}))
    argv = ["train", "--manifest", str(colour_manifest), "--out", str(out / "run"), "--config",
            str(config), "--epochs", "30", "--lr", "1e-2", "--batch-size", "8", "--no-progress",
            "--init", "none"]  # fmt: skip
    assert main(argv) == 0
    return out / "run" / "final"


def _digest(folder: Path) -> str:
    return hashlib.sha1(b"".join(p.read_bytes() for p in sorted(folder.glob("*")) if p.is_file())).hexdigest()


def _top(model_dir: Path, manifest: Path, query: str, k: int) -> list[str]:
    """The ids of the first ``k`` images for ``query`` (Eq. 12 over every image of ``manifest``)."""
    from vsparta.core.manifest import read_manifest
    from vsparta.model.data import ImageStore
    from vsparta.model.dense import load_model

    model = load_model(model_dir).eval()
    records = read_manifest(manifest)
    store = ImageStore(records, model.config, model.query_tokenizer().tokenize, cache=False)
    pixels, regions = store.image_batch(list(range(len(records))))
    ids = torch.tensor([model.query_tokenizer().tokenize(query)])
    with torch.no_grad():
        h, mask = model.encode_images(pixel_values=pixels, regions=regions)
        scores = model.score(ids, torch.ones_like(ids), h, mask)[0]
    return [records[i].id for i in scores.argsort(descending=True)[:k].tolist()]


@pytest.mark.slow
def test_a_word_no_caption_used_finds_the_images_of_its_caption_twin(
    trained: Path, colour_manifest: Path, tmp_path: Path
) -> None:
    """Captions say "gray"; "grey" (MiniLM cosine >= 0.6 to it) finds both gray squares only once
    completed. The trained model is left as it was; caption words keep their vectors."""
    from vsparta.model.dense import load_model

    before = _digest(trained)
    common = ["complete-words", "--model", str(trained), "--train", str(colour_manifest),
              "--val", str(colour_manifest)]  # fmt: skip
    assert main([*common, "--out", str(tmp_path / "given"), "--floor", "0.6"]) == 0
    report = json.loads((tmp_path / "given" / "word-completion.json").read_text())
    assert report["floor"] == 0.6 and not report["floor_chosen_on_validation"]
    assert report["examples"]["grey"] == "gray" and report["caption_words"] == 17
    assert _digest(trained) == before
    old, new = load_model(trained), load_model(tmp_path / "given")
    table = old.word_embeddings.weight
    changed = (table != new.word_embeddings.weight).any(dim=1).nonzero().flatten()
    assert len(changed) == report["completed_words"] > 0
    names = new.tokenizer.convert_ids_to_tokens
    assert "grey" in names(changed.tolist()) and not {"gray", "square", "big", "small", *COLOURS} & set(
        names(changed.tolist())
    )  # caption words keep their trained vectors
    grey, gray = new.tokenizer.convert_tokens_to_ids(["grey", "gray"])
    assert torch.equal(new.word_embeddings.weight[grey], table[gray])
    assert set(_top(trained, colour_manifest, "gray", 2)) == {"gray-0", "gray-1"}  # the model knows gray
    assert set(_top(trained, colour_manifest, "grey", 2)) != {"gray-0", "gray-1"}
    assert set(_top(tmp_path / "given", colour_manifest, "grey", 2)) == {"gray-0", "gray-1"}

    # The floor chosen on --val: a colour held out takes another colour's vector ("white" for
    # "gray"...), which finds the wrong squares: the copy is judged, not trusted, and nothing is
    # completed.
    assert main([*common, "--out", str(tmp_path / "chosen")]) == 0
    chosen = json.loads((tmp_path / "chosen" / "word-completion.json").read_text())
    print(chosen)
    assert chosen["floor_chosen_on_validation"] and chosen["held_out_caption_words"] >= len(COLOURS)
    assert chosen["floor"] is None and chosen["completed_words"] == 0


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Untrained tiny models, saved: one whose table started from MiniLM's, one from random values,
    one dense."""
    from vsparta.model.configuration import VisualSpartaConfig
    from vsparta.model.dense import DenseConfig, DenseDualEncoder
    from vsparta.model.modeling import build_model

    out = tmp_path_factory.mktemp("saved")
    for name, extra in (("minilm", {"word_embeddings_from": DEFAULT_TEXT_MODEL}), ("random", {})):
        build_model(VisualSpartaConfig(**TINY, **extra)).save_pretrained(out / name)
    build_model(DenseConfig(**TINY), model_class=DenseDualEncoder).save_pretrained(out / "dense")
    return {name: out / name for name in ("minilm", "random", "dense")}


def test_complete_words_says_in_one_sentence_what_is_wrong(
    saved: dict[str, Path], colour_manifest: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    common = ["complete-words", "--train", str(colour_manifest), "--val", str(colour_manifest)]
    assert main([*common, "--model", str(saved["minilm"]), "--out", str(saved["minilm"])]) == 2
    assert "the trained model's own folder" in caplog.text
    assert main([*common, "--model", str(saved["dense"]), "--out", str(tmp_path / "o")]) == 2
    assert "is a dense model: it has no words to complete" in caplog.text
    assert main([*common, "--model", str(tmp_path / "missing"), "--out", str(tmp_path / "o")]) == 2
    assert "no such folder" in caplog.text
    assert (
        main([*common, "--model", str(saved["minilm"]), "--out", str(tmp_path / "o"), "--batch-size", "0"])
        == 2
    )
    assert "--batch-size must be at least 1" in caplog.text
    with pytest.raises(SystemExit) as exit_:
        main([*common, "--model", str(saved["minilm"]), "--out", str(tmp_path / "o"), "--floor", "2"])
    assert exit_.value.code == 2
    assert not (tmp_path / "o").exists()


def test_a_model_whose_table_started_from_random_values_is_completed_in_its_tokenizers_text_model(
    saved: dict[str, Path], colour_manifest: Path, tmp_path: Path
) -> None:
    """Nearness is a property of the words, not of the trained table: MiniLM's (the tokenizer's)."""
    argv = ["complete-words", "--model", str(saved["random"]), "--train", str(colour_manifest),
            "--val", str(colour_manifest), "--out", str(tmp_path / "out"), "--floor", "0.6"]  # fmt: skip
    assert main(argv) == 0
    report = json.loads((tmp_path / "out" / "word-completion.json").read_text())
    assert report["examples"]["grey"] == "gray" and report["completed_words"] > 0


def test_an_unreadable_validation_image_is_left_out_and_reported(
    saved: dict[str, Path], colour_manifest: Path, tmp_path: Path
) -> None:
    from vsparta.core.manifest import ManifestRecord, read_manifest, write_manifest

    broken = tmp_path / "broken.png"
    broken.write_bytes(b"\x89PNG\r\n\x1a\n not really")
    records = [*read_manifest(colour_manifest), ManifestRecord("broken", broken, ["a broken gray square"])]
    val = write_manifest(tmp_path / "val.jsonl", records)
    argv = ["complete-words", "--model", str(saved["minilm"]), "--train", str(colour_manifest),
            "--val", str(val), "--out", str(tmp_path / "out")]  # fmt: skip
    assert main(argv) == 0
    report = json.loads((tmp_path / "out" / "word-completion.json").read_text())
    assert report["unreadable_validation_images"] == ["broken"]
    assert report["held_out_caption_words"] >= len(COLOURS)  # the others were all used
