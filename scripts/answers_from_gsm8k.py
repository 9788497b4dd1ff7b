#!/usr/bin/env python3
"""GSM8K's test set (openai/grade-school-math, grade_school_math/data/test.jsonl: one
{"question", "answer"} per line, the answer's last line "#### N") as a known-answers file for
sglang_gate_answers (docs/quality.md): the first COUNT questions, each asking for the number on
its last line, with the number the data set gives.

    python scripts/answers_from_gsm8k.py test.jsonl 200 > gsm8k-200.jsonl

Reads a local copy only (fetch it once where there is access, pin it by its sha256)."""
from __future__ import annotations

import json
import sys

ASK = "\nThink step by step, then give the final answer as a number on the last line."


def convert(lines, count):
    """GSM8K rows -> known-answer rows (dicts); ValueError names a line without '#### N'."""
    out = []
    for number, line in enumerate(lines, 1):
        if len(out) >= count:
            break
        if not line.strip():
            continue
        row = json.loads(line)
        final = str(row.get("answer", "")).rsplit("####", 1)
        try:
            value = float(final[1].strip().replace(",", "")) if len(final) == 2 else None
        except ValueError:
            value = None
        if value is None or not isinstance(row.get("question"), str):
            raise ValueError("line %d: not a GSM8K row (a question and an answer ending '#### N')" % number)
        out.append({"id": "gsm8k-%d" % (len(out)), "prompt": row["question"] + ASK,
                    "answer": int(value) if value.is_integer() else value})
    return out


def main(argv):
    if len(argv) != 3 or not argv[2].isdigit():
        sys.stderr.write("usage: answers_from_gsm8k.py TEST.jsonl COUNT\n")
        return 2
    with open(argv[1], encoding="utf-8") as fh:
        rows = convert(fh, int(argv[2]))
    for row in rows:
        sys.stdout.write(json.dumps(row) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
