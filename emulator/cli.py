"""`python -m emulator <argv of python -m sglang.launch_server>`."""
from __future__ import annotations

import asyncio
import logging
import os
import shlex
import signal
import sys
import warnings
from typing import Dict, List

from . import memory
from .args import build_parser, drafter_load_error, merge_config, read_architecture, resolve
from .distributed import DistError, Group
from .knobs import KnobError, Knobs
from .scheduler import Scheduler

log = logging.getLogger("sglang.srt.entrypoints.http_server")
sched_log = logging.getLogger("sglang.srt.managers.scheduler")
uvicorn_log = logging.getLogger("uvicorn.error")
# The listen backlog SGLang 0.5.23 opens with (entrypoints/http_server.py runs uvicorn.run() without
# one: uvicorn's Config default, 2048; read in both sources), for both engines here. aiohttp's own
# default is 128: 512 clients connecting at once overflowed it on a loaded CI machine.
BACKLOG = 2048


def configure_logging(level: str, tp_size: int) -> None:
    """srt/utils/common.py configure_logger: "[%(asctime)s{prefix}] %(message)s"."""
    lvl = getattr(logging, str(level).upper(), logging.INFO)
    fmt_date = "%Y-%m-%d %H:%M:%S"
    root = logging.getLogger()
    root.handlers[:] = []
    h = logging.StreamHandler(sys.stderr)
    h.setFormatter(logging.Formatter("[%(asctime)s] %(message)s", fmt_date))
    root.addHandler(h)
    root.setLevel(lvl)
    prefix = " TP0" if tp_size > 1 else ""
    sh = logging.StreamHandler(sys.stderr)
    sh.setFormatter(logging.Formatter("[%(asctime)s" + prefix + "] %(message)s", fmt_date))
    sched_log.handlers[:] = [sh]
    sched_log.propagate = False
    uh = logging.StreamHandler(sys.stderr)
    uh.setFormatter(logging.Formatter("%(levelname)s:     %(message)s"))
    uvicorn_log.handlers[:] = [uh]
    uvicorn_log.propagate = False
    logging.getLogger("aiohttp.access").setLevel(logging.WARNING)


def _server_args_repr(cfg) -> str:
    skip = {"architectures"}
    return "ServerArgs(" + ", ".join("%s=%r" % (k, v) for k, v in cfg.items()
                                      if k not in skip) + ")"


async def _sleep_or_stop(seconds: float, stop: asyncio.Event) -> bool:
    """Sleep, unless asked to stop first. True if stop was requested."""
    if seconds <= 0:
        return stop.is_set()
    try:
        await asyncio.wait_for(stop.wait(), seconds)
        return True
    except asyncio.TimeoutError:
        return False


def load_seconds(cfg, knobs: Knobs) -> float:
    """The weights' load: LOAD_SECONDS for the target, and a drafter's after it in the same time
    per weight."""
    drafter = knobs.load_seconds * knobs.drafter_params_b / memory.TARGET_PARAMS_B \
        if cfg.get("speculative_draft_model_path") else 0.0
    return knobs.load_seconds + drafter


async def serve(cfg, knobs: Knobs, launch_command: str) -> int:
    from aiohttp import web

    from .server import EmulatorServer

    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)

    group = None
    if cfg["nnodes"] > 1:
        group = Group(cfg)
        try:
            if cfg["node_rank"] != 0:
                return await serve_follower(cfg, knobs, group, stop)
            if not await group.host(stop):
                return 0
        except DistError as exc:
            sched_log.error("%s", exc)
            return 1

    cap_log = sched_log  # model_runner / kv_cache_configurator / tp_worker: scheduler process
    pre = knobs.gpu_memory_mib / 1024.0 - memory.CUDA_CONTEXT_GIB
    sched_log.info("Load weight begin. avail mem=%.2f GB", pre)
    if await _sleep_or_stop(load_seconds(cfg, knobs), stop):
        return 0
    failed = drafter_load_error(cfg)
    if failed:
        sched_log.error("Scheduler hit an exception: %s", failed)
        return 1
    # memory.py: the pools as SGLang 0.5.23 sizes them (raises SGLang's errors, exit 1)
    cap = memory.compute(cfg, knobs.gpu_memory_mib, knobs.pre_pool_reserve_mib, knobs.drafter_params_b)
    sched_log.info("Load weight end. type=%s, dtype=torch.bfloat16, avail mem=%.2f GB, "
                   "mem usage=%.2f GB.", cfg["architectures"][0], cap.avail_after_weights_gib,
                   cap.weights_gib)
    if cap.draft_weights_gib:
        sched_log.info("Load weight end. type=%s, dtype=torch.bfloat16, "
                       "avail mem=%.2f GB, mem usage=%.2f GB.",
                       read_architecture(cfg["speculative_draft_model_path"],
                                         cfg["speculative_algorithm"])[0]
                       if cfg.get("speculative_draft_model_path") else "Qwen3_5ForCausalLMMTP",
                       cap.avail_after_weights_gib - cap.draft_weights_gib, cap.draft_weights_gib)
    if cap.max_mamba_cache_size is not None:
        cap_log.info("Mamba Cache is allocated. max_mamba_cache_size: %d, conv_state size: %.2fGB, "
                     "ssm_state size: %.2fGB intermediate_ssm_state_cache size: %.2fGB "
                     "intermediate_conv_window_cache size: %.2fGB ", cap.max_mamba_cache_size,
                     cap.mamba_conv_gib, cap.mamba_ssm_gib, cap.intermediate_ssm_gib,
                     cap.intermediate_conv_gib)
    cap_log.info("KV Cache is allocated. dtype: torch.bfloat16, #tokens: %d, K size: %.2f GB, "
                 "V size: %.2f GB", cap.max_total_num_tokens, cap.kv_cache_gib / 2,
                 cap.kv_cache_gib / 2)
    cap_log.info("Memory pool end. avail mem=%.2f GB", cap.slack_gib + cap.mm_reservation_gib)
    for line in cap.warnings:
        cap_log.warning("%s", line)
    server = EmulatorServer(cfg, knobs, launch_command, cap)
    sched = server.sched
    sched_log.info("max_total_num_tokens=%d, chunked_prefill_size=%d, max_prefill_tokens=%d, "
                   "max_running_requests=%d, context_len=%d, available_gpu_mem=%.2f GB",
                   cap.max_total_num_tokens, cap.chunked_prefill_size, cap.max_prefill_tokens,
                   cap.max_running_requests, cap.context_len, cap.available_gpu_mem_gib)
    app = server.build_app()
    runner = web.AppRunner(app, access_log=None, handle_signals=False, shutdown_timeout=1.0)
    await runner.setup()
    site = web.TCPSite(runner, cfg["host"], cfg["port"], backlog=BACKLOG)
    await site.start()
    uvicorn_log.info("Started server process [%d]", os.getpid())
    uvicorn_log.info("Waiting for application startup.")
    uvicorn_log.info("Application startup complete.")
    uvicorn_log.info("Uvicorn running on http://%s:%d (Press CTRL+C to quit)",
                     cfg["host"], cfg["port"])
    sched_task = asyncio.create_task(sched.run(), name="scheduler")

    async def announce():
        if not await _sleep_or_stop(knobs.warmup_seconds, stop):
            log.info("The server is fired up and ready to roll!")

    announce_task = asyncio.create_task(announce())
    stopper = asyncio.create_task(stop.wait())
    watched = {stopper, sched_task}
    peers_task = asyncio.create_task(group.watch()) if group else None
    if peers_task is not None:
        watched.add(peers_task)
    done, _ = await asyncio.wait(watched, return_when=asyncio.FIRST_COMPLETED)
    if sched_task in done and sched_task.exception() is not None:
        log.error("Scheduler hit an exception: %r", sched_task.exception())
        os._exit(1)
    if peers_task is not None and peers_task in done:
        log.error("Scheduler hit an exception: %s", peers_task.exception() or "peer gone")
        os._exit(1)
    if peers_task is not None:
        peers_task.cancel()
        await group.broadcast_shutdown()
    log.info("Received sigterm, shutting down gracefully.")
    sched.stopping = True
    sched_task.cancel()
    announce_task.cancel()
    for req in list(sched.running) + list(sched.waiting):
        sched.abort(req)
        if req.done is not None and not req.done.done():
            req.done.set_result(None)
        if req.waiter is not None and not req.waiter.done():
            req.waiter.set_result(None)
    try:
        await asyncio.wait_for(runner.cleanup(), 3.0)
    except (asyncio.TimeoutError, Exception):  # noqa: BLE001 - exiting anyway
        pass
    return 0


async def serve_follower(cfg, knobs: Knobs, group: Group, stop: asyncio.Event) -> int:
    """A node with --node-rank >= 1: join the group, load, then only the dummy health server
    (srt/utils/common.py launch_dummy_health_check_server) until rank 0 shuts the group down."""
    from aiohttp import web

    if not await group.join(stop):
        return 0
    sched_log.info("Load weight begin. avail mem=%.2f GB",
                   knobs.gpu_memory_mib / 1024.0 - memory.CUDA_CONTEXT_GIB)
    if await _sleep_or_stop(load_seconds(cfg, knobs), stop):
        group.close()
        return 0
    sched_log.info("Load weight end. type=%s, dtype=torch.bfloat16", cfg["architectures"][0])

    async def ok(_request):
        return web.Response(status=200)

    app = web.Application()
    for path in ("/ping", "/health", "/health_generate"):
        app.router.add_get(path, ok)
    runner = web.AppRunner(app, access_log=None, handle_signals=False, shutdown_timeout=1.0)
    await runner.setup()
    await web.TCPSite(runner, cfg["host"], cfg["port"], backlog=BACKLOG).start()
    uvicorn_log.info("Uvicorn running on http://%s:%d (dummy health check server of node_rank %d)",
                     cfg["host"], cfg["port"], cfg["node_rank"])

    async def note_sigterm():
        await stop.wait()
        sched_log.warning("SIGTERM received on node_rank %d; waiting for the rank-0 ShutdownReq "
                          "broadcast to stop the schedulers.", cfg["node_rank"])

    noter = asyncio.create_task(note_sigterm())
    try:
        await group.watch()
    except DistError as exc:
        sched_log.error("Scheduler hit an exception: %s", exc)
        return 1
    finally:
        noter.cancel()
        group.close()
        try:
            await asyncio.wait_for(runner.cleanup(), 3.0)
        except (asyncio.TimeoutError, Exception):  # noqa: BLE001 - exiting anyway
            pass
    sched_log.info("node_rank %d: shutdown broadcast by rank 0, exiting.", cfg["node_rank"])
    return 0


def offline_scheduler(argv: List[str], env: Dict[str, str]) -> Scheduler:
    """The scheduler a launch with ``argv`` and SGLEMU_* ``env`` would run, without a server: its
    simulate_decode() draws requests in virtual time (the gate's error-rate tests)."""
    knobs = Knobs.from_env(env)
    cfg = resolve(build_parser().parse_args(argv), knobs.architecture, knobs.gpu_memory_mib)
    return Scheduler(cfg, knobs, None, "")


def main(argv: List[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    warnings.warn(
        "'python -m sglang.launch_server' is still supported, but "
        "'sglang serve' is the recommended entrypoint.\n"
        "  Example: sglang serve --model-path <model> [options]",
        UserWarning, stacklevel=1)
    argv = merge_config(argv, build_parser())
    ns = build_parser().parse_args(argv)  # exits 2 like SGLang's argparse
    configure_logging(ns.log_level, ns.tp_size)
    try:
        knobs = Knobs.from_env()
    except KnobError as exc:
        sys.stderr.write("sglang emulator: %s\n" % exc)
        return 2
    # resolve_once(): raises ValueError / AssertionError / TypeError exactly like SGLang; left
    # uncaught so the traceback and the exit status (1) match.
    cfg = resolve(ns, knobs.architecture, knobs.gpu_memory_mib)
    log.info("server_args=%s", _server_args_repr(cfg))
    launch_command = "python3 -m sglang.launch_server " + " ".join(shlex.quote(a) for a in argv)
    try:
        return asyncio.run(serve(cfg, knobs, launch_command))
    finally:
        logging.shutdown()
