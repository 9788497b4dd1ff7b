# -*- coding: utf-8 -*-
"""The deploy plan's parts as types: what each part holds, field by field, and the one place its
shape is written down. ``deploy.make`` builds them (one builder per part) and hands the plan on
as a dict (``Plan.as_dict``): the host's fact ``sglang_deploy_plan``, which the roles read by part
(``sglang_deploy_plan.server.unit_path``, ``.release.venv``, ``.gate.cases``), never through
renamed copies. Standard library only."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Release:
    """What is installed: the engine's release in a directory of its own."""
    engine: str  # the engine's name (engines/: sglang, vllm)
    label: str  # how messages name it
    docs: str  # where its flags are documented
    version: str
    name: str  # <engine>-<version>-<checksum of the lock file and the wheels>
    dir: str  # <releases_dir>/<name>
    venv: str  # <dir>/venv
    inputs: dict[str, Any]  # lock (path or None), lock_sha256, packages, wheels [{path, sha256}]
    launch_module: str | None  # python -m <this> starts the server (None: the engine is unknown)
    releases_dir: str
    keep: int | None  # releases kept besides the current one


@dataclass
class Model:
    """The weights the server loads and the drafter beside them."""
    load_path: str  # the snapshot's path when pinned, else sglang_model_path
    served_name: str
    size: Any  # sglang_model_size (capacity.py reads it)
    drafter: dict[str, Any] | None  # {repo, revision, path, download}; None: own MTP head or none


@dataclass
class Gpu:
    """The GPUs the profile runs on and what it needs of them."""
    hardware: dict[str, Any] | None  # sglang_hardware (None: not stated, no budget)
    memory: list[str] | None  # the memory budget per GPU, a line each (None: not computed)
    cuda_runtime: str | None  # the CUDA runtime the engine release pins
    min_driver: str | None  # the oldest driver that runtime runs on


@dataclass
class Server:
    """The systemd unit and how the host reaches the server it runs."""
    service: str  # the unit's name, without .service
    user: str
    group: str
    python: str  # the interpreter the release's venv is made with
    state_dir: str
    unit_path: str
    env_path: str
    secrets_path: str  # the engine's config file holding the API key (0600)
    hidden_paths: list[str]  # what the unit's ProtectHome=yes hides
    argv: list[str] | None  # the unit's ExecStart (None: the profile could not be rendered)
    local_url: str  # where the host itself reaches the server
    drift_url: str  # where the watch's and the gate's drift probes reach it
    ready_paths: list[str]  # the engine's readiness endpoints, in order
    drift_paths: list[str]  # what a drift probe reads
    drift_answers_secret: bool  # whether the drift answers need the API key
    exposure: dict[str, Any]  # problems, host, api_key (set or not), allowed_networks, open_network
    adopt_existing: bool
    adopt_backup_dir: str


@dataclass
class Lock:
    """The deploy lock and the measurement lock beside it."""
    path: str
    max_age: int | None
    measure_path: str
    break_lock: bool


@dataclass
class Gate:
    """What the sglang_bench module runs and judges (its ``gate`` option)."""
    cases: list[dict[str, Any]]  # the resolved cases, thresholds and options each
    text: str  # the plan in words
    promise: dict[str, Any]  # what the profile promises the server holds (context, requests)
    answers: dict[str, Any] | None  # the host's known-answers file: path, sha256, counts
    options: dict[str, Any]  # how every case is measured (GATE_OPTIONS)
    notes: list[str]
    lkg_import: str  # a hand-made unit taken as the last known good ('' none)
    history_path: str = ""
    lkg_dir: str = ""
    corpus_source: str = ""  # the long-context corpus on the controller
    corpus_path: str = ""  # its copy on the host, which the module reads
    identity: dict[str, Any] = field(default_factory=dict)  # what the fingerprint records
    nvidia_smi: str | None = None
    profile: str | None = None
    measure_lock: str = ""
    model_size: Any = None  # the roofline's sizes (None: no hardware stated)
    hardware: dict[str, Any] | None = None  # the GPUs serving the model (all nodes' tp share)


@dataclass
class Watch:
    """Whether this host runs the watch, and its settings file."""
    active: bool
    settings: dict[str, Any] | None = None


@dataclass
class Plan:
    """A host's deploy plan. ``problems`` is [] when the deploy can go on; a part is None when
    its role is not planned (``roles``) or, for the sglang role's parts, with no sglang role."""
    host: str
    roles: list[str]
    problems: list[str]
    profile: str | None = None
    settings: dict[str, Any] | None = None  # the profile's flat settings (None: not valid)
    release: Release | None = None
    model: Model | None = None
    gpu: Gpu | None = None
    server: Server | None = None
    topology: dict[str, Any] | None = None  # fleet.sglang_topology
    lock: Lock | None = None
    gate: Gate | None = None
    watch: Watch | None = None

    def as_dict(self):
        """The plan as the host's fact: parts as dicts, a part not planned left out."""
        planned = dataclasses.asdict(self)
        return {k: v for k, v in planned.items()
                if v is not None or (k in ("profile", "settings") and self.release is not None)}
