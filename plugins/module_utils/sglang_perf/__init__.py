# -*- coding: utf-8 -*-
"""sglang_perf: the one measurement engine of this repository, one package imported two ways.

- On the target host, by the Ansible modules (``sglang_bench``, ``sglang_gate_decide``,
  ``sglang_processes``, ``sglang_units``) as ``ansible.module_utils.sglang_perf``: ansible.cfg's
  ``module_utils`` path puts this directory there and AnsiballZ ships it with the module, so it
  runs under the host's system Python 3.9+ with the standard library only (hence the relative
  imports inside, and nothing here imports Ansible).
- On the controller, as ``sglang_perf``, by everything else (``bench``, the filter plugins,
  ``scripts/demo.py``, the tests): ``make venv`` installs the repository's project
  (pyproject.toml: package ``sglang_perf`` = ``plugins/module_utils/sglang_perf``) editable into
  .venv, so ``import sglang_perf`` finds these files with no path set-up of the caller's.
"""
