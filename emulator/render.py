"""Where each engine puts what the model wrote: reasoning, content, tool calls (README
"Rendering").

The emulated model writes what Qwen3.6 writes under its chat template: with thinking on, the
thinking, "\\n", "</think>", "\\n\\n" and the reply (the template ends the prompt with "<think>\\n",
so the output never opens the block); a tool call in its native XML markup::

    <tool_call>
    <function=lookup_order>
    <parameter=order_id>
    4417
    </parameter>
    </function>
    </tool_call>

``ChatRenderer`` splits that text the way the server's parsers do, step by step (streaming) or
at once (``full``), for one engine: SGLang 0.5.23 (srt/parser/reasoning_parser.py Qwen3Detector,
srt/function_call/qwen3_coder_detector.py, hermes_detector.py, qwen25_detector.py) or vLLM
0.33.0 (parser/qwen3.py on parser/engine/parser_engine.py, tool_parsers/hermes_tool_parser.py).
Each engine's behaviour here was read from its source and checked by running that source on
this output (README "Rendering" lists the parsers and what they do with the markup). Standard
library only; nothing shared with plugins/module_utils.
"""
from __future__ import annotations

import ast
import json
from typing import Any, Dict, List, Tuple

THINK_END = "</think>"
TOOL_START, TOOL_END = "<tool_call>", "</tool_call>"
FUNC, FUNC_END = "<function=", "</function>"
PARAM, PARAM_END = "<parameter=", "</parameter>"

# --- tool-call parsers, by what they do with Qwen3.6's markup ---------------------------------
# "xml": reads it (tool_calls). "keep": does not; streamed, everything from <tool_call> on is
# swallowed (the detector waits for JSON that never parses), not streamed, the whole text stays
# in content. "drop": does not; streamed as "keep" but the text before the marker in the same
# chunk goes too, not streamed, content is the text before the marker, stripped. Anything else:
# the markup stays in content, streamed and not ("content").
SGLANG_TOOL_MODES = {
    # Qwen3CoderDetector (function_call_parser.py ToolCallParserEnum); "auto" resolves to it for
    # Qwen3.6 (the emulator has no chat template to detect from: an assumption)
    "qwen3_coder": "xml", "step3p5": "xml", "nanbeige": "xml", "auto": "xml",
    "hermes": "keep",  # HermesDetector: bot "<tool_call>", JSON inside
    "qwen": "drop", "qwen25": "drop",  # Qwen25Detector: bot "<tool_call>\n", JSON inside
    "glm": "drop", "glm45": "drop", "glm47": "drop",  # glm47 streamed: a bogus call, not emulated
}
VLLM_TOOL_MODES = {
    "qwen3_coder": "xml", "qwen3_xml": "xml",  # both Qwen3EngineToolParser (parser/qwen3.py)
    "hermes": "keep", "qwen3_json": "keep",  # Hermes2ProToolParser
}
# Reasoning parsers that split on Qwen3's </think> (others are treated alike; not verified).
# SGLang's qwen3-thinking forces reasoning: with thinking off the whole output is reasoning.
FORCED_REASONING = {"qwen3-thinking"}
SWALLOW_BOT = {"keep": TOOL_START, "drop": TOOL_START + "\n"}


def tool_mode(engine: str, parser: str | None) -> str:
    if not parser:
        return "content"
    table = SGLANG_TOOL_MODES if engine == "sglang" else VLLM_TOOL_MODES
    return table.get(parser, "content")


# --- values as each engine types them --------------------------------------------------------
def _schema_of(tools: List[Dict[str, Any]] | None, name: str) -> Dict[str, Any] | None:
    for tool in tools or []:
        fn = (tool or {}).get("function") if isinstance(tool, dict) else None
        if isinstance(fn, dict) and fn.get("name") == name:
            params = fn.get("parameters")
            if isinstance(params, dict):
                return params.get("properties") if isinstance(params.get("properties"), dict) \
                    else {}
            return {}
    return None


def _type_of(schema: Any) -> List[str]:
    if not isinstance(schema, dict):
        return []
    t = schema.get("type")
    if isinstance(t, str):
        return [t.lower()]
    if isinstance(t, list):
        return [str(x).lower() for x in t]
    if "enum" in schema:
        return ["enum"]
    if "properties" in schema:
        return ["object"]
    if "items" in schema:
        return ["array"]
    return []


def convert_sglang(raw: str, key: str, props: Dict[str, Any] | None) -> Any:
    """qwen3_coder_detector.py Qwen3CoderDetector._convert_param_value."""
    if raw.lower() == "null":
        return None
    if not props or key not in props:
        return raw
    types = [t for t in _type_of(props[key]) if t != "null"] or ["string"]
    t = types[0]
    if t in ("string", "str", "text", "varchar", "char", "enum"):
        return raw
    if t.startswith(("int", "uint", "long", "short", "unsigned")):
        try:
            return int(raw)
        except ValueError:
            return raw
    if t.startswith(("num", "float")):
        try:
            value = float(raw)
        except ValueError:
            return raw
        if "." not in raw and "e" not in raw.lower() and value.is_integer():
            return int(value)
        return value
    if t in ("boolean", "bool", "binary"):
        return raw.lower() == "true"
    if t in ("object", "array", "arr") or t.startswith(("dict", "list")):
        try:
            return json.loads(raw)
        except ValueError:
            pass
    try:
        return ast.literal_eval(raw)
    except (ValueError, SyntaxError):
        return raw


def convert_vllm(raw: str, key: str, props: Dict[str, Any] | None) -> Any:
    """tool_parsers/utils.py coerce_to_schema_type (via ParserEngine._fix_arg_types): the
    schema's types in the order null, integer, number, boolean, object, array, string."""
    if not props or key not in props:
        return raw
    types = set(_type_of(props[key]))
    for t in ("null", "integer", "number", "boolean", "object", "array", "string"):
        if t not in types:
            continue
        if t == "null" and raw.lower() == "null":
            return None
        if t == "string":
            return raw
        if t == "integer":
            try:
                return int(raw)
            except ValueError:
                continue
        if t == "number":
            try:
                return int(raw)
            except ValueError:
                try:
                    return float(raw)
                except ValueError:
                    continue
        if t == "boolean" and raw.lower() in ("true", "false"):
            return raw.lower() == "true"
        if t in ("object", "array"):
            try:
                value = json.loads(raw)
            except ValueError:
                continue
            if isinstance(value, dict if t == "object" else list):
                return value
    return raw


# --- the markup, read from the text so far ----------------------------------------------------
class Param:
    __slots__ = ("key", "raw", "ended", "final")

    def __init__(self, key, raw, ended, final):
        self.key = key
        self.raw = raw  # leading "\n" dropped; a trailing one dropped once ended
        self.ended = ended  # SGLang: </parameter>, the next <parameter= or </function> seen
        self.final = final  # vLLM: the next <parameter= or </function> seen


class Call:
    __slots__ = ("name", "after_name", "params", "closed")

    def __init__(self, name, after_name, params, closed):
        self.name = name  # None while "<function=..." has no ">"
        self.after_name = after_name  # text follows the name tag
        self.params = params
        self.closed = closed  # </function> seen


def _params(body: str, func_closed: bool) -> List[Param]:
    out: List[Param] = []
    q = 0
    while True:
        s = body.find(PARAM, q)
        if s < 0:
            return out
        gt = body.find(">", s)
        if gt < 0:
            return out
        key = body[s + len(PARAM):gt]
        rest = body[gt + 1:]
        cands = [(i, n) for i, n in ((rest.find(PARAM_END), len(PARAM_END)),
                                    (rest.find(PARAM), 0)) if i >= 0]
        if cands:
            end, skip = min(cands)
            raw = rest[:end]
            later = rest.find(PARAM, end) >= 0
            ended, final = True, later or func_closed
        else:
            end, skip, raw = len(rest), 0, rest
            ended = final = func_closed
        if raw.startswith("\n"):
            raw = raw[1:]
        if ended and raw.endswith("\n"):
            raw = raw[:-1]
        out.append(Param(key, raw, ended, final))
        if not cands:
            return out
        q = gt + 1 + end + skip


def scan(text: str) -> Tuple[str, List[Call], bool]:
    """(text outside tool-call blocks, the calls, whether a block was opened)."""
    normal: List[str] = []
    calls: List[Call] = []
    pos = 0
    opened = False
    while True:
        i = text.find(TOOL_START, pos)
        if i < 0:
            normal.append(text[pos:])
            break
        opened = True
        normal.append(text[pos:i])
        start = i + len(TOOL_START)
        j = text.find(TOOL_END, start)
        block = text[start:j if j >= 0 else len(text)]
        p = 0
        while True:
            f = block.find(FUNC, p)
            if f < 0:
                break
            gt = block.find(">", f)
            if gt < 0:
                calls.append(Call(None, False, [], False))
                break
            fe = block.find(FUNC_END, gt)
            body = block[gt + 1:fe if fe >= 0 else len(block)]
            calls.append(Call(block[f + len(FUNC):gt], len(block) > gt + 1,
                              _params(body, fe >= 0), fe >= 0))
            if fe < 0:
                break
            p = fe + len(FUNC_END)
        if j < 0:
            break
        pos = j + len(TOOL_END)
    return "".join(normal), calls, opened


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def _is_string(props, key) -> bool:
    types = [t for t in _type_of((props or {}).get(key)) if t != "null"]
    return (not props or key not in props) or not types or types[0] in ("string", "enum")


# --- the renderer -----------------------------------------------------------------------------
class ChatRenderer:
    """One chat request's output as one engine's chat API returns it.

    ``engine``: "sglang" or "vllm"; ``reasoning``: a reasoning parser splits the thinking off
    (False under no parser or FAULT_UNPARSED_REASONING); ``forced``: it treats all output as
    reasoning until </think> even with thinking off (SGLang's qwen3-thinking); ``thinking``: the
    template put the model into thinking; ``mode``: tool_mode() of the tool-call parser when
    tool parsing is active for this request (tools offered, parser configured, not
    FAULT_UNPARSED_TOOLS), else "content"."""

    def __init__(self, engine: str, reasoning: bool, thinking: bool, mode: str,
                 tools: List[Dict[str, Any]] | None, forced: bool = False):
        self.engine = engine
        self.mode = mode
        self.tools = tools or []
        self.in_reasoning = reasoning and (thinking or forced)
        self.content = ""  # all content text so far (after the reasoning split)
        # streaming state
        self.sent_normal = 0
        self.swallowing = False
        self.held = ""  # "keep"/"drop": text held back while it may begin the marker
        self.pending_ws = ""  # vLLM: whitespace-only content held back before a call
        self.content_nonws = False
        self.sent_names: Dict[int, str] = {}  # call index -> the id given
        self.sent_params: Dict[int, int] = {}  # SGLang: params emitted per call
        self.sent_open: Dict[int, bool] = {}
        self.sent_close: Dict[int, bool] = {}
        self.sent_args: Dict[int, str] = {}  # vLLM: argument JSON emitted per call
        self.calls_streamed = False
        self.step_content_pieces = 0  # pieces of the last step that were content

    # -- reasoning split ---------------------------------------------------------------------
    def split(self, pieces: List[str]) -> Tuple[str, str]:
        reasoning: List[str] = []
        content: List[str] = []
        for piece in pieces:
            if self.in_reasoning:
                if piece == THINK_END:
                    self.in_reasoning = False
                elif piece == TOOL_START:
                    # both engines end reasoning at a <tool_call> (SGLang Qwen3Detector's
                    # tool_start_token, vLLM qwen3_config's REASONING -> TOOL_START transition)
                    self.in_reasoning = False
                    content.append(piece)
                else:
                    reasoning.append(piece)
            else:
                content.append(piece)
        self.step_content_pieces = len(content)
        return "".join(reasoning), "".join(content)

    # -- streaming ---------------------------------------------------------------------------
    def step(self, pieces: List[str], new_id) -> Tuple[str, List[Tuple[str, Any]]]:
        """The pieces one scheduler step produced -> (reasoning text, content events): ("content",
        text) and ("call", {"index", "id", "name", "arguments"}) (id/name None after the first
        fragment of a call). ``new_id``: makes a tool-call id."""
        reasoning, text = self.split(pieces)
        self.content += text
        if self.mode == "xml":
            return reasoning, self._xml_events(new_id)
        if self.mode in ("keep", "drop"):
            return reasoning, self._swallow_events(text)
        return reasoning, ([("content", text)] if text else [])

    def _swallow_events(self, text: str) -> List[Tuple[str, Any]]:
        if self.swallowing:
            return []
        bot = SWALLOW_BOT[self.mode]
        buf = self.held + text
        i = buf.find(bot)
        if i >= 0:
            self.swallowing = True
            self.held = ""
            # Hermes (both engines) emits the text before the marker; Qwen25's base detector
            # drops the chunk that holds it
            before = buf[:i] if self.mode == "keep" else ""
            return [("content", before)] if before else []
        keep = 0
        for n in range(min(len(buf), len(bot) - 1), 0, -1):
            if bot.startswith(buf[-n:]):
                keep = n
                break
        out, self.held = buf[:len(buf) - keep], buf[len(buf) - keep:]
        return [("content", out)] if out else []

    def _xml_events(self, new_id) -> List[Tuple[str, Any]]:
        normal, calls, _ = scan(self.content)
        events: List[Tuple[str, Any]] = []
        new_text = normal[self.sent_normal:]
        self.sent_normal = len(normal)
        if self.engine == "vllm":
            return self._vllm_events(new_text, calls, new_id)
        if new_text:
            events.append(("content", new_text))
        for idx, call in enumerate(calls):
            if call.name is None:
                continue
            props = _schema_of(self.tools, call.name)
            if idx not in self.sent_names:
                self.sent_names[idx] = new_id()
                events.append(("call", {"index": idx, "id": self.sent_names[idx],
                                        "name": call.name, "arguments": ""}))
            done = self.sent_params.get(idx, 0)
            for n, param in enumerate(call.params):
                if n < done or not param.ended:
                    continue
                if not self.sent_open.get(idx):
                    self.sent_open[idx] = True
                    events.append(("call", {"index": idx, "id": None, "name": None,
                                            "arguments": "{"}))
                value = convert_sglang(param.raw, param.key, props)
                fragment = "%s: %s" % (_json(param.key), _json(value))
                events.append(("call", {"index": idx, "id": None, "name": None,
                                        "arguments": fragment if n == 0 else ", " + fragment}))
                self.sent_params[idx] = n + 1
            if call.closed and not self.sent_close.get(idx):
                self.sent_close[idx] = True
                if not self.sent_open.get(idx):
                    self.sent_open[idx] = True
                    events.append(("call", {"index": idx, "id": None, "name": None,
                                            "arguments": "{"}))
                events.append(("call", {"index": idx, "id": None, "name": None,
                                        "arguments": "}"}))
        if any(e[0] == "call" for e in events):
            self.calls_streamed = True
        return events

    def _vllm_args_prefix(self, call: Call) -> str:
        """The argument JSON vLLM's engine has streamed once it read this much of the call:
        a key (and a string's opening quote) as its tag arrives, a string value as it grows
        (its trailing newline held back), any other value, a string's closing quote and the
        closing brace only once the next <parameter= or </function> arrives."""
        props = _schema_of(self.tools, call.name)
        out = []
        for n, param in enumerate(call.params):
            out.append(("{" if n == 0 else ", ") + _json(param.key) + ": ")
            if param.final:
                out.append(_json(convert_vllm(param.raw, param.key, props)))
            elif _is_string(props, param.key):
                raw = param.raw[:-1] if param.raw.endswith("\n") else param.raw
                out.append('"' + _json(raw)[1:-1])
        if call.closed:
            out.append("}" if call.params else "{}")
        return "".join(out)

    def _vllm_events(self, new_text: str, calls: List[Call], new_id) -> List[Tuple[str, Any]]:
        events: List[Tuple[str, Any]] = []
        # content: whitespace-only text is held back; it goes out with the next non-blank text,
        # or with a call when non-blank content came before (else it is dropped)
        if new_text:
            if new_text.strip():
                events.append(("content", self.pending_ws + new_text))
                self.pending_ws = ""
                self.content_nonws = True
            else:
                self.pending_ws += new_text
        for idx, call in enumerate(calls):
            if call.name is None or not call.after_name:
                continue
            prefix = self._vllm_args_prefix(call)
            sent = self.sent_args.get(idx, "")
            delta = prefix[len(sent):] if prefix.startswith(sent) else ""
            if idx not in self.sent_names:
                if self.pending_ws and self.content_nonws:
                    events.append(("content", self.pending_ws))
                self.pending_ws = ""
                self.sent_names[idx] = new_id()
                events.append(("call", {"index": idx, "id": self.sent_names[idx],
                                        "name": call.name, "arguments": delta or None}))
            elif delta:
                events.append(("call", {"index": idx, "id": None, "name": None,
                                        "arguments": delta}))
            self.sent_args[idx] = sent + delta
        if any(e[0] == "call" for e in events):
            self.calls_streamed = True
        return events

    def finish(self) -> List[Tuple[str, Any]]:
        """Text still held back when the stream ends."""
        events: List[Tuple[str, Any]] = []
        if self.mode in ("keep", "drop") and self.held and not self.swallowing:
            events.append(("content", self.held))
            self.held = ""
        if self.engine == "vllm" and self.pending_ws and not self.sent_names:
            events.append(("content", self.pending_ws))
            self.pending_ws = ""
        return events

    # -- not streamed ------------------------------------------------------------------------
    def full(self, pieces: List[str]) -> Dict[str, Any]:
        """{"reasoning": str|None, "content": str|None, "calls": [{"name", "arguments"}]} as the
        engine's non-streamed response carries them (before its own None/"" conventions:
        SGLang content "" never None, vLLM None when empty)."""
        reasoning, text = self.split(pieces)
        calls: List[Dict[str, str]] = []
        content: str | None = text
        if self.mode == "xml":
            normal, found, opened = scan(text)
            for call in found:
                if call.name is None:
                    continue
                props = _schema_of(self.tools, call.name)
                conv = convert_sglang if self.engine == "sglang" else convert_vllm
                args = {p.key: conv(p.raw, p.key, props) for p in call.params}
                calls.append({"name": call.name, "arguments": _json(args)})
            if self.engine == "sglang":
                # serving_chat.py _process_tool_calls: with the marker in the text the content
                # is detect_and_parse's normal text, the text before the first <tool_call>
                if opened:
                    i = text.find(TOOL_START)
                    content = text[:i] if i > 0 else ""
            else:
                if opened or calls:
                    content = normal
                if calls:
                    content = content.strip()
        elif self.mode == "drop" and self.engine == "sglang":
            i = text.find(SWALLOW_BOT["drop"])
            if i >= 0:
                content = text[:i].strip()
        if self.engine == "vllm" and not content:
            content = None
        return {"reasoning": reasoning or None, "content": content, "calls": calls}
