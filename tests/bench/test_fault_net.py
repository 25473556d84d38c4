"""The network faults the partition tests and the soak inject (``bench/fault_net.py``), on real
sockets: a cut drops one direction between two of our loopback addresses and nothing else, a slow
link holds packets for the given seconds (NFQUEUE, ``bench/fault_delay.py``), healing and closing
leave no rule behind, and the chains of a killed run are removed by the next one."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from vsparta.bench.fault_cluster import LocalCluster
from vsparta.bench.fault_net import PREFIX, NetFaults, clean_stale, iptables


@pytest.fixture
def addresses(tmp_path: Path, require) -> Iterator[list[str]]:
    """Three loopback addresses no one else uses (a block claimed as a test cluster's)."""
    require(os.geteuid() == 0 and shutil.which("iptables") is not None, "root with iptables",
            "run as root after `bash scripts/install-system-deps.sh`")  # fmt: skip
    block = LocalCluster("elasticsearch-7.17", tmp_path).claim()
    try:
        yield block.addresses()
    finally:
        block.release()


def datagram_arrives(source: str, dest: str) -> bool:
    with (
        socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as rx,
        socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as tx,
    ):
        rx.bind((dest, 0))
        rx.settimeout(0.5)
        tx.bind((source, 0))
        tx.sendto(b"x", rx.getsockname())
        try:
            return rx.recv(8) == b"x"
        except TimeoutError:
            return False


def round_trip_s(source: str, dest: str) -> float:
    """Seconds for a TCP connect and a 4-byte echo from ``source`` to ``dest``."""
    with socket.socket() as server, socket.socket() as client:
        server.bind((dest, 0))
        server.listen(1)
        client.bind((source, 0))
        client.settimeout(30)
        t0 = time.monotonic()
        client.connect(server.getsockname())
        conn, _ = server.accept()
        with conn:
            client.sendall(b"ping")
            conn.recv(4)
        return time.monotonic() - t0


def our_rules() -> str:
    return iptables("-S").stdout + iptables("-S", table="nat").stdout


def test_a_cut_drops_one_direction_between_two_of_our_addresses_only(addresses: list[str]) -> None:
    a, b, c = addresses
    with NetFaults(addresses) as faults:
        assert datagram_arrives(a, b) and datagram_arrives(b, a)
        faults.cut(a, b)
        assert not datagram_arrives(a, b)  # cut
        assert datagram_arrives(b, a) and datagram_arrives(c, b) and datagram_arrives(a, c)  # the rest flows
        assert datagram_arrives("127.0.0.1", b)
        faults.heal()
        assert datagram_arrives(a, b)
        chain = faults.chain
        assert chain in our_rules()
    assert chain not in our_rules()  # closed: nothing left


def test_a_reset_cut_both_ways_fails_connections_at_once(addresses: list[str]) -> None:
    """Both directions cut with resets: an open connection and a new one fail at once. (The
    reset answering one direction travels the other; before resets passed, that rule swallowed
    it and the link hung like a drop.)"""
    a, b, _ = addresses
    with NetFaults(addresses) as faults, socket.socket() as server, socket.socket() as client:
        server.bind((b, 0))
        server.listen(2)
        client.bind((a, 0))
        client.connect(server.getsockname())
        peer, _ = server.accept()
        faults.cut(a, b, reset=True)
        faults.cut(b, a, reset=True)
        client.settimeout(5)
        t0 = time.monotonic()
        with peer, pytest.raises(ConnectionResetError):
            client.sendall(b"ping")
            client.recv(4)
        with socket.socket() as fresh:
            fresh.bind((a, 0))
            fresh.settimeout(5)
            with pytest.raises(ConnectionRefusedError):
                fresh.connect(server.getsockname())
        assert time.monotonic() - t0 < 1.0
        faults.heal()
        assert round_trip_s(a, b) < 0.3


def test_a_slow_link_holds_packets_for_seconds_and_only_between_its_pair(addresses: list[str]) -> None:
    a, b, c = addresses
    with NetFaults(addresses) as faults:
        faults.slow(a, b, 0.5)
        slow, fast = round_trip_s(a, b), round_trip_s(a, c)
        held = faults.heal()
        after = round_trip_s(a, b)
    # connect (SYN, SYN-ACK) and the echo (data, ACK): each packet of the pair waits 0.5 s
    assert slow >= 1.5 and fast < 0.3 and after < 0.3 and held >= 4, (slow, fast, after, held)


def test_rules_name_only_a_test_clusters_addresses() -> None:
    with pytest.raises(ValueError, match="own addresses"):
        NetFaults(["127.0.0.1", "127.0.0.2"])
    with pytest.raises(ValueError, match="own addresses"):
        NetFaults(["10.0.0.1"])


def test_chains_of_a_killed_run_are_removed_by_the_next(addresses: list[str]) -> None:
    proc = subprocess.Popen(["true"])  # a process that has ended: its pid names a dead run
    proc.wait()
    chain = f"{PREFIX}{proc.pid}-abc123"
    iptables("-N", chain)
    iptables("-I", "INPUT", "1", "-j", chain)
    iptables("-A", chain, "-s", addresses[0], "-d", addresses[1], "-j", "DROP")
    assert chain in our_rules()
    removed = clean_stale()
    assert f"filter/{chain}" in removed and chain not in our_rules()
