# -*- coding: utf-8 -*-
"""The long-context corpus: an original, fictional code base and its documents, kept as data in
corpus.json beside this module, and its loader (``documents()``, ``total_chars()``, ``use(path)``).

Everything in it was written for this project. It is the repository of "Tallowmere Freight", an
invented regional carrier, and its platform "Ferrywell": dispatch and a route planner, billing,
GPS tracking, warehouse inventory and customer notifications. The documents refer to each other
consistently (services, tables, tickets, incidents, people), and some of the code carries the
kind of subtle bugs a reviewer should find (an off-by-one, a missing await, a data race, naive
datetimes, queries no index can serve), because prompts.py uses the corpus to build long-context
prompts of the form "here is a slice of our repository and its docs; review it". No company,
product or person in it is real; host names are under example.com and addresses under 192.0.2.0/24
or loopback; nothing in it is a credential.

The text is varied on purpose - real-looking code and prose, not a phrase repeated with a
counter - because speculative-decoding acceptance depends on how predictable the context is.

``documents()`` is a tuple of (repository path, file content) pairs in the order of a tour of the
repository, code and prose interleaved: 51 documents, 221,042 characters in all, each between
2,500 and 9,000 characters, plain ASCII. About 54% of the characters are code (Python, Go,
TypeScript, Rust, SQL, shell, YAML/TOML/INI, a Makefile and a Containerfile) and 46% prose
(ADRs, RFCs, postmortems, runbooks, an API reference, a changelog, meeting notes, a design
review). That is roughly 55,000 to 65,000 tokens, about twice what a 32,000-token prompt
needs.

The file: a JSON list of ``{"path": ..., "lines": [...]}``, one per document in that order, each
document's text split at its newlines (joined with "\\n" again, byte for byte), one line of text
to a line of the file, so a change to the corpus reads line by line. It is read once, on first
use, from ``path()``: corpus.json beside this module by default, which is where it is on the
controller (the repository's plugins/module_utils/sglang_perf/measure). AnsiballZ ships a module's
Python imports only, so on a target host the sglang_gate role copies the file to the deploy plan's
``gate.corpus_path`` (<sglang_state_dir>/corpus.json) and the sglang_bench module points the
loader there (``use``). The watch's one-file program (plugins/filter/sglang_watch_program.py)
bundles this module (prompts.py imports it) but never reads the corpus: its probe sends short
prompts only, and bundled, without a file of its own, the module has no default path (a call
would raise CorpusError). Python 3.9, standard library only.
"""
from __future__ import annotations

import json
import os

FILE_NAME = "corpus.json"
# beside this module; None where it has no file of its own (the watch's one-file program imports
# it from a string, without __file__)
_HERE = globals().get("__file__")
DEFAULT_PATH = os.path.join(os.path.dirname(os.path.abspath(_HERE)), FILE_NAME) if _HERE else None
# how the file gets where it is read, for the message of a missing one
WHERE_FROM = ("the repository's plugins/module_utils/sglang_perf/measure/corpus.json; the sglang_gate "
              "role copies it to a target host's sglang_deploy_plan.gate.corpus_path before the benchmark")

_path = None  # use(): None is DEFAULT_PATH
_documents = None  # what documents() read, once


class CorpusError(Exception):
    """The corpus file cannot be read or is not the corpus (the message names the path and how the
    file gets there). Neither an OSError nor a ValueError: neither a request's failure nor a bad
    option."""


def use(path):
    """Read the corpus from ``path`` from now on (None: the default, beside this module); another
    path than before forgets the documents read."""
    global _path, _documents
    if path != _path:
        _path, _documents = path, None


def path():
    """Where the corpus is read from (None: nowhere, see DEFAULT_PATH)."""
    return _path or DEFAULT_PATH


def documents():
    """The tuple of (repository path, text) pairs, read from ``path()`` on first use;
    CorpusError when the file cannot be read."""
    global _documents
    if _documents is None:
        if path() is None:
            raise CorpusError("the long-context corpus has no file here: this corpus.py has none beside "
                              "it (the watch's one-file program, which never reads it) and was pointed "
                              "at none (the file is %s)" % WHERE_FROM)
        _documents = load(path())
    return _documents


def total_chars():
    """The characters of every document's text."""
    return sum(len(text) for _, text in documents())


def load(file):
    """The documents of the corpus file ``file`` (its texts joined from their lines); CorpusError
    naming it when it cannot be read or is not a list of {"path", "lines"}."""
    try:
        with open(file, encoding="ascii") as f:
            data = json.load(f)
    except (OSError, ValueError) as e:  # UnicodeDecodeError is a ValueError
        raise CorpusError("cannot read the long-context corpus %s: %s (the file is %s)"
                          % (file, e, WHERE_FROM))
    if not isinstance(data, list) or not data or not all(_is_document(d) for d in data):
        raise CorpusError("%s is not the long-context corpus: a JSON list of {\"path\": ..., \"lines\": "
                          "[...]} is expected (the file is %s)" % (file, WHERE_FROM))
    return tuple((d["path"], "\n".join(d["lines"])) for d in data)


def _is_document(d):
    return (isinstance(d, dict) and isinstance(d.get("path"), str) and isinstance(d.get("lines"), list)
            and all(isinstance(line, str) for line in d["lines"]))
