"""The whole online side of VisualSparta: text -> vocabulary ids with counts. No torch.

The query is never run through a network (paper section 3.1.1), so the service only needs the
WordPiece tokenizer saved with the model (``tokenizer.json``, read by the Rust ``tokenizers``
library). Repeated tokens count once per occurrence (docs/architecture.md section 2).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Mapping
from pathlib import Path

from tokenizers import Tokenizer

TOKENIZER_FILE = "tokenizer.json"

# Markup tokens of the common vocabularies; the tokenizer's own special tokens are added to these.
_MARKUP_TOKENS = ("[CLS]", "[SEP]", "[PAD]", "[MASK]", "[UNK]", "<s>", "</s>", "<pad>", "<unk>", "<mask>")
_UNUSED = re.compile(r"^\[unused\d+\]$")


def non_query_ids(tokenizer: Tokenizer) -> frozenset[int]:
    """The one rule for ids a query never contains, used by training, evaluation, indexing and the service.

    Markup ([CLS], [PAD] ...), reserved slots ([unused17]) and [UNK]: [UNK] stands for any word the
    vocabulary cannot spell, so matching it would rank images by noise; it is dropped from queries
    (training captions included) and never indexed.
    """
    vocab = tokenizer.get_vocab(with_added_tokens=True)
    ids = {vocab[t] for t in _MARKUP_TOKENS if t in vocab}
    ids |= {i for i, t in tokenizer.get_added_tokens_decoder().items() if t.special}
    ids |= {i for t, i in vocab.items() if _UNUSED.match(t)}
    return frozenset(ids)


class QueryTokenizer:
    """Turns query text into ``{vocabulary id: count}`` and ids back into display strings."""

    def __init__(self, tokenizer: Tokenizer, max_tokens: int = 64) -> None:
        self._tok = tokenizer
        self._tok.no_padding()
        self._tok.no_truncation()
        self.max_tokens = max_tokens
        vocab = tokenizer.get_vocab(with_added_tokens=True)
        self._id_to_token = {i: t for t, i in vocab.items()}
        self._token_to_id = vocab
        # the dict's own lookup, a C call: a re-index maps every token of every document with it
        self.token_to_id: Callable[[str], int | None] = vocab.get
        self.non_query_ids = non_query_ids(tokenizer)

    @classmethod
    def from_pretrained(cls, path: str | Path, max_tokens: int = 64) -> QueryTokenizer:
        """Load from a saved model folder (or a ``tokenizer.json`` file directly)."""
        p = Path(path)
        file = p if p.is_file() else p / TOKENIZER_FILE
        if not file.exists():
            raise FileNotFoundError(f"no {TOKENIZER_FILE} in {p}: is it a saved VisualSparta model folder?")
        return cls(Tokenizer.from_file(str(file)), max_tokens=max_tokens)

    @property
    def vocab_size(self) -> int:
        return self._tok.get_vocab_size(with_added_tokens=True)

    def tokenize(self, text: str) -> list[int]:
        """Word-piece ids of ``text`` in order, ``non_query_ids`` ([UNK] included) removed, at most
        ``max_tokens``."""
        ids = self._tok.encode(text, add_special_tokens=False).ids
        return [i for i in ids if i not in self.non_query_ids][: self.max_tokens]

    def query_weights(self, text: str) -> dict[int, float]:
        """``{vocabulary id: occurrences}``: the boost of each rank_feature clause."""
        return {i: float(c) for i, c in Counter(self.tokenize(text)).items()}

    def id_to_token(self, token_id: int) -> str:
        return self._id_to_token.get(token_id, f"[{token_id}]")

    def terms_to_ids(self, terms: Mapping[str, float]) -> dict[int, float]:
        """Explicit ``{token string: weight}`` -> ``{id: weight}``; unknown tokens raise KeyError."""
        out: dict[int, float] = {}
        for token, weight in terms.items():
            token_id = self._token_to_id.get(token)
            if token_id is None:
                raise KeyError(token)
            out[token_id] = out.get(token_id, 0.0) + float(weight)
        return out
