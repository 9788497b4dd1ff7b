"""Multi-node start-up and shutdown as SGLang 0.5.23 does them, for the emulator.

What SGLang does (read in srt/distributed/bootstrap.py, srt/entrypoints/engine.py,
srt/entrypoints/http_server.py, srt/utils/common.py):

- Every node runs ``--nnodes N --node-rank R --dist-init-addr HOST:PORT``. torch.distributed's TCP
  rendezvous happens at the init address: rank 0's process hosts the store on that port, the other
  nodes connect to it, retrying, until ``--dist-timeout`` (torch's default when unset). The tensor
  parallel group spans all nodes, so no node gets past initialisation before every rank joined: the
  nodes may start in any order within the timeout.
- Rank 0 then loads its share of the weights and serves HTTP as a single node does.
- A node with rank >= 1 runs only its schedulers and, once they are ready, a dummy health server
  on ``--host:--port`` whose /ping, /health and /health_generate answer 200
  (``launch_dummy_health_check_server``).
- On SIGTERM a node with rank >= 1 does not stop by itself: it waits for rank 0's ShutdownReq
  broadcast (engine.py: "SIGTERM received on node_rank R; waiting for the rank-0 ShutdownReq
  broadcast"). Stopping rank 0 stops every node; stopping a follower alone runs into systemd's
  stop timeout.
- A node that loses a peer fails (the collectives error out) and exits with status 1.

The emulator keeps the same observable contract over a small line protocol of its own on the
init address (one JSON object per line): a follower sends ``{"node_rank": R, "nnodes": N}``; rank 0
answers ``{"ok": true}`` to every follower once all N-1 joined, or ``{"error": "..."}`` to a
follower it refuses (wrong node count, a rank out of range, a rank already taken), and sends
``{"shutdown": true}`` when it stops.
"""
from __future__ import annotations

import asyncio
import json
import logging
from typing import Any, Dict, Tuple

log = logging.getLogger("sglang.srt.distributed.bootstrap")

# torch.distributed's default process-group timeout (NCCL backend), used when --dist-timeout is
# not given.
DEFAULT_DIST_TIMEOUT = 600
RETRY_SECONDS = 1.0


class DistError(Exception):
    """The node cannot join or lost its group; the emulator exits with status 1."""


def init_address(addr: str | None) -> Tuple[str, int]:
    """``host:port`` (``[v6]:port`` too) of --dist-init-addr."""
    if not addr:
        raise DistError("--dist-init-addr is required when --nnodes > 1")
    host, sep, port = addr.rpartition(":")
    if not sep or not port.isdigit():
        raise DistError("--dist-init-addr %r is not HOST:PORT" % addr)
    return host.strip("[]"), int(port)


def _line(obj: Dict[str, Any]) -> bytes:
    return (json.dumps(obj) + "\n").encode()


async def _read_message(reader: asyncio.StreamReader, timeout: float) -> Dict[str, Any]:
    raw = await asyncio.wait_for(reader.readline(), timeout)
    if not raw:
        raise ConnectionError("connection closed")
    return json.loads(raw)


class Group(object):
    """This node's membership of the multi-node group, once every rank joined."""

    def __init__(self, cfg: Dict[str, Any]):
        self.rank = int(cfg["node_rank"])
        self.nnodes = int(cfg["nnodes"])
        self.addr = cfg["dist_init_addr"]
        self.timeout = float(cfg.get("dist_timeout") or DEFAULT_DIST_TIMEOUT)
        self.peers: Dict[int, Tuple[asyncio.StreamReader, asyncio.StreamWriter]] = {}
        self.server: asyncio.AbstractServer | None = None
        self.shutdown_requested = asyncio.Event()

    # ------------------------------------------------------------------ rank 0: the store ------
    async def host(self, stop: asyncio.Event) -> bool:
        """Rank 0: serve the rendezvous until every follower joined. False if asked to stop."""
        _, port = init_address(self.addr)
        complete = asyncio.Event()

        async def on_connect(reader, writer):
            try:
                hello = await _read_message(reader, 30.0)
                rank, nnodes = int(hello.get("node_rank", -1)), int(hello.get("nnodes", -1))
            except (OSError, ValueError, asyncio.TimeoutError, ConnectionError):
                writer.close()
                return
            problem = None
            if nnodes != self.nnodes:
                problem = "node_rank %d was started with --nnodes %d, rank 0 with %d" % (
                    rank, nnodes, self.nnodes)
            elif not 1 <= rank < self.nnodes:
                problem = "node_rank %d is out of range for --nnodes %d" % (rank, self.nnodes)
            elif rank in self.peers or complete.is_set():
                problem = "node_rank %d joined twice" % rank
            if problem:
                log.error("Rendezvous refused a node: %s", problem)
                writer.write(_line({"error": problem}))
                await writer.drain()
                writer.close()
                return
            self.peers[rank] = (reader, writer)
            log.info("node_rank %d joined (%d/%d nodes)", rank, len(self.peers) + 1, self.nnodes)
            if len(self.peers) == self.nnodes - 1:
                complete.set()

        # torch's TCPStore listens on every interface of rank 0's host.
        self.server = await asyncio.start_server(on_connect, host=None, port=port,
                                                 reuse_address=True)
        log.info("Init torch distributed begin. (node_rank=0 of nnodes=%d, store on port %d)",
                 self.nnodes, port)
        waiter = asyncio.create_task(complete.wait())
        stopper = asyncio.create_task(stop.wait())
        done, _ = await asyncio.wait({waiter, stopper}, timeout=self.timeout,
                                     return_when=asyncio.FIRST_COMPLETED)
        for task in (waiter, stopper):
            task.cancel()
        if stopper in done and not complete.is_set():
            self.close()
            return False
        if not complete.is_set():
            self.close()
            raise DistError("torch.distributed.DistStoreError: Timed out after %d seconds waiting "
                            "for clients. %d/%d clients joined."
                            % (self.timeout, len(self.peers) + 1, self.nnodes))
        for _, writer in self.peers.values():
            writer.write(_line({"ok": True}))
            await writer.drain()
        log.info("Init torch distributed ends. nnodes=%d", self.nnodes)
        return True

    # ------------------------------------------------------------------ rank >= 1: join --------
    async def join(self, stop: asyncio.Event) -> bool:
        """Rank >= 1: connect to rank 0's store (retrying) and wait for the group. False if
        asked to stop first."""
        host, port = init_address(self.addr)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.timeout
        log.info("Init torch distributed begin. (node_rank=%d of nnodes=%d, dist_init_addr=%s)",
                 self.rank, self.nnodes, self.addr)
        while True:
            if stop.is_set():
                return False
            try:
                reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port), 5.0)
                writer.write(_line({"node_rank": self.rank, "nnodes": self.nnodes}))
                await writer.drain()
                break
            except (OSError, asyncio.TimeoutError):
                if loop.time() >= deadline:
                    raise DistError("torch.distributed.DistNetworkError: The client socket has timed "
                                    "out after %ds while trying to connect to (%s, %d)."
                                    % (self.timeout, host, port))
                try:
                    await asyncio.wait_for(stop.wait(), RETRY_SECONDS)
                except asyncio.TimeoutError:
                    pass
        answer = asyncio.create_task(_read_message(reader, max(deadline - loop.time(), 1.0)))
        stopper = asyncio.create_task(stop.wait())
        done, _ = await asyncio.wait({answer, stopper}, return_when=asyncio.FIRST_COMPLETED)
        stopper.cancel()
        if answer not in done:
            answer.cancel()
            writer.close()
            return False
        try:
            msg = answer.result()
        except asyncio.TimeoutError:
            raise DistError("torch.distributed.DistStoreError: Timed out after %d seconds waiting "
                            "for the other nodes at %s" % (self.timeout, self.addr))
        except (OSError, ValueError, ConnectionError) as exc:
            raise DistError("rendezvous at %s failed: %s" % (self.addr, exc))
        if "error" in msg:
            raise DistError("rank 0 at %s refused this node: %s" % (self.addr, msg["error"]))
        self.peers[0] = (reader, writer)
        log.info("Init torch distributed ends. node_rank=%d", self.rank)
        return True

    # ------------------------------------------------------------------ both ------------------
    async def watch(self) -> None:
        """Return when a peer is gone (raises DistError) or rank 0 broadcast its shutdown."""

        async def one(rank, reader):
            while True:
                raw = await reader.readline()
                if not raw:
                    raise DistError("NCCL error: node_rank %d closed its connection (the process "
                                    "group is broken)" % rank)
                try:
                    msg = json.loads(raw)
                except ValueError:
                    continue
                if msg.get("shutdown"):
                    self.shutdown_requested.set()
                    return

        tasks = [asyncio.create_task(one(rank, reader)) for rank, (reader, _) in self.peers.items()]
        try:
            done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
            for task in done:
                task.result()
        finally:
            for task in tasks:
                task.cancel()

    async def broadcast_shutdown(self) -> None:
        """Rank 0 stopping: the ShutdownReq to every follower, then close."""
        for _, writer in self.peers.values():
            try:
                writer.write(_line({"shutdown": True}))
                await asyncio.wait_for(writer.drain(), 2.0)
            except (OSError, asyncio.TimeoutError):
                pass
        self.close()

    def close(self) -> None:
        for _, writer in self.peers.values():
            writer.close()
        if self.server is not None:
            self.server.close()
