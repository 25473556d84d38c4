"""A slow link without netem: packets between chosen loopback addresses held for seconds in user
space, then let through in the order they came.

This machine's kernel has no netem (nor prio) queueing discipline (``tc qdisc add dev lo root
netem delay 1s``: "Specified qdisc kind is unknown"; htb and tbf exist but shape bandwidth, they
add no fixed delay), so ``tc`` cannot delay packets here. netfilter can: a rule sends the matching
packets to an NFQUEUE (``fault_net.NetFaults.slow``), and this module reads them from the kernel
over netlink (``NETLINK_NETFILTER``, nfnetlink_queue, packet metadata only: no payload is copied)
and gives the packets their ACCEPT verdict ``delay_s`` after they arrived. Packet ids grow in
arrival order and the delay is the same for all, so one batch verdict ("every packet up to this
id") per tick releases them in order, including any whose notice was lost to a full socket buffer.

The rules carry ``--queue-bypass`` and the queue is configured fail-open: with no reader (this
process gone) or a full queue the kernel lets packets through instead of dropping them, so a
crash leaves a link fast, never cut. The message layouts are the kernel's
(``include/uapi/linux/netfilter/nfnetlink_queue.h``).
"""

from __future__ import annotations

import collections
import errno
import logging
import select
import socket
import struct
import threading
import time

log = logging.getLogger(__name__)

NETLINK_NETFILTER = 12
NFNL_SUBSYS_QUEUE = 3
NFQNL_MSG_PACKET, NFQNL_MSG_CONFIG, NFQNL_MSG_VERDICT_BATCH = 0, 2, 3
NFQA_PACKET_HDR, NFQA_VERDICT_HDR = 1, 2
NFQA_CFG_CMD, NFQA_CFG_PARAMS, NFQA_CFG_QUEUE_MAXLEN, NFQA_CFG_MASK, NFQA_CFG_FLAGS = 1, 2, 3, 4, 5
NFQNL_CFG_CMD_BIND, NFQNL_CFG_CMD_UNBIND = 1, 2
NFQNL_COPY_META = 1
NFQA_CFG_F_FAIL_OPEN = 1
NF_ACCEPT = 1
NLM_F_REQUEST, NLM_F_ACK = 1, 4
NLMSG_ERROR = 2
SO_RCVBUFFORCE = 33
QUEUE_MAXLEN = 200_000  # packets held at once (seconds of a busy cluster's transport traffic)


def _attr(kind: int, payload: bytes) -> bytes:
    size = 4 + len(payload)
    return struct.pack("=HH", size, kind) + payload + b"\0" * (-size % 4)


def _message(msg: int, queue: int, attrs: bytes, flags: int = NLM_F_REQUEST, seq: int = 0) -> bytes:
    body = struct.pack("=BB", socket.AF_UNSPEC, 0) + struct.pack(">H", queue) + attrs
    head = struct.pack("=IHHII", 16 + len(body), (NFNL_SUBSYS_QUEUE << 8) | msg, flags, seq, 0)
    return head + body


def _packet_ids(data: bytes) -> list[int]:
    """Packet ids of the ``NFQNL_MSG_PACKET`` messages in one datagram."""
    ids, at = [], 0
    while at + 16 <= len(data):
        size, kind = struct.unpack_from("=IH", data, at)
        if size < 16:
            break
        if kind == (NFNL_SUBSYS_QUEUE << 8) | NFQNL_MSG_PACKET:
            pos, end = at + 20, at + size  # after nlmsghdr (16) and nfgenmsg (4)
            while pos + 4 <= end:
                alen, atype = struct.unpack_from("=HH", data, pos)
                if alen < 4:
                    break
                if atype & 0x7FFF == NFQA_PACKET_HDR:
                    ids.append(struct.unpack_from(">I", data, pos + 4)[0])
                    break
                pos += (alen + 3) & ~3
        at += (size + 3) & ~3
    return ids


class PacketDelay:
    """Reads NFQUEUE ``queue`` from a thread and lets each packet through ``delay_s`` after it came.

    ``start()`` binds the queue (``OSError`` EBUSY when another process holds that number);
    ``stop()`` lets everything still held through at once and unbinds.
    """

    def __init__(self, queue: int, delay_s: float) -> None:
        self.queue = queue
        self.delay_s = delay_s
        self.held = 0  # packets delayed so far
        self._sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_NETFILTER)
        self._pending: collections.deque[tuple[int, float]] = collections.deque()
        self._last_id = -1
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"nfqueue-{queue}", daemon=True)

    def _configure(self, attrs: bytes) -> None:
        self._sock.send(_message(NFQNL_MSG_CONFIG, self.queue, attrs, NLM_F_REQUEST | NLM_F_ACK))
        answer = self._sock.recv(8192)
        size, kind = struct.unpack_from("=IH", answer)
        if kind == NLMSG_ERROR and size >= 20:
            code = struct.unpack_from("=i", answer, 16)[0]
            if code:
                raise OSError(-code, f"nfnetlink_queue {self.queue}: {errno.errorcode.get(-code, code)}")

    def start(self) -> PacketDelay:
        self._sock.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, 16 * 1024 * 1024)
        self._sock.bind((0, 0))
        self._configure(_attr(NFQA_CFG_CMD, struct.pack(">BBH", NFQNL_CFG_CMD_BIND, 0, socket.AF_INET)))
        params = _attr(NFQA_CFG_PARAMS, struct.pack(">IB", 0, NFQNL_COPY_META))
        params += _attr(NFQA_CFG_QUEUE_MAXLEN, struct.pack(">I", QUEUE_MAXLEN))
        params += _attr(NFQA_CFG_MASK, struct.pack(">I", NFQA_CFG_F_FAIL_OPEN))
        params += _attr(NFQA_CFG_FLAGS, struct.pack(">I", NFQA_CFG_F_FAIL_OPEN))
        self._configure(params)
        self._thread.start()
        return self

    def _release(self, packet_id: int) -> None:
        verdict = _attr(NFQA_VERDICT_HDR, struct.pack(">II", NF_ACCEPT, packet_id))
        self._sock.send(_message(NFQNL_MSG_VERDICT_BATCH, self.queue, verdict))

    def _run(self) -> None:
        while not self._stop.is_set():
            now = time.monotonic()
            due = None
            while self._pending and self._pending[0][1] <= now:
                due = self._pending.popleft()[0]
            if due is not None:
                self._release(due)
            wait = min(0.05, self._pending[0][1] - now) if self._pending else 0.05
            ready, _, _ = select.select([self._sock], [], [], max(0.001, wait))
            if not ready:
                continue
            try:
                data = self._sock.recv(1 << 20)
            except OSError as exc:  # ENOBUFS: notices lost; the next batch verdict covers them
                log.debug("nfqueue %d: %s", self.queue, exc)
                continue
            arrived = time.monotonic()
            for packet_id in _packet_ids(data):
                self._pending.append((packet_id, arrived + self.delay_s))
                self._last_id = max(self._last_id, packet_id)
                self.held += 1

    def stop(self) -> None:
        """Everything still held goes through now; the queue is unbound (new packets bypass it)."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)
        try:
            if self._last_id >= 0:
                self._release(self._last_id)
            unbind = struct.pack(">BBH", NFQNL_CFG_CMD_UNBIND, 0, socket.AF_INET)
            self._sock.send(_message(NFQNL_MSG_CONFIG, self.queue, _attr(NFQA_CFG_CMD, unbind)))
        finally:
            self._sock.close()
