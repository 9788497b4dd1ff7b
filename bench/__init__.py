"""The repository's command line (python -m bench). Ansible reads its configuration when it is
first imported: the repository's own ansible.cfg (its roles, plugins and module_utils paths), from
wherever the command is run - a path on the command line is the user's, relative to where they
stand; the repository's files are found from here (bench/paths.py)."""
from __future__ import annotations

import os
from pathlib import Path

os.environ.setdefault("ANSIBLE_CONFIG", str(Path(__file__).resolve().parent.parent / "ansible.cfg"))
