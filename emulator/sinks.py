"""Sinks: the bytes of each endpoint's reply, SGLang 0.5.23's shapes (server.py feeds them).

One sink per request turns the scheduler's steps into the endpoint's output: native /generate
(GenerateSink), OpenAI completions (CompletionSink) and chat (ChatSink), streamed as SSE chunks
from the scheduler loop or rendered once as a body; HealthSink only marks a health check done.
Shapes follow openai/serving_chat.py, serving_completions.py, protocol.py, sse_utils.py and
managers/tokenizer_manager.py `_handle_batch_output`.
"""
from __future__ import annotations

import json
import time
import uuid
from typing import TYPE_CHECKING, Any, Dict, List

from aiohttp import web

from .render import ChatRenderer
from .request import EOS, TOKEN_IDS_STR, VOCAB, VOCAB_ESC, Req

if TYPE_CHECKING:
    from .scheduler import Scheduler

INLINE_WRITE_LIMIT = 256 * 1024


def _dumps(obj: Any) -> str:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)


def _usage(prompt: int, completion: int, reasoning: int) -> Dict[str, Any]:
    """UsageInfo.model_dump() as UsageProcessor.calculate_token_usage builds it."""
    return {"prompt_tokens": prompt, "total_tokens": prompt + completion,
            "completion_tokens": completion, "prompt_tokens_details": None,
            "reasoning_tokens": reasoning,
            "completion_tokens_details": ({"reasoning_tokens": reasoning} if reasoning else None)}


def spec_details(req: Req, draft_tokens: int) -> Dict[str, Any] | None:
    """tokenizer_manager._calculate_spec_decoding_metrics (only with verify steps)."""
    if not req.verify_ct:
        return None
    proposed = req.verify_ct * (draft_tokens - 1)
    if proposed <= 0:
        return None
    return {
        "spec_accept_rate": req.correct / proposed,
        "spec_accept_length": req.produced / req.verify_ct,
        "spec_num_correct_drafts": req.correct,
        "spec_num_proposed_drafts": proposed,
        "spec_verify_ct": req.verify_ct,
        "spec_correct_drafts_histogram": list(req.hist),
    }


def spec_tokens_details(details: Dict[str, Any]) -> Dict[str, Any]:
    """protocol.SpecTokensDetails, field order as declared."""
    return {
        "spec_accept_rate": details["spec_accept_rate"],
        "spec_accept_length": details["spec_accept_length"],
        "spec_cap_length": 0.0, "spec_block_accept_length": 0.0,
        "spec_num_correct_drafts": details["spec_num_correct_drafts"],
        "spec_num_proposed_drafts": details["spec_num_proposed_drafts"],
        "spec_verify_ct": details["spec_verify_ct"],
        "spec_correct_drafts_histogram": details["spec_correct_drafts_histogram"],
        "spec_cap_lens_histogram": [],
    }


# ---------------------------------------------------------------------------------------------
# Sinks: turn scheduler steps into the endpoint's bytes. One per request.
# ---------------------------------------------------------------------------------------------
class Sink:
    def __init__(self, sched: Scheduler, req: Req, stream: bool):
        self.sched = sched  # the server's: a client that goes away aborts its request there
        self.req = req
        self.stream = stream
        self.resp: web.StreamResponse | None = None
        self.transport = None
        self.created = int(time.time())

    def wake(self) -> None:
        w = self.req.waiter
        if w is not None and not w.done():
            w.set_result(None)

    def terminal(self) -> bool:
        r = self.req
        return r.finish is not None or r.closed or r.fault == "truncate"

    async def on_step(self, req: Req, start: int) -> None:
        if self.stream:
            data = self.render_step(req, start)
            if req.finish is not None:
                data += self.render_tail(req)
            if data:
                await self.write(data)
        if self.terminal():
            if req.done is not None and not req.done.done():
                req.done.set_result(None)
            self.wake()

    async def write(self, data: bytes) -> None:
        req = self.req
        if req.backlog is None:
            tr = self.transport
            if tr is None or tr.is_closing():
                self.sched.abort(req)
                self.wake()
                return
            if tr.get_write_buffer_size() < INLINE_WRITE_LIMIT:
                try:
                    await self.resp.write(data)
                except Exception:  # client went away mid-write
                    self.sched.abort(req)
                    self.wake()
                return
            req.backlog = []
        req.backlog.append(data)
        self.wake()

    # meta / text helpers ------------------------------------------------------------------
    def text_range(self, req: Req, a: int, b: int, escaped: bool = False) -> str:
        table = VOCAB_ESC if escaped else VOCAB
        return "".join([table[req.vocab_index(p)] for p in range(a, b)])

    def render_step(self, req: Req, start: int) -> bytes:
        raise NotImplementedError

    def render_tail(self, req: Req) -> bytes:
        return b""

    def body(self) -> Dict[str, Any]:
        raise NotImplementedError


class GenerateSink(Sink):
    """Native /generate: cumulative text and output_ids, meta_info per chunk."""

    def __init__(self, sched, req, stream):
        super().__init__(sched, req, stream)
        self.esc_parts: List[str] = []
        self.ids_parts: List[str] = []
        self.esc_text = ""
        self.ids_text = ""

    def _advance(self, req: Req, start: int) -> None:
        idx = [req.vocab_index(p) for p in range(start, req.produced)]
        self.esc_text += "".join([VOCAB_ESC[i] for i in idx])
        ids = ",".join([TOKEN_IDS_STR[i] for i in idx])
        if ids:
            self.ids_text = (self.ids_text + "," + ids) if self.ids_text else ids

    def meta_json(self, req: Req) -> str:
        fin = "null" if req.finish is None else _dumps(req.finish)
        meta = ('{"id":%s,"finish_reason":%s,"prompt_tokens":%d,"weight_version":"default",'
                '"num_retractions":0,"reasoning_tokens":%d,"completion_tokens":%d,'
                '"cached_tokens":0' % (_dumps(req.rid), fin, req.prompt_tokens,
                                       req.reasoning_tokens(), req.produced))
        if req.finish is not None:
            extra = {"e2e_latency": req.t_finish - req.t_arrival}
            details = spec_details(req, self.sched.draft_tokens) \
                if self.sched.spec else None
            if details:
                extra.update(details)
            meta += "," + _dumps(extra)[1:-1]
        return meta + "}"

    def render_step(self, req: Req, start: int) -> bytes:
        self._advance(req, start)
        return ('data: {"text":"%s","output_ids":[%s],"meta_info":%s}\n\n'
                % (self.esc_text, self.ids_text, self.meta_json(req))).encode()

    def render_tail(self, req: Req) -> bytes:
        return b"data: [DONE]\n\n"

    def body(self) -> bytes:
        self._advance(self.req, 0)
        return ('{"text":"%s","output_ids":[%s],"meta_info":%s}'
                % (self.esc_text, self.ids_text, self.meta_json(self.req))).encode()


class CompletionSink(Sink):
    def __init__(self, sched, req, stream, model, include_usage, continuous, spec_details_on):
        super().__init__(sched, req, stream)
        self.model = model
        self.include_usage = include_usage
        self.continuous = continuous
        self.spec_details_on = spec_details_on

    def _usage_now(self, req: Req) -> Dict[str, Any]:
        return _usage(req.prompt_tokens, req.produced, req.reasoning_tokens())

    def render_step(self, req: Req, start: int) -> bytes:
        fin = req.finish
        choice = {"index": 0, "text": self.text_range(req, start, req.produced),
                  "logprobs": None, "finish_reason": fin["type"] if fin else None,
                  "matched_stop": fin.get("matched") if fin else None}
        chunk = {"id": req.rid, "object": "text_completion", "created": self.created,
                 "model": self.model, "choices": [choice],
                 "usage": self._usage_now(req) if self.continuous else None}
        return ("data: " + _dumps(chunk) + "\n\n").encode()

    def _sglext(self, req: Req) -> Dict[str, Any] | None:
        if not self.spec_details_on or not self.sched.spec:
            return None
        details = spec_details(req, self.sched.draft_tokens)
        return {"spec_tokens_details": spec_tokens_details(details)} if details else None

    def render_tail(self, req: Req) -> bytes:
        out = []
        sglext = self._sglext(req)
        if sglext:
            out.append({"id": req.rid, "object": "text_completion", "created": self.created,
                        "model": self.model, "choices": [], "usage": None, "sglext": sglext})
        if self.include_usage:
            usage = self._usage_now(req)  # model_dump_json(exclude_none=True)
            usage = {k: v for k, v in usage.items() if v is not None}
            out.append({"id": req.rid, "object": "text_completion", "created": self.created,
                        "model": self.model, "choices": [], "usage": usage})
        return ("".join("data: " + _dumps(c) + "\n\n" for c in out)
                + "data: [DONE]\n\n").encode()

    def body(self) -> Dict[str, Any]:
        req = self.req
        return self._response("text_completion",
                              {"text": self.text_range(req, 0, req.produced)})

    def _response(self, obj: str, choice: Dict[str, Any]) -> Dict[str, Any]:
        """A non-streamed response: the envelope both OpenAI endpoints share around ``choice``."""
        req = self.req
        fin = req.finish or {}
        choice = dict({"index": 0}, **choice, logprobs=None, finish_reason=fin.get("type"),
                      matched_stop=fin.get("matched"))
        out = {"id": req.rid, "object": obj, "created": self.created, "model": self.model,
               "choices": [choice], "usage": self._usage_now(req),
               "metadata": {"weight_version": "default"}}
        sglext = self._sglext(req)
        if sglext:
            out["sglext"] = sglext
        return out


class ChatSink(CompletionSink):
    """Chat: the output split as SGLang's parsers split it (render.py). Content and reasoning
    chunks are sse_utils.py build_sse_content's; with tool-call parsing active (a parser, tools,
    tool_choice not "none") content and tool calls go through serving_chat.py
    _process_tool_call_stream, which serialises ChatCompletionStreamResponse.model_dump_json()."""

    def __init__(self, *a, renderer: ChatRenderer | None = None, tool_active: bool = False,
                 logprobs: bool = False, top_logprobs: int = 0, **kw):
        super().__init__(*a, **kw)
        self.first = True
        self.renderer = renderer or ChatRenderer("sglang", False, False, "content", None)
        self.tool_active = tool_active
        self.logprobs = logprobs
        self.top_logprobs = top_logprobs

    def pieces(self, req: Req, a: int, b: int) -> List[str]:
        return [VOCAB[req.vocab_index(p)] for p in range(a, b)]

    def _chunk(self, req: Req, delta: Dict[str, Any], finish=None, matched=None,
               usage=None) -> str:
        d = {"reasoning_content": delta.get("reasoning_content")}
        if "role" in delta:
            d["role"] = delta["role"]
        if "content" in delta:
            d["content"] = delta["content"]
        chunk = {"id": req.rid, "object": "chat.completion.chunk", "created": self.created,
                 "model": self.model,
                 "choices": [{"index": 0, "delta": d, "logprobs": None,
                              "finish_reason": finish, "matched_stop": matched}]}
        if usage is not None:
            chunk["usage"] = usage
        return "data: " + _dumps(chunk) + "\n\n"

    def _model_chunk(self, req: Req, content=None, tool_call=None, usage=None) -> str:
        """ChatCompletionStreamResponse(...).model_dump_json(): every field, in order."""
        delta = {"role": None, "content": content, "reasoning_content": None}
        if tool_call is not None:
            delta["tool_calls"] = [{"id": tool_call["id"], "index": tool_call["index"],
                                    "type": "function",
                                    "function": {"name": tool_call["name"],
                                                 "arguments": tool_call["arguments"]}}]
        chunk = {"id": req.rid, "object": "chat.completion.chunk", "created": self.created,
                 "model": self.model,
                 "choices": [{"index": 0, "delta": delta, "logprobs": None,
                              "finish_reason": None, "matched_stop": None}],
                 "usage": usage}
        return "data: " + _dumps(chunk) + "\n\n"

    def render_step(self, req: Req, start: int) -> bytes:
        out = []
        if self.first:
            self.first = False
            out.append(self._chunk(req, {"role": "assistant", "content": ""}))
        reasoning, events = self.renderer.step(self.pieces(req, start, req.produced),
                                               new_tool_call_id)
        if req.finish is not None:
            events = events + self.renderer.finish()
        usage = self._usage_now(req) if self.continuous else None
        if reasoning:
            out.append(self._chunk(req, {"reasoning_content": reasoning}, usage=usage))
        for kind, value in events:
            if kind == "call":
                out.append(self._model_chunk(req, tool_call=value, usage=usage))
            elif self.tool_active:
                out.append(self._model_chunk(req, content=value, usage=usage))
            else:
                out.append(self._chunk(req, {"content": value}, usage=usage))
        return "".join(out).encode()

    def _finish(self, req: Req, calls: bool):
        """(finish_reason, matched_stop): "tool_calls" for a call after a natural stop;
        not streamed, matched_stop is then None (_process_tool_calls), streamed it stays."""
        fin = req.finish or {}
        if calls and fin.get("type") == "stop":
            return "tool_calls", (fin.get("matched") if self.stream else None)
        return fin.get("type"), fin.get("matched")

    def render_tail(self, req: Req) -> bytes:
        note_rendering(req, self.renderer, self.renderer.calls_streamed, True)
        finish, matched = self._finish(req, self.renderer.calls_streamed)
        out = [self._chunk(req, {}, finish=finish, matched=matched)]
        base = {"id": req.rid, "object": "chat.completion.chunk", "created": self.created,
                "model": self.model, "choices": []}
        sglext = self._sglext(req)
        if sglext:
            out.append("data: " + _dumps(dict(base, usage=None, sglext=sglext)) + "\n\n")
        if self.include_usage:
            out.append("data: " + _dumps(dict(base, usage=self._usage_now(req))) + "\n\n")
        out.append("data: [DONE]\n\n")
        return "".join(out).encode()

    def body(self) -> Dict[str, Any]:
        req = self.req
        pieces = self.pieces(req, 0, req.produced)
        parsed = self.renderer.full(pieces)
        message = {"role": "assistant", "content": parsed["content"] or "",
                   "reasoning_content": parsed["reasoning"]}
        if parsed["calls"]:
            message["tool_calls"] = [
                {"id": new_tool_call_id(), "index": i, "type": "function",
                 "function": {"name": c["name"], "arguments": c["arguments"]}}
                for i, c in enumerate(parsed["calls"])]
        note_rendering(req, self.renderer, bool(parsed["calls"]), False)
        out = self._response("chat.completion", {"message": message})
        choice = out["choices"][0]
        choice["finish_reason"], choice["matched_stop"] = self._finish(req, bool(parsed["calls"]))
        if self.logprobs:
            # serving_chat.py _build_token_logprobs_from_raw: ChatCompletionTokenLogprob per
            # output token (protocol.py field order: token, bytes, logprob, top_logprobs)
            choice["logprobs"] = {"content": [
                {"token": e["token"], "bytes": e["bytes"], "logprob": e["logprob"],
                 "top_logprobs": [{"token": t["token"], "bytes": t["bytes"],
                                   "logprob": t["logprob"]} for t in e["top_logprobs"]]}
                for e in token_logprobs(req, self.top_logprobs)]}
        return out


def new_tool_call_id() -> str:
    """serving_chat.py _process_tool_call_id: call_ + 24 hex digits."""
    return "call_" + uuid.uuid4().hex[:24]


def note_rendering(req: Req, renderer: ChatRenderer, calls: bool, streamed: bool) -> None:
    """Record how the reply came out (/_emulator/stats "answer.rendered"): "tool_calls",
    "content", or for a parser that cannot read the markup "swallowed" (streamed: the chunks
    after <tool_call> never come) / "dropped" (not streamed, content cut at the marker)."""
    if req.reply is None:
        return
    if calls:
        how = "tool_calls"
    elif streamed and renderer.mode in ("keep", "drop") and renderer.swallowing:
        how = "swallowed"
    elif not streamed and renderer.mode == "drop" and "<tool_call>" in "".join(
            VOCAB[req.vocab_index(p)] for p in range(req.produced)) and \
            renderer.engine == "sglang":
        how = "dropped"
    else:
        how = "content"
    req.extra["rendered"] = how


def token_logprobs(req: Req, top: int = 0) -> List[Dict[str, Any]]:
    """One entry per generated token: its text, UTF-8 bytes, a (deterministic) log probability
    near 0 (greedy picks), and ``top`` alternatives (the token first, others below it)."""
    out = []
    for pos in range(req.produced):
        i = req.vocab_index(pos)
        text = VOCAB[i] if i != EOS else "<|im_end|>"
        lp = -((req.offset + 7 * pos) % 997) / 9970.0
        alts = []
        if top:
            alts.append({"token": text, "bytes": list(text.encode("utf-8")), "logprob": lp})
            for k in range(1, top):
                alt = VOCAB[3 + (req.offset + pos + 13 * k) % 60]
                if alt == text:
                    alt = VOCAB[3 + (req.offset + pos + 13 * k + 1) % 60]
                alts.append({"token": alt, "bytes": list(alt.encode("utf-8")),
                             "logprob": round(lp - 2.0 - k, 6)})
        out.append({"token": text, "bytes": list(text.encode("utf-8")), "logprob": lp,
                    "top_logprobs": alts})
    return out


class HealthSink(Sink):
    async def on_step(self, req, start):
        if self.terminal() and req.done is not None and not req.done.done():
            req.done.set_result(None)
