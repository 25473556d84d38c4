"""From CLI options to what the runner needs: corpus loaders, a query maker, fresh adapters per size."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import Any

from vsparta.bench.corpus import Corpus, Query
from vsparta.bench.engines.base import Adapter


def corpora_and_queries(
    args: argparse.Namespace, sizes: list[tuple[str, int]], n_queries: int
) -> tuple[list[tuple[str, Callable[[], Corpus]]], Callable[[Corpus], list[Query]], dict]:
    if args.term_docs is not None:
        return _term_docs(args, n_queries)
    if getattr(args, "corpus", "synthetic") == "model-shaped":
        return _model_shaped(args, sizes, n_queries)
    from vsparta.bench.synthetic import VOCAB_SIZE, SyntheticSpec, generate_queries, load_or_generate

    cache = Path(args.cache_dir)
    corpora = [
        (label, lambda n=n: load_or_generate(SyntheticSpec(n, n_terms=args.n_terms, seed=args.seed), cache))
        for label, n in sorted(sizes, key=lambda s: s[1])
    ]
    zipf_s, zipf_b = getattr(args, "query_zipf", (1.0, 100.0))
    queries = generate_queries(n_queries, VOCAB_SIZE, seed=args.seed, zipf_s=zipf_s, zipf_b=zipf_b)
    description = {
        "documents": f"synthetic, seed {args.seed}: top-{args.n_terms} of {VOCAB_SIZE:,} word-pieces "
        "per image, Zipf(1.0, +100) document frequency, log-normal φ (median 0.37; see bench/synthetic.py)",
        "queries": f"{n_queries} synthetic captions of 8-12 tokens, Zipf({zipf_s}, +{zipf_b}) over the "
        "same ranking, repeats counted",
    }
    return corpora, lambda corpus: queries, description


def _model_shaped(args: argparse.Namespace, sizes: list[tuple[str, int]], n_queries: int):
    """Documents sampled from a trained model's profile (``bench.model_shaped``): its ~28 terms per
    image load at thousands of documents/s where the synthetic 1,000-term ones load at hundreds."""
    from vsparta.bench.model_shaped import load_or_generate, load_profile, summary

    cache = Path(args.cache_dir) / "model-shaped"
    profile = Path(args.profile)
    corpora = [
        (label, lambda n=n: load_or_generate(profile, n, cache, seed=args.seed))
        for label, n in sorted(sizes, key=lambda s: s[1])
    ]
    shape = summary(load_profile(profile))
    description = {
        "documents": f"model-shaped, seed {args.seed}: sampled from {profile} ({shape['terms_seen']:,} terms "
        f"seen, {shape['mean_terms_per_image']:.1f} per image, {shape['terms_in_half_the_images']} in half "
        "the images; see bench/model_shaped.py)",
    }
    if getattr(args, "captions", None):
        from vsparta.model.query_tokenizer import QueryTokenizer

        if not args.model:
            raise ValueError("--captions needs --model (the folder whose tokenizer made the profile)")
        tok = QueryTokenizer.from_pretrained(args.model)
        return _with_queries(args, corpora, description, n_queries, tok)
    return _with_queries(args, corpora, description, n_queries, None)


def _with_queries(args: argparse.Namespace, corpora: list, description: dict, n_queries: int, tok: Any):
    """The queries: ``--captions`` tokenized as the service does (``tok``), or captions drawn in
    proportion to the corpus's document frequencies."""
    from vsparta.bench.termdocs import queries_from_captions, queries_from_df

    if tok is not None and getattr(args, "captions", None):
        queries = queries_from_captions(args.captions, tok.query_weights, n_queries, seed=args.seed)
        description["queries"] = (
            f"{len(queries)} captions sampled from {args.captions}, tokenized as the service does"
        )
        return corpora, lambda corpus: queries, description
    description["queries"] = (
        f"{n_queries} captions of 8-12 tokens drawn in proportion to the corpus's document frequency"
    )
    return corpora, lambda corpus: queries_from_df(corpus, n_queries, seed=args.seed), description


def _term_docs(args: argparse.Namespace, n_queries: int):
    from vsparta.bench.engines.service import default_model_dir
    from vsparta.bench.termdocs import load_term_docs
    from vsparta.model.query_tokenizer import QueryTokenizer

    model = args.model or default_model_dir()
    if model is None:
        raise ValueError("--term-docs needs --model (a folder with tokenizer.json)")
    tok = QueryTokenizer.from_pretrained(model)
    label = Path(args.term_docs).name
    corpora = [(label, lambda: load_term_docs(Path(args.term_docs), tok.token_to_id, tok.vocab_size))]
    description = {"documents": f"real term documents {args.term_docs} (indexer output), tokenizer {model}"}
    return _with_queries(args, corpora, description, n_queries, tok)


def make_adapters_factory(args: argparse.Namespace, engines: list[str]) -> Callable[[], list[Adapter]]:
    """A fresh set of adapters for each size (they hold per-size state)."""

    def make() -> list[Adapter]:
        from vsparta.bench.engines.dense import FaissDenseAdapter, NumpyDenseAdapter
        from vsparta.bench.engines.ours import ElasticsearchAdapter, EmbeddedAdapter, OpenSearchAdapter
        from vsparta.bench.engines.pisa import PisaAdapter
        from vsparta.bench.engines.scipy_exact import ScipyAdapter
        from vsparta.bench.engines.seismic import SeismicAdapter
        from vsparta.bench.engines.service import ServiceAdapter

        out: list[Adapter] = []
        budgets = getattr(args, "engine_budgets", None) or {}

        def add(cli_name: str, adapter: Adapter) -> Adapter:
            if cli_name in budgets:  # --engine-budget overrides the run's build budget
                adapter.build_budget_s = budgets[cli_name]
            out.append(adapter)
            return adapter

        embedded = elastic = None
        if "scipy" in engines:
            add("scipy", ScipyAdapter())
        if "embedded" in engines or ("service" in engines and args.service_backend == "embedded"):
            embedded = add("embedded", EmbeddedAdapter())
        es_service = "service" in engines and args.service_backend == "elasticsearch"
        if "elasticsearch" in engines or "elasticsearch-wand" in engines or es_service:
            elastic = add("elasticsearch", ElasticsearchAdapter(args.es_url))
            if "elasticsearch-wand" in engines:
                elastic.followers = [elastic.wand_follower()]
        for line in ("2.19", "3.x"):
            if f"opensearch-{line}" in engines:
                url = getattr(args, f"os{line[0]}_url")
                add(f"opensearch-{line}", OpenSearchAdapter(url, line))
        if "service" in engines:
            backend = elastic if args.service_backend == "elasticsearch" else embedded
            backend.followers = [
                *getattr(backend, "followers", []),
                ServiceAdapter(backend, model_dir=args.model),
            ]
        if "pisa" in engines:
            add("pisa", PisaAdapter(args.pisa_algorithm))
        if "seismic" in engines:
            add("seismic", SeismicAdapter(args.seismic_postings))
        if "dense-numpy" in engines:
            add("dense-numpy", NumpyDenseAdapter(args.seed))
        if "dense-faiss" in engines:
            add("dense-faiss", FaissDenseAdapter(args.seed))
        return out

    return make
