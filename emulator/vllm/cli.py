"""`python -m emulator.vllm serve MODEL [flags]`: vLLM 0.33.0's start-up.

entrypoints/cli/main.py parses, configures logging and runs validate_parsed_serve_args;
entrypoints/launchers/launcher.py setup_server logs the version and the non-default args, runs
validate_api_server_args and binds the socket *without listening* before the engine loads (so
a client sees connection refused during the load, and no other process can take the port);
entrypoints/launchers/api_server/entry.py then builds the engine (weights, memory profile, KV
cache) and only then serves HTTP (uvicorn listens on that socket).
"""
from __future__ import annotations

import asyncio
import logging
import os
import shlex
import signal
import socket
import sys
from typing import List

from ..cli import _sleep_or_stop, load_seconds
from ..knobs import KnobError, Knobs, _get, parse_probs
from . import capacity as capmod
from .args import VLLM_VERSION, parse, resolve

log = logging.getLogger("vllm.entrypoints.openai.api_server")
uvicorn_log = logging.getLogger("uvicorn.error")

# vLLM MTP acceptance, conditional p_i (draft i accepted given all before were), calibrated to
# noonghunna/club-3090#74 (Qwen3.6-27B, vLLM MTP n=3): unconditional per-position 0.80 / 0.52 /
# 0.35, accept length 2.67 in vLLM's 1 + accepted / drafts. p_1 = 0.80, p_2 = 0.52 / 0.80 = 0.65,
# p_3 = 0.35 / 0.52 = 0.673. The single MTP layer run repeatedly (config/speculative.py warns
# "may result in lower acceptance rate") keeps losing about a third per position: p_4 = 0.66,
# p_5 = 0.65 (unconditional 0.231, 0.150). Position 1 does not depend on n.
VLLM_ACCEPT_PROBS = "0.80,0.65,0.673,0.66,0.65,0.64,0.63,0.62"
# Memory the profile run and the CUDA graphs take (assumptions, no vLLM log of this host):
# the activation peak of profile_run at max_num_batched_tokens 2048 (the logits of 256 dummy
# sequences over a 248320 vocabulary in fp32 and the sampler's copies, GDN chunk workspace),
# the non-torch memory (NCCL + custom all-reduce buffers), and profile_cudagraph_memory for
# FULL_AND_PIECEWISE graphs up to the default capture sizes.
ACTIVATION_PEAK_MIB = 1228.8
NON_TORCH_MIB = 512.0
CUDAGRAPH_MIB = 614.4


def vllm_knobs(env=None) -> tuple:
    """The shared SGLEMU_* knobs, with the vLLM side's acceptance (SGLEMU_VLLM_ACCEPT_PROBS,
    SGLEMU_VLLM_ACCEPT_P1_CONTEXT: no ramp by default, the club-3090 figures are for ordinary
    prompts) and memory figures (SGLEMU_VLLM_*_MIB)."""
    env = os.environ if env is None else env
    k = Knobs.from_env(env)
    k.accept_probs = _get(env, "VLLM_ACCEPT_PROBS", parse_probs, parse_probs(VLLM_ACCEPT_PROBS))
    k.accept_p1_context = _get(env, "VLLM_ACCEPT_P1_CONTEXT", float, k.accept_probs[0])
    mem = {"activation_peak_mib": _get(env, "VLLM_ACTIVATION_PEAK_MIB", float, ACTIVATION_PEAK_MIB),
           "non_torch_mib": _get(env, "VLLM_NON_TORCH_MIB", float, NON_TORCH_MIB),
           "cudagraph_mib": _get(env, "VLLM_CUDAGRAPH_MIB", float, CUDAGRAPH_MIB)}
    return k, mem


def configure_logging() -> None:
    """vllm/logger.py: "(APIServer pid=N) INFO MM-DD HH:MM:SS [file.py:line] message"."""
    root = logging.getLogger()
    root.handlers[:] = []
    h = logging.StreamHandler(sys.stderr)
    h.setFormatter(logging.Formatter("(APIServer pid=%d) %%(levelname)s %%(asctime)s "
                                     "[%%(name)s] %%(message)s" % os.getpid(), "%m-%d %H:%M:%S"))
    root.addHandler(h)
    root.setLevel(logging.INFO)
    # the shared scheduler logs SGLang's batch lines: not vLLM's
    logging.getLogger("sglang.srt.managers.scheduler").setLevel(logging.WARNING)
    logging.getLogger("aiohttp.access").setLevel(logging.WARNING)


def bind(host: str | None, port: int) -> socket.socket:
    """launcher.py create_server_socket: bound, not listening."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host or "", port))
    return sock


async def serve(cfg, knobs: Knobs, mem, launch_command: str) -> int:
    from aiohttp import web

    from .server import VllmServer

    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    sock = bind(cfg["host"], cfg["port"])
    eng = logging.getLogger("vllm.v1.worker.gpu_worker")
    eng.info("Loading model weights ...")
    if cfg.get("speculative_draft_model_path"):
        logging.getLogger("vllm.v1.worker.gpu_model_runner").info("Loading drafter model...")
    # the target's LOAD_SECONDS, and a drafter's after it in the same time per weight (as the
    # SGLang side loads it: ..cli.load_seconds)
    if await _sleep_or_stop(load_seconds(cfg, knobs), stop):
        sock.close()
        return 0
    # raises vLLM's errors (exit 1)
    cap = capmod.compute(cfg, knobs.gpu_memory_mib, drafter_params_b=knobs.drafter_params_b, **mem)
    eng.info("Model loading took %.4f GiB memory", cap.weights_gib + cap.draft_weights_gib)
    eng.info("Available KV cache memory: %.2f GiB", cap.available_kv_cache_memory_gib)
    kv_log = logging.getLogger("vllm.v1.core.kv_cache_utils")
    for line in cap.warnings:
        kv_log.warning("%s", line)
    if cap.mamba_state_bytes:
        logging.getLogger("vllm.platforms.interface").info(
            "Setting attention block size to %d tokens to ensure that attention page size is >= "
            "mamba page size.", cap.block_size)
    kv_log.info("GPU KV cache size: %s tokens, Maximum concurrency for %s tokens per request: "
                "%.2fx", f"{cap.kv_cache_size_tokens:,}", f"{cap.max_model_len:,}",
                cap.max_concurrency)
    server = VllmServer(cfg, knobs, launch_command, cap)
    sched = server.sched
    runner = web.AppRunner(server.build_app(), access_log=None, handle_signals=False,
                           shutdown_timeout=1.0)
    await runner.setup()
    await web.SockSite(runner, sock).start()
    log.info("Starting vLLM server on http://%s:%d", cfg["host"] or "0.0.0.0", cfg["port"])
    uvicorn_log.info("Started server process [%d]", os.getpid())
    uvicorn_log.info("Waiting for application startup.")
    uvicorn_log.info("Application startup complete.")
    sched_task = asyncio.create_task(sched.run(), name="scheduler")
    stopper = asyncio.create_task(stop.wait())
    done, _ = await asyncio.wait({stopper, sched_task}, return_when=asyncio.FIRST_COMPLETED)
    if sched_task in done and sched_task.exception() is not None:
        log.error("EngineCore encountered a fatal error: %r", sched_task.exception())
        os._exit(1)
    uvicorn_log.info("Shutting down")
    sched.stopping = True
    sched_task.cancel()
    for req in list(sched.running) + list(sched.waiting):
        sched.abort(req)
        for fut in (req.done, req.waiter):
            if fut is not None and not fut.done():
                fut.set_result(None)
    try:
        await asyncio.wait_for(runner.cleanup(), 3.0)
    except (asyncio.TimeoutError, Exception):  # noqa: BLE001 - exiting anyway
        pass
    return 0


def main(argv: List[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    ns = parse(argv)  # exits 2 like vLLM's argparse
    configure_logging()
    try:
        knobs, mem = vllm_knobs()
    except KnobError as exc:
        sys.stderr.write("vllm emulator: %s\n" % exc)
        return 2
    # vLLM's own validation errors, uncaught (traceback, exit status 1), as vLLM raises them
    cfg = resolve(ns, knobs.architecture)
    log.info("vLLM API server version %s", VLLM_VERSION)
    log.info("args: %s", {k: v for k, v in vars(ns).items() if k != "api_key"})
    launch_command = "vllm " + " ".join(shlex.quote(a) for a in argv)
    try:
        return asyncio.run(serve(cfg, knobs, mem, launch_command))
    finally:
        logging.shutdown()
