"""The long-context corpus (sglang_perf/measure/corpus.py): big enough, varied (not a
phrase repeated with a counter, which would make speculative decoding look better than it is), a
mix of code and prose, plain ASCII, free of secret-looking strings and real addresses, and a
module that imports nothing."""
from __future__ import annotations

import ast
import collections
import re
import zlib
from pathlib import Path, PurePosixPath

from sglang_perf.measure import corpus

ROOT = Path(__file__).resolve().parents[1]

SOURCE = ROOT / "plugins" / "module_utils" / "sglang_perf" / "measure" / "corpus.py"
DOCS = corpus.DOCUMENTS
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
    assert corpus.TOTAL_CHARS == sum(len(t) for t in TEXTS)
    assert corpus.TOTAL_CHARS >= 180_000


def test_plain_ascii_and_tabs_only_in_makefiles():
    for path, text in DOCS:
        assert text.isascii(), path
        assert all(ch >= " " or ch in "\n\t" for ch in text), path
        if "\t" in text:
            assert PurePosixPath(path).name == "Makefile", path
    assert SOURCE.read_text(encoding="ascii").count("\t") == 0


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
    assert 0.3 <= prose / corpus.TOTAL_CHARS <= 0.6


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


def test_module_imports_nothing_and_keeps_lines_short():
    tree = ast.parse(SOURCE.read_text())
    assert not [n for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))]
    assert ast.get_docstring(tree)
    assert max(len(line) for line in SOURCE.read_text().splitlines()) <= 110
