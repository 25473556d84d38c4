"""`vsparta complete-words`: a trained model's words that its training captions never used take
the vector of their nearest caption word, nearest in the text model its words come from
(``model.word_completion``).

    vsparta complete-words --model RUN/best --train train.jsonl --val val.jsonl --out RUN/completed

Writes a new model folder (the trained one is left as it is) with ``word-completion.json``: the
floor, how it was chosen (per bin of nearness, held-out caption words' hits@5 with the copied and
their own trained vectors), how many words were completed, and examples (word: caption word).
"""

from __future__ import annotations

import argparse
import json
import logging
from collections import defaultdict
from pathlib import Path
from typing import Any

from vsparta.core.progress import quiet_library_bars
from vsparta.model.resolve import existing_path

log = logging.getLogger(__name__)

COMMON_SHARE = 0.1  # a word on more of the validation images names no object ("a", "of"): not judged
REPORT = "word-completion.json"


def _floor(text: str) -> float:
    value = float(text)
    if not -1.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"--floor is a cosine between -1 and 1, got {text}")
    return value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", required=True, help="trained VisualSparta folder")
    parser.add_argument("--train", required=True, type=existing_path, help="the manifest it was trained on")
    parser.add_argument(
        "--val", required=True, type=existing_path, help="validation manifest (images, captions)"
    )
    parser.add_argument("--out", required=True, type=Path, help="folder for the completed model")
    parser.add_argument("--floor", type=_floor, help="cosine floor to use instead of the one chosen on --val")
    parser.add_argument(
        "--batch-size", type=int, default=64, help="validation images encoded at once (default 64)"
    )


def _caption_ids(records: list[Any], tokenize: Any, skip: set[int]) -> list[set[int]]:
    """Per record: the ids its captions hold (query-impossible ones left out)."""
    return [{t for c in r.captions for t in tokenize(c)} - skip for r in records]


def _encode(model: Any, records: list[Any], batch_size: int) -> tuple[Any, Any]:
    """The validation images' contextual region states ``h [B, L, H]`` and mask, on CPU."""
    import torch

    from vsparta.model.data import ImageStore

    store = ImageStore(records, model.config, model.query_tokenizer().tokenize, cache=False)
    hs, masks = [], []
    model.eval()
    with torch.no_grad():
        for start in range(0, len(store), batch_size):
            pixels, regions = store.image_batch(list(range(start, min(len(store), start + batch_size))))
            h, mask = model.encode_images(pixel_values=pixels, regions=regions)
            hs.append(h.float())
            masks.append(mask)
    return torch.cat(hs), torch.cat(masks)


def _readable(records: list[Any]) -> tuple[list[Any], list[str]]:
    """The records whose image opens, and the ids of those that do not (left out, reported)."""
    from vsparta.model.data import load_rgb

    kept, unreadable = [], []
    for r in records:
        try:
            load_rgb(r.image)
        except (OSError, ValueError):
            unreadable.append(r.id)
            continue
        kept.append(r)
    return kept, unreadable


def _trained_model(args: argparse.Namespace) -> tuple[str, Any, Any]:
    """(folder, model, the text model's word table) of ``--model``; one sentence when it cannot
    be completed."""
    from vsparta.model.configuration import DEFAULT_TEXT_MODEL
    from vsparta.model.dense import load_model
    from vsparta.model.modeling import VisualSpartaModel
    from vsparta.model.resolve import resolve_model_path
    from vsparta.model.text_init import load_bert_state
    from vsparta.model.tokenization import resolve_text_model

    if args.batch_size < 1:
        raise ValueError(f"--batch-size must be at least 1, got {args.batch_size}")
    folder = resolve_model_path(args.model, hub=False)
    if Path(args.out).resolve() == Path(folder):
        raise ValueError("--out is the trained model's own folder: give a new one (the trained one is kept)")
    model = load_model(folder)
    if not isinstance(model, VisualSpartaModel):
        raise ValueError(f"{args.model} is a dense model: it has no words to complete")
    # nearness is read in the table of the text model the words came from: the one the table
    # started from, else the one whose tokenizer the model uses
    source_name = model.config.word_embeddings_from or model.config.text_model or DEFAULT_TEXT_MODEL
    location = resolve_model_path(resolve_text_model(source_name), option="the text model")
    source = load_bert_state(location)["embeddings.word_embeddings.weight"].float()
    if source.shape[0] != model.config.vocab_size:
        raise ValueError(
            f"{source_name} has {source.shape[0]:,} words and the model {model.config.vocab_size:,}: "
            "their vocabularies differ, so the model's words cannot be looked up there"
        )
    return folder, model, source


def complete_words(args: argparse.Namespace) -> dict[str, Any]:
    import numpy as np
    import torch

    from vsparta.core.manifest import read_manifest
    from vsparta.model.word_completion import HeldOutWords, choose_floor, completion, held_out_words

    folder, model, source = _trained_model(args)
    table = model.word_embeddings.weight.detach()
    bias = model.phi_bias.detach().float() + torch.zeros(table.shape[0])
    if model.term_bias is not None:
        bias = bias + model.term_bias.detach().float()
    tokenize = model.query_tokenizer().tokenize
    skip = {int(i) for i in model.non_query_ids().tolist()}
    seen = sorted(set().union(*_caption_ids(read_manifest(args.train), tokenize, skip)))
    val, unreadable = _readable(read_manifest(args.val))
    if unreadable:
        log.warning(
            "%d validation images cannot be read and are left out (e.g. %s)", len(unreadable), unreadable[0]
        )
    named: dict[int, list[int]] = defaultdict(list)
    for row, ids in enumerate(_caption_ids(val, tokenize, skip)):
        for t in ids:
            named[t].append(row)
    relevant = {t: np.asarray(rows) for t, rows in named.items() if len(rows) <= COMMON_SHARE * len(val)}
    h, h_mask = _encode(model, val, args.batch_size) if val else (None, None)
    held = held_out_words(source, table, bias, seen, h, h_mask, relevant) if val else HeldOutWords()
    floor = args.floor if args.floor is not None else choose_floor(held)
    seen_set = set(seen)
    candidates = [i for i in range(table.shape[0]) if i not in seen_set and i not in skip]
    chosen, nearest = completion(source, seen, candidates, floor) if floor is not None else ([], [])
    with torch.no_grad():
        if chosen:
            model.word_embeddings.weight[chosen] = table[nearest].clone()
            if model.term_bias is not None:
                model.term_bias[chosen] = model.term_bias[nearest].clone()
    args.out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(args.out)
    names = model.tokenizer.convert_ids_to_tokens
    step = max(1, len(chosen) // 30)
    report = {
        "model": folder,
        "floor": floor,
        "floor_chosen_on_validation": args.floor is None,
        "caption_words": len(seen),
        "completed_words": len(chosen),
        "examples": dict(zip(names(chosen[::step][:30]), names(nearest[::step][:30]), strict=True)),
        "held_out_caption_words": len(held.ids),
        "unreadable_validation_images": unreadable,
        "bins": held.bins(),
    }
    (args.out / REPORT).write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    return report


def run(args: argparse.Namespace) -> int:
    quiet_library_bars()
    try:
        report = complete_words(args)
    except (ValueError, FileNotFoundError) as exc:
        log.error("%s", exc)
        return 2
    log.info(
        "floor %s (%s): %d words no caption used took their nearest caption word's vector; %s written",
        report["floor"],
        "chosen on --val" if report["floor_chosen_on_validation"] else "given",
        report["completed_words"],
        args.out,
    )
    return 0
