# -*- coding: utf-8 -*-
"""Known answers: the rows the gate's quality checks ask, and how a reply is scored.

A row is ``{"prompt": ..., "answer": ...}`` (a known answer) or ``{"prompt": ..., "tools":
[OpenAI tool objects], "call": {"name": ..., "arguments": {...}}}`` (a tool call); either may say
``"thinking": true``. The project's own set (``builtin()``) is generated here, deterministically,
with its answers computed by the generator: multi-step arithmetic word problems, facts read from a
passage, the value a short Python function returns, and tool calls whose arguments the prompt
states. No downloaded data; a host's own file (``sglang_gate_answers``, e.g. GSM8K fetched and
pinned on the controller) replaces the built-in rows of its kind (``parse``).

Scoring: a numeric answer matches when the last number in the reply's content equals it; a text
answer when the content contains it, case-insensitively. Standard library only, Python 3.9+."""
from __future__ import annotations

import hashlib
import json
import random
import re

from .client import ConfigError
from ..engines.settings import is_num

ANSWER_KEYS = ("prompt", "answer", "thinking", "system", "id")
CALL_KEYS = ("prompt", "tools", "call", "thinking", "system", "id")

# ------------------------------------------------------------------------- the built-in set --
_NAMES = ("Ada", "Bram", "Chiara", "Dmitri", "Esme", "Farid", "Greta", "Hiro", "Ines", "Jonas",
          "Kaia", "Luca", "Maren", "Nils", "Odile", "Pavel")
_STORES = (("bakery", "loaves"), ("bookshop", "books"), ("hardware store", "hammers"),
           ("florist", "tulips"), ("toy shop", "kites"), ("pharmacy", "bandages"))
_SHARES = (("marbles", "jars"), ("stickers", "albums"), ("bulbs", "pots"), ("coins", "purses"))
_PROJECTS = ("Kestrel", "Orchid", "Basalt", "Juniper", "Quarry", "Lantern", "Meridian", "Tundra",
             "Saffron", "Harbor")
_ATTRIBUTES = (
    ("lead engineer", ("Ilse Varga", "Tomas Reyes", "Yuki Sato", "Amara Obi", "Lena Holm",
                       "Rafael Duarte", "Mei Chen", "Oskar Lind", "Priya Nair", "Sven Berg")),
    ("home city", ("Lisbon", "Tallinn", "Osaka", "Accra", "Bergen", "Quito", "Dundee", "Perth",
                   "Leipzig", "Valparaiso")),
    ("release name", ("Copper Fox", "Silent Heron", "Amber Tide", "Iron Lark", "Blue Cedar",
                      "Granite Owl", "Paper Moon", "Velvet Ant", "Coral Wren", "North Gate")),
)
_FILLER = ("Every project reports to the steering group once a quarter.",
           "The teams share one build farm in the basement.",
           "Budgets are reviewed in March and again in September.",
           "New hires spend their first week on the support rota.")

# The tools the built-in tool-call rows offer (every row offers all of them: choosing is part
# of the check), each an OpenAI tool object.
TOOLS = [
    {"type": "function", "function": {
        "name": "lookup_order", "description": "Look up a customer order by its number.",
        "parameters": {"type": "object", "properties": {
            "order_id": {"type": "integer", "description": "The order number."},
            "include_history": {"type": "boolean", "description": "Include the status history."}},
            "required": ["order_id", "include_history"]}}},
    {"type": "function", "function": {
        "name": "get_weather", "description": "Current weather in a city.",
        "parameters": {"type": "object", "properties": {
            "city": {"type": "string", "description": "The city's name."},
            "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
            "required": ["city", "unit"]}}},
    {"type": "function", "function": {
        "name": "create_ticket", "description": "Open a ticket in the operations queue.",
        "parameters": {"type": "object", "properties": {
            "title": {"type": "string", "description": "One line saying what is wrong."},
            "priority": {"type": "integer", "description": "1 (urgent) to 4 (whenever)."}},
            "required": ["title", "priority"]}}},
    {"type": "function", "function": {
        "name": "search_code", "description": "Search the repository's code.",
        "parameters": {"type": "object", "properties": {
            "query": {"type": "string", "description": "What to look for."},
            "max_results": {"type": "integer", "description": "At most this many hits."}},
            "required": ["query", "max_results"]}}},
]
_TICKETS = ("disk full on the build host", "nightly backup did not run", "TLS certificate expires Friday",
            "GPU 1 reports ECC errors", "login page returns 502")
_QUERIES = ("retry with backoff", "def parse_config", "TODO remove", "lock timeout", "class Scheduler")


def _arithmetic(rnd):
    kind = rnd.randrange(3)
    name = rnd.choice(_NAMES)
    if kind == 0:
        place, items = rnd.choice(_STORES)
        a, k, m = rnd.randint(20, 90), rnd.randint(2, 9), rnd.randint(6, 24)
        s = rnd.randint(5, a + k * m - 5)
        prompt = ("%s runs a %s. At opening it holds %d %s. A delivery brings %d cartons of %d %s "
                  "each, and during the day %d %s are sold. How many %s does the %s hold at closing?"
                  % (name, place, a, items, k, m, items, s, items, items, place))
        return prompt, a + k * m - s
    if kind == 1:
        items, groups = rnd.choice(_SHARES)
        d, q, b = rnd.randint(3, 9), rnd.randint(4, 30), rnd.randint(2, 15)
        prompt = ("%s has %d %s and shares them equally among %d %s. Each of the %s then gets %d "
                  "more %s. How many %s does each of the %s hold now?"
                  % (name, d * q, items, d, groups, groups, b, items, items, groups))
        return prompt, q + b
    v1, h1, v2, h2 = rnd.randint(40, 140), rnd.randint(2, 7), rnd.randint(40, 140), rnd.randint(2, 7)
    prompt = ("A train runs at %d km per hour for %d hours, then at %d km per hour for %d hours. "
              "How many kilometres does it cover in all?" % (v1, h1, v2, h2))
    return prompt, v1 * h1 + v2 * h2


def _passage(rnd):
    attr, values = rnd.choice(_ATTRIBUTES)
    projects = rnd.sample(_PROJECTS, 5)
    chosen = rnd.sample(values, 5)
    lines = ["The %s of project %s is %s." % (attr, p, v) for p, v in zip(projects, chosen)]
    for filler in rnd.sample(_FILLER, 2):
        lines.insert(rnd.randrange(len(lines) + 1), filler)
    i = rnd.randrange(5)
    prompt = ("Read the passage, then answer the question.\n\nPassage:\n%s\n\nQuestion: What is "
              "the %s of project %s? Reply with the %s only."
              % (" ".join(lines), attr, projects[i], attr))
    return prompt, chosen[i]


def _code(rnd):
    if rnd.randrange(2) == 0:
        a, b, c, n = rnd.randint(1, 20), rnd.randint(2, 9), rnd.randint(0, 15), rnd.randint(3, 9)
        code = ("def f(n):\n    total = %d\n    for i in range(n):\n        total = total + %d * i\n"
                "    return total - %d\n" % (a, b, c))
        return code, "f(%d)" % n, a + b * n * (n - 1) // 2 - c
    m, start = rnd.randint(2, 5), rnd.randint(0, 10)
    values = [rnd.randint(1, 40) for _ in range(rnd.randint(4, 7))]
    code = ("def g(values):\n    best = %d\n    for v in values:\n        if v %% %d == 0:\n"
            "            best = best + v\n    return best\n" % (start, m))
    return code, "g(%s)" % values, start + sum(v for v in values if v % m == 0)


def _tool(rnd):
    which = rnd.randrange(4)
    if which == 0:
        args = {"order_id": rnd.randint(1000, 99999), "include_history": rnd.random() < 0.5}
        said = "order_id set to %d and include_history set to %s" % (
            args["order_id"], "true" if args["include_history"] else "false")
    elif which == 1:
        args = {"city": rnd.choice(_ATTRIBUTES[1][1]), "unit": rnd.choice(("celsius", "fahrenheit"))}
        said = "city set to %s and unit set to %s" % (args["city"], args["unit"])
    elif which == 2:
        args = {"title": rnd.choice(_TICKETS), "priority": rnd.randint(1, 4)}
        said = 'title set to "%s" and priority set to %d' % (args["title"], args["priority"])
    else:
        args = {"query": rnd.choice(_QUERIES), "max_results": rnd.randint(3, 25)}
        said = 'query set to "%s" and max_results set to %d' % (args["query"], args["max_results"])
    name = TOOLS[which]["function"]["name"]
    return {"prompt": "Use the %s tool with %s." % (name, said), "tools": TOOLS,
            "call": {"name": name, "arguments": args}, "id": "tool-%d" % which}


_NUMBER_ASK = " End your reply with the number."


def builtin_row(i):
    """Row ``i`` of the built-in known answers (any i >= 0): arithmetic, passage and code in
    turn, each from its own seeded generator, so row i is the same on every machine."""
    rnd = random.Random(0x5EED + 7919 * i)
    family = i % 3
    if family == 0:
        prompt, answer = _arithmetic(rnd)
        return {"id": "arithmetic-%d" % i, "prompt": prompt + _NUMBER_ASK, "answer": answer}
    if family == 1:
        prompt, answer = _passage(rnd)
        return {"id": "passage-%d" % i, "prompt": prompt, "answer": answer}
    code, call, answer = _code(rnd)
    return {"id": "code-%d" % i,
            "prompt": "What does this Python function return for %s?\n\n```python\n%s```\n%s"
                      % (call, code, _NUMBER_ASK.strip()),
            "answer": answer}


def builtin(count):
    """The first ``count`` built-in known-answer rows."""
    return [builtin_row(i) for i in range(count)]


def builtin_calls(count):
    """``count`` built-in tool-call rows: each of the four tools in turn, its arguments drawn."""
    rows = []
    for i in range(count):
        rnd = random.Random(0x7001 + 104729 * i)
        for _ in range(64):  # draw until the tool is the one whose turn it is
            row = _tool(rnd)
            if row["call"]["name"] == TOOLS[i % len(TOOLS)]["function"]["name"]:
                break
        row["id"] = "tool-%d" % i
        rows.append(row)
    return rows


# ------------------------------------------------------------------------- a host's file -----
def _row_problems(row, where):
    if not isinstance(row, dict):
        return ["%s must be a JSON object, got %s" % (where, type(row).__name__)]
    errors = []
    keys = CALL_KEYS if "call" in row else ANSWER_KEYS
    unknown = sorted(set(row) - set(keys))
    if unknown:
        errors.append("%s has unknown key(s) %s (a row is {%s} or {%s})"
                      % (where, ", ".join(unknown), ", ".join(ANSWER_KEYS), ", ".join(CALL_KEYS)))
    if not isinstance(row.get("prompt"), str) or not row.get("prompt", "").strip():
        errors.append("%s.prompt must be a non-empty string" % where)
    if not isinstance(row.get("thinking", False), bool):
        errors.append("%s.thinking must be true or false" % where)
    if row.get("system") is not None and not isinstance(row["system"], str):
        errors.append("%s.system must be a string" % where)
    if "call" in row:
        call = row["call"]
        if not isinstance(call, dict) or not isinstance(call.get("name"), str) \
                or not isinstance(call.get("arguments"), dict) or set(call) - {"name", "arguments"}:
            errors.append("%s.call must be {\"name\": str, \"arguments\": {...}}" % where)
        tools = row.get("tools")
        names = [((t or {}).get("function") or {}).get("name") for t in tools] \
            if isinstance(tools, list) else []
        if not tools or not all(isinstance(t, dict) and t.get("type") == "function" and isinstance(n, str)
                                for t, n in zip(tools, names)):
            errors.append("%s.tools must be a non-empty list of OpenAI tool objects "
                          "({\"type\": \"function\", \"function\": {\"name\", \"parameters\"}})" % where)
        elif isinstance(call, dict) and call.get("name") not in names:
            errors.append("%s.call.name %r is none of the row's tools (%s)"
                          % (where, call.get("name"), ", ".join(names)))
    else:
        answer = row.get("answer")
        if not (is_num(answer) or (isinstance(answer, str) and answer.strip())):
            errors.append("%s.answer must be a number or a non-empty string, got %r" % (where, answer))
    return errors


def parse(text, name="sglang_gate_answers"):
    """A JSONL file's rows -> {"answers": [...], "calls": [...]}; ConfigError naming ``name``, the
    line and the rule for every bad row (at most 10 named), or for a file with no row."""
    rows, errors = [], []
    for number, line in enumerate(str(text).splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except ValueError as e:
            errors.append("line %d is not JSON (%s)" % (number, e))
            continue
        problems = _row_problems(row, "line %d" % number)
        errors.extend(problems)
        if not problems:
            rows.append(dict(row, id=str(row.get("id") or "line-%d" % number)))
    if errors:
        raise ConfigError(name, "%d bad row(s): %s%s" % (len(errors), "; ".join(errors[:10]),
                                                        "; ..." if len(errors) > 10 else ""))
    if not rows:
        raise ConfigError(name, "holds no row (one JSON object per line: {\"prompt\", \"answer\"} "
                                "or {\"prompt\", \"tools\", \"call\"})")
    return {"answers": [r for r in rows if "call" not in r], "calls": [r for r in rows if "call" in r]}


def read(path, name="sglang_gate_answers"):
    """A host's file on this machine: parse's rows plus {"path", "sha256", "source"} (what the
    history and the messages call it: 'NAME PATH (sha256 12 digits)'). ConfigError names ``name``
    for a path that is not absolute and for bad rows; OSError / UnicodeDecodeError for a file
    that cannot be read."""
    if not isinstance(path, str) or not path.startswith("/"):
        raise ConfigError(name, "must be an absolute path on the controller (a JSONL file of known "
                                "answers), got %r" % (path,))
    with open(path, "rb") as fh:
        raw = fh.read()
    digest = hashlib.sha256(raw).hexdigest()
    return dict(parse(raw.decode("utf-8"), name), path=path, sha256=digest,
                source="%s %s (sha256 %s)" % (name, path, digest[:12]))


# ---------------------------------------------------------------------------------- scoring --
_NUM = re.compile(r"-?\d[\d,]*(?:\.\d+)?")
_WHOLE_NUM = re.compile(r"^-?\d[\d,]*(?:\.\d+)?$")


def last_number(text):
    """The last number in ``text`` (thousands separators dropped), or None."""
    found = _NUM.findall(text or "")
    while found:
        raw = found.pop().replace(",", "")
        try:
            return float(raw)
        except ValueError:
            continue
    return None


def correct(answer, content):
    """Whether a reply's ``content`` gives ``answer``: the last number equals a numeric answer
    (to 1e-6 of its size); the content contains a text answer, case-insensitively."""
    if isinstance(answer, str) and _WHOLE_NUM.match(answer.strip()):
        answer = float(answer.strip().replace(",", ""))
    if is_num(answer):
        got = last_number(content)
        return got is not None and abs(got - float(answer)) <= 1e-6 * max(1.0, abs(float(answer)))
    return str(answer).strip().lower() in (content or "").lower()
