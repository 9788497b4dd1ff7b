# -*- coding: utf-8 -*-
"""The prompt set the benchmark sends: realistic coding tasks, like the original notes' "implement a
red-black tree". Each asks for a long, complete answer (implementation, tests, explanation) so a
thinking model produces well over 1024 tokens on its own; the engine still sets ``ignore_eos`` and
checks every request produced the tokens it asked for.

Shipped as Python so AnsiballZ carries it to the target host with the engine.
"""
from __future__ import annotations

import hashlib

from . import corpus

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

# Warmup prompts: never sent as measured prompts, and every measured prompt starts with its own
# request tag, so no measured request finds its prefix in SGLang's radix cache (a cached prefix
# would make the measured prefill, and the time to first token, nearly free).
WARMUP_PROMPTS = (
    "Explain in a few paragraphs how a hash map resolves collisions, then sketch a small "
    "open-addressing implementation in C with linear probing and tombstones.",
    "Summarise the trade-offs between optimistic and pessimistic locking in a relational "
    "database, with one short SQL example of each.",
)

# Prose and chat: what a "70 tok/s before" may have been measured on. The same server decodes
# prose slower than code at the same settings (drafts are accepted less often on prose: the
# club-3090 figures for one Qwen3.6-27B MTP n=3 config, 70.7 tok/s on prose and 93.5 on code), so
# figures from the two are never compared as one.
_PROSE_ASK = (
    " Write it as continuous prose of at least fifteen hundred words, in paragraphs, with no code, "
    "no lists and no headings."
)
PROSE_PROMPTS = (
    ("lighthouse_story",
     "Write a short story about the last keeper of a lighthouse on a northern island in the winter "
     "the light is automated: the supply boat, the letters from the mainland, the storm, and what "
     "he decides to keep when he leaves." + _PROSE_ASK),
    ("city_history",
     "Tell the history of a river port city from its founding as a ford to the present day as a "
     "storyteller would: the floods, the bridges, the trade that made it rich and the trade that "
     "left, and the people whose names the streets still carry." + _PROSE_ASK),
    ("advice_letter",
     "A friend has written to ask whether she should leave a stable job to open a bakery in the "
     "town where she grew up. Answer her in a long, warm and honest letter that weighs what she "
     "would gain and lose, tells a story of your own, and ends with a question for her." + _PROSE_ASK),
    ("travel_essay",
     "Write a travel essay about crossing a mountain range by night train: the station, the other "
     "passengers, the landscape at dawn, the food, and what the journey taught you about time "
     "and distance." + _PROSE_ASK),
    ("science_explainer",
     "Explain to a curious twelve-year-old why the sky is blue, why sunsets are red and why clouds "
     "are white, as a patient teacher talking on a walk, with everyday comparisons and the story "
     "of how people found out." + _PROSE_ASK),
    ("book_review",
     "Review an imagined novel about three generations of a family of boat builders for a literary "
     "magazine: its plot, its characters, its language, what it gets right about work and "
     "inheritance, and where it falls short." + _PROSE_ASK),
    ("debate_speech",
     "Write the speech a student gives in a school debate arguing that every town should keep its "
     "public library open on Sundays, anticipating the other side's objections and answering each "
     "of them." + _PROSE_ASK),
    ("garden_diary",
     "Write a year of a gardener's diary as one flowing essay: the first sowing in March, the slugs, "
     "the drought of July, the harvest, the neighbour's advice, and the quiet of the garden under "
     "the first snow." + _PROSE_ASK),
)

# The prompt sets a case draws from (``prompts``: coding, prose, or long_context, which is built
# from the corpus's documents, corpus.documents(), at the case's prompt_tokens).
PROMPT_SETS = {"coding": CODING_PROMPTS, "prose": PROSE_PROMPTS}
PROMPT_SOURCES = ("coding", "prose", "long_context")

_LONG_HEAD = (
    "Below is a slice of our repository: source files, migrations, configuration and the team's "
    "documents (design records, runbooks, incident reports). Read all of it. Then review it as a "
    "senior engineer: list the bugs and risky spots you find with the file and the reason, say "
    "which documents disagree with the code, and propose the three changes you would make first, "
    "with the code for each."
)
_LONG_TAIL = ("\n\nEnd of the repository slice. Begin your reply with the reviewer notes planted in "
              "it, one per line, as they are written; then start the review." + _ASK)

# Facts planted in every long-context prompt, one at each of these shares of its repository
# slice (its start, middle and end: where long-context recall fails first), each a reviewer note
# the reply must state (the case's min_facts judges how many it did, engine.py facts_stated).
FACT_DEPTHS = (0.1, 0.5, 0.9)
_FACTS = (
    ("release code name", ("Amber Finch", "Cobalt Reed", "Silver Marten", "Juniper Gale", "Ochre Lynx",
                           "Tidal Wren", "Basalt Heron", "Pale Comet", "Copper Otter", "Quiet Delta",
                           "Rust Ibis")),
    ("on-call engineer", ("Hedda Sorensen", "Matteo Ruiz", "Aiko Tanaka", "Kwame Mensah", "Ilona Nowak",
                          "Ravi Menon", "Freya Lund", "Diego Alvarez", "Noor Haddad", "Tobias Krause",
                          "Lena Kovac")),
    ("rollback window", ("14 minutes", "22 minutes", "31 minutes", "9 minutes", "47 minutes", "18 minutes",
                         "26 minutes", "53 minutes", "12 minutes", "38 minutes", "41 minutes")),
)


def long_context_facts(index):
    """The facts planted in long-context prompt ``index``: [(what, value)], one per FACT_DEPTHS,
    the values another combination for each index."""
    return [(what, values[(index * (k + 2) + 3 * k) % len(values)])
            for k, (what, values) in enumerate(_FACTS)]


def fact_note(what, value):
    """One planted fact as the prompt carries it (and as a reply that read it repeats it)."""
    return "REVIEWER NOTE: the %s is %s." % (what, value)

# A budget of characters per token for the long-context prompt until the server's own count is
# known (engine.py learns the real ratio from its warmup requests' usage.prompt_tokens).
DEFAULT_CHARS_PER_TOKEN = 4.0


def tagged(tag, text):
    """``text`` behind a request tag of its own: a prefix no other request shares."""
    return "Request %s.\n\n%s" % (tag, text)


def long_context_prompt(target_tokens, chars_per_token, index, tag):
    """A code-review prompt of about ``target_tokens`` tokens: the repository slice of
    the corpus's documents (corpus.documents()), starting at a different document for each
    ``index`` (and wrapping), the last one cut at a line. Raises ValueError when the corpus is too
    short (corpus.CorpusError when its file cannot be read)."""
    docs = corpus.documents()
    head = tagged(tag, _LONG_HEAD)
    notes = ["\n\n" + fact_note(what, value) for what, value in long_context_facts(index)]
    budget = int(target_tokens * chars_per_token) - len(head) - len(_LONG_TAIL) - sum(map(len, notes))
    total = sum(len(path) + len(text) + 16 for path, text in docs)
    if budget > total:
        raise ValueError("a %d-token prompt needs about %d characters of documents at %.2f "
                         "characters per token; the corpus holds %d (about %d tokens)"
                         % (target_tokens, budget, chars_per_token, total, total / chars_per_token))
    # each note goes in after the document that crosses its depth (a line of its own between files)
    marks = [int(budget * d) for d in FACT_DEPTHS]
    parts, size = [head], 0
    n = len(docs)
    first = (index * 11) % n  # each request's slice starts at another document
    for k in range(n):
        if size >= budget:
            break
        path, text = docs[(first + k) % n]
        block = "\n\n===== %s =====\n%s" % (path, text)
        if len(block) > budget - size:
            cut = block.rfind("\n", 0, budget - size)
            block = block[:cut if cut > 0 else budget - size]
        # a long document is split where a note falls inside it
        while notes and marks[0] < size + len(block):
            at = block.rfind("\n", 0, max(1, marks[0] - size)) if marks[0] > size else 0
            at = max(at, 0)
            parts.append(block[:at])
            parts.append(notes.pop(0))
            size += at
            block = block[at:]
            marks.pop(0)
        parts.append(block)
        size += len(block)
    parts += notes  # a slice shorter than a depth: the rest at its end
    parts.append(_LONG_TAIL)
    return "".join(parts)


def corpus_sample(chars, tag):
    """A warmup prompt of about ``chars`` characters of corpus text, behind its own tag, for
    learning the server's characters per token (engine.warm_up)."""
    text = []
    size = 0
    for _path, body in reversed(corpus.documents()):
        if size >= chars:
            break
        piece = body[:chars - size]
        text.append(piece)
        size += len(piece)
    return tagged(tag, "Summarise these notes in two sentences.\n\n" + "".join(text))


def filler_prompt(target_tokens, chars_per_token, tag):
    """A prompt of about ``target_tokens`` tokens whose only job is to hold KV cache (the
    pressure check): corpus documents in turn, over and over, behind a tag of its own so no
    other request shares its prefix (a shared prefix is cached once and holds nothing more)."""
    budget = int(target_tokens * chars_per_token)
    parts, size, k = [tagged(tag, "Keep these files in mind; a question follows later.\n")], 0, 0
    docs = corpus.documents()
    while size < budget:
        path, text = docs[k % len(docs)]
        block = ("\n\n===== %s =====\n%s" % (path, text))[:budget - size]
        parts.append(block)
        size += len(block)
        k += 1
    return "".join(parts)


def set_id(source):
    """The prompt set a case's figures came from, as the history keeps it: its source and the
    first 12 hex digits of the sha256 of every text it is built from ('coding@1f2e3d4c5b6a'), so
    two figures from different prompts are told apart even under one source name."""
    if source == "long_context":
        parts = [_LONG_HEAD, _LONG_TAIL] + ["%s\n%s" % d for d in corpus.documents()]
    else:
        parts = [text for _, text in PROMPT_SETS.get(source, ())]
    digest = hashlib.sha256("\x00".join(parts).encode("utf-8")).hexdigest()[:12]
    return "%s@%s" % (source, digest)
