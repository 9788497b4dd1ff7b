"""The emulated model's mind: what it answers to a chat request.

Given the last user message of a chat request (and the request's ``tools``), ``Mind.reply``
decides the reply script, as a model would, by reading the prompt's text:

- the project's known-answer prompts: arithmetic word problems (a shop's stock at closing,
  things shared equally and then more each, a train at two speeds), a passage of "The {attr} of
  project {P} is {value}." sentences with the question "What is the {attr} of project {P}?",
  and "What does this Python function return for f(8)?" with the function in a ```python
  block, run by a small interpreter over Python's ``ast`` (a whitelist: anything else is not
  answerable);
- tool prompts "Use the {name} tool with {k} set to {v} and {k2} set to "{v2}"." when the
  request offers that function: a call in Qwen3.6's native XML markup, the values typed by the
  tool's JSON schema;
- the rows of an answers file (SGLEMU_ANSWERS, one JSON object per line): a prompt equal to a
  row's prompt (both stripped) gets that row's answer or call.

Anything else is not answerable (None): the emulator keeps its code-ish stream. Nothing here is
shared with the measurement engine (plugins/module_utils/sglang_perf): this is a second,
independent reading of the same prompts, so a test can hold the two against each other.
Standard library only.
"""
from __future__ import annotations

import ast
import hashlib
import json
import re
from typing import Any, Dict, List, Tuple

ANSWER_KEYS = ("prompt", "answer", "thinking", "system", "id")
CALL_KEYS = ("prompt", "tools", "call", "thinking", "system", "id")


class AnswersFileError(ValueError):
    """A bad SGLEMU_ANSWERS file (the message names the line)."""


def stable_hash(text: str) -> int:
    return int.from_bytes(hashlib.blake2b(text.encode("utf-8", "replace"),
                                          digest_size=8).digest(), "big")


# ------------------------------------------------------------------------- the reply --------
class Reply:
    """A reply script: a known answer (``value``) or a tool call (``call``: name, arguments)."""

    def __init__(self, kind: str, source: str, value: Any = None,
                 call: Dict[str, Any] | None = None, alternatives: List[Any] | None = None,
                 row_id: str | None = None):
        self.kind = kind  # "answer" | "call"
        self.source = source  # "arithmetic" | "passage" | "code" | "tool" | "file"
        self.value = value
        self.call = call
        self.alternatives = alternatives or []  # other values a wrong reply may give
        self.row_id = row_id

    # what the reply says, right or wrong ------------------------------------------------
    def given(self, wrong: bool, h: int, tools: List[Dict[str, Any]] | None = None) -> Any:
        """The value (answer) or call the reply gives: the right one, or a deterministic wrong
        one (another number; another value of the passage; a wrong argument)."""
        if not wrong:
            return self.call if self.kind == "call" else self.value
        if self.kind == "call":
            return wrong_call(self.call, h, tools)
        return wrong_value(self.value, h, self.alternatives)

    def text(self, given: Any) -> str:
        """The reply's text: "The answer is 46." for a number, "Dundee." for a text answer, the
        call markup for a call."""
        return "".join(t for t, _ in self.segments(given))

    def segments(self, given: Any) -> List[Tuple[str, bool]]:
        """The reply's text in parts, each marked essential (the value, the call markup) or
        not (the words around a value, which FAULT_DRIFT_FROM_TOKEN may reword)."""
        if self.kind == "call":
            return [(call_markup(given), True)]
        return answer_segments(given)

    def as_dict(self) -> Dict[str, Any]:
        return {"kind": self.kind, "source": self.source, "id": self.row_id,
                "expected": self.call if self.kind == "call" else self.value}


def _number_text(value: Any) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


_WHOLE_NUMBER = re.compile(r"^-?\d[\d,]*(?:\.\d+)?$")


def answer_segments(value: Any) -> List[Tuple[str, bool]]:
    if is_number(value) or (isinstance(value, str) and _WHOLE_NUMBER.match(value.strip())):
        text = _number_text(value).strip() if is_number(value) else value.strip()
        return [("The answer is", False), (" " + text, True), (".", False)]
    text = str(value).strip()
    return [(text, True)] if text.endswith((".", "!", "?")) else [(text, True), (".", False)]


def answer_sentence(value: Any) -> str:
    return "".join(t for t, _ in answer_segments(value))


# FAULT_DRIFT_FROM_TOKEN: the other wording of the pieces around a value
REWORD = {"The": "Our", " answer": " result", " is": " was", ".": "!"}


def reword(piece: str) -> str:
    return REWORD.get(piece, " so" if piece.startswith(" ") else "So")


def wrong_value(value: Any, h: int, alternatives: List[Any]) -> Any:
    others = [a for a in alternatives if str(a).strip().lower() != str(value).strip().lower()]
    if others:
        return others[h % len(others)]
    if is_number(value):
        return value + 1 + h % 7
    text = str(value).strip()
    if _WHOLE_NUMBER.match(text):
        number = float(text.replace(",", ""))
        number = int(number) if number.is_integer() else number
        return number + 1 + h % 7
    return "I do not know"


def _schema_type(tools: List[Dict[str, Any]] | None, name: str, key: str) -> str | None:
    for tool in tools or []:
        fn = (tool or {}).get("function") or {}
        if fn.get("name") == name:
            prop = ((fn.get("parameters") or {}).get("properties") or {}).get(key) or {}
            t = prop.get("type")
            if isinstance(t, list):
                t = next((x for x in t if x != "null"), None)
            return t if isinstance(t, str) else None
    return None


def _enum(tools, name, key):
    for tool in tools or []:
        fn = (tool or {}).get("function") or {}
        if fn.get("name") == name:
            prop = ((fn.get("parameters") or {}).get("properties") or {}).get(key) or {}
            return prop.get("enum") if isinstance(prop.get("enum"), list) else None
    return None


def wrong_call(call: Dict[str, Any], h: int, tools: List[Dict[str, Any]] | None) -> Dict[str, Any]:
    """The same call with one argument (chosen by ``h``) given a wrong value."""
    args = dict(call.get("arguments") or {})
    if not args:
        return {"name": call["name"], "arguments": {"unexpected": True}}
    keys = list(args)
    key = keys[h % len(keys)]
    value = args[key]
    enum = _enum(tools, call["name"], key)
    if isinstance(value, bool):
        args[key] = not value
    elif is_number(value):
        args[key] = value + 1 + (h >> 8) % 7
    elif enum and len(enum) > 1:
        args[key] = [e for e in enum if e != value][(h >> 8) % (len(enum) - 1)]
    else:
        args[key] = "unknown" if str(value) != "unknown" else "none"
    return {"name": call["name"], "arguments": args}


def markup_value(value: Any) -> str:
    """A parameter value as Qwen3.6 writes it inside <parameter=...>."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, (dict, list)):
        return json.dumps(value, ensure_ascii=False)
    return _number_text(value) if is_number(value) else str(value)


def call_markup(call: Dict[str, Any]) -> str:
    """Qwen3.6's native tool-call markup (its chat template's tool-call format, what SGLang's
    qwen3_coder detector and vLLM's qwen3_coder / qwen3_xml parsers read)."""
    lines = ["<tool_call>", "<function=%s>" % call["name"]]
    for key, value in (call.get("arguments") or {}).items():
        lines += ["<parameter=%s>" % key, markup_value(value), "</parameter>"]
    lines += ["</function>", "</tool_call>"]
    return "\n".join(lines)


# ------------------------------------------------------------------- arithmetic prompts -----
_N = r"(\d+)"
_STOCK = re.compile(r"At opening it holds %s \w+\. A delivery brings %s cartons of %s \w+ each, "
                    r"and during the day %s \w+ are sold\. How many" % (_N, _N, _N, _N))
_SHARE = re.compile(r"has %s (\w+) and shares them equally among %s \w+\. Each of the \w+ then "
                    r"gets %s more \w+\. How many" % (_N, _N, _N))
_TRAIN = re.compile(r"runs at %s km per hour for %s hours, then at %s km per hour for %s hours\. "
                    r"How many kilometres" % (_N, _N, _N, _N))


def solve_arithmetic(prompt: str) -> Reply | None:
    m = _STOCK.search(prompt)
    if m:
        held, cartons, each, sold = (int(x) for x in m.groups())
        return Reply("answer", "arithmetic", held + cartons * each - sold)
    m = _SHARE.search(prompt)
    if m:
        total, divisor, more = int(m.group(1)), int(m.group(3)), int(m.group(4))
        if divisor and total % divisor == 0:
            return Reply("answer", "arithmetic", total // divisor + more)
    m = _TRAIN.search(prompt)
    if m:
        v1, h1, v2, h2 = (int(x) for x in m.groups())
        return Reply("answer", "arithmetic", v1 * h1 + v2 * h2)
    return None


# --------------------------------------------------------------------- passage prompts ------
_FACT = re.compile(r"The ([a-z][a-z ]*?) of project ([A-Z][A-Za-z]*) is ([^.]+)\.")
_QUESTION = re.compile(r"What is the ([a-z][a-z ]*?) of project ([A-Z][A-Za-z]*)\?")


def solve_passage(prompt: str) -> Reply | None:
    q = _QUESTION.search(prompt)
    if not q:
        return None
    attr, project = q.group(1), q.group(2)
    facts = [(a, p, v.strip()) for a, p, v in _FACT.findall(prompt[:q.start()])]
    found = [v for a, p, v in facts if a == attr and p == project]
    if len(found) != 1:
        return None
    others = [v for a, p, v in facts if a == attr and p != project]
    return Reply("answer", "passage", found[0], alternatives=others)


# ------------------------------------------------------------------------ code prompts ------
_CODE_ASK = re.compile(r"What does this Python function return for (.+?)\?\s*```python\n(.*?)```",
                       re.DOTALL)
MAX_OPS = 200000
MAX_DEPTH = 50


class NotAnswerable(Exception):
    pass


class _Return(Exception):
    def __init__(self, value):
        super().__init__()
        self.value = value


class Interpreter:
    """Runs a whitelisted subset of Python (README "Answering"): FunctionDef, Assign to a name,
    For over range(...) or a list, If, Compare, BinOp (+ - * // %), unary minus, Return, Name,
    Constant (int), List, Call of range or of a function defined in the block. Anything else
    raises NotAnswerable; so do a step budget overrun, deep recursion and division by zero."""

    _BINOPS = {ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b,
               ast.Mult: lambda a, b: a * b, ast.FloorDiv: lambda a, b: a // b,
               ast.Mod: lambda a, b: a % b}
    _CMPOPS = {ast.Eq: lambda a, b: a == b, ast.NotEq: lambda a, b: a != b,
               ast.Lt: lambda a, b: a < b, ast.LtE: lambda a, b: a <= b,
               ast.Gt: lambda a, b: a > b, ast.GtE: lambda a, b: a >= b}

    def __init__(self, source: str):
        try:
            tree = ast.parse(source)
        except SyntaxError:
            raise NotAnswerable("syntax") from None
        self.functions: Dict[str, ast.FunctionDef] = {}
        for node in tree.body:
            if not isinstance(node, ast.FunctionDef) or node.decorator_list or node.returns:
                raise NotAnswerable("only function definitions at the top")
            a = node.args
            if a.vararg or a.kwarg or a.kwonlyargs or a.defaults or a.kw_defaults \
                    or getattr(a, "posonlyargs", []):
                raise NotAnswerable("plain positional parameters only")
            self.functions[node.name] = node
        self.ops = 0
        self.depth = 0

    def _tick(self):
        self.ops += 1
        if self.ops > MAX_OPS:
            raise NotAnswerable("too many steps")

    def call(self, name: str, args: List[Any]) -> Any:
        fn = self.functions.get(name)
        if fn is None or len(args) != len(fn.args.args):
            raise NotAnswerable("unknown function or wrong arity")
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise NotAnswerable("recursion too deep")
        env = {p.arg: v for p, v in zip(fn.args.args, args)}
        try:
            self.block(fn.body, env)
        except _Return as r:
            return r.value
        finally:
            self.depth -= 1
        return None

    def block(self, body: List[ast.stmt], env: Dict[str, Any]) -> None:
        for stmt in body:
            self.stmt(stmt, env)

    def stmt(self, node: ast.stmt, env: Dict[str, Any]) -> None:
        self._tick()
        if isinstance(node, ast.Assign):
            if len(node.targets) != 1 or not isinstance(node.targets[0], ast.Name):
                raise NotAnswerable("assignment to a name only")
            env[node.targets[0].id] = self.expr(node.value, env)
        elif isinstance(node, ast.For):
            if not isinstance(node.target, ast.Name) or node.orelse:
                raise NotAnswerable("for over a name, no else")
            seq = self.expr(node.iter, env)
            if not isinstance(seq, (list, range)):
                raise NotAnswerable("for over range() or a list only")
            for item in seq:
                self._tick()
                env[node.target.id] = item
                self.block(node.body, env)
        elif isinstance(node, ast.If):
            if self.expr(node.test, env):
                self.block(node.body, env)
            else:
                self.block(node.orelse, env)
        elif isinstance(node, ast.Return):
            raise _Return(None if node.value is None else self.expr(node.value, env))
        else:
            raise NotAnswerable(type(node).__name__)

    def expr(self, node: ast.expr, env: Dict[str, Any]) -> Any:
        self._tick()
        if isinstance(node, ast.Constant):
            if isinstance(node.value, bool) or not isinstance(node.value, int):
                raise NotAnswerable("integer constants only")
            return node.value
        if isinstance(node, ast.Name):
            if node.id not in env:
                raise NotAnswerable("unbound name")
            return env[node.id]
        if isinstance(node, ast.List):
            return [self.expr(e, env) for e in node.elts]
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return -self._int(self.expr(node.operand, env))
        if isinstance(node, ast.BinOp) and type(node.op) in self._BINOPS:
            a, b = self._int(self.expr(node.left, env)), self._int(self.expr(node.right, env))
            if isinstance(node.op, (ast.FloorDiv, ast.Mod)) and b == 0:
                raise NotAnswerable("division by zero")
            if isinstance(node.op, ast.Mult) and abs(a) * abs(b) > 10 ** 30:
                raise NotAnswerable("too large")
            return self._BINOPS[type(node.op)](a, b)
        if isinstance(node, ast.Compare):
            left = self.expr(node.left, env)
            for op, right_node in zip(node.ops, node.comparators):
                if type(op) not in self._CMPOPS:
                    raise NotAnswerable("comparison")
                right = self.expr(right_node, env)
                if not self._CMPOPS[type(op)](self._int(left), self._int(right)):
                    return False
                left = right
            return True
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and not node.keywords:
            args = [self.expr(a, env) for a in node.args]
            if node.func.id == "range":
                if not 1 <= len(args) <= 3:
                    raise NotAnswerable("range arity")
                r = range(*[self._int(a) for a in args])
                if len(r) > MAX_OPS:
                    raise NotAnswerable("range too long")
                return r
            return self.call(node.func.id, args)
        raise NotAnswerable(type(node).__name__)

    @staticmethod
    def _int(value: Any) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise NotAnswerable("integers only")
        return value


def _literal(node: ast.expr) -> Any:
    if isinstance(node, ast.Constant) and isinstance(node.value, int) \
            and not isinstance(node.value, bool):
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return -_literal(node.operand)
    if isinstance(node, ast.List):
        return [_literal(e) for e in node.elts]
    raise NotAnswerable("call arguments must be integers or lists of them")


def run_code(source: str, call: str) -> int:
    """The value ``call`` (e.g. "f(8)", "g([3, 4])") returns for the functions in ``source``."""
    try:
        expr = ast.parse(call.strip(), mode="eval").body
    except SyntaxError:
        raise NotAnswerable("call syntax") from None
    if not isinstance(expr, ast.Call) or not isinstance(expr.func, ast.Name) or expr.keywords:
        raise NotAnswerable("a call of one function")
    interp = Interpreter(source)
    result = interp.call(expr.func.id, [_literal(a) for a in expr.args])
    if isinstance(result, bool) or not isinstance(result, int):
        raise NotAnswerable("the function returns no integer")
    return result


def solve_code(prompt: str) -> Reply | None:
    m = _CODE_ASK.search(prompt)
    if not m:
        return None
    try:
        return Reply("answer", "code", run_code(m.group(2), m.group(1)))
    except (NotAnswerable, RecursionError, MemoryError):
        return None


# ------------------------------------------------------------------------ tool prompts ------
_TOOL_ASK = re.compile(r"Use the ([A-Za-z_][\w.-]*) tool with (.+?)\.?\s*$", re.DOTALL)
_SETTING = re.compile(r'(\w+) set to (?:"((?:[^"\\]|\\.)*)"|(.+?))(?= and \w+ set to |$)')


def typed(value: str, schema_type: str | None, quoted: bool) -> Any:
    """A value the prompt states, as the tool's JSON schema types it."""
    if quoted or schema_type in (None, "string"):
        return value
    if schema_type == "integer":
        return int(value)
    if schema_type == "number":
        number = float(value)
        return int(number) if number.is_integer() and "." not in value else number
    if schema_type == "boolean":
        if value.lower() not in ("true", "false"):
            raise ValueError(value)
        return value.lower() == "true"
    if schema_type in ("object", "array"):
        return json.loads(value)
    return value


def solve_tool(prompt: str, tools: List[Dict[str, Any]] | None) -> Reply | None:
    m = _TOOL_ASK.search(prompt.strip())
    if not m or not tools:
        return None
    name = m.group(1)
    if not any(((t or {}).get("function") or {}).get("name") == name for t in tools
               if isinstance(t, dict)):
        return None
    args: Dict[str, Any] = {}
    rest = m.group(2)
    pos = 0
    for s in _SETTING.finditer(rest):
        if rest[pos:s.start()].strip() not in ("", "and"):
            return None
        key = s.group(1)
        quoted = s.group(2) is not None
        raw = s.group(2) if quoted else s.group(3).strip()
        if quoted:
            raw = raw.replace('\\"', '"').replace("\\\\", "\\")
        try:
            args[key] = typed(raw, _schema_type(tools, name, key), quoted)
        except ValueError:
            return None
        pos = s.end()
    if not args or rest[pos:].strip():
        return None
    return Reply("call", "tool", call={"name": name, "arguments": args})


# ------------------------------------------------------------------------ answers file ------
def _row_problems(row: Any) -> List[str]:
    if not isinstance(row, dict):
        return ["must be a JSON object, got %s" % type(row).__name__]
    problems = []
    keys = CALL_KEYS if "call" in row else ANSWER_KEYS
    unknown = sorted(set(row) - set(keys))
    if unknown:
        problems.append("unknown key(s) %s" % ", ".join(unknown))
    if not isinstance(row.get("prompt"), str) or not row["prompt"].strip():
        problems.append("prompt must be a non-empty string")
    if "call" in row:
        call = row["call"]
        if not isinstance(call, dict) or not isinstance(call.get("name"), str) \
                or not isinstance(call.get("arguments"), dict):
            problems.append('call must be {"name": str, "arguments": {...}}')
        tools = row.get("tools")
        if not isinstance(tools, list) or not tools or not all(
                isinstance(t, dict) and isinstance((t.get("function") or {}).get("name"), str)
                for t in tools):
            problems.append("tools must be a non-empty list of OpenAI tool objects")
    else:
        answer = row.get("answer")
        if not (is_number(answer) or (isinstance(answer, str) and answer.strip())):
            problems.append("answer must be a number or a non-empty string")
    return problems


def parse_answers(text: str) -> Dict[str, Dict[str, Any]]:
    """An answers file's rows, by stripped prompt. AnswersFileError names the first bad line."""
    rows: Dict[str, Dict[str, Any]] = {}
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except ValueError as exc:
            raise AnswersFileError("line %d is not JSON (%s)" % (number, exc)) from None
        problems = _row_problems(row)
        if problems:
            raise AnswersFileError("line %d: %s" % (number, "; ".join(problems)))
        rows[row["prompt"].strip()] = dict(row, id=str(row.get("id") or "line-%d" % number))
    if not rows:
        raise AnswersFileError("holds no row (one JSON object per line: {\"prompt\", \"answer\"} "
                               "or {\"prompt\", \"tools\", \"call\"})")
    return rows


def load_answers(path: str) -> Dict[str, Dict[str, Any]]:
    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
    except OSError as exc:
        raise AnswersFileError("cannot be read (%s)" % exc.strerror) from None
    except UnicodeDecodeError as exc:
        raise AnswersFileError("is not UTF-8 (%s)" % exc) from None
    return parse_answers(text)


# -------------------------------------------------------------------------------- mind ------
# ------------------------------------------------------------- notes in a long prompt --------
# The measurement engine's long-context prompts plant reviewer notes at several depths and ask
# the reply to begin with them; a model that read the whole prompt repeats each as written.
_NOTE = re.compile(r"REVIEWER NOTE: (the [^\n]*?\.)(?=\n|$)")
_NOTES_ASK = "Begin your reply with the reviewer notes"


def solve_notes(prompt: str) -> Reply | None:
    if _NOTES_ASK not in prompt:
        return None
    notes = _NOTE.findall(prompt)
    if not notes:
        return None
    return Reply("answer", "notes", "\n".join(n[0].upper() + n[1:] for n in notes))


class Mind:
    """Reads prompts and decides replies; ``rows``: an answers file's rows (parse_answers)."""

    def __init__(self, rows: Dict[str, Dict[str, Any]] | None = None):
        self.rows = rows or {}

    def reply(self, prompt: str, tools: List[Dict[str, Any]] | None = None) -> Reply | None:
        if not isinstance(prompt, str) or not prompt.strip():
            return None
        row = self.rows.get(prompt.strip())
        if row is not None:
            if "call" in row:
                return Reply("call", "file", call={"name": row["call"]["name"],
                                                   "arguments": dict(row["call"]["arguments"])},
                             row_id=row["id"])
            return Reply("answer", "file", row["answer"], row_id=row["id"])
        tools = [t for t in tools or [] if isinstance(t, dict)]
        for solve in (solve_notes, solve_arithmetic, solve_passage, solve_code):
            reply = solve(prompt)
            if reply is not None:
                return reply
        return solve_tool(prompt, tools)


def last_user_text(messages: List[Any]) -> str | None:
    """The last user message's text (content parts joined), or None."""
    for m in reversed(messages or []):
        if isinstance(m, dict) and m.get("role") == "user":
            content = m.get("content")
            if isinstance(content, list):
                content = "".join(p.get("text", "") for p in content
                                  if isinstance(p, dict) and isinstance(p.get("text"), str))
            return content if isinstance(content, str) else None
    return None


# pieces: the reply's text cut the way the vocabulary is (about a word a token, a word's
# leading space kept with it; tags, newlines and punctuation tokens of their own)
_PIECE = re.compile(r"</?tool_call>|<function=[^>\n]*>|</function>|<parameter=[^>\n]*>|"
                    r"</parameter>|\n+| ?[A-Za-z_]+| ?\d+| ?[^\sA-Za-z_\d]| +|\s|.", re.DOTALL)


def pieces(text: str) -> List[str]:
    out = _PIECE.findall(text)
    assert "".join(out) == text, text
    return out
