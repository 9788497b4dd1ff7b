# -*- coding: utf-8 -*-
"""sglang_perf: the one measurement engine of this repository.

Used by the Ansible module ``sglang_bench`` (shipped to the target host through AnsiballZ, so it
runs under the host's system Python 3.9+ with the standard library only) and by the ``bench`` CLI
(which puts ``plugins/module_utils`` on ``sys.path``). Nothing here imports Ansible.
"""
