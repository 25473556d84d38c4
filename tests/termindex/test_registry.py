"""The engine registry: spec forms, one engine per scheme, and dispatch by the engines' own records."""

from __future__ import annotations

import argparse
import asyncio
import dataclasses

import pytest
from elastic_testkit import unique_name

from vsparta.termindex import BackendSpec, TermDocument, open_index, parse_spec, registry
from vsparta.termindex.elastic.plugin import ENGINE as ELASTIC


def test_spec_forms() -> None:
    assert parse_spec("embedded:/a/b") == BackendSpec("embedded", "/a/b", None)
    assert parse_spec("relative/dir") == BackendSpec("embedded", "relative/dir", None)
    assert parse_spec("C:\\index") == BackendSpec("embedded", "C:\\index", None)  # a drive letter is a path
    for spec in ("http://h:9200/name", "elasticsearch+http://h:9200/name"):
        assert parse_spec(spec) == BackendSpec("elasticsearch", "http://h:9200", "name")
    assert parse_spec("elasticsearch+https://h/n").location == "https://h"
    engine, location, name = parse_spec("https://h:1/n")  # still unpacks as a tuple
    assert (engine, location, name) == ("elasticsearch", "https://h:1", "n")


@pytest.mark.parametrize(
    ("spec", "says"),
    [
        ("embeded:/typo", "unknown backend 'embeded:/typo': use embedded:/path/to/index or http://"),
        ("es://h/n", "unknown backend"),
        ("http://h:9200", "Elasticsearch spec must be http://HOST:PORT/INDEX"),
        ("elasticsearch+http://h/a/b", "Elasticsearch spec must be elasticsearch+http://HOST:PORT/INDEX"),
        ("embedded:", "embedded spec needs a directory"),
    ],
)
def test_malformed_specs_say_what_is_expected(spec: str, says: str) -> None:
    with pytest.raises(ValueError, match=says.replace("+", r"\+").replace("(", r"\(")):
        parse_spec(spec)


def test_a_scheme_belongs_to_one_engine() -> None:
    registry.engines()
    with pytest.raises(ValueError, match="already belong to 'elasticsearch'"):
        registry.register(dataclasses.replace(ELASTIC, name="other", schemes=("http",)))
    assert [e.name for e in registry.engines()] == ["embedded", "elasticsearch", "opensearch"]


def test_engine_facts_come_from_the_records() -> None:
    assert registry.client_loggers() == ["elasticsearch"]
    assert registry.engine_of("embedded:/x").paths and registry.engine_of("http://h/n").versions
    parser = argparse.ArgumentParser()
    registry.add_index_arguments(parser)
    args = parser.parse_args(["--shards", "2"])
    args.resume, args.num_shards = False, 1
    assert registry.index_options(parse_spec("http://h/n"), args) == {"shards": 2}
    with pytest.raises(ValueError, match="--shards, --replicas and --new-version need an Elasticsearch"):
        registry.index_options(parse_spec("embedded:/x"), args)
    with pytest.raises(ValueError, match="need an Elasticsearch"):
        registry.index_options(None, args)


def test_a_parsed_spec_reads_back_in_messages() -> None:
    for text in ("embedded:/a/b", "elasticsearch+http://h:9200/n", "opensearch+https://h:1/images"):
        assert str(parse_spec(text)) == text
        assert parse_spec(str(parse_spec(text))) == parse_spec(text)
    assert str(parse_spec("relative/dir")) == "embedded:relative/dir"


@pytest.mark.elasticsearch
def test_the_explicit_form_opens_elasticsearch_sync_and_async(es_url: str) -> None:
    spec = parse_spec(f"elasticsearch+{es_url}/{unique_name('registry')}")
    with open_index(f"elasticsearch+{spec.location}/{spec.name}", create=True) as index:
        try:
            index.upsert([TermDocument("a", {5: 2.0}), TermDocument("b", {5: 1.0, 6: 3.0})])
            hits = index.search({5: 1.0}, k=2, explain=True)

            async def read() -> tuple[list, int]:
                reader = ELASTIC.open_async(spec, 5.0)
                try:
                    return await reader.search({5: 1.0}, k=2, explain=True), await reader.count()
                finally:
                    await reader.close()

            async_hits, count = asyncio.run(read())
            assert [h.id for h in hits] == ["a", "b"] and count == 2
            assert [(h.id, h.score, h.contributions) for h in async_hits] == [
                (h.id, h.score, h.contributions) for h in hits
            ]
        finally:
            index.drop()  # type: ignore[attr-defined]
