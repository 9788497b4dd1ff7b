"""The gate's quality checks as Python calls (sglang_perf/judge/quality.py, answers.py): the built-in
known answers, a host's file, scoring, the Wilson interval at its edges, and each check against a
scripted server that answers in SGLang 0.5.23's or vLLM 0.33's shapes (real HTTP on 127.0.0.1),
right and in each way a server goes wrong while its speed stays the same. The emulator's answers
and faults: tests/test_emulator_quality.py; the whole gate on the emulator: test_gate_quality.py."""
from __future__ import annotations

import json
import re

import pytest

from fakeserver import FakeServer, sse
from conftest import raw_role_defaults
from planutil import plan_for
from sglang_perf.judge import quality
from sglang_perf.measure import answers
from sglang_perf.record import history
from sglang_perf.plan import gate as plan
from sglang_perf.measure.client import ConfigError, Endpoint
from sglang_perf.measure.stats import wilson_interval

COMMON = {"confidence": 0.95, "inconclusive": "fail", "first_token_timeout": 5.0, "stall_timeout": 5.0}


# ----------------------------------------------------------------------- the built-in set ----
@pytest.mark.parametrize("i", [0, 1, 5, 6, 1023, 99999])
def test_builtin_rows_are_the_same_everywhere_and_a_valid_file(i):
    row = answers.builtin_row(i)
    assert row == answers.builtin_row(i)
    assert row["id"].startswith(("arithmetic-", "passage-", "code-")) and row["id"].endswith("-%d" % i)
    parsed = answers.parse(json.dumps(row))
    assert parsed["answers"] == [row] and parsed["calls"] == []


@pytest.mark.parametrize("i", [2, 5, 1025, 99998])
def test_a_code_row_answer_is_what_the_function_returns(i):
    row = answers.builtin_row(i)
    code = re.search(r"```python\n(.*?)```", row["prompt"], re.S).group(1)
    call = re.search(r"return for (.+?)\?", row["prompt"]).group(1)
    scope = {}
    exec(code, scope)  # the generator's own code, shown to the model
    assert eval(call, scope) == row["answer"]


def test_passage_answers_are_in_the_passage_once_and_arithmetic_is_exact():
    for i in range(1, 300, 3):
        row = answers.builtin_row(i)
        passage = row["prompt"].split("Passage:\n")[1].split("\n\nQuestion")[0]
        assert passage.count(row["answer"]) == 1
    for i in range(0, 300, 3):
        row = answers.builtin_row(i)
        assert isinstance(row["answer"], int) and row["answer"] >= 0


def test_builtin_tool_rows_take_each_tool_in_turn_with_typed_arguments():
    rows = answers.builtin_calls(8)
    assert [r["call"]["name"] for r in rows] == ["lookup_order", "get_weather", "create_ticket",
                                                 "search_code"] * 2
    for r in rows:
        props = next(t for t in r["tools"] if t["function"]["name"] == r["call"]["name"])["function"]
        assert set(r["call"]["arguments"]) == set(props["parameters"]["required"])
        assert answers.parse(json.dumps(r))["calls"][0]["call"] == r["call"]


# ----------------------------------------------------------------------------- a host's file --
def test_a_host_file_is_refused_naming_the_line_and_the_rule():
    text = "\n".join([json.dumps({"prompt": "2+2?", "answer": 4}), "not json",
                      json.dumps({"prompt": "", "answer": 1}),
                      json.dumps({"prompt": "x", "answer": None}),
                      json.dumps({"prompt": "x", "answer": 1, "extra": 2}),
                      json.dumps({"prompt": "x", "tools": [], "call": {"name": "f", "arguments": {}}}),
                      json.dumps({"prompt": "x", "tools": answers.TOOLS,
                                  "call": {"name": "nope", "arguments": {}}})])
    with pytest.raises(ConfigError) as e:
        answers.parse(text, "sglang_gate_answers")
    said = str(e.value)
    for words in ("sglang_gate_answers", "6 bad row(s)", "line 2 is not JSON", "line 3.prompt must be",
                  "line 4.answer must be a number or a non-empty string", "line 5 has unknown key(s) extra",
                  "line 6.tools must be a non-empty list",
                  "line 7.call.name 'nope' is none of the row's tools"):
        assert words in said, (words, said)
    with pytest.raises(ConfigError, match="holds no row"):
        answers.parse("\n\n")


def test_a_gsm8k_style_file_splits_answers_from_calls():
    text = "\n".join([json.dumps({"prompt": "Q%d" % i, "answer": i, "thinking": i % 2 == 0})
                      for i in range(5)]
                     + [json.dumps(answers.builtin_calls(1)[0])])
    rows = answers.parse(text)
    assert [r["id"] for r in rows["answers"]] == ["line-1", "line-2", "line-3", "line-4", "line-5"]
    assert len(rows["calls"]) == 1 and rows["calls"][0]["id"] == "tool-0"


@pytest.mark.parametrize("answer, content, right", [
    (46, "The answer is 46.", True), (46, "46 or maybe 47", False), (1234, "so 1,234 jars", True),
    (-3, "it returns -3", True), (2.5, "2.50", True), ("72", "#### 72", True), ("72", "172", False),
    ("Dundee", "The home city is dundee.", True), ("Paper Moon", "Paper moon", True),
    ("Lisbon", "", False), (7, "", False), (7, None, False)])
def test_a_reply_is_scored_by_its_last_number_or_by_containing_the_text(answer, content, right):
    assert answers.correct(answer, content) is right


@pytest.mark.parametrize("n", [1, 6, 1024, 100000])
def test_the_wilson_interval_holds_the_share_inside_0_and_1_at_every_n(n):
    for right in sorted({0, 1, n // 2, int(0.7 * n), n - 1, n} & set(range(n + 1))):
        lo, hi = wilson_interval(right, n, 0.95)
        assert 0 <= lo <= right / n <= hi <= 1
    assert wilson_interval(n, n, 0.95)[1] == pytest.approx(1.0)
    wide, narrow = wilson_interval(n // 2, n, 0.95), wilson_interval(n // 2, n, 0.8)
    assert narrow[0] >= wide[0] and narrow[1] <= wide[1]
    assert wilson_interval(0, 0, 0.95) is None


# --------------------------------------------------------------------------- a scripted server --
class Chat(object):
    """A chat server of ``engine``'s shapes whose model answers right, except what ``wrong(row
    prompt)`` says; ``calls``: how a tool call comes back (parsed / markup / dropped);
    ``thinking``: where reasoning goes (field / content / other_field)."""

    def __init__(self, engine="sglang", wrong=lambda p: False, calls="parsed", thinking="field",
                 tokens=lambda p: ["tok%d" % i for i in range(40)]):
        self.engine, self.wrong, self.calls = engine, wrong, calls
        self.thinking, self.tokens = thinking, tokens
        self.field = "reasoning_content" if engine == "sglang" else "reasoning"
        self.table = {r["prompt"]: r for r in answers.builtin(200) + answers.builtin_calls(8)}
        self.server = FakeServer({("POST", "/v1/chat/completions"): self.reply})
        self.ep = Endpoint(self.server.url)

    def close(self):
        self.server.close()

    def reply(self, body):
        prompt = body["messages"][-1]["content"]
        row = self.table.get(prompt)
        think = body.get("chat_template_kwargs", {}).get("enable_thinking") is not False
        reasoning = "Let me work it out." if think else None
        content, calls = "I do not know.", []
        if row and "call" in row and body.get("tools"):
            params = "".join("<parameter=%s>\n%s\n</parameter>\n" % (k, v)
                             for k, v in row["call"]["arguments"].items())
            markup = "<tool_call>\n<function=%s>\n%s</function>\n</tool_call>" % (row["call"]["name"], params)
            if self.calls == "parsed":
                # SGLang's ToolCall carries its index, vLLM's not; vLLM's content is null when empty
                call = {"id": "call_1", "type": "function", "function": {
                    "name": row["call"]["name"], "arguments": json.dumps(row["call"]["arguments"])}}
                content, calls = ("", [dict(call, index=0)]) if self.engine == "sglang" else (None, [call])
            else:
                content = markup if self.calls == "markup" else ""
        elif row:
            answer = row["answer"]
            if self.wrong(prompt):
                answer = answer + 1 if isinstance(answer, int) else "somewhere else"
            content = "The answer is %s." % answer
        elif prompt in dict(plan.promptset.CODING_PROMPTS).values():
            content = "".join(self.tokens(prompt))
        message = {"role": "assistant", "content": content}
        if reasoning and self.thinking == "content":
            message["content"] = reasoning + "\n</think>\n\n" + (content or "")
        elif reasoning:
            message[self.field if self.thinking == "field" else "other_reasoning"] = reasoning
        finish = "tool_calls" if calls else "stop"
        if not body.get("stream"):
            if calls:
                message["tool_calls"] = calls
            out = {"choices": [{"index": 0, "message": message, "finish_reason": finish}]}
            if body.get("logprobs") and row is None:
                out["choices"][0]["logprobs"] = {"content": [{"token": t, "logprob": 0.0}
                                                             for t in self.tokens(prompt)]}
            return 200, [json.dumps(out).encode()]
        chunks = [sse({"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]})]
        for key in ("reasoning_content", "reasoning", "other_reasoning"):
            if message.get(key):
                chunks.append(sse({"choices": [{"index": 0, "delta": {key: message[key]}}]}))
        if message["content"]:
            for piece in re.findall(r"\s*\S+", message["content"]):
                chunks.append(sse({"choices": [{"index": 0, "delta": {"content": piece}}]}))
        for c in calls:  # SGLang's order: id and name, then the arguments in pieces
            chunks.append(sse({"choices": [{"index": 0, "delta": {"tool_calls": [dict(
                c, index=0, function={"name": c["function"]["name"], "arguments": ""})]}}]}))
            args = c["function"]["arguments"]
            for a, b in ((0, len(args) // 2), (len(args) // 2, len(args))):
                chunks.append(sse({"choices": [{"index": 0, "delta": {"tool_calls": [
                    {"index": 0, "type": "function", "function": {"arguments": args[a:b]}}]}}]}))
        chunks.append(sse({"choices": [{"index": 0, "delta": {}, "finish_reason": finish}]}))
        chunks.append(sse("[DONE]"))
        return 200, chunks


@pytest.fixture
def chat():
    made = []

    def make(**kw):
        made.append(Chat(**kw))
        return made[-1]
    yield make
    for c in made:
        c.close()


def cfg(check, **kw):
    sizes = {"answers": (24, 72, 64), "tool_calls": (4, 4, 64), "reasoning": (2, 2, 64),
             "agreement": (8, 8, 16)}[check]
    return quality.validate(dict(COMMON, case=check, check=check, concurrency=8, requests=sizes[0],
                                 max_requests=sizes[1], max_tokens=sizes[2], thinking=False, **kw))


def run(c, check, server=None, baseline=None, **kw):
    return quality.run(cfg(check, **kw), c.ep, "m", server or {"kind": c.engine}, None, baseline)


def test_right_answers_pass_on_the_first_look(chat):
    r = run(chat(), "answers", min_accuracy=0.8)
    assert r["verdict"] == "pass" and r["requests"] == 24 and r["right"] == 24
    assert r["accuracy"]["lower"] > 0.8 and r["failures"] == []


def test_thirty_percent_wrong_answers_fail_naming_the_check_after_asking_more(chat):
    c = chat(wrong=lambda p: int(re.sub(r"\D", "", json.dumps(p))[-3:] or 0) % 10 < 3)
    r = run(c, "answers", min_accuracy=0.8)
    assert r["verdict"] == "fail" and 24 <= r["requests"] <= 72
    message = r["failures"][0]["message"]
    assert " known answers right, accuracy " in message and "< required 0.80" in message
    assert "first wrong:" in message
    assert r["accuracy"]["upper"] < 0.8 and r["wrong"][0]["got"].startswith("The answer is")


def test_a_share_inside_the_band_at_the_last_row_is_inconclusive_and_fails_by_policy(chat):
    # every 10th row wrong: 64 of 72 right (0.89 [0.80, 0.94]) straddles 0.9 at every look
    wrong = {r["prompt"] for r in answers.builtin(72)[::10]}
    c = chat(wrong=lambda p: p in wrong)
    r = run(c, "answers", min_accuracy=0.9)
    assert r["verdict"] == "inconclusive" and r["requests"] == 72 and r["right"] == 64
    assert r["passed"] is False and r["failures"][0]["message"].startswith("inconclusive after 72 rows: ")
    passing = quality.run(dict(cfg("answers", min_accuracy=0.9), inconclusive="pass"), c.ep, "m",
                          {"kind": "sglang"}, None, None)
    assert passing["verdict"] == "inconclusive" and passing["passed"] is True and passing["failures"] == []


@pytest.mark.parametrize("engine", ["sglang", "vllm"])
def test_parsed_tool_calls_pass_streamed_and_not(chat, engine):
    r = run(chat(engine=engine), "tool_calls")
    assert r["verdict"] == "pass" and r["requests"] == 8 and r["right"] == 8, r["problems"]


def test_a_call_left_as_markup_in_the_content_fails_naming_the_parser(chat):
    r = run(chat(calls="markup"), "tool_calls", server={"kind": "sglang", "tool_call_parser": "hermes"})
    assert r["verdict"] == "fail" and r["problem_kinds"] == {"in_content": 8}
    message = r["failures"][0]["message"]
    assert message.startswith("8 of 8 replies did not carry the expected tool call")
    assert "check --tool-call-parser" in message and "(server's parser: hermes)" in message


def test_a_call_the_parser_dropped_fails_as_missing(chat):
    r = run(chat(calls="dropped"), "tool_calls")
    assert r["verdict"] == "fail" and r["problem_kinds"] == {"missing": 8}


@pytest.mark.parametrize("engine", ["sglang", "vllm"])
def test_reasoning_in_the_engines_own_field_passes(chat, engine):
    r = run(chat(engine=engine), "reasoning")
    assert r["verdict"] == "pass" and r["requests"] == 6 and r["field"] == (
        "reasoning_content" if engine == "sglang" else "reasoning")


def test_reasoning_left_in_the_content_fails_naming_the_check(chat):
    r = run(chat(thinking="content"), "reasoning")
    assert r["verdict"] == "fail" and r["problem_kinds"] == {"in_content": 4}
    assert r["failures"][0]["message"].startswith("4 of 6 replies with the reasoning misplaced: 4 x thinking "
                                                  "left in the content")


def test_reasoning_in_another_engines_field_is_not_what_clients_read(chat):
    r = run(chat(engine="vllm", thinking="other"), "reasoning")
    assert r["verdict"] == "fail" and r["problem_kinds"] == {"missing": 4}
    assert "no reasoning with thinking on" in r["failures"][0]["message"]


FP = {"engine": "sglang", "version": "0.5.23", "model": {"repo": "Qwen/Qwen3.6-27B", "commit": "a" * 40}}


def drifting(pos):
    return lambda p: ["tok%d" % i if i < pos else "drift%d" % i for i in range(40)]


def test_agreement_keeps_its_tokens_first_then_judges_the_same_build(chat):
    first = run(chat(), "agreement", min_agreement=0.75)
    assert first["verdict"] == "pass" and first["agreement"] is None and len(first["tokens"]) == 8
    assert all(len(t) == 16 for t in first["tokens"].values()) and "kept as the reference" in first["note"]
    base = {"tokens": first["tokens"], "same_build": quality.same_build(FP, dict(FP)), "time": "t0"}
    again = run(chat(), "agreement", baseline=base, min_agreement=0.75)
    assert again["verdict"] == "pass" and again["agreement"] == 1.0 and again["same_build"] is True
    drift = run(chat(tokens=drifting(4)), "agreement", baseline=base, min_agreement=0.75)
    assert drift["verdict"] == "fail" and drift["agreement"] == 0.0
    message = drift["failures"][0]["message"]
    assert message.startswith("0 of 8 prompts agree") and "differs at token 4" in message
    assert "prompt red_black_tree" in message


def test_agreement_across_builds_is_reported_not_judged():
    a, b = dict(FP), dict(FP, version="0.5.24")
    assert quality.same_build(a, dict(a)) and not quality.same_build(a, b)
    assert not quality.same_build(a, dict(a, model={"repo": "Qwen/Qwen3.6-27B", "commit": "b" * 40}))
    assert not quality.same_build({}, {})  # unknown is never the same


def test_agreement_on_another_build_is_only_reported(chat):
    base = {"tokens": run(chat(), "agreement")["tokens"], "same_build": False, "time": "t0"}
    r = run(chat(tokens=drifting(2)), "agreement", baseline=base, min_agreement=0.75)
    assert r["verdict"] == "pass" and r["same_build"] is False and r["agreement"] == 0.0
    assert "reported, not judged (another engine, release or model revision" in r["note"]


def test_a_record_keeps_what_the_next_run_compares_with():
    result = {"cases": [{"case": "agreement", "check": "agreement", "tokens": {"a": ["x"]}, "agreement": None,
                         "verdict": "pass", "passed": True, "failures": []}]}
    rec = history.record(result, {"verdict": "pass", "action": "record", "reason": ""}, {"time": "t"})
    assert rec["cases"][0]["tokens"] == {"a": ["x"]} and rec["cases"][0]["check"] == "agreement"
    base = plan.agreement_baseline(dict(rec, fingerprint=FP), "agreement", dict(FP))
    assert base == {"tokens": {"a": ["x"]}, "time": "t", "same_build": True}


# ---------------------------------------------------------------------------- the plan's rules --
GATE = plan_for({}, plumbing=False)["gate"]
PROFILES = raw_role_defaults("sglang")["sglang_profiles"]


@pytest.mark.parametrize("case, limits, words", [
    ({"check": "answer", "concurrency": 1, "requests": 4, "max_tokens": 8}, {},
     "sglang_gate_plan.q.check must be one of answers, tool_calls, reasoning, agreement, pressure, got "
     "'answer'"),
    ({"check": "answers", "kv_usage": 0.6, "concurrency": 1, "requests": 4, "max_tokens": 8}, {},
     "sglang_gate_plan.q (check answers) has key(s) kv_usage that a quality check does not take"),
    ({"check": "pressure", "kv_usage": 60, "when": "sometimes", "concurrency": 1, "requests": 4,
      "max_tokens": 8}, {}, "sglang_gate_plan.q.kv_usage must be a share of the KV pool between 0 and 1"),
    ({"check": "pressure", "when": "sometimes", "concurrency": 1, "requests": 4, "max_tokens": 8}, {},
     "sglang_gate_plan.q.when must be one of changed, always, never, got 'sometimes'"),
    ({"check": "answers", "prompts": "coding", "concurrency": 1, "requests": 4, "max_tokens": 8}, {},
     "sglang_gate_plan.q (check answers) has key(s) prompts that a quality check does not take"),
    ({"check": "answers", "concurrency": 1, "requests": 4, "max_tokens": 8}, {"min_accuracy": 80},
     "sglang_gate_thresholds.no_spec.q.min_accuracy must be a share from 0 to 1 (0.8 = 80%), got 80"),
    ({"check": "tool_calls", "concurrency": 1, "requests": 4, "max_tokens": 8}, {"min_accuracy": 0.9},
     "sglang_gate_thresholds.no_spec.q has unknown threshold(s) min_accuracy (known: none: every reply "
     "of check tool_calls must pass, give {})"),
    ({"check": "agreement", "concurrency": 1, "requests": 4}, {},
     "sglang_gate_plan.q.max_tokens is required"),
    ({"prompts": "coding", "concurrency": 1, "requests": 6, "max_tokens": 8}, {"min_accuracy": 0.9},
     "sglang_gate_thresholds.no_spec.q has unknown threshold(s) min_accuracy (known: min_tok_s"),
])
def test_a_bad_check_case_is_refused_naming_the_variable(case, limits, words):
    problems = plan.problems({"q": case}, {"no_spec": {"q": limits}}, "no_spec")
    assert any(words in p for p in problems), problems


def test_the_role_plan_runs_every_check_with_the_bars_of_no_spec():
    checks = {c["case"]: (c["options"]["check"], c["thresholds"])
              for c in GATE["cases"] if c["options"].get("check")}
    assert checks == {"answers": ("answers", {"min_accuracy": 0.8}), "tool_calls": ("tool_calls", {}),
                      "reasoning": ("reasoning", {}), "agreement": ("agreement", {"min_agreement": 0.75}),
                      "pressure": ("pressure", {"min_accuracy": 0.8})}
    assert "answers (C=8, 24-72 x 384 tokens, check answers): min_accuracy 0.8" in GATE["text"]
    assert GATE["answers"] is None


def test_a_host_answers_file_is_read_and_checked_before_any_host_changes(tmp_path):
    good = tmp_path / "gsm8k.jsonl"
    good.write_text("\n".join(json.dumps({"prompt": "Q%d" % i, "answer": i}) for i in range(3)) + "\n")
    gate = plan_for({"sglang_gate_answers": str(good)})["gate"]
    assert gate["answers"]["path"] == str(good) and gate["answers"]["answers"] == 3
    assert gate["answers"]["calls"] == 0 and len(gate["answers"]["sha256"]) == 64
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"prompt": "Q"}\n')
    for path, words in ((str(bad), "sglang_gate_answers = %s: 1 bad row(s): line 1.answer must be" % bad),
                        (str(tmp_path / "none.jsonl"), "cannot be read"),
                        ("relative.jsonl", "sglang_gate_answers must be an absolute path on the controller")):
        problems = plan_for({"sglang_gate_answers": path})["problems"]
        assert any(words in p for p in problems), (words, problems)


@pytest.mark.parametrize("extra, setting", [
    ({"speculative_accept_threshold_single": 0.6}, "speculative_accept_threshold_single = 0.6"),
    ({"speculative_accept_threshold_acc": 0.5}, "speculative_accept_threshold_acc = 0.5"),
])
def test_lossy_verification_is_refused_naming_the_setting_unless_allowed(extra, setting):
    profiles = dict(PROFILES, mine=dict(base="nextn_3step", **extra))
    problems = " ".join(plan_for({"sglang_profiles": profiles, "sglang_profile": "mine"})["problems"])
    assert "sglang_profiles.mine.%s makes speculative decoding lossy" % setting in problems
    assert "sglang_allow_lossy_speculation: true" in problems
    allowed = plan_for({"sglang_profiles": profiles, "sglang_profile": "mine",
                        "sglang_allow_lossy_speculation": True})["problems"]
    assert not any("lossy" in p for p in allowed), allowed
    exact = plan_for({"sglang_profiles": dict(PROFILES, mine=dict(base="nextn_3step",
                                                                  speculative_accept_threshold_single=1.0)),
                      "sglang_profile": "mine"})
    assert exact["problems"] == [] and "--speculative-accept-threshold-single" in exact["server"]["argv"]


@pytest.mark.parametrize("method, lossy", [("fly", True), ("synthetic", True), ("standard", False),
                                           ("block", False)])
def test_vllm_rejection_methods_that_are_not_exact_are_refused(method, lossy):
    profiles = dict(PROFILES, mine={"base": "vllm_mtp_3", "rejection_sample_method": method})
    out = plan_for({"sglang_profiles": profiles, "sglang_profile": "mine"})
    said = " ".join(out["problems"])
    assert ("rejection_sample_method = %s makes speculative decoding lossy" % method in said) is lossy
    if not lossy:
        spec = json.loads(out["server"]["argv"][out["server"]["argv"].index("--speculative-config") + 1])
        assert spec["rejection_sample_method"] == method


def test_gsm8k_rows_become_a_file_the_gate_reads(tmp_path):
    import subprocess
    import sys
    from conftest import ROOT
    src = tmp_path / "test.jsonl"
    src.write_text("\n".join(json.dumps({"question": "Tom has %d apples and eats one. How many are left?" % n,
                                         "answer": "He had %d.\n%d - 1 = %d\n#### %s"
                                                   % (n, n, n - 1, format(n - 1, ","))})
                             for n in (3, 1001, 7)) + "\n")
    out = subprocess.run([sys.executable, str(ROOT / "scripts" / "answers_from_gsm8k.py"), str(src), "2"],
                         capture_output=True, text=True, check=True).stdout
    rows = answers.parse(out)["answers"]
    assert [(r["id"], r["answer"]) for r in rows] == [("gsm8k-0", 2), ("gsm8k-1", 1000)]
    assert rows[1]["prompt"].endswith("as a number on the last line.")
    assert answers.correct(rows[1]["answer"], "So the answer is\n1,000")
    src.write_text(json.dumps({"question": "q", "answer": "no marker"}) + "\n")
    bad = subprocess.run([sys.executable, str(ROOT / "scripts" / "answers_from_gsm8k.py"), str(src), "5"],
                         capture_output=True, text=True)
    assert bad.returncode != 0 and "line 1: not a GSM8K row" in bad.stderr


def test_the_pressure_check_runs_when_what_it_guards_changed():
    before = dict(FP, release="0.5.23-abc", profile="nextn_3step", profile_sha256="p1")
    assert quality.pressure_due("changed", dict(before), before) == (
        False, "nothing it guards changed since the last-known-good (engine, release, profile, weights)")
    for change, label in ((dict(version="0.5.24"), "engine version"), (dict(profile="dflash"), "profile"),
                          (dict(profile_sha256="p2"), "profile settings"),
                          (dict(model={"repo": "Qwen/Qwen3.6-27B", "commit": "c" * 40}), "model revision")):
        due, why = quality.pressure_due("changed", dict(before, **change), before)
        assert due and why.endswith(label), why
    assert quality.pressure_due("changed", before, None) == (True, "no last-known-good to compare with")
    assert quality.pressure_due("always", before, before)[0]
    assert not quality.pressure_due("never", before, None)[0]


# ------------------------------------------------------- the long-context case's facts ------
@pytest.mark.parametrize("tokens, index", [(1024, 0), (1024, 6), (8192, 1), (32768, 1023), (32768, 99999)])
def test_each_long_prompt_plants_its_facts_at_its_depths(tokens, index):
    text = plan.promptset.long_context_prompt(tokens, 4.0, index, "t")
    facts = plan.promptset.long_context_facts(index)
    assert len(facts) == len(plan.promptset.FACT_DEPTHS) == 3
    at = [text.index(plan.promptset.fact_note(what, value)) / len(text) for what, value in facts]
    assert at == sorted(at) and all(abs(a - d) < 0.2 for a, d in zip(at, plan.promptset.FACT_DEPTHS)), at
    assert abs(len(text) / 4.0 - tokens) < 0.02 * tokens
    assert "Begin your reply with the reviewer notes" in text


def test_facts_are_counted_in_each_reply_and_judged_on_the_median():
    from sglang_perf.measure import config, engine
    from sglang_perf.judge import verdict

    def rec(i, said):
        r = engine._Request("bench-x-m%d" % i, "measure", "long_context")
        r.text = [said]
        return r
    facts = [plan.promptset.long_context_facts(i) for i in range(3)]
    recs = [rec(0, " ".join(v for _, v in facts[0]).upper()),          # all three, any case
            rec(1, "%s and %s" % (facts[1][0][1], facts[1][2][1])),   # the middle one missed
            rec(2, "no notes at all")]
    got = engine.facts_stated(recs)
    assert got["stated"] == [3, 2, 0] and got["median"] == 2 and got["planted"] == 3
    assert got["missed"] == {"rid": "bench-x-m1", "what": facts[1][1][0], "value": facts[1][1][1],
                             "depth": 0.5}
    cfg = dict(config.DEFAULTS, min_facts=3, concurrency=1, metrics="auto", max_regression_pct=None)
    entries = verdict.verdict_entries({"facts": got, "errors": 0, "error_kinds": {}, "metrics": None}, cfg)
    (e,) = [e for e in entries if e["threshold"] == "min_facts"]
    assert e["state"] == "fail" and e["message"].startswith(
        "facts planted in the long prompt and stated in the reply: median 2 of 3 (per reply 3, 2, 0) "
        "< required 3")
    assert "first missed: the %s (%s, at 50%% of the prompt)" % facts[1][1] in e["message"]
    with pytest.raises(ConfigError, match="min_facts"):
        config.validate({"url": "http://127.0.0.1:1", "prompts": "coding", "min_facts": 2})
