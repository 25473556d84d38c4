"""``masters.steer``: while some host has no master, reads that pick shard copies prefer the nodes
of the hosts that name the master most hosts name (the cluster case is ``test_elastic_masters.py``)."""

from __future__ import annotations

import json

from elasticsearch.client.utils import _bulk_body
from elasticsearch.serializer import JSONSerializer

from vsparta.termindex.elastic.masters import MasterProbe, steer
from vsparta.termindex.elastic.statistics import statistics_body

PREFER = "_prefer_nodes:a1,c3"


def test_the_preference_names_the_nodes_of_hosts_that_name_the_majority_master() -> None:
    probe = MasterProbe("elasticsearch")
    probe._connections = ("h1", "h2", "h3")
    probe.node_ids = {"h1": "c3", "h2": "b2", "h3": "a1"}
    probe.named = {"h1": "a1", "h2": "a1", "h3": "a1"}
    assert probe.preference is None  # every host knows a master: the engine picks copies
    probe.named["h2"], probe.masterless = "", frozenset({"h2"})
    assert probe.preference == PREFER
    del probe.node_ids["h3"]  # a host whose id is not known yet is left out of the list
    assert probe.preference == "_prefer_nodes:c3"


def test_no_preference_without_a_majority_master() -> None:
    probe = MasterProbe("elasticsearch")
    probe._connections = ("h1", "h2", "h3")
    probe.node_ids = {"h1": "c3", "h2": "b2", "h3": "a1"}
    # an election under way: the cut-off old master (h2) names itself, h1 names the new one (h3),
    # which names none yet
    probe.named, probe.masterless = {"h1": "a1", "h2": "b2", "h3": ""}, frozenset({"h3"})
    assert probe.preference is None
    probe.named, probe.masterless = {"h1": "", "h2": "", "h3": ""}, frozenset({"h1", "h2", "h3"})
    assert probe.preference is None


def test_searches_counts_and_gets_take_it_as_a_parameter() -> None:
    for method, url in [("POST", "/vs/_search"), ("GET", "/vs/_count"), ("POST", "/vs/_mget"),
                        ("GET", "/vs/_doc/img-7")]:  # fmt: skip
        params, body = steer(PREFER, method, url, {"size": 3}, {"query": {}})
        assert params == {"size": 3, "preference": PREFER} and body == {"query": {}}
    assert steer(PREFER, "GET", "/vs/_count", None, None) == ({"preference": PREFER}, None)


def test_its_own_preference_and_other_requests_are_left_alone() -> None:
    own = {"preference": "_local"}
    assert steer(PREFER, "POST", "/vs/_search", own, None) == (own, None)
    for method, url in [("PUT", "/vs/_doc/img-7"), ("DELETE", "/vs/_doc/img-7"), ("POST", "/_bulk"),
                        ("GET", "/_cat/master"), ("GET", "/vs/_mapping"),
                        ("POST", "/vs/_refresh")]:  # fmt: skip
        assert steer(PREFER, method, url, {"x": 1}, "b") == ({"x": 1}, "b")
    assert steer(None, "POST", "/vs/_search", {"size": 3}, None) == ({"size": 3}, None)


def test_every_request_of_an_msearch_gets_it_in_its_header() -> None:
    body = _bulk_body(JSONSerializer(), statistics_body([5, 9]))  # what the client sends
    for sent in (body, body.encode()):
        params, steered = steer(PREFER, "POST", "/vs/_msearch", None, sent)
        assert params is None and type(steered) is type(sent)
        text = steered.decode() if isinstance(steered, bytes) else steered
        lines = [json.loads(line) for line in text.splitlines()]
        assert text.endswith("\n") and len(lines) == 6
        assert [h.get("preference") for h in lines[0::2]] == [PREFER] * 3
        assert lines[1::2] == statistics_body([5, 9])[1::2]  # the searches themselves unchanged
    own = '{"preference":"_local"}\n{"size":0}\n'
    assert steer(PREFER, "POST", "/vs/_msearch", None, own)[1] == own
