# -*- coding: utf-8 -*-
"""Filter: ``lines | redact_api_keys`` - mask API key values in log lines before they reach
Ansible's output (SGLang logs its server_args, API key included, when it starts)."""
from __future__ import annotations

import re

DOCUMENTATION = r"""
name: redact_api_keys
short_description: Mask API key values in log lines
description:
  - Replaces the value after C(api_key=), C('api_key':) or C(--api-key) with C(********).
"""

_PATTERNS = (
    re.compile(r"""(api[_-]key['"]?\s*[=:]\s*)['"]?[^'",)\s]+"""),
    re.compile(r"""(--api-key[=\s]+)\S+"""),
)


def redact_api_keys(lines):
    out = []
    for line in lines if isinstance(lines, (list, tuple)) else [lines]:
        text = str(line)
        for pattern in _PATTERNS:
            text = pattern.sub(r"\1********", text)
        out.append(text)
    return out


class FilterModule(object):
    def filters(self):
        return {"redact_api_keys": redact_api_keys}
