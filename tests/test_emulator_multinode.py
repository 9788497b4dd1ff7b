"""The emulator's multi-node start-up and shutdown against SGLang 0.5.23's contract
(emulator/distributed.py): rendezvous at --dist-init-addr hosted by rank 0, rank 0 serves
only once every rank joined, followers serve the dummy health server, a follower waits for rank
0's shutdown broadcast, a lost peer fails the group. Everything on loopback."""
from __future__ import annotations

import signal
import time

from conftest import free_port
from test_emulator import FAST, http_status, port_open

TP2 = ["--tp-size", "2"]


def node(emulator, rank, nnodes, addr, extra=(), env=None):
    return emulator(TP2 + ["--nnodes", str(nnodes), "--node-rank", str(rank), "--dist-init-addr", addr]
                    + list(extra), env=dict(FAST, **(env or {})), wait=False)


def wait_for(predicate, timeout=20.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.1)
    return False


def test_rank0_serves_only_after_every_rank_joined_in_any_order(emulator):
    addr = "127.0.0.1:%d" % free_port()
    # the follower first: it retries until rank 0's store is up
    follower = node(emulator, 1, 2, addr)
    time.sleep(1.5)
    assert follower.proc.poll() is None and not port_open(follower.port)
    rank0 = node(emulator, 0, 2, addr)
    rank0.wait_healthy()
    assert http_status(rank0.url + "/health_generate")[0] == 200
    assert rank0.get("/server_info")["nnodes"] == 2
    # the follower's dummy health server: health answers, the API does not exist there
    assert wait_for(lambda: port_open(follower.port))
    for path in ("/ping", "/health", "/health_generate"):
        assert http_status(follower.url + path)[0] == 200, path
    assert http_status(follower.url + "/v1/models")[0] == 404
    assert "node_rank 1 joined (2/2 nodes)" in rank0.output()


def test_rank0_waits_for_the_missing_rank(emulator):
    rank0 = node(emulator, 0, 3, "127.0.0.1:%d" % free_port(), extra=["--tp-size", "3"])
    time.sleep(1.5)
    assert rank0.proc.poll() is None and not port_open(rank0.port)


def test_follower_waits_for_rank0_shutdown_broadcast(emulator):
    addr = "127.0.0.1:%d" % free_port()
    rank0, follower = node(emulator, 0, 2, addr), node(emulator, 1, 2, addr)
    rank0.wait_healthy()
    assert wait_for(lambda: port_open(follower.port))
    follower.proc.send_signal(signal.SIGTERM)
    time.sleep(1.0)
    assert follower.proc.poll() is None  # SGLang's follower ignores SIGTERM alone
    assert "waiting for the rank-0 ShutdownReq broadcast" in follower.output()
    rank0.proc.send_signal(signal.SIGTERM)
    assert rank0.proc.wait(10) == 0
    assert follower.proc.wait(10) == 0


def test_a_lost_follower_fails_rank0(emulator):
    addr = "127.0.0.1:%d" % free_port()
    rank0, follower = node(emulator, 0, 2, addr), node(emulator, 1, 2, addr)
    rank0.wait_healthy()
    follower.proc.kill()
    assert rank0.proc.wait(10) == 1
    assert "node_rank 1 closed its connection" in rank0.output()


def test_refusals(emulator):
    addr = "127.0.0.1:%d" % free_port()
    tp3 = ["--tp-size", "3"]
    rank0, first = node(emulator, 0, 3, addr, extra=tp3), node(emulator, 1, 3, addr, extra=tp3)
    assert wait_for(lambda: "node_rank 1 joined" in rank0.output())
    twice = node(emulator, 1, 3, addr, extra=tp3)
    assert twice.proc.wait(15) == 1
    assert "refused this node: node_rank 1 joined twice" in twice.output()
    wrong = node(emulator, 2, 2, addr)
    assert wrong.proc.wait(15) == 1
    assert "started with --nnodes 2, rank 0 with 3" in wrong.output()
    assert rank0.proc.poll() is None and first.proc.poll() is None


def test_join_timeout_and_divisibility(emulator):
    t0 = time.monotonic()
    lonely = node(emulator, 1, 2, "127.0.0.1:%d" % free_port(), extra=["--dist-timeout", "2"])
    assert lonely.proc.wait(15) == 1
    assert time.monotonic() - t0 < 10
    assert "DistNetworkError: The client socket has timed out after 2s" in lonely.output()
    odd = node(emulator, 0, 2, "127.0.0.1:%d" % free_port(), extra=["--tp-size", "3"])
    assert odd.proc.wait(15) == 1
    assert "AssertionError: tp_size must be divisible by number of nodes" in odd.output()
