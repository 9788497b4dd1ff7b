# -*- coding: utf-8 -*-
"""The prompt set the benchmark sends: realistic coding tasks, like the seeds' "implement a
red-black tree". Each asks for a long, complete answer (implementation, tests, explanation) so a
thinking model produces well over 1024 tokens on its own; the engine still sets ``ignore_eos`` and
checks every request produced the tokens it asked for.

Shipped as Python so AnsiballZ carries it to the target host with the engine.
"""
from __future__ import annotations

_ASK = (
    " Think it through first, then write the complete code in one file with type hints and "
    "docstrings, a pytest test module that covers the edge cases, and a short explanation of the "
    "time and space complexity of every operation and of the design choices you made."
)

CODING_PROMPTS = (
    ("red_black_tree",
     "Write a Python module that implements a red-black tree with insert, delete, search, "
     "in-order iteration, floor/ceiling queries and a validate() method that checks all five "
     "red-black invariants. Deletion must handle every rebalancing case explicitly." + _ASK),
    ("lru_cache",
     "Implement a thread-safe LRU cache in Python with a maximum size and an optional time-to-live "
     "per entry, O(1) get and put using a hash map and a doubly linked list you write yourself, "
     "hit/miss statistics, and a decorator form like functools.lru_cache that supports methods." + _ASK),
    ("rate_limiter",
     "Design and implement an asyncio HTTP middleware for aiohttp that enforces per-client rate "
     "limits with a token bucket and a sliding-window log, configurable per route, returning 429 "
     "with a Retry-After header, and a Redis-backed variant that stays correct across processes." + _ASK),
    ("dijkstra_astar",
     "Implement Dijkstra's algorithm and A* for a weighted grid with obstacles and diagonal moves "
     "in Python, with a binary heap you write yourself (decrease-key by lazy deletion), path "
     "reconstruction, an admissible octile heuristic, and a benchmark that compares both." + _ASK),
    ("json_parser",
     "Write a recursive-descent JSON parser in Python without using the json module: a tokenizer "
     "with line and column tracking, full string escapes including surrogate pairs, numbers per "
     "RFC 8259, precise error messages, and a pretty-printer that round-trips the parsed value." + _ASK),
    ("trie_autocomplete",
     "Implement a compressed trie (radix tree) in Python for an autocomplete service: insert, "
     "delete with node merging, prefix search returning the top-k completions by frequency, "
     "fuzzy matching within edit distance one, and serialisation to and from a compact byte format." + _ASK),
    ("sql_builder",
     "Write a small SQL query builder in Python with a fluent API for SELECT, JOIN, WHERE with "
     "nested AND/OR groups, GROUP BY, HAVING, ORDER BY and LIMIT, that produces parameterised "
     "queries for SQLite and PostgreSQL dialects and refuses unsafe identifiers." + _ASK),
    ("async_crawler",
     "Implement an asynchronous web crawler in Python with asyncio and aiohttp that respects "
     "robots.txt, limits concurrency per host, deduplicates URLs after normalisation, retries with "
     "exponential backoff and jitter, and writes results incrementally to SQLite." + _ASK),
)

_LONG_HEAD = (
    "Below is a Python module from our code base. Review it as a senior engineer: find the bugs, "
    "explain each one, then rewrite the whole module with the fixes, better names and tests."
    "\n\n```python\n"
)
_LONG_TAIL = "```\n" + _ASK


def _long_body(approx_tokens):
    """Deterministic, code-like text of roughly ``approx_tokens`` tokens (about 4 chars/token)."""
    parts = []
    size = 0
    i = 0
    target = int(approx_tokens) * 4
    while size < target:
        chunk = (
            "def handler_%d(request, store, retries=3):\n"
            "    \"\"\"Load record %d, merge the request's fields and save it back.\"\"\"\n"
            "    record = store.get(request['id_%d']) or {}\n"
            "    for key, value in request.items():\n"
            "        if key.startswith('x_%d') and value is not None:\n"
            "            record[key] = value if retries > 0 else record.get(key)\n"
            "    store.put(request['id_%d'], record)\n"
            "    return record\n\n" % (i, i, i, i % 7, i)
        )
        parts.append(chunk)
        size += len(chunk)
        i += 1
    return "".join(parts)


def prompt_cases(long_context_tokens=0):
    """The ordered list of (case name, prompt text) that requests cycle through.

    With ``long_context_tokens`` > 0 a code-review case with a prompt of about that many tokens is
    added, so a gate also sees speculative acceptance at long context (it falls with context
    length; report it per case).
    """
    cases = list(CODING_PROMPTS)
    if long_context_tokens and long_context_tokens > 0:
        cases.append(("long_context_review",
                      _LONG_HEAD + _long_body(long_context_tokens) + _LONG_TAIL))
    return cases
