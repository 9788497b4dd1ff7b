"""aiohttp front end speaking SGLang 0.5.23's HTTP API shapes.

Routes, readiness, info, the api key, request validation and admission follow
srt/entrypoints/http_server.py, openai/serving_chat.py, serving_completions.py and
managers/tokenizer_manager.py; each reply's bytes are its sink's (sinks.py).
"""
from __future__ import annotations

import asyncio
import logging
import time
import uuid
from typing import Any, Dict, List

from aiohttp import web

from . import adaptive
from .args import SGLANG_VERSION
from .knobs import KnobError, Knobs
from .metrics import Metrics
from .answers import Mind, last_user_text, pieces as reply_pieces, reword
from .render import FORCED_REASONING, ChatRenderer, tool_mode
from .request import Req, intern_piece, stable_hash
from .scheduler import Scheduler, crash_now
from .sinks import (INLINE_WRITE_LIMIT, ChatSink, CompletionSink, GenerateSink, HealthSink, Sink,
                    _dumps)

logger = logging.getLogger("sglang.srt.entrypoints.http_server")

OPEN_PREFIXES = ("/health", "/ready", "/metrics", "/_emulator/")
HEALTH_CHECK_TIMEOUT = 20.0
CHAT_DEFAULT_MAX_TOKENS = 8192


def _release_version() -> str:
    """The version /server_info reports: the installed emulator release's (its wheel's version;
    `make dist` builds a second release for the release-rollback test), else, run from the source
    tree, the SGLang version it emulates."""
    try:
        from importlib.metadata import PackageNotFoundError, version
    except ImportError:  # Python < 3.8
        return SGLANG_VERSION
    try:
        return version("sglang-emulator")
    except PackageNotFoundError:
        return SGLANG_VERSION


RELEASE_VERSION = _release_version()


def _openai_error(message: str, err_type: str = "BadRequestError", code: int = 400):
    return web.json_response({"object": "error", "message": message, "type": err_type,
                              "param": None, "code": code}, status=code, dumps=_dumps)


class BadRequest(Exception):
    pass


class ContextLengthError(BadRequest):
    """tokenizer_manager._validate_one_request's ValueError: raised inside generate_request, so a
    streamed /generate answers it as an SSE error event after HTTP 200 (http_server.py
    stream_results), the OpenAI routes kick-start the stream and answer HTTP 400."""


def answer_totals(requests: List[Req]) -> Dict[str, int]:
    """/_emulator/stats totals.answers: of the finished requests with a reply script, how many
    were answered (script complete), right, wrong (and why), and how the calls came out."""
    out = {"answerable": 0, "answered": 0, "right": 0, "wrong": 0, "wrong_answers": 0,
           "corrupt_above_kv": 0, "incomplete": 0, "calls": 0,
           "tool_calls_rendered": 0, "calls_in_content": 0, "calls_lost": 0}
    for r in requests:
        info = r.answer_stats() if r.finish is not None else None
        if info is None:
            continue
        out["answerable"] += 1
        out["answered"] += info["complete"]
        out["right"] += info["right"]
        if not info["right"]:
            out["wrong"] += 1
            if info["wrong_because"]:
                out[info["wrong_because"]] += 1
        if info["kind"] == "call":
            out["calls"] += 1
            if info["rendered"] == "tool_calls":
                out["tool_calls_rendered"] += 1
            elif info["rendered"] == "content":
                out["calls_in_content"] += 1
            elif info["rendered"] in ("swallowed", "dropped"):
                out["calls_lost"] += 1
    return out


# ---------------------------------------------------------------------------------------------
class EmulatorServer:
    scheduler_cls = Scheduler

    def __init__(self, cfg: Dict[str, Any], knobs: Knobs, launch_command: str,
                 capacity=None):
        self.cfg = cfg
        self.knobs = knobs
        self.launch_command = launch_command
        self.metrics = self.make_metrics(cfg)
        prefix = " TP0" if cfg["tp_size"] > 1 else ""
        self.sched = self.scheduler_cls(cfg, knobs, self.metrics, prefix, capacity)
        self.sched.crash_hook = crash_now
        # the emulated model's mind (answers.py): built-in prompts and SGLEMU_ANSWERS rows
        self.mind = Mind(getattr(knobs, "answer_rows", None))
        self.t_start = time.monotonic()
        self.startup_time = time.time()
        self.up_at = self.t_start + knobs.warmup_seconds
        self.last_receive = 0.0
        self.fault_counter = 0
        self.crash_armed = True
        self.sched.on_step_hooks.append(self._touch)

    @staticmethod
    def error_response(message: str, err_type: str = "BadRequestError", code: int = 400,
                       param: str | None = None):
        """The OpenAI routes' ErrorResponse (SGLang's shape)."""
        return _openai_error(message, err_type, code)

    def make_metrics(self, cfg: Dict[str, Any]):
        return Metrics(cfg["served_model_name"], cfg["enable_metrics"])

    def _touch(self) -> None:
        self.last_receive = time.monotonic()

    def is_up(self) -> bool:
        return time.monotonic() >= self.up_at

    # -- app ---------------------------------------------------------------------------------
    def routes(self):
        """(method, path, handler) of every endpoint; /_emulator/* are never behind the key."""
        return [
            ("GET", "/health", self.health), ("GET", "/health_generate", self.health),
            ("GET", "/ready", self.ready), ("GET", "/v1/models", self.models),
            ("GET", "/v1/models/{model:.*}", self.retrieve_model),
            ("GET", "/model_info", self.model_info), ("GET", "/get_model_info", self.get_model_info),
            ("GET", "/server_info", self.server_info),
            ("GET", "/get_server_info", self.get_server_info),
            ("GET", "/metrics", self.metrics_endpoint), ("POST", "/generate", self.generate),
            ("PUT", "/generate", self.generate), ("POST", "/v1/completions", self.completions),
            ("POST", "/v1/chat/completions", self.chat)]

    def build_app(self) -> web.Application:
        app = web.Application(middlewares=[self.auth_middleware], client_max_size=64 * 2 ** 20)
        for method, path, handler in self.routes():
            app.router.add_route(method, path, handler)
        self.add_control_routes(app.router)
        return app

    def add_control_routes(self, r) -> None:
        """/_emulator/*: the exact counters and the fault switches (never behind an api key)."""
        r.add_get("/_emulator/stats", self.stats)
        r.add_post("/_emulator/faults", self.faults)
        r.add_get("/_emulator/faults", self.faults)
        r.add_post("/_emulator/reset", self.reset)

    @web.middleware
    async def auth_middleware(self, request: web.Request, handler):
        key = self.cfg.get("api_key")
        path = request.path
        if key and request.method != "OPTIONS" and not path.startswith(OPEN_PREFIXES):
            authz = request.headers.get("Authorization") or ""
            parts = authz.split(" ", 1)
            if len(parts) != 2 or parts[0].lower() != "bearer" or parts[1] != key:
                return web.json_response({"error": "Unauthorized"}, status=401)
        return await handler(request)

    # -- readiness ---------------------------------------------------------------------------
    async def ready(self, request):
        return web.Response(status=200 if self.is_up() else 503)

    async def health(self, request):
        if not self.is_up():
            return web.Response(status=503)
        # health_generate: a 1-token request (log_metrics=False) through the scheduler; healthy
        # as soon as *any* output arrives after the check started (SGLang polls once a second;
        # we poll every SGLEMU_HEALTH_POLL_SECONDS).
        tic = time.monotonic()
        req = Req("HEALTH_CHECK_%s" % uuid.uuid4().hex, request.path, 1, 1, True,
                  "health", False, False, health=True)
        req.sink = HealthSink(self.sched, req, False)
        req.done = asyncio.get_running_loop().create_future()
        self.sched.submit(req)
        while time.monotonic() < tic + HEALTH_CHECK_TIMEOUT:
            if req.done.done() or self.last_receive > tic:
                return web.Response(status=200)
            try:
                await asyncio.wait_for(asyncio.shield(req.done), self.knobs.health_poll_seconds)
            except asyncio.TimeoutError:
                pass
        logger.error("Health check failed. Server couldn't get a response from detokenizer for "
                     "last %s seconds." % int(HEALTH_CHECK_TIMEOUT))
        return web.Response(status=503)

    # -- info --------------------------------------------------------------------------------
    async def models(self, request):
        name = self.cfg["served_model_name"]
        return web.json_response({"object": "list", "data": [self._card(name)]}, dumps=_dumps)

    def _card(self, name):
        return {"id": name, "object": "model", "created": int(time.time()), "owned_by": "sglang",
                "root": name, "parent": None, "max_model_len": self.cfg["context_length"]}

    async def retrieve_model(self, request):
        model = request.match_info["model"]
        if model != self.cfg["served_model_name"]:
            return web.json_response({"error": {
                "message": f"The model '{model}' does not exist",
                "type": "invalid_request_error", "param": "model",
                "code": "model_not_found"}}, status=404, dumps=_dumps)
        return web.json_response(self._card(model), dumps=_dumps)

    async def model_info(self, request):
        c = self.cfg
        return web.json_response({
            "model_path": c["model_path"], "served_model_name": c["served_model_name"],
            "tokenizer_path": c["model_path"], "is_generation": True,
            "preferred_sampling_params": None, "weight_version": "default",
            "load_format": "auto", "reasoning_parser": c["reasoning_parser"],
            "tool_call_parser": c["tool_call_parser"], "disaggregation_mode": "null",
            "has_image_understanding": c["architectures"][0].endswith("ConditionalGeneration"),
            "has_audio_understanding": False, "model_type": "qwen3_5",
            "architectures": c["architectures"]}, dumps=_dumps)

    async def get_model_info(self, request):
        logger.warning("Endpoint '/get_model_info' is deprecated and will be removed in a future "
                       "version. Please use '/model_info' instead.")
        return await self.model_info(request)

    def server_args_dict(self) -> Dict[str, Any]:
        skip = {"architectures"}
        return {k: v for k, v in self.cfg.items() if k not in skip}

    def memory_usage(self) -> Dict[str, Any]:
        """scheduler_components/memory_usage.py build_memory_usage, from memory.py's figures."""
        cap = self.sched.capacity
        return {"weight": round(cap.weights_gib, 3), "kvcache": round(cap.kv_cache_gib, 3),
                "startup_available": round(cap.available_gpu_mem_gib, 3),
                "token_capacity": int(cap.max_total_num_tokens), "token_capacity_swa": None,
                "graph": {phase: round(gb, 3) for phase, gb in cap.graph_gib.items()}}

    async def server_info(self, request):
        """http_server.py server_info: build_server_info (resolved args + launch_command + the
        scheduler's init info) + internal_states (internal_state.py get_internal_state: the
        scheduler process's resolved args with its runtime overrides, e.g. the mamba pool size
        _handle_max_mamba_cache declared, + topology, memory usage, speculative state)."""
        s = self.sched
        cap = s.capacity
        state = dict(self.server_args_dict())
        if cap.max_mamba_cache_size is not None:
            # get_context().override("mamba_pool...", max_mamba_cache_size=...) happens in the
            # scheduler process only: internal_states carries it, the top level does not
            state["max_mamba_cache_size"] = cap.max_mamba_cache_size
        state.update({"world_size": self.cfg["tp_size"], "startup_time": self.startup_time,
                      "effective_max_running_requests_per_dp": s.max_running,
                      "last_gen_throughput": s.last_gen_throughput,
                      "memory_usage": self.memory_usage()})
        if s.adaptive is not None:
            # eagle_worker_v2.py apply_runtime_state: get_context().override("adaptive_spec.
            # restore", ...) of the steps it switched to, which the readback reflects
            steps, draft_tokens = s.active_spec_config()
            state.update(speculative_num_steps=steps, speculative_num_draft_tokens=draft_tokens)
        if s.spec and s.avg_spec_accept_length is not None:
            state["avg_spec_accept_length"] = s.avg_spec_accept_length
        info = dict(self.server_args_dict())
        info.update({"launch_command": self.launch_command,
                     # scheduler.py get_init_info
                     "status": "ready",
                     "max_total_num_tokens": cap.max_total_num_tokens,
                     "max_req_input_len": cap.max_req_input_len,
                     "hicache_object_layout": None,
                     "kv_events": None, "startup_time": self.startup_time,
                     "internal_states": [state], "version": RELEASE_VERSION,
                     "frontend": "python"})
        return web.json_response(info, dumps=_dumps)

    async def get_server_info(self, request):
        logger.warning("Endpoint '/get_server_info' is deprecated and will be removed in a future "
                       "version. Please use '/server_info' instead.")
        return await self.server_info(request)

    async def metrics_endpoint(self, request):
        if not self.cfg["enable_metrics"]:
            return web.json_response({"detail": "Not Found"}, status=404)
        return web.Response(text=self.metrics.render(),
                            content_type="text/plain", charset="utf-8",
                            headers={"X-Emulator": "sglemu"})

    # -- emulator control --------------------------------------------------------------------
    async def stats(self, request):
        s = self.sched
        include = request.query.get("requests", "1") != "0"
        body = {
            "configured": dict(s.configured(), server_args=self.server_args_dict(),
                               knobs=self.knobs.as_dict()),
            "totals": dict(s.totals, metrics_counters=self.metrics.counter_totals(),
                           running=len(s.running), waiting=len(s.waiting),
                           generation_requests_since_start=s.generation_requests_seen,
                           answers=answer_totals(s.requests)),
            "now": time.monotonic(),
        }
        if include:
            body["requests"] = [r.to_stats() for r in s.requests]
        return web.json_response(body, dumps=_dumps)

    async def faults(self, request):
        if request.method == "POST":
            try:
                values = await request.json() if request.can_read_body else {}
                if not isinstance(values, dict):
                    raise KnobError("body must be a JSON object")
                self.knobs.faults.update(values)
            except (KnobError, ValueError) as exc:
                return web.json_response({"error": str(exc)}, status=400)
            self.fault_counter = 0
            self.crash_armed = True
            logger.info("emulator faults set: %s", self.knobs.faults.as_dict())
        return web.json_response(self.knobs.faults.as_dict())

    async def reset(self, request):
        self.sched.reset_counters()
        self.fault_counter = 0
        self.crash_armed = True
        return web.json_response({"reset": True})

    # -- generation --------------------------------------------------------------------------
    def prompt_tokens_of_text(self, text: str) -> int:
        return max(1, int(round(len(text) / self.knobs.chars_per_token)))

    def _admit(self, req: Req) -> str | None:
        """Warmup marking and fault switches at arrival. Returns 'http500' if that fault hits."""
        n = self.sched.new_request_number()
        f = self.knobs.faults
        req.warmup = n <= self.knobs.warmup_requests
        req.exempt = req.warmup and not f.apply_to_warmup
        if req.exempt:
            return None
        self.fault_counter += 1
        if f.http500_every and self.fault_counter % f.http500_every == 0:
            req.fault = "http500"
            return "http500"
        if f.crash_after_requests and self.crash_armed \
                and self.fault_counter >= f.crash_after_requests:
            self.crash_armed = False
            req.extra["crash_at_first_token"] = True
        return None

    def num_reserved_tokens(self) -> int:
        """managers/utils.py compute_num_reserved_tokens: EAGLE and EAGLE-3 keep their drafts in
        the output token slots, so each request reserves max(topk x steps, the largest draft
        width) beyond its input (adaptive: the largest candidate + 1); other algorithms none."""
        c = self.cfg
        if c.get("speculative_algorithm") not in ("EAGLE", "EAGLE3"):
            return 0
        return max(int(c["speculative_eagle_topk"]) * int(c["speculative_num_steps"]),
                   adaptive.max_draft_tokens(c) or 0)

    def _check_length(self, prompt_tokens: int, max_tokens: int | None) -> None:
        """tokenizer_manager._validate_one_request (against the model's context length): the
        input counts the reserved output slots; the total is checked only when the request
        gives max_new_tokens (chat's max_tokens, native sampling_params.max_new_tokens)."""
        ctx = self.cfg["context_length"]
        tokens = prompt_tokens + self.num_reserved_tokens()
        if tokens >= ctx:
            raise ContextLengthError(f"The input ({tokens} tokens) is longer than the "
                                     f"model's context length ({ctx} tokens).")
        if max_tokens is not None and max_tokens + tokens > ctx:
            raise ContextLengthError(
                f"Requested token count exceeds the model's maximum context length of {ctx} "
                f"tokens. You requested a total of {max_tokens + tokens} tokens: "
                f"{tokens} tokens from the input messages and {max_tokens} tokens for the "
                "completion. Please reduce the number of tokens in the input messages or the "
                "completion to fit within the limit.")

    def too_long(self, prompt_tokens: int) -> str | None:
        """managers/utils.py validate_input_length, which the scheduler runs on every request
        (scheduler.py handle_generate_request) against max_req_input_len (tp_worker.py: the
        smaller of the context and the KV pool, minus 6)."""
        limit = self.sched.max_req_input_len
        if prompt_tokens >= limit:
            return (f"Input length ({prompt_tokens} tokens) exceeds the maximum allowed length "
                    f"({limit} tokens). Use a shorter input or enable --allow-auto-truncate.")
        return None

    async def _refuse(self, request: web.Request, req: Req, sink: Sink, openai: bool,
                      message: str):
        """The scheduler's set_finish_with_abort(error_msg) (status 400, BadRequestError). Not
        streamed: tokenizer_manager._handle_abort_finish_reason raises ValueError, answered HTTP
        400 ({"error": {"message"}} native, ErrorResponse on the OpenAI routes). Streamed: the
        abort is an ordinary last chunk after HTTP 200 (native: meta_info.finish_reason is the
        abort with its message; OpenAI: finish_reason "abort", since status_code reaches the
        serving code as a plain int after SGLang's msgpack IPC and the graceful branch runs)."""
        logger.error("%s, self.rid='%s'", message, req.rid)
        req.prompt_tokens = 1  # set_finish_with_abort: origin_input_ids = [0]
        req.finish = {"type": "abort", "message": message, "status_code": 400,
                      "err_type": "BadRequestError"}
        req.t_finish = time.monotonic()
        req.fault = None
        self.sched.record_refused(req)
        if not sink.stream:
            if openai:
                return _openai_error(message)
            return web.json_response({"error": {"message": message}}, status=400, dumps=_dumps)
        resp = web.StreamResponse(status=200, headers={"Content-Type": "text/event-stream"})
        resp.enable_chunked_encoding()
        await resp.prepare(request)
        await resp.write(sink.render_step(req, 0) + sink.render_tail(req))
        await resp.write_eof()
        return resp

    @staticmethod
    async def _stream_error(request: web.Request, message: str):
        """http_server.py stream_results: a ValueError inside a streamed /generate."""
        resp = web.StreamResponse(status=200, headers={"Content-Type": "text/event-stream"})
        resp.enable_chunked_encoding()
        await resp.prepare(request)
        err = {"error": {"message": message, "type": "invalid_request_error", "code": 400,
                         "retryable": False}}
        await resp.write(("data: " + _dumps(err) + "\n\ndata: [DONE]\n\n").encode())
        await resp.write_eof()
        return resp

    async def _run(self, request: web.Request, req: Req, sink: Sink, openai: bool):
        req.sink = sink
        loop = asyncio.get_running_loop()
        req.done = loop.create_future()
        if req.fault == "http500":
            self.sched.submit(req)  # recorded, never scheduled
            self.sched.waiting.remove(req)
            req.finish = {"type": "abort", "message": "emulated HTTP 500",
                          "status_code": 500, "err_type": None}
            req.t_finish = time.monotonic()
            msg = "Internal server error: emulated fault (SGLEMU_FAULT_HTTP500_EVERY)"
            if openai:
                return self.error_response(msg, "InternalServerError", 500)
            return web.json_response({"error": {"message": msg}}, status=500, dumps=_dumps)
        if not sink.stream:
            self.sched.submit(req)
            await req.done
            if req.fault == "truncate":
                self._cut(request)
                return web.Response(status=500)  # never reaches the client
            payload = sink.body()
            if isinstance(payload, bytes):
                return web.Response(body=payload, content_type="application/json")
            return web.json_response(payload, dumps=_dumps)
        resp = web.StreamResponse(status=200, headers={"Content-Type": "text/event-stream"})
        resp.enable_chunked_encoding()
        await resp.prepare(request)
        sink.resp = resp
        sink.transport = request.transport
        self.sched.submit(req)
        while True:
            if req.backlog:
                data = b"".join(req.backlog)
                req.backlog.clear()
                try:
                    await resp.write(data)
                except Exception:
                    self.sched.abort(req)
                    break
                tr = request.transport
                if not req.backlog and tr is not None and \
                        tr.get_write_buffer_size() < INLINE_WRITE_LIMIT:
                    req.backlog = None
                continue
            if sink.terminal():
                break
            req.waiter = loop.create_future()
            try:
                await req.waiter
            finally:
                req.waiter = None
        if req.fault == "truncate" or req.closed:
            self._cut(request)
            return resp
        try:
            await resp.write_eof()
        except Exception:
            pass
        return resp

    @staticmethod
    def _cut(request: web.Request) -> None:
        """Close the connection abruptly: no terminating chunk, no [DONE]."""
        tr = request.transport
        if tr is not None:
            tr.close()
        raise asyncio.CancelledError()

    async def _json(self, request) -> Dict[str, Any]:
        try:
            body = await request.json()
        except (ValueError, UnicodeDecodeError) as exc:
            raise BadRequest("Invalid JSON body: %s" % exc) from None
        if not isinstance(body, dict):
            raise BadRequest("Request body must be a JSON object.")
        return body

    async def generate(self, request):
        try:
            body = await self._json(request)
            sp = body.get("sampling_params") or {}
            if not isinstance(sp, dict):
                raise BadRequest("sampling_params must be an object")
            text = body.get("text")
            ids = body.get("input_ids")
            if isinstance(text, list) or (ids and isinstance(ids[0], list)):
                raise BadRequest("sglang emulator: batched /generate is not supported")
            if text is None and ids is None:
                raise BadRequest("Either text, input_ids or input_embeds should be provided.")
            prompt_tokens = len(ids) if ids is not None else self.prompt_tokens_of_text(text)
            max_new = sp.get("max_new_tokens")
            self._check_length(prompt_tokens, None if max_new is None else int(max_new))
            max_new = 128 if max_new is None else int(max_new)
        except ContextLengthError as exc:
            if isinstance(body, dict) and body.get("stream"):
                return await self._stream_error(request, str(exc))
            return web.json_response({"error": {"message": str(exc)}}, status=400, dumps=_dumps)
        except (BadRequest, TypeError, ValueError) as exc:
            return web.json_response({"error": {"message": str(exc)}}, status=400, dumps=_dumps)
        stream = bool(body.get("stream", False))
        rid = body.get("rid") or uuid.uuid4().hex
        max_new = self.sched.cap_max_new_tokens(prompt_tokens, max_new)
        req = Req(str(rid), "/generate", prompt_tokens, max_new, bool(sp.get("ignore_eos")),
                  text if text is not None else repr(ids), stream,
                  reasoning=self.cfg["reasoning_parser"] is not None)
        sink = GenerateSink(self.sched, req, stream)
        refusal = self.too_long(prompt_tokens)
        if refusal:
            return await self._refuse(request, req, sink, False, refusal)
        self._admit(req)
        return await self._run(request, req, sink, openai=False)

    def _openai_common(self, body: Dict[str, Any]):
        model = body.get("model", "default")
        if not isinstance(model, str):
            raise BadRequest("model must be a string")
        served = self.cfg["served_model_name"]
        if ":" in model and model != served:
            adapter = model[len(served) + 1:] if model.startswith(served + ":") \
                else model.split(":", 1)[1]
            adapter = adapter.strip()
            if adapter:
                raise BadRequest(
                    f"LoRA adapter '{adapter}' was requested, but LoRA is not enabled. Please "
                    "launch the server with --enable-lora flag and preload adapters using "
                    "--lora-paths or /load_lora_adapter endpoint.")
        if int(body.get("n", 1) or 1) != 1:
            raise BadRequest("sglang emulator: n > 1 is not supported")
        so = body.get("stream_options") or {}
        stream = bool(body.get("stream", False))
        include_usage = bool(so.get("include_usage")) if stream else False
        continuous = bool(so.get("continuous_usage_stats")) if stream else False
        return model, stream, include_usage, continuous

    async def completions(self, request):
        try:
            body = await self._json(request)
            model, stream, include_usage, continuous = self._openai_common(body)
            prompt = body.get("prompt")
            if not prompt or (isinstance(prompt, list) and all(not p for p in prompt)):
                raise BadRequest("Prompt cannot be empty")
            if isinstance(prompt, list) and isinstance(prompt[0], (str, list)):
                if len(prompt) != 1:
                    raise BadRequest("sglang emulator: batched prompts are not supported")
                prompt = prompt[0]
            prompt_tokens = len(prompt) if isinstance(prompt, list) \
                else self.prompt_tokens_of_text(str(prompt))
            max_tokens = body.get("max_tokens", 16)
            max_tokens = 16 if max_tokens is None else int(max_tokens)
            if max_tokens <= 0:
                raise BadRequest("max_tokens must be positive")
            self._check_length(prompt_tokens, max_tokens)
        except (BadRequest, TypeError, ValueError) as exc:
            return _openai_error(str(exc))
        rid = body.get("rid") or uuid.uuid4().hex
        max_tokens = self.sched.cap_max_new_tokens(prompt_tokens, max_tokens)
        req = Req(str(rid), "/v1/completions", prompt_tokens, max_tokens,
                  bool(body.get("ignore_eos")), repr(prompt), stream,
                  reasoning=self.cfg["reasoning_parser"] is not None)
        sink = CompletionSink(self.sched, req, stream, model, include_usage, continuous,
                              bool(body.get("return_spec_tokens_details")))
        refusal = self.too_long(prompt_tokens)
        if refusal:
            return await self._refuse(request, req, sink, True, refusal)
        self._admit(req)
        return await self._run(request, req, sink, openai=True)

    async def chat(self, request):
        try:
            body = await self._json(request)
            model, stream, include_usage, continuous = self._openai_common(body)
            messages = body.get("messages")
            if not isinstance(messages, list) or not messages:
                raise BadRequest("messages must be a non-empty list")
            chars, key = 0, []
            for m in messages:
                content = m.get("content") if isinstance(m, dict) else None
                if isinstance(content, list):
                    content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
                content = content or ""
                chars += len(content)
                key.append(content)
            # ~4 chars per token plus the chat template's per-message framing
            prompt_tokens = max(1, int(round(chars / self.knobs.chars_per_token))) \
                + 4 * len(messages) + 3
            max_tokens = body.get("max_completion_tokens")
            if max_tokens is None:
                max_tokens = body.get("max_tokens")
            if max_tokens is not None:
                max_tokens = int(max_tokens)
                if max_tokens <= 0:
                    raise BadRequest("max_tokens must be positive")
            self._check_length(prompt_tokens, max_tokens)
            if max_tokens is None:  # the scheduler's cap follows (cap_max_new_tokens)
                max_tokens = min(CHAT_DEFAULT_MAX_TOKENS, self.cfg["context_length"] - prompt_tokens)
        except (BadRequest, TypeError, ValueError, AttributeError) as exc:
            return _openai_error(str(exc))
        # Thinking follows the chat template (Qwen3.6 thinks unless enable_thinking is false); the
        # reasoning parser only decides where its text goes (render.py).
        ctk = body.get("chat_template_kwargs") or {}
        thinking = not (isinstance(ctk, dict) and ctk.get("enable_thinking") is False)
        rid = body.get("rid") or uuid.uuid4().hex
        max_tokens = self.sched.cap_max_new_tokens(prompt_tokens, max_tokens)
        req = Req(str(rid), "/v1/chat/completions", prompt_tokens, max_tokens,
                  bool(body.get("ignore_eos")), "\x00".join(key), stream, reasoning=thinking)
        req.chat_think = thinking
        parser = self.cfg["reasoning_parser"]
        # SGLang counts reasoning tokens (to </think>) only under a reasoning parser
        # (batch_result_processor.py _maybe_update_reasoning_tokens)
        req.count_reasoning = thinking and parser is not None
        tools = body.get("tools") if isinstance(body.get("tools"), list) else None
        sink = ChatSink(self.sched, req, stream, model, include_usage, continuous,
                        bool(body.get("return_spec_tokens_details")),
                        **self.chat_rendering(body, thinking, tools))
        refusal = self.too_long(prompt_tokens)
        if refusal:
            return await self._refuse(request, req, sink, True, refusal)
        self._admit(req)
        self.apply_reply(req, last_user_text(messages), tools)
        return await self._run(request, req, sink, openai=True)

    def chat_rendering(self, body: Dict[str, Any], thinking: bool,
                       tools: List[Any] | None) -> Dict[str, Any]:
        """The ChatSink's renderer and options for this request (SGLang 0.5.23): reasoning split
        under a reasoning parser with separate_reasoning (default true), tool-call parsing with a
        --tool-call-parser, tools and tool_choice other than "none" (serving_chat.py
        _tool_call_parsing_active); the faults FAULT_UNPARSED_REASONING / _TOOLS."""
        f = self.knobs.faults
        parser = self.cfg["reasoning_parser"]
        reasoning = parser is not None and body.get("separate_reasoning", True) is not False \
            and not f.unparsed_reasoning
        tool_parser = self.cfg.get("tool_call_parser")
        tool_active = bool(tool_parser) and bool(tools) and body.get("tool_choice") != "none"
        mode = tool_mode("sglang", tool_parser) if tool_active and not f.unparsed_tools \
            else "content"
        renderer = ChatRenderer("sglang", reasoning, thinking, mode, tools,
                                forced=parser in FORCED_REASONING)
        top = body.get("top_logprobs")
        return {"renderer": renderer, "tool_active": tool_active,
                "logprobs": bool(body.get("logprobs")),
                "top_logprobs": int(top) if isinstance(top, int) and top > 0 else 0}

    def apply_reply(self, req: Req, prompt: str | None, tools: List[Any] | None) -> None:
        """The mind's reply script for this request (answers.py), right or wrong
        (FAULT_WRONG_ANSWERS: that share of answerable prompts, by a hash of the prompt)."""
        reply = self.mind.reply(prompt, tools) if prompt else None
        if reply is None or req.fault == "http500":
            return
        share = self.knobs.faults.wrong_answers
        key = prompt.strip()
        wrong = bool(share) and not req.exempt \
            and stable_hash("wrong\x00" + key) % 1000000 < share * 1000000
        given = reply.given(wrong, stable_hash("alt\x00" + key), tools)
        req.reply = reply
        req.wrong = wrong
        req.extra["given"] = given
        script, alt = [], []
        for text, essential in reply.segments(given):
            for piece in reply_pieces(text):
                script.append(intern_piece(piece))
                alt.append(None if essential else intern_piece(reword(piece)))
        req.set_script(script, alt)
