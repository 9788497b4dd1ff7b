"""The long-context corpus (sglang_perf/measure/corpus.json, read by measure/corpus.py): big
enough, varied (not a phrase repeated with a counter, which would make speculative decoding look
better than it is), a mix of code and prose, plain ASCII, free of secret-looking strings and real
addresses; a data file laid out one line of text to a line, and a loader that gives every document
back byte for byte, imports only the standard library and names a file it cannot read."""
from __future__ import annotations

import ast
import collections
import hashlib
import json
import re
import shutil
import subprocess
import sys
import zlib
from pathlib import Path, PurePosixPath

import pytest

from sglang_perf.measure import corpus

ROOT = Path(__file__).resolve().parents[1]

SOURCE = ROOT / "plugins" / "module_utils" / "sglang_perf" / "measure" / "corpus.py"
DATA = SOURCE.with_name("corpus.json")
DOCS = corpus.documents()
TEXTS = [text for _, text in DOCS]
ALL_TEXT = "\n".join(TEXTS)

SECRET_PATTERNS = [
    re.compile(r"""(?i)(api[_-]?key|token|secret|password)\s*[:=]\s*['"][^'"]{8,}"""),
    re.compile(r"-----BEGIN"),
    re.compile(r"sk-[A-Za-z0-9]{16,}"),
    re.compile(r"hf_[A-Za-z0-9]{16,}"),
]
IPV4 = re.compile(r"(?<![\d.])(?:\d{1,3}\.){3}\d{1,3}(?![\d.])")
HOST = re.compile(r"\b[A-Za-z0-9][A-Za-z0-9-]*(?:\.[A-Za-z0-9-]+)*\.(?:com|org|net|io)\b")


def long_lines(texts, min_len=25):
    return [s for t in texts for s in (line.strip() for line in t.splitlines()) if len(s) >= min_len]


def max_repeats(texts):
    return max(collections.Counter(long_lines(texts)).values())


def distinct_share(texts):
    lines = long_lines(texts)
    return len(set(lines)) / len(lines)


def compression_ratio(text):
    return len(zlib.compress(text.encode(), 9)) / len(text)


def test_size_and_shape():
    assert isinstance(DOCS, tuple) and len(DOCS) >= 40
    paths = [p for p, _ in DOCS]
    assert len(set(paths)) == len(paths), "duplicate paths"
    for path, text in DOCS:
        assert isinstance(path, str) and isinstance(text, str)
        assert not path.startswith("/") and ".." not in PurePosixPath(path).parts and " " not in path
        assert 2500 <= len(text) <= 9000, "%s: %d characters" % (path, len(text))
        assert text.endswith("\n"), path
    assert corpus.total_chars() == sum(len(t) for t in TEXTS)
    assert corpus.total_chars() >= 180_000


def test_plain_ascii_and_tabs_only_in_makefiles():
    for path, text in DOCS:
        assert text.isascii(), path
        assert all(ch >= " " or ch in "\n\t" for ch in text), path
        if "\t" in text:
            assert PurePosixPath(path).name == "Makefile", path
    for path in (SOURCE, DATA):  # a Makefile's tabs are escaped in the JSON
        assert path.read_text(encoding="ascii").count("\t") == 0, path


def test_no_line_repeats_more_than_three_times():
    counts = collections.Counter(long_lines(TEXTS))
    worst = [(n, line) for line, n in counts.most_common(5) if n > 3]
    assert not worst, worst
    assert max_repeats(TEXTS) <= 3


def test_most_lines_are_distinct():
    assert distinct_share(TEXTS) >= 0.9


def test_compresses_like_real_text():
    # Measured 0.367 for the corpus as written (51 documents, 221,042 characters); a phrase or a
    # template repeated with a counter compresses to a few per cent.
    assert compression_ratio(ALL_TEXT) >= 0.22


def test_the_variety_checks_reject_a_templated_text():
    """The checks above can fail: a counter-driven template trips all three of them."""
    templated = ["".join("Load L-%05d was assigned to vehicle V-%03d at depot QBY-01.\n" % (i, i % 40)
                         for i in range(j * 100, j * 100 + 100)) for j in range(40)]
    repeated = ["The quick review of the dispatch planner found nothing to change.\n" * 60] * 3
    assert compression_ratio("\n".join(templated)) < 0.22
    assert max_repeats(repeated) > 3
    assert distinct_share(repeated) < 0.9


def test_code_and_prose_are_both_present():
    extensions = {PurePosixPath(p).suffix for p, _ in DOCS if PurePosixPath(p).suffix}
    assert len(extensions) >= 8, extensions
    assert {".py", ".go", ".ts", ".rs", ".sql", ".sh", ".md"} <= extensions
    markdown = [p for p, _ in DOCS if p.endswith(".md")]
    assert len(markdown) >= 12
    prose = sum(len(t) for p, t in DOCS if p.endswith(".md"))
    assert 0.3 <= prose / corpus.total_chars() <= 0.6


def test_no_secret_looking_strings():
    for path, text in DOCS:
        for pattern in SECRET_PATTERNS:
            match = pattern.search(text)
            assert match is None, "%s: %r" % (path, match.group(0))


def test_no_ip_addresses_but_loopback_and_documentation_range():
    for path, text in DOCS:
        for ip in IPV4.findall(text):
            assert ip in ("127.0.0.1", "0.0.0.0") or ip.startswith("192.0.2."), "%s: %s" % (path, ip)


def test_host_names_are_example_domains():
    for path, text in DOCS:
        for host in (m.group(0) for m in HOST.finditer(text)):
            assert re.search(r"(^|\.)example\.(com|org|net)$", host), "%s: %s" % (path, host)


def test_the_loader_imports_only_the_standard_library_and_keeps_lines_short():
    """AnsiballZ ships it with prompts.py, and the watch's one-file program bundles it: it imports
    nothing of the package (a leaf) and nothing outside the standard library (json, os)."""
    tree = ast.parse(SOURCE.read_text())
    imported = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    imported |= {"." * n.level + (n.module or "") for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    assert imported <= {"__future__", "json", "os"}, imported
    assert ast.get_docstring(tree)
    assert max(len(line) for line in SOURCE.read_text().splitlines()) <= 110
    assert len(SOURCE.read_text().splitlines()) < 200  # the loader; the corpus is the data file


def test_the_text_keeps_its_lines_short_and_the_file_one_text_line_to_a_line():
    """The data file is the canonical JSON of its documents (2-space indent, one line of text to a
    line of the file), so a change to the corpus reads line by line in a diff."""
    raw = DATA.read_text(encoding="ascii")
    data = json.loads(raw)
    assert raw == json.dumps(data, indent=2) + "\n"
    assert [list(d) for d in data] == [["path", "lines"]] * len(data)
    assert max(len(line) for text in TEXTS for line in text.split("\n")) <= 110
    assert len(raw.splitlines()) == 2 + sum(5 + len(d["lines"]) for d in data)  # {, path, lines [, ], }


def test_the_loader_gives_every_document_back_byte_for_byte():
    """The file's lines joined with "\\n" are the texts: a few documents by their sha256 (as the
    corpus was when it moved from a Python tuple to corpus.json), the first and the last, and the
    total."""
    assert isinstance(DOCS, tuple) and len(DOCS) == 51 and corpus.documents() == DOCS
    assert corpus.documents() is corpus.documents()  # read once
    assert all(isinstance(d, tuple) and len(d) == 2 for d in DOCS)
    assert corpus.total_chars() == 221_042
    digest = {p: hashlib.sha256(t.encode("ascii")).hexdigest()[:16] for p, t in DOCS}
    assert {p: digest[p] for p in SHA256} == SHA256
    first, last = DOCS[0], DOCS[-1]
    assert first[0] == "README.md" and first[1].startswith("# Ferrywell\n\nFerrywell is the platform")
    assert last[1].endswith("  A `period_key` column with a unique constraint backs this up, and a lost\n"
                            "  insert race is logged and skipped (INC-2024-031).\n"
                            "- Platform: scheduler retries are opt-in per job (PLT-220).\n")
    for path, text in (first, last):
        entry = next(d for d in json.loads(DATA.read_text()) if d["path"] == path)
        assert entry["lines"] == text.split("\n") and entry["lines"][-1] == ""


@pytest.fixture
def loader():
    """The loader, put back to its default afterwards."""
    yield corpus
    corpus.use(None)
    assert corpus.path() == corpus.DEFAULT_PATH


def test_the_loader_reads_the_file_it_is_pointed_at(loader, tmp_path):
    """A target host's copy (the sglang_bench module points the loader at gate.corpus_path): read
    from there, once; pointing back reads the default again."""
    assert loader.path() == loader.DEFAULT_PATH == str(DATA)
    copy = tmp_path / "corpus.json"
    shutil.copyfile(DATA, copy)
    loader.use(str(copy))
    assert loader.path() == str(copy)
    assert loader.documents() == DOCS and loader.documents() is loader.documents()
    copy.write_text(json.dumps([{"path": "a.md", "lines": ["one", "two", ""]}]))
    loader.use(str(copy))
    assert loader.documents() == DOCS  # the same path: what was read
    loader.use(str(tmp_path / "other.json"))
    loader.use(str(copy))  # another path forgets what was read
    assert loader.documents() == (("a.md", "one\ntwo\n"),) and loader.total_chars() == 8
    loader.use(None)
    assert loader.documents() == DOCS


@pytest.mark.parametrize("content, words", [
    (None, "cannot read the long-context corpus"),
    ("{not json", "cannot read the long-context corpus"),
    ("[]", "is not the long-context corpus"),
    ('[{"path": "a.md", "text": "x"}]', "is not the long-context corpus"),
    ('[{"path": "a.md", "lines": ["x", 1]}]', "is not the long-context corpus"),
    ('[{"path": "caf\u00e9.md", "lines": []}]', "cannot read the long-context corpus"),  # not ASCII
])
def test_a_file_it_cannot_read_is_named_with_how_it_gets_there(loader, tmp_path, content, words):
    path = tmp_path / "corpus.json"
    if content is not None:
        path.write_text(content, encoding="utf-8")
    loader.use(str(path))
    with pytest.raises(corpus.CorpusError) as e:
        loader.documents()
    said = str(e.value)
    assert words in said and str(path) in said, said
    assert "the sglang_gate role copies it to a target host's sglang_deploy_plan.gate.corpus_path" in said
    # neither a request's failure (OSError) nor a bad option (ValueError)
    assert not isinstance(e.value, (OSError, ValueError))


def test_the_loader_runs_under_the_hosts_python_from_its_own_directory(tmp_path):
    """The module file alone with its data beside it (the default path: os.path.dirname(__file__)),
    under an isolated Python with nothing installed (python -I): the standard library only."""
    shutil.copyfile(SOURCE, tmp_path / "corpus.py")
    shutil.copyfile(DATA, tmp_path / "corpus.json")
    p = subprocess.run([sys.executable, "-I", "-c", "import sys; sys.path.insert(0, %r); import corpus; "
                        "print(len(corpus.documents()), corpus.total_chars())" % str(tmp_path)],
                       capture_output=True, text=True, check=True)
    assert p.stdout.split() == ["51", "221042"]


# sha256 (first 16 hex digits) of a few documents' texts, as the Python tuple held them
SHA256 = {
    "README.md": "d0084c55cff80ee6",
    "services/dispatch/retry.py": "393fd871d4c2a2b6",
    "services/tracking/worker/main.go": "ea8f774f679c80c6",
    "config/notifications.ini": "b712c1c49a008585",
    "Makefile": "044f2245e43b0b49",
    "CHANGELOG.md": "79b1f0852e0c8ff4",
}
