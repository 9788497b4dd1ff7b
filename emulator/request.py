"""One request inside the emulated engine, and the text it generates.

Req carries a request's state (tokens produced, verify steps, timestamps, faults) and derives
its output token by token (vocab_index): thinking pieces, the reply script (answers.py), then
a deterministic code-ish sequence that is a function of the prompt alone. The vocabulary (word
pieces with fake token ids, reply pieces interned on first use) and the prose test of a prompt
(is_prose, which decides whether SGLEMU_PROSE_ACCEPT_FACTOR applies) live here with it.
"""
from __future__ import annotations

import asyncio
import hashlib
import json
import random
import re
import time
from typing import Any, Dict, List

# ---------------------------------------------------------------------------------------------
# Deterministic pseudo code-ish output: vocabulary of short word pieces with fake token ids.
# ---------------------------------------------------------------------------------------------
THINK_START, THINK_END, EOS = 0, 1, 2
EOS_TOKEN_ID = 248046  # <|im_end|> in the Qwen3.5 / 3.6 vocabulary
_SPECIAL = [("<think>\n", 248068), ("\n</think>\n\n", 248069), ("", EOS_TOKEN_ID)]
_CODE_PIECES = [
    " def", " return", " self", " if", " else", " for", " in", " range", " import", " from",
    " None", " True", " False", " data", " value", " result", " item", " key", " index",
    " count", " total", " =", " ==", " +", " -", " *", " (", ")", "(", ":", ",", ".", "[", "]",
    "\n", "\n    ", "\n        ", " x", " y", " i", " n", "_id", "_list", "_map", "get", "set",
    "append", "len", " 0", " 1", " 2", " and", " or", " not", " while", " class", " async",
    " await", " yield", " with", " as", " lambda", " assert", "_cache", "_size", " buf",
]
_THINK_PIECES = [
    " We", " need", " to", " check", " the", " input", " first", ".", " Then", " handle",
    " edge", " cases", ",", " like", " empty", " lists", " and", " large", " values", " so",
    " the", " loop", " stays", " simple", " Let", " me", " think", " about", " it", " again",
    "\n", " Okay", " this", " works",
]
VOCAB: List[str] = [s for s, _ in _SPECIAL] + _CODE_PIECES + _THINK_PIECES
TOKEN_IDS: List[int] = [i for _, i in _SPECIAL] + [1000 + 37 * i for i in range(
    len(_CODE_PIECES) + len(_THINK_PIECES))]
_N_CODE = len(_CODE_PIECES)
_CODE0 = len(_SPECIAL)
_THINK0 = _CODE0 + _N_CODE
SEQ_LEN = 8192
# managers/schedule_policy.py CLIP_MAX_NEW_TOKENS (SGLANG_CLIP_MAX_NEW_TOKENS_ESTIMATION): the
# part of max_new_tokens PrefillAdder reserves in the KV pool at admission.
CLIP_MAX_NEW_TOKENS = 4096


def _json_escape(s: str) -> str:
    return s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


VOCAB_ESC: List[str] = [_json_escape(s) for s in VOCAB]
TOKEN_IDS_STR: List[str] = [str(i) for i in TOKEN_IDS]


def stable_hash(text: str) -> int:
    return int.from_bytes(hashlib.blake2b(text.encode("utf-8", "replace"),
                                          digest_size=8).digest(), "big")


# Reply pieces (answers.py: a word or a tag a token) join the vocabulary when first met, with a
# token id derived from their text (the same on every start); the tags have Qwen3.6's ids.
_PIECE_INDEX: Dict[str, int] = {s: i for i, s in enumerate(VOCAB) if i >= len(_SPECIAL)}
_PIECE_IDS = {"<think>": 248068, "</think>": 248069, "<tool_call>": 248058,
              "</tool_call>": 248059}


def intern_piece(text: str) -> int:
    """The vocabulary index of a reply piece (added on first use)."""
    i = _PIECE_INDEX.get(text)
    if i is None:
        i = len(VOCAB)
        tid = _PIECE_IDS.get(text, 160000 + stable_hash(text) % 80000)
        VOCAB.append(text)
        VOCAB_ESC.append(json.dumps(text, ensure_ascii=False)[1:-1])
        TOKEN_IDS.append(tid)
        TOKEN_IDS_STR.append(str(tid))
        _PIECE_INDEX[text] = i
    return i


# The chat template's thinking (Qwen3.6: "<think>\n" ends the prompt unless enable_thinking is
# false): the output is thinking, "\n", the "</think>" token, "\n\n", then the reply.
CHAT_THINK_END = intern_piece("</think>")
NEWLINE = intern_piece("\n")
BLANK_LINE = intern_piece("\n\n")
# code-ish pieces with no digit (a garbled reply must not give a number by chance)
_NOISE = [i for i, piece in enumerate(_CODE_PIECES) if not any(c.isdigit() for c in piece)]


def _build_seq(seed: int) -> List[int]:
    rng = random.Random(seed * 7919 + 17)
    return [rng.randrange(_N_CODE) for _ in range(SEQ_LEN)]


# The output text is a function of the prompt alone (greedy decoding): the same sequence on every
# start, whatever SGLEMU_SEED (which draws acceptance and clock jitter only).
_SEQ: List[int] = _build_seq(0)
# FAULT_DRIFT_FROM_TOKEN's other greedy sequence
_SEQ_DRIFT: List[int] = _build_seq(1)


class Req:
    """One generation request inside the emulated engine."""

    __slots__ = (
        "rid", "endpoint", "health", "warmup", "exempt", "stream", "prompt_tokens", "max_tokens",
        "ignore_eos", "eos_at", "limit", "think_len", "offset", "produced", "verify_ct",
        "correct", "hist", "probs", "t_arrival", "t_admit", "t_first", "t_last", "t_finish",
        "finish", "fault", "stall_until", "stall_done", "counted", "sink", "done",
        "backlog", "waiter", "closed", "log_metrics", "index", "reasoning", "extra",
        "collapsed", "prose", "think_probs", "chat_think", "count_reasoning", "script",
        "script_at", "script_alt", "reply", "wrong", "corrupt", "drift_from",
    )

    def __init__(self, rid: str, endpoint: str, prompt_tokens: int, max_tokens: int,
                 ignore_eos: bool, prompt_key: str, stream: bool, reasoning: bool,
                 health: bool = False):
        self.rid = rid
        self.endpoint = endpoint
        self.health = health
        self.warmup = False
        self.exempt = False
        self.stream = stream
        self.prompt_tokens = max(1, int(prompt_tokens))
        self.max_tokens = max(1, int(max_tokens))
        self.ignore_eos = ignore_eos
        self.reasoning = reasoning
        h = stable_hash(prompt_key)
        self.prose = not health and is_prose(prompt_key)
        self.offset = h % SEQ_LEN
        # Emulated EOS: 2 of 3 prompts stop between 40% and 100% of max tokens.
        self.eos_at: int | None = None
        if not ignore_eos and not health and (h >> 20) % 3 != 0:
            frac = 0.4 + 0.6 * (((h >> 32) % 10007) / 10006.0)
            self.eos_at = max(1, min(self.max_tokens, int(round(self.max_tokens * frac))))
        self.limit = self.max_tokens if self.eos_at is None else self.eos_at
        self.think_len = 0
        self.produced = 0
        self.verify_ct = 0
        self.correct = 0
        self.hist: List[int] = []
        self.probs: List[float] = []
        self.think_probs: List[float] = []
        self.t_arrival = time.monotonic()
        self.t_admit: float | None = None
        self.t_first: float | None = None
        self.t_last: float | None = None
        self.t_finish: float | None = None
        self.finish: Dict[str, Any] | None = None
        self.fault: str | None = None
        self.stall_until = 0.0
        self.stall_done = False
        self.counted = False
        self.sink: Any = None
        self.done: asyncio.Future | None = None
        self.backlog: List[bytes] | None = None
        self.waiter: asyncio.Future | None = None
        self.closed = False
        self.log_metrics = not health
        self.index = -1
        self.extra: Dict[str, Any] = {}
        self.collapsed = False
        # chat: the template's thinking layout (no <think> in the output, README "Answering")
        self.chat_think = False
        # whether usage reports reasoning tokens (SGLang counts them under a reasoning parser)
        self.count_reasoning = reasoning
        # the reply script (answers.py): vocabulary indexes, where it starts, the Reply behind it
        self.script: List[int] | None = None
        self.script_alt: List[int | None] = []  # FAULT_DRIFT_FROM_TOKEN's rewording (None: kept)
        self.script_at = 0
        self.reply: Any = None
        self.wrong = False  # FAULT_WRONG_ANSWERS picked this prompt
        self.corrupt = False  # FAULT_CORRUPT_ABOVE_KV hit this request before its reply began
        self.drift_from = 0  # FAULT_DRIFT_FROM_TOKEN at submission (0: off)

    def kv_reserved(self) -> int:
        """KV tokens the scheduler counts as taken by this request (PrefillAdder: the prompt,
        what it produced, and the rest of max_new_tokens clipped at CLIP_MAX_NEW_TOKENS)."""
        return (self.prompt_tokens + self.produced
                + min(max(0, self.max_tokens - self.produced), CLIP_MAX_NEW_TOKENS))

    # -- output text -------------------------------------------------------------------------
    def set_script(self, indexes: List[int], alt: List[int | None] | None = None) -> None:
        """Answer with these pieces after the thinking (Scheduler.submit places them); ``alt``:
        each piece's other wording under FAULT_DRIFT_FROM_TOKEN, None for the essential ones
        (the value, the call markup), which a drift leaves as they are."""
        self.script = list(indexes)
        self.script_alt = list(alt) if alt is not None else [None] * len(self.script)

    def place_script(self) -> None:
        """After think_len is known: the script's first position, and the emulated EOS right
        after it (unless ignore_eos: the code-ish stream goes on to max tokens)."""
        if self.script is None:
            return
        self.script_at = self.think_len + (1 if self.chat_think and self.think_len else 0)
        end = self.script_at + len(self.script) + 1  # + the EOS token
        if self.ignore_eos or end > self.max_tokens:
            self.eos_at = None
            self.limit = self.max_tokens
        else:
            self.eos_at = self.limit = end

    def script_done(self) -> bool:
        return self.script is not None and self.produced >= self.script_at + len(self.script)

    def vocab_index(self, pos: int) -> int:
        if pos == self.limit - 1 and self.eos_at is not None and self.eos_at == self.limit:
            return EOS
        drift = bool(self.drift_from) and pos >= self.drift_from
        tl = self.think_len
        if tl:
            if self.chat_think:
                if pos == tl - 1:
                    return CHAT_THINK_END
                if pos == tl - 2:
                    return NEWLINE
                if pos == tl:
                    return BLANK_LINE
            else:
                if pos == 0:
                    return THINK_START
                if pos == tl - 1:
                    return THINK_END
            if pos < tl:
                i = (self.offset + pos) % len(_THINK_PIECES)
                if drift:
                    j = (self.offset + 3 * pos + 11) % len(_THINK_PIECES)
                    i = j if _THINK_PIECES[j] != _THINK_PIECES[i] else (i + 1) % len(_THINK_PIECES)
                return _THINK0 + i
        script = self.script
        if script is not None:
            k = pos - self.script_at
            if 0 <= k < len(script):
                if self.corrupt:
                    return _CODE0 + _NOISE[(_SEQ_DRIFT[(self.offset + pos) % SEQ_LEN]) % len(_NOISE)]
                if drift and self.script_alt[k] is not None:
                    return self.script_alt[k]
                return script[k]
        i = _SEQ[(self.offset + pos) % SEQ_LEN]
        if drift:
            j = _SEQ_DRIFT[(self.offset + pos) % SEQ_LEN]
            i = j if j != i else (i + 1) % _N_CODE
        return _CODE0 + i

    def reasoning_tokens(self, upto: int | None = None) -> int:
        if not self.count_reasoning:
            return 0
        n = self.produced if upto is None else upto
        return min(n, self.think_len)

    def to_stats(self) -> Dict[str, Any]:
        decode = None
        if self.t_first is not None and self.t_last is not None and self.produced > 1 \
                and self.t_last > self.t_first:
            decode = (self.produced - 1) / (self.t_last - self.t_first)
        fr = self.finish["type"] if self.finish else None
        return {
            "rid": self.rid, "endpoint": self.endpoint, "health": self.health,
            "warmup": self.warmup, "fault_exempt": self.exempt, "stream": self.stream,
            "prompt_tokens": self.prompt_tokens, "max_tokens": self.max_tokens,
            "ignore_eos": self.ignore_eos, "completion_tokens": self.produced,
            "reasoning_tokens": self.reasoning_tokens(), "verify_ct": self.verify_ct,
            "correct_drafts": self.correct,
            "accept_length": (self.produced / self.verify_ct) if self.verify_ct else None,
            "correct_drafts_histogram": list(self.hist),
            "t_arrival": self.t_arrival, "t_admit": self.t_admit, "t_first_token": self.t_first,
            "t_last_token": self.t_last, "t_finish": self.t_finish, "decode_tok_s": decode,
            "finish_reason": fr, "fault": self.fault, "counted_in_metrics": self.counted,
            "longctx_collapsed": self.collapsed,
            "answer": self.answer_stats(),
        }

    def answer_stats(self) -> Dict[str, Any] | None:
        """What the reply script was and whether the reply as generated is right (README
        "Answering"): None for a request with no script."""
        if self.reply is None:
            return None
        info = self.reply.as_dict()
        complete = self.script_done()
        why = None
        if self.corrupt:
            why = "corrupt_above_kv"
        elif self.wrong:
            why = "wrong_answers"
        elif not complete:
            why = "incomplete"
        info.update({"given": self.extra.get("given"), "complete": complete,
                     "right": complete and why is None, "wrong_because": why,
                     "rendered": self.extra.get("rendered")})
        return info


# Words that make a prompt code (any case, whole words): two different ones or more.
CODE_WORDS = frozenset((
    "code", "python", "implement", "function", "class", "module", "algorithm", "sql", "api",
    "pytest", "compile", "json", "http", "parser", "async", "asyncio", "database", "repository",
    "def", "return", "import", "struct", "bug", "bugs", "test", "tests", "query", "queries",
))
# A word: a run of letters with no letter or digit either side, so a request's hex tag
# ("Request 3def9a01-prose-0.") is never read as one ("def").
_WORD = re.compile(r"(?<![a-z0-9_])[a-z_]+(?![a-z0-9_])")


PROSE_MIN_WORDS = 40


def is_prose(text: str) -> bool:
    """Whether a prompt is prose or chat rather than code: at least PROSE_MIN_WORDS words (a
    shorter one is too short to tell, and keeps the coding calibration) and fewer than two
    different CODE_WORDS."""
    words = _WORD.findall(str(text).lower())
    return len(words) >= PROSE_MIN_WORDS and len(CODE_WORDS.intersection(words)) < 2
