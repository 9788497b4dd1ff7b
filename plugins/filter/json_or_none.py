# -*- coding: utf-8 -*-
"""Filter: ``text | json_or_none`` - the decoded JSON value, or None when ``text`` is not JSON
(to check a file's content in a condition without a templating error)."""
from __future__ import annotations

import json

DOCUMENTATION = r"""
name: json_or_none
short_description: Decode JSON, or None when it is not JSON
description:
  - Returns the decoded value, or None for text that is not valid JSON.
"""


def json_or_none(text):
    try:
        return json.loads(text)
    except (TypeError, ValueError):
        return None


class FilterModule(object):
    def filters(self):
        return {"json_or_none": json_or_none}
