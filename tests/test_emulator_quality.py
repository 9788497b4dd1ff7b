"""The emulator answers like a model (emulator/answers.py), renders replies as each engine's
parsers do (render.py) and has the quality faults (README "Answering", "Rendering", knobs)."""
from __future__ import annotations

import json
import os
import urllib.error
import urllib.request

import pytest

from test_emulator_vllm import sse as stream_events

from emulator import answers as emu_answers
from emulator.knobs import KnobError, Knobs
from emulator.render import ChatRenderer
from bench.launch import EmulatorProcess
from conftest import MODEL_ARGS, PROFILE_ARGS
from sglang_perf.measure import answers as truth

pytestmark = pytest.mark.timeout(60)

FAST = {"SGLEMU_SPEED_SCALE": "50", "SGLEMU_WARMUP_REQUESTS": "0"}
MODEL = "Qwen3.6-27B"
ROWS = (0, 1, 5, 6, 1023, 99999)
SGLANG_PROFILE = list(PROFILE_ARGS["nextn_3step"])  # --reasoning-parser qwen3 --tool-call-parser qwen3_coder
VLLM_ARGV = ["serve", "/models/Qwen3.6-27B", "--tensor-parallel-size", "2", "--max-model-len",
             "131072", "--speculative-config", '{"method": "mtp", "num_speculative_tokens": 3}',
             "--served-model-name", MODEL]


# ------------------------------------------------------------------------------ helpers -------
def sglang_args(reasoning="qwen3", tools="qwen3_coder"):
    args = [a for a in SGLANG_PROFILE]
    for flag in ("--reasoning-parser", "--tool-call-parser"):
        if flag in args:
            i = args.index(flag)
            del args[i:i + 2]
    if reasoning:
        args += ["--reasoning-parser", reasoning]
    if tools:
        args += ["--tool-call-parser", tools]
    return args


@pytest.fixture
def start():
    """start(engine, args, env) -> a running emulator (SGLang: MODEL_ARGS + args; vLLM: argv)."""
    started = []

    def run(engine="sglang", args=None, env=None):
        log = open(os.devnull, "w")
        if engine == "sglang":
            argv = list(MODEL_ARGS) + list(sglang_args() if args is None else args)
            emu = EmulatorProcess(argv, log, env=dict(FAST, **(env or {})))
        else:
            argv = list(VLLM_ARGV) + list(args or [])
            emu = EmulatorProcess(argv, log, env=dict(FAST, **(env or {})),
                                  module="emulator.vllm")
        started.append((emu, log))
        return emu.wait_ready(timeout=30)

    yield run
    for emu, log in started:
        emu.stop()
        log.close()


def post(url, body):
    req = urllib.request.Request(url, data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as r:
        return json.loads(r.read())


def sse(url, body):
    """The stream's JSON events, [DONE] dropped (test_emulator_vllm.sse's reading)."""
    return [e for e in stream_events(url, body) if e != "[DONE]"]


def chat(emu, prompt, think=False, tools=None, stream=False, **kw):
    body = dict({"model": MODEL, "max_tokens": 80,
                 "messages": [{"role": "user", "content": prompt}],
                 "chat_template_kwargs": {"enable_thinking": think}}, **kw)
    if tools is not None:
        body["tools"] = tools
    url = emu.url + "/v1/chat/completions"
    return sse(url, body) if stream else post(url, body)


def stats(emu):
    with urllib.request.urlopen(emu.url + "/_emulator/stats", timeout=10) as r:
        return json.loads(r.read())


def set_faults(emu, **faults):
    return post(emu.url + "/_emulator/faults", faults)


def streamed(chunks, reasoning_key="reasoning_content"):
    """(reasoning, content, {index: (id, name, arguments)}, finish) of a streamed chat reply."""
    reasoning = content = ""
    calls, finish = {}, None
    for c in chunks:
        if not c.get("choices"):
            continue
        ch = c["choices"][0]
        d = ch["delta"]
        reasoning += d.get(reasoning_key) or ""
        content += d.get("content") or ""
        for tc in d.get("tool_calls") or []:
            i, f = tc["index"], tc.get("function") or {}
            cid, name, args = calls.get(i, (None, None, ""))
            calls[i] = (cid or tc.get("id"), name or f.get("name"),
                        args + (f.get("arguments") or ""))
        finish = ch.get("finish_reason") or finish
    return reasoning, content, calls, finish


def answer_of(stats_body, rid=None):
    reqs = [r for r in stats_body["requests"] if not r["health"] and r["answer"]]
    return reqs[-1]["answer"] if rid is None else next(r["answer"] for r in reqs if r["rid"] == rid)


# ------------------------------------------------------------------- the mind, no server ------
@pytest.mark.parametrize("i", ROWS)
def test_builtin_rows_are_answered_right_and_wrong_on_purpose(i):
    row = truth.builtin_row(i)
    reply = emu_answers.Mind().reply(row["prompt"])
    assert reply is not None and reply.kind == "answer"
    assert truth.correct(row["answer"], reply.text(reply.given(False, 0)))
    for h in (0, 1, 12345):  # a wrong reply is scored wrong, whatever the alternative
        assert not truth.correct(row["answer"], reply.text(reply.given(True, h)))


def test_builtin_tool_rows_give_the_call_typed_by_the_schema():
    for row in truth.builtin_calls(8):
        reply = emu_answers.Mind().reply(row["prompt"], row["tools"])
        assert reply.kind == "call" and reply.call == row["call"]
        assert reply.given(True, 3, row["tools"]) != row["call"]
        markup = reply.text(row["call"])
        assert markup.startswith("<tool_call>\n<function=%s>\n<parameter=" % row["call"]["name"])
        for engine in ("sglang", "vllm"):
            parsed = ChatRenderer(engine, False, False, "xml", row["tools"]).full(
                emu_answers.pieces(markup))
            assert [c["name"] for c in parsed["calls"]] == [row["call"]["name"]]
            assert json.loads(parsed["calls"][0]["arguments"]) == row["call"]["arguments"]
    # no such tool offered, or no tools: not a call
    row = truth.builtin_calls(1)[0]
    assert emu_answers.Mind().reply(row["prompt"]) is None
    assert emu_answers.Mind().reply(row["prompt"], row["tools"][1:]) is None


@pytest.mark.parametrize("source,call,value", [
    ("def f(n):\n    total = 3\n    for i in range(n):\n        total = total + 2 * i\n"
     "    return total - 1\n", "f(8)", 58),
    ("def g(values):\n    best = 1\n    for v in values:\n        if v % 3 == 0:\n"
     "            best = best + v\n    return best\n", "g([3, 4, 9, -6])", 7),
    ("def fib(n):\n    if n < 2:\n        return n\n    return fib(n - 1) + fib(n - 2)\n",
     "fib(10)", 55),
])
def test_the_interpreter_runs_the_whitelist(source, call, value):
    assert emu_answers.run_code(source, call) == value


@pytest.mark.parametrize("source", [
    "import os\ndef f(n):\n    return n\n",
    "def f(n):\n    while n:\n        n = n - 1\n    return n\n",
    "def f(n):\n    return n.bit_length()\n",
    "def f(n):\n    return open('/etc/passwd')\n",
    "def f(n):\n    x = [i for i in range(n)]\n    return 1\n",
    "def f(n):\n    return n // 0\n",
    "def f(n):\n    return f(n)\n",
    "def f(n):\n    return 'x'\n",
])
def test_anything_else_is_not_answerable(source):
    prompt = ("What does this Python function return for f(8)?\n\n```python\n%s```\n"
              "End your reply with the number." % source)
    assert emu_answers.Mind().reply(prompt) is None


def test_an_answers_file_is_read_at_start_up_and_a_bad_one_names_the_line(tmp_path):
    good = tmp_path / "rows.jsonl"
    good.write_text(json.dumps({"prompt": " Capital of Peru? ", "answer": "Lima"}) + "\n\n"
                    + json.dumps({"prompt": "Open a ticket.", "tools": truth.TOOLS, "id": "t1",
                                  "call": {"name": "create_ticket",
                                           "arguments": {"title": "x y", "priority": 2}}}) + "\n")
    k = Knobs.from_env({"SGLEMU_ANSWERS": str(good)})
    mind = emu_answers.Mind(k.answer_rows)
    assert mind.reply("Capital of Peru?").text("Lima") == "Lima."
    assert mind.reply("Open a ticket.").call["arguments"] == {"title": "x y", "priority": 2}
    assert "answer_rows" not in k.as_dict() and k.as_dict()["answers"] == str(good)
    for text, where in [('{"prompt": "a", "answer": 1}\n{"prompt": "b"}\n', "line 2"),
                        ('{"prompt": "a", "answer": 1}\nnot json\n', "line 2 is not JSON"),
                        ('{"prompt": "a", "answer": 1, "colour": 2}\n', "line 1: unknown key"),
                        ("\n", "holds no row")]:
        bad = tmp_path / "bad.jsonl"
        bad.write_text(text)
        with pytest.raises(KnobError) as e:
            Knobs.from_env({"SGLEMU_ANSWERS": str(bad)})
        assert str(e.value).startswith("SGLEMU_ANSWERS=%s: " % bad) and where in str(e.value)


def test_pieces_cut_a_reply_like_the_vocabulary():
    assert emu_answers.pieces("The answer is 46.") == ["The", " answer", " is", " 46", "."]
    text = emu_answers.call_markup({"name": "f", "arguments": {"a": True, "b": "x y"}})
    assert "".join(emu_answers.pieces(text)) == text
    assert "<tool_call>" in emu_answers.pieces(text) and "</parameter>" in emu_answers.pieces(text)


# ---------------------------------------------------------------- SGLang over HTTP ------------
def test_sglang_answers_renders_calls_reasoning_and_logprobs(start, tmp_path):
    rows = tmp_path / "answers.jsonl"
    call_row = {"prompt": "File it.", "tools": truth.TOOLS,
                "call": {"name": "get_weather", "arguments": {"city": "Bergen", "unit": "celsius"}}}
    rows.write_text(json.dumps({"prompt": "Capital of Peru?", "answer": "Lima"}) + "\n"
                    + json.dumps(call_row) + "\n")
    emu = start("sglang", env={"SGLEMU_ANSWERS": str(rows), "SGLEMU_SEED": "11"})
    for i in ROWS[:4]:
        row = truth.builtin_row(i)
        out = chat(emu, row["prompt"], think=bool(i % 2))
        msg = out["choices"][0]["message"]
        assert truth.correct(row["answer"], msg["content"]), msg
        assert out["choices"][0]["finish_reason"] == "stop"
        if i % 2:  # thinking on: SGLang's reasoning_content, none of it in content
            assert msg["reasoning_content"] and msg["reasoning_content"].endswith("\n")
            assert msg["content"].startswith("\n\n") and "</think>" not in msg["content"]
            assert out["usage"]["reasoning_tokens"] > 0
        else:
            assert msg["reasoning_content"] is None and out["usage"]["reasoning_tokens"] == 0
    assert chat(emu, "Capital of Peru?")["choices"][0]["message"]["content"] == "Lima."
    # tool calls, not streamed: qwen3_coder's shape, arguments typed by the schema
    for row in truth.builtin_calls(2) + [call_row]:
        out = chat(emu, row["prompt"], tools=row["tools"])
        ch = out["choices"][0]
        assert ch["finish_reason"] == "tool_calls" and ch["matched_stop"] is None
        assert ch["message"]["content"] == ""
        (tc,) = ch["message"]["tool_calls"]
        assert tc["id"].startswith("call_") and len(tc["id"]) == 29
        assert (tc["index"], tc["type"]) == (0, "function")
        assert tc["function"]["name"] == row["call"]["name"]
        assert json.loads(tc["function"]["arguments"]) == row["call"]["arguments"]
    # streamed, thinking on: name first (arguments ""), then "{", each parameter, "}"
    row = truth.builtin_calls(1)[0]
    chunks = chat(emu, row["prompt"], think=True, tools=row["tools"], stream=True)
    reasoning, content, calls, finish = streamed(chunks)
    assert reasoning and content == "\n\n" and finish == "tool_calls"
    frags = [c["choices"][0]["delta"]["tool_calls"][0] for c in chunks
             if c.get("choices") and c["choices"][0]["delta"].get("tool_calls")]
    assert frags[0]["function"] == {"name": "lookup_order", "arguments": ""} and frags[0]["id"]
    assert frags[1]["function"]["arguments"] == "{" and frags[-1]["function"]["arguments"] == "}"
    assert all(f["id"] is None and f["function"]["name"] is None for f in frags[1:])
    assert json.loads(calls[0][2]) == row["call"]["arguments"]
    # logprobs: one entry per token, the first N tokens of the greedy reply
    out = chat(emu, truth.builtin_row(0)["prompt"], logprobs=True)
    content = out["choices"][0]["logprobs"]["content"]
    assert len(content) == out["usage"]["completion_tokens"]
    assert list(content[0]) == ["token", "bytes", "logprob", "top_logprobs"]
    assert "".join(e["token"] for e in content[:-1]) == out["choices"][0]["message"]["content"]
    assert content[0]["bytes"] == list(content[0]["token"].encode()) and content[0]["logprob"] <= 0
    totals = stats(emu)["totals"]["answers"]
    assert totals["right"] == totals["answerable"] == 10 and totals["tool_calls_rendered"] == 4
    # no tools offered: the tool prompt is not answerable, the code-ish stream goes on
    out = chat(emu, row["prompt"], max_tokens=12, ignore_eos=True)
    assert out["usage"]["completion_tokens"] == 12
    assert "<tool_call>" not in out["choices"][0]["message"]["content"]


def test_sglang_parsers_that_cannot_read_the_markup_and_no_parser(start):
    row = truth.builtin_calls(1)[0]
    hermes = start("sglang", args=sglang_args("qwen3", "hermes"))
    out = chat(hermes, row["prompt"], tools=row["tools"])
    ch = out["choices"][0]
    assert ch["finish_reason"] == "stop" and "tool_calls" not in ch["message"]
    assert ch["message"]["content"] == emu_answers.call_markup(row["call"])
    _, content, calls, finish = streamed(chat(hermes, row["prompt"], think=True,
                                              tools=row["tools"], stream=True))
    assert content == "\n\n" and not calls and finish == "stop"  # swallowed after <tool_call>
    assert stats(hermes)["requests"][-1]["answer"]["rendered"] == "swallowed"
    bare = start("sglang", args=sglang_args(None, None))
    out = chat(bare, row["prompt"], think=True, tools=row["tools"])
    msg = out["choices"][0]["message"]
    assert msg["reasoning_content"] is None and "tool_calls" not in msg
    assert msg["content"].endswith("\n</think>\n\n" + emu_answers.call_markup(row["call"]))
    assert out["usage"]["reasoning_tokens"] == 0 and out["choices"][0]["finish_reason"] == "stop"


# ------------------------------------------------------------------ vLLM over HTTP ------------
def test_vllm_qwen3_coder_reasoning_field_and_calls(start):
    emu = start("vllm", ["--reasoning-parser", "qwen3", "--enable-auto-tool-choice",
                         "--tool-call-parser", "qwen3_coder"])
    row = truth.builtin_row(5)
    out = chat(emu, row["prompt"], think=True, logprobs=True)
    msg = out["choices"][0]["message"]
    assert msg["reasoning"] and "reasoning_content" not in msg
    assert truth.correct(row["answer"], msg["content"])
    first = out["choices"][0]["logprobs"]["content"][0]
    assert list(first) == ["token", "logprob", "bytes", "top_logprobs"]
    assert out["usage"]["completion_tokens_details"]["reasoning_tokens"] > 0
    out = chat(emu, row["prompt"], think=False)
    assert out["choices"][0]["message"]["reasoning"] is None
    assert out["usage"]["completion_tokens_details"]["reasoning_tokens"] == 0
    call = truth.builtin_calls(3)[2]  # create_ticket: a string and an integer
    out = chat(emu, call["prompt"], think=True, tools=call["tools"])
    ch = out["choices"][0]
    assert ch["finish_reason"] == "tool_calls" and ch["message"]["content"] is None
    (tc,) = ch["message"]["tool_calls"]
    assert list(tc) == ["id", "type", "function"] and tc["id"].startswith("chatcmpl-tool-")
    assert json.loads(tc["function"]["arguments"]) == call["call"]["arguments"]
    chunks = chat(emu, call["prompt"], think=True, tools=call["tools"], stream=True)
    reasoning, content, calls, finish = streamed(chunks, "reasoning")
    assert reasoning and content == "" and finish == "tool_calls"
    frags = [c["choices"][0]["delta"]["tool_calls"][0] for c in chunks
             if c.get("choices") and c["choices"][0]["delta"].get("tool_calls")]
    assert list(frags[0]) == ["id", "type", "index", "function"]
    assert frags[0]["function"]["name"] == "create_ticket"
    assert all(list(f) == ["index", "function"] for f in frags[1:])
    assert json.loads(calls[0][2]) == call["call"]["arguments"]


def test_vllm_qwen3_xml_without_reasoning_parser_and_no_auto_tool_choice(start):
    call = truth.builtin_calls(2)[1]
    xml = start("vllm", ["--enable-auto-tool-choice", "--tool-call-parser", "qwen3_xml"])
    out = chat(xml, call["prompt"], think=True, tools=call["tools"])
    msg = out["choices"][0]["message"]
    # thinking without a reasoning parser: in content, with </think>; the call is parsed
    assert msg["reasoning"] is None and msg["content"].endswith("\n</think>")
    assert json.loads(msg["tool_calls"][0]["function"]["arguments"]) == call["call"]["arguments"]
    _, _, calls, finish = streamed(chat(xml, call["prompt"], tools=call["tools"], stream=True))
    assert finish == "tool_calls" and json.loads(calls[0][2]) == call["call"]["arguments"]
    plain = start("vllm", ["--reasoning-parser", "qwen3", "--tool-call-parser", "qwen3_coder"])
    out = chat(plain, call["prompt"], tools=call["tools"])
    assert out["choices"][0]["finish_reason"] == "stop"
    assert out["choices"][0]["message"]["content"] == emu_answers.call_markup(call["call"])


# ------------------------------------------------------------------------- faults -------------
def test_quality_faults(start):
    emu = start("sglang")
    prompts = [truth.builtin_row(i)["prompt"] for i in range(12)]
    expected = [truth.builtin_row(i)["answer"] for i in range(12)]

    def rights():
        return [truth.correct(a, chat(emu, p, max_tokens=40)["choices"][0]["message"]["content"])
                for p, a in zip(prompts, expected)]

    assert set_faults(emu, wrong_answers=0.5)["wrong_answers"] == 0.5
    first = rights()
    assert 0 < first.count(False) < 12 and rights() == first  # the same prompts, every time
    assert answer_of(stats(emu))["wrong_because"] in (None, "wrong_answers")
    set_faults(emu, wrong_answers=1)
    assert not any(rights())
    call = truth.builtin_calls(1)[0]
    out = chat(emu, call["prompt"], tools=call["tools"])
    args = json.loads(out["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"])
    assert args != call["call"]["arguments"] and set(args) == set(call["call"]["arguments"])
    # the parsers stop reading: markup and thinking stay in content
    set_faults(emu, wrong_answers=0, unparsed_tools=1, unparsed_reasoning=1)
    out = chat(emu, call["prompt"], think=True, tools=call["tools"])
    msg = out["choices"][0]["message"]
    assert out["choices"][0]["finish_reason"] == "stop" and "tool_calls" not in msg
    assert msg["reasoning_content"] is None
    assert msg["content"].endswith("</think>\n\n" + emu_answers.call_markup(call["call"]))
    # drift: greedy output differs from token 2 on, same length; the words around an answer are
    # reworded, the value and the call markup are not (the answer stays right)
    set_faults(emu, unparsed_tools=0, unparsed_reasoning=0)
    asks = [dict(prompt=prompts[0]), dict(prompt="Tell me about the sea.", ignore_eos=True)]
    base = [chat(emu, max_tokens=20, logprobs=True, **ask) for ask in asks]
    set_faults(emu, drift_from_token=2)
    drifted = [chat(emu, max_tokens=20, logprobs=True, **ask) for ask in asks]
    for x, y, n in zip(base, drifted, (6, 20)):
        a = [e["token"] for e in x["choices"][0]["logprobs"]["content"]]
        b = [e["token"] for e in y["choices"][0]["logprobs"]["content"]]
        assert len(a) == len(b) == n and a[:2] == b[:2] and a[2] != b[2]
    assert truth.correct(expected[0], drifted[0]["choices"][0]["message"]["content"])
    out = chat(emu, call["prompt"], tools=call["tools"])
    assert json.loads(out["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"]) \
        == call["call"]["arguments"]
    # KV usage at or above the threshold garbles the reply; below it, right
    set_faults(emu, drift_from_token=0, corrupt_above_kv=0.01)
    assert truth.correct(expected[0], chat(emu, prompts[0])["choices"][0]["message"]["content"])
    long = post(emu.url + "/v1/chat/completions", {
        "model": MODEL, "max_tokens": 40, "chat_template_kwargs": {"enable_thinking": False},
        "messages": [{"role": "system", "content": "Context. " * 1500},
                     {"role": "user", "content": prompts[0]}]})
    assert not truth.correct(expected[0], long["choices"][0]["message"]["content"])
    assert long["usage"]["completion_tokens"] == 6  # the same length as the right reply
    assert answer_of(stats(emu))["wrong_because"] == "corrupt_above_kv"
    totals = stats(emu)["totals"]["answers"]
    assert totals["corrupt_above_kv"] == 1
    assert totals["wrong_answers"] == first.count(False) * 2 + 12 + 1


def test_faults_leave_speed_and_acceptance_alone_and_text_is_seed_free(start):
    """Same seed, same requests: the same token counts and the same draft acceptance per
    request with every quality fault on; another seed: the same text."""
    faults = {"SGLEMU_FAULT_WRONG_ANSWERS": "1", "SGLEMU_FAULT_DRIFT_FROM_TOKEN": "2",
              "SGLEMU_FAULT_UNPARSED_TOOLS": "1", "SGLEMU_FAULT_UNPARSED_REASONING": "1",
              "SGLEMU_FAULT_CORRUPT_ABOVE_KV": "0.01"}
    runs, texts = [], []
    for env in ({"SGLEMU_SEED": "5"}, dict(faults, SGLEMU_SEED="5"), {"SGLEMU_SEED": "6"}):
        emu = start("sglang", env=env)
        call = truth.builtin_calls(1)[0]
        chat(emu, truth.builtin_row(0)["prompt"], think=True)
        chat(emu, call["prompt"], tools=call["tools"])
        out = chat(emu, "Tell me about the sea.", max_tokens=30, ignore_eos=True)
        gen = post(emu.url + "/generate", {"text": "def add(a, b):", "sampling_params": {
            "max_new_tokens": 20, "ignore_eos": True}})
        texts.append((out["choices"][0]["message"]["content"], gen["text"]))
        runs.append([(r["completion_tokens"], r["verify_ct"], r["correct_drafts_histogram"])
                     for r in stats(emu)["requests"] if not r["health"]])
    assert runs[0] == runs[1]
    assert texts[0] == texts[2] and texts[0] != texts[1]
