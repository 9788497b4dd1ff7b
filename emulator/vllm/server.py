"""aiohttp front end speaking vLLM 0.33.0's OpenAI-compatible shapes, on the shared scheduler.

Shapes (paths under vllm/entrypoints/): openai/chat_completion/serving.py (stream chunks are
`model_dump_json(exclude_unset=True, exclude_none=not chunk.choices)`), openai/completion/
serving.py (chunks `exclude_unset=True`, the final usage chunk `exclude_none=True`),
generate/base/protocol.py (DeltaMessage, SpeculativeDecodingMetrics, PerRequestMetrics),
serve/engine/protocol.py (ModelCard, UsageInfo, ErrorResponse), serve/instrumentator/ (/health,
/version), serve/middleware/authenticate.py (api key on /v1, /v2, /inference, /cohere only).
"""
from __future__ import annotations

import time
import uuid
from typing import Any, Dict, List

from aiohttp import web

from ..answers import last_user_text
from ..render import ChatRenderer, tool_mode
from ..request import VOCAB, Req
from ..scheduler import Scheduler
from ..server import BadRequest, EmulatorServer
from ..sinks import Sink, _dumps, note_rendering, token_logprobs
from .args import VLLM_VERSION
from .metrics import VllmMetrics, cache_config_labels

GUARDED_PREFIX = ("/v1", "/v2", "/inference", "/cohere")
CHAT_DEFAULT_MAX_TOKENS = 8192  # emulator cap; vLLM's default is max_model_len - prompt
COMPLETION_DEFAULT_MAX_TOKENS = 16  # CompletionRequest.max_tokens default


def _release_version() -> str:
    """The installed vllm-emulator release's version (`make dist`), else the emulated 0.33.0."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("vllm-emulator")
    except PackageNotFoundError:
        return VLLM_VERSION


RELEASE_VERSION = _release_version()


def spec_decode_metrics(req: Req, num_spec: int, level: str) -> Dict[str, Any] | None:
    """v1/metrics/stats.py RequestSpecDecodeMetrics.to_dict (histogram: verify steps that
    accepted exactly j drafts, as the sampler accepted them, before the max_tokens cut)."""
    if level == "none" or not num_spec:
        return None
    hist = list(req.hist) + [0] * (num_spec + 1 - len(req.hist))
    steps = sum(hist)
    accepted = sum(j * c for j, c in enumerate(hist))
    drafted = steps * num_spec
    return {"mean_acceptance_length": 1.0 + accepted / steps if steps else 1.0,
            "draft_acceptance_rate": accepted / drafted if drafted else 0.0,
            "acceptance_histogram": hist, "num_spec_steps": steps,
            "num_accepted_draft_tokens": accepted, "num_draft_tokens": drafted,
            "num_spec_tokens": num_spec}


class VllmScheduler(Scheduler):
    """The shared scheduler with vLLM's accounting: histograms before the max_tokens cut, spec
    counters per verify step, prompt / generation counters per engine step."""

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.hist_untruncated = True
        self.on_verify = self._verify

    def _verify(self, req: Req, accepted: int) -> None:
        if req.log_metrics:
            self.metrics.observe_draft(accepted)

    async def _finish_step(self, t, new, decode):
        before = [(r, r.produced) for r in decode]
        await super()._finish_step(t, new, decode)
        # vLLM records its scheduler stats (running, waiting, KV usage) every engine step
        self.metrics.set_scheduler_gauges(self)
        self.metrics.observe_step_tokens(
            sum(r.prompt_tokens for r in new if r.log_metrics),
            sum(r.produced for r in new if r.log_metrics)
            + sum(r.produced - b for r, b in before if r.log_metrics))


class VllmSink(Sink):
    """Common to both OpenAI routes: ids, usage, the final usage chunk."""

    obj = "text_completion"

    def __init__(self, server, req, stream, model, include_usage, continuous):
        super().__init__(server.sched, req, stream)
        self.server = server  # its configuration: the reasoning parser, per-request metrics
        self.model = model
        self.include_usage = include_usage
        self.continuous = continuous

    def head(self) -> Dict[str, Any]:
        return {"id": self.req.rid, "object": self.obj, "created": self.created,
                "model": self.model}

    def usage(self, completion: int | None = None, details: bool = False) -> Dict[str, Any]:
        req = self.req
        n = req.produced if completion is None else completion
        u = {"prompt_tokens": req.prompt_tokens, "total_tokens": req.prompt_tokens + n,
             "completion_tokens": n}
        if details:
            u["completion_tokens_details"] = (
                {"reasoning_tokens": req.reasoning_tokens(n)}
                if self.server.cfg["reasoning_parser"] else None)
        return u

    def spec_metrics(self) -> Dict[str, Any] | None:
        s = self.server
        return spec_decode_metrics(self.req, s.sched.steps, s.cfg["per_request_spec_decode_metrics"])

    def final_usage_chunk(self, details: bool) -> str:
        usage = self.usage(details=details)
        usage = {k: v for k, v in usage.items() if v is not None}
        chunk = dict(self.head(), choices=[], usage=usage)
        spec = self.spec_metrics()
        if spec is not None:
            chunk["metrics"] = {"speculative_decoding": spec}
        return "data: " + _dumps(chunk) + "\n\n"

    def finish_reason(self):
        fin = self.req.finish
        return fin["type"] if fin else None

    def response(self, choice: Dict[str, Any], details: bool, extra: Dict[str, Any]):
        """The non-streamed body: model_dump() of the response (every field)."""
        spec = self.spec_metrics()
        metrics = None
        if spec is not None:
            metrics = {"time_to_first_token_ms": None, "generation_time_ms": None,
                       "queue_time_ms": None, "mean_itl_ms": None, "tokens_per_second": None,
                       "speculative_decoding": dict(spec, per_step_accepted=None,
                                                    per_step_drafted=None)}
        usage = self.usage(details=True)
        usage = {"prompt_tokens": usage["prompt_tokens"], "total_tokens": usage["total_tokens"],
                 "completion_tokens": usage["completion_tokens"], "prompt_tokens_details": None,
                 "completion_tokens_details": usage["completion_tokens_details"]}
        out = dict(self.head(), choices=[choice], service_tier=None, system_fingerprint=None,
                   usage=usage)
        out["object"] = self.obj.replace(".chunk", "")
        out.update(extra)
        out.update(kv_transfer_params=None, ec_transfer_params=None, metrics=metrics)
        return out


class VllmCompletionSink(VllmSink):
    def render_step(self, req: Req, start: int) -> bytes:
        fin = self.finish_reason()
        chunk = dict(self.head(), choices=[{
            "index": 0, "text": self.text_range(req, start, req.produced), "logprobs": None,
            "finish_reason": fin, "stop_reason": None, "prompt_token_ids": None,
            "token_ids": None, "weight_versions": None}])
        if self.continuous:
            chunk["usage"] = self.usage()
        chunk["kv_transfer_params"] = None
        return ("data: " + _dumps(chunk) + "\n\n").encode()

    def render_tail(self, req: Req) -> bytes:
        out = self.final_usage_chunk(details=False) if self.include_usage else ""
        return (out + "data: [DONE]\n\n").encode()

    def body(self) -> Dict[str, Any]:
        req = self.req
        choice = {"index": 0, "text": self.text_range(req, 0, req.produced), "logprobs": None,
                  "finish_reason": self.finish_reason(), "stop_reason": None, "token_ids": None,
                  "prompt_logprobs": None, "prompt_token_ids": None}
        body = self.response(choice, False, {})
        body["usage"].pop("completion_tokens_details")
        body["usage"]["completion_tokens_details"] = None
        return body


def new_vllm_tool_call_id() -> str:
    """renderers/chat_utils/tool_call.py make_tool_call_id ("random"): chatcmpl-tool- + 16 hex."""
    return "chatcmpl-tool-%016x" % (uuid.uuid4().int & (2 ** 64 - 1))


class VllmChatSink(VllmSink):
    """Chat: the output split as vLLM's parser engine splits it (render.py; ChatStreamProcessor
    in openai/chat_completion/stream_processor.py, assemble_chat_message_fields in
    message_assembly.py)."""

    obj = "chat.completion.chunk"

    def __init__(self, *a, renderer: ChatRenderer | None = None, parsing: bool = False,
                 logprobs: bool = False, top_logprobs: int = 0, include_reasoning: bool = True,
                 **kw):
        super().__init__(*a, **kw)
        self.first = True
        self.renderer = renderer or ChatRenderer("vllm", False, False, "content", None)
        self.parsing = parsing  # a parser class exists (reasoning or auto tool choice)
        self.logprobs = logprobs
        self.top_logprobs = top_logprobs
        self.include_reasoning = include_reasoning

    def pieces(self, req: Req, a: int, b: int) -> List[str]:
        return [VOCAB[req.vocab_index(p)] for p in range(a, b)]

    def usage(self, completion: int | None = None, details: bool = False) -> Dict[str, Any]:
        """The parser's count_reasoning_tokens: the tokens before </think> (the template
        opened the block in the prompt), 0 with thinking off."""
        u = super().usage(completion, details)
        req = self.req
        if details and u.get("completion_tokens_details") is not None and req.chat_think:
            n = req.produced if completion is None else completion
            count = min(n, req.think_len - 1) if req.count_reasoning else 0
            u["completion_tokens_details"] = {"reasoning_tokens": max(0, count)}
        return u

    def _delta_chunk(self, delta: Dict[str, Any], upto: int, finish=None) -> str:
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
        if finish is not None:
            choice.update(stop_reason=None, token_ids=None, weight_versions=None)
        else:
            choice["token_ids"] = None
        chunk = dict(self.head(), choices=[choice])
        if self.continuous:
            chunk["usage"] = self.usage(upto, details=True)
        chunk["kv_transfer_params"] = None
        return "data: " + _dumps(chunk) + "\n\n"

    def finish_reason(self, calls: bool = False):
        """serve/utils/tool_calls_utils.py resolve_finish_reason: tool_calls for a choice that
        carries calls after a natural stop."""
        fin = self.req.finish
        reason = fin["type"] if fin else None
        return "tool_calls" if calls and reason == "stop" else reason

    def render_step(self, req: Req, start: int) -> bytes:
        out: List[str] = []
        if self.first:
            self.first = False
            chunk = dict(self.head(), choices=[{"index": 0, "delta": {"role": "assistant",
                                                                        "content": ""},
                                                 "logprobs": None, "finish_reason": None}])
            if self.continuous:
                chunk["usage"] = self.usage(0, details=True)
            chunk.update(prompt_token_ids=None, prompt_text=None)
            out.append("data: " + _dumps(chunk) + "\n\n")
        r = self.renderer
        reasoning, events = r.step(self.pieces(req, start, req.produced), new_vllm_tool_call_id)
        if req.finish is not None:
            events = events + r.finish()
        # DeltaMessage field order: role, content, reasoning, tool_calls (exclude_unset)
        delta: Dict[str, Any] = {}
        content = "".join(v for k, v in events if k == "content")
        if content or (not self.parsing and start < req.produced) \
                or (r.mode == "content" and r.step_content_pieces and not reasoning):
            delta["content"] = content
        if reasoning and self.include_reasoning:
            delta["reasoning"] = reasoning
        calls = []
        for kind, v in events:
            if kind != "call":
                continue
            if v["id"] is not None:
                fn = {"name": v["name"]}
                if v["arguments"]:
                    fn["arguments"] = v["arguments"]
                calls.append({"id": v["id"], "type": "function", "index": v["index"],
                              "function": fn})
            else:
                calls.append({"index": v["index"], "function": {"arguments": v["arguments"]}})
        if calls:
            delta["tool_calls"] = calls
        fin = self.finish_reason(r.calls_streamed)
        if delta or fin is not None:
            out.append(self._delta_chunk(delta, req.produced, fin))
        if fin is not None:
            note_rendering(req, r, r.calls_streamed, True)
        return "".join(out).encode()

    def render_tail(self, req: Req) -> bytes:
        out = self.final_usage_chunk(details=True) if self.include_usage else ""
        return (out + "data: [DONE]\n\n").encode()

    def body(self) -> Dict[str, Any]:
        req = self.req
        parsed = self.renderer.full(self.pieces(req, 0, req.produced))
        message = {"role": "assistant", "content": parsed["content"], "refusal": None,
                   "annotations": None, "audio": None, "function_call": None}
        if parsed["calls"]:
            message["tool_calls"] = [
                {"id": new_vllm_tool_call_id(), "type": "function",
                 "function": {"name": c["name"], "arguments": c["arguments"]}}
                for c in parsed["calls"]]
        message["reasoning"] = parsed["reasoning"] if self.include_reasoning else None
        note_rendering(req, self.renderer, bool(parsed["calls"]), False)
        logprobs = None
        if self.logprobs:
            # chat_completion/serving.py _create_chat_logprobs: ChatCompletionLogProbsContent
            # per output token (protocol.py field order: token, logprob, bytes, top_logprobs)
            logprobs = {"content": [
                {"token": e["token"], "logprob": e["logprob"], "bytes": e["bytes"],
                 "top_logprobs": [{"token": t["token"], "logprob": t["logprob"],
                                   "bytes": t["bytes"]} for t in e["top_logprobs"]]}
                for e in token_logprobs(req, self.top_logprobs)]}
        choice = {"index": 0, "message": message, "logprobs": logprobs,
                  "finish_reason": self.finish_reason(bool(parsed["calls"])),
                  "stop_reason": None, "token_ids": None}
        return self.response(choice, True, {"prompt_logprobs": None, "prompt_token_ids": None,
                                            "prompt_text": None})


class ValidationError(Exception):
    def __init__(self, message: str, param: str | None = None, code: int = 400,
                 err_type: str = "BadRequestError"):
        super().__init__(message)
        self.param = param
        self.code = code
        self.err_type = err_type


class VllmServer(EmulatorServer):
    scheduler_cls = VllmScheduler

    def make_metrics(self, cfg: Dict[str, Any]):
        return VllmMetrics(cfg)

    @staticmethod
    def error_response(message: str, err_type: str = "BadRequestError", code: int = 400,
                       param: str | None = None):
        """serve/exception_handling/error_response.py: ErrorResponse(error=ErrorInfo(...))."""
        return web.json_response({"error": {"message": message, "type": err_type,
                                            "param": param, "code": code}},
                                 status=code, dumps=_dumps)

    def routes(self):
        return [("GET", "/health", self.health), ("GET", "/version", self.version),
                ("GET", "/v1/models", self.models), ("GET", "/metrics", self.metrics_endpoint),
                ("POST", "/v1/completions", self.completions),
                ("POST", "/v1/chat/completions", self.chat)]

    def build_app(self) -> web.Application:
        self.metrics.cache_info = cache_config_labels(self.cfg, self.sched.capacity)
        return super().build_app()

    @web.middleware
    async def auth_middleware(self, request: web.Request, handler):
        keys = self.cfg.get("api_keys") or []
        if keys and request.method != "OPTIONS" and request.path.startswith(GUARDED_PREFIX):
            scheme, _, param = (request.headers.get("Authorization") or "").partition(" ")
            if scheme.lower() != "bearer" or param not in keys:
                return web.json_response({"error": "Unauthorized"}, status=401)
        return await handler(request)

    async def health(self, request):
        """serve/instrumentator/health.py: 200, empty body, while the engine lives."""
        return web.Response(status=200)

    async def version(self, request):
        return web.json_response({"version": RELEASE_VERSION})

    async def models(self, request):
        now = int(time.time())
        data = [{"id": name, "object": "model", "created": now, "owned_by": "vllm",
                 "root": self.cfg["model"], "parent": None,
                 "max_model_len": self.cfg["max_model_len"],
                 "permission": [{"id": "modelperm-" + uuid.uuid4().hex, "object": "model_permission",
                                 "created": now, "allow_create_engine": False,
                                 "allow_sampling": True, "allow_logprobs": True,
                                 "allow_search_indices": False, "allow_view": True,
                                 "allow_fine_tuning": False, "organization": "*", "group": None,
                                 "is_blocking": False}]}
                for name in self.cfg["served_model_names"]]
        return web.json_response({"object": "list", "data": data}, dumps=_dumps)

    async def metrics_endpoint(self, request):
        return web.Response(text=self.metrics.render(), content_type="text/plain",
                            charset="utf-8", headers={"X-Emulator": "vllmemu"})

    # -- generation -------------------------------------------------------------------------
    def _common(self, body: Dict[str, Any]):
        model = body.get("model")
        if model and model not in self.cfg["served_model_names"]:
            raise ValidationError(
                f"The model `{model}` does not exist. Valid aliases: "
                f"{', '.join(self.cfg['served_model_names'])}.", "model", 404, "NotFoundError")
        if int(body.get("n", 1) or 1) != 1:
            raise ValidationError("vllm emulator: n > 1 is not supported")
        so = body.get("stream_options") or {}
        stream = bool(body.get("stream", False))
        # api_utils.py should_include_usage: continuous only together with include_usage
        include = bool(so.get("include_usage")) if stream else False
        continuous = include and bool(so.get("continuous_usage_stats"))
        return model or self.cfg["served_model_name"], stream, include, continuous

    def _max_tokens(self, body: Dict[str, Any], prompt_tokens: int, default: int) -> int:
        """renderers/params.py _token_len_check and TokenizeParams.__post_init__, then
        serve/utils/api_utils.py get_max_tokens (clamped to max_model_len - input)."""
        mml = self.cfg["max_model_len"]
        param = "max_completion_tokens" if body.get("max_completion_tokens") is not None \
            else "max_tokens"
        requested = body.get(param)
        if requested is not None:
            requested = int(requested)
            if requested < 1:
                raise ValidationError(f"{param} must be at least 1, got {requested}.", param)
            if requested > mml:
                raise ValidationError(f"{param}={requested} cannot be greater than "
                                      f"max_model_len={mml}. Please request fewer output tokens.",
                                      param)
        if prompt_tokens > mml:
            raise ValidationError(
                f"This model's maximum context length is {mml} tokens. However, your prompt "
                f"contains {prompt_tokens} input tokens, which exceeds this limit even without "
                "any output tokens. Please reduce the length of the input prompt.",
                "input_tokens")
        return max(1, min(mml - prompt_tokens, requested if requested is not None else default))

    async def _generate(self, request, endpoint: str, chat: bool):
        try:
            body = await self._json(request)
            model, stream, include, continuous = self._common(body)
            # the raw completions text has no chat template: it thinks (with the tags) only under
            # a reasoning parser, as before; chat follows the template's enable_thinking
            thinking = self.cfg["reasoning_parser"] is not None
            if chat:
                messages = body.get("messages")
                if not isinstance(messages, list) or not messages:
                    raise ValidationError("messages must be a non-empty list", "messages")
                texts = []
                for m in messages:
                    c = m.get("content") if isinstance(m, dict) else None
                    if isinstance(c, list):
                        c = "".join(p.get("text", "") for p in c if isinstance(p, dict))
                    texts.append(c or "")
                prompt_tokens = self.prompt_tokens_of_text("".join(texts)) + 4 * len(messages) + 3
                key = "\x00".join(texts)
                ctk = body.get("chat_template_kwargs") or {}
                thinking = not (isinstance(ctk, dict) and ctk.get("enable_thinking") is False)
                default = CHAT_DEFAULT_MAX_TOKENS
            else:
                prompt = body.get("prompt")
                if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], (str, list)):
                    prompt = prompt[0]
                if not prompt:
                    raise ValidationError("Prompt cannot be empty", "prompt")
                prompt_tokens = len(prompt) if isinstance(prompt, list) \
                    else self.prompt_tokens_of_text(str(prompt))
                key = repr(prompt)
                default = COMPLETION_DEFAULT_MAX_TOKENS
            max_tokens = self._max_tokens(body, prompt_tokens, default)
        except ValidationError as exc:
            if exc.param == "input_tokens":
                req = Req("refused-" + uuid.uuid4().hex, endpoint, 1, 1, True, "", False, False)
                req.finish = {"type": "abort", "message": str(exc), "status_code": 400}
                req.t_finish = time.monotonic()
                self.sched.record_refused(req)
            return self.error_response(str(exc), exc.err_type, exc.code, exc.param)
        except (BadRequest, TypeError, ValueError, AttributeError) as exc:
            return self.error_response(str(exc))
        # serving.py: f"chatcmpl-{self._base_request_id(raw_request, request.request_id)}" - the
        # X-Request-Id header, else the body's request_id, else a random id
        prefix = "chatcmpl-" if chat else "cmpl-"
        base = request.headers.get("X-Request-Id") or body.get("request_id") or uuid.uuid4().hex
        req = Req(prefix + str(base), endpoint, prompt_tokens, max_tokens,
                  bool(body.get("ignore_eos")), key, stream, reasoning=thinking)
        if chat:
            req.chat_think = thinking
            tools = body.get("tools") if isinstance(body.get("tools"), list) else None
            sink = VllmChatSink(self, req, stream, model, include, continuous,
                                **self.chat_rendering(body, thinking, tools))
            req.count_reasoning = thinking and bool(self.cfg["reasoning_parser"]) \
                and not self.knobs.faults.unparsed_reasoning
        else:
            sink = VllmCompletionSink(self, req, stream, model, include, continuous)
        self._admit(req)
        if chat:
            self.apply_reply(req, last_user_text(body.get("messages")), tools)
        return await self._run(request, req, sink, openai=True)

    def chat_rendering(self, body: Dict[str, Any], thinking: bool,
                       tools: List[Any] | None) -> Dict[str, Any]:
        """vLLM 0.33.0: the parser class exists with a reasoning parser or auto tool choice
        (parser/parser_manager.py); tool calls are kept with --enable-auto-tool-choice, a
        --tool-call-parser, tools and tool_choice "auto", the default with tools
        (message_assembly.py keeps_tool_calls);
        the faults FAULT_UNPARSED_REASONING / _TOOLS."""
        f = self.knobs.faults
        parser = self.cfg["reasoning_parser"]
        tool_parser = self.cfg.get("tool_call_parser") or None
        auto = bool(self.cfg.get("enable_auto_tool_choice")) and bool(tool_parser)
        # "required" / a named tool are treated as "auto" (vLLM constrains decoding then)
        keep_calls = auto and bool(tools) and body.get("tool_choice", "auto") != "none"
        mode = tool_mode("vllm", tool_parser) if keep_calls and not f.unparsed_tools \
            else "content"
        renderer = ChatRenderer("vllm", bool(parser) and not f.unparsed_reasoning, thinking,
                                mode, tools)
        top = body.get("top_logprobs")
        return {"renderer": renderer, "parsing": bool(parser) or auto,
                "logprobs": bool(body.get("logprobs")),
                "top_logprobs": int(top) if isinstance(top, int) and top > 0 else 0,
                "include_reasoning": body.get("include_reasoning", True) is not False}

    async def completions(self, request):
        return await self._generate(request, "/v1/completions", chat=False)

    async def chat(self, request):
        return await self._generate(request, "/v1/chat/completions", chat=True)
