# -*- coding: utf-8 -*-
"""The host's measurement lock: an ``flock`` on one file next to the deploy lock (the deploy
plan's ``lock.measure_path``), held by whatever sends measured requests to the server, so two
measurements never stream side by side. The watch's probe takes it without waiting (busy: no
probe this run); the gate (the sglang_bench module) waits for it, a running probe being short.
The kernel drops the lock when its holder exits, so a killed run leaves nothing to clean up.

Standard library only, Python 3.9+ (the watch ships it to the host; AnsiballZ carries it with the
module)."""
from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import time

POLL_S = 0.2
NAME = "measure.lock"


def beside(deploy_lock_path):
    """The measurement lock's path: NAME in the deploy lock's directory (None without one)."""
    if not isinstance(deploy_lock_path, str) or not deploy_lock_path.startswith("/"):
        return None
    return os.path.join(os.path.dirname(deploy_lock_path), NAME)


class Busy(Exception):
    """Another process holds the lock (still, after waiting ``wait_s``)."""


def acquire(path, wait_s=0.0, create=True, clock=time.monotonic, sleep=time.sleep):
    """Take the lock at ``path``: at once, or waiting up to ``wait_s`` seconds for its holder;
    the open descriptor that holds it (release() gives it back). Raises Busy after the wait, and
    OSError when the file cannot be opened. ``create``: make the file when missing (the gate, as
    root); the watch's sandbox cannot create it, and its role installs it."""
    fd = os.open(path, os.O_RDONLY | (os.O_CREAT if create else 0), 0o644)
    deadline = clock() + max(0.0, float(wait_s))
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return fd
        except OSError as e:
            busy = e.errno in (errno.EAGAIN, errno.EWOULDBLOCK, errno.EACCES)
            if not busy or clock() >= deadline:
                os.close(fd)
                if not busy:
                    raise
                raise Busy("%s: another measurement holds it%s" % (
                    path, " after %.0f s of waiting" % float(wait_s) if wait_s else ""))
        sleep(POLL_S)


def release(fd):
    os.close(fd)  # closing the descriptor releases the lock


@contextlib.contextmanager
def held(path, wait_s=0.0, create=True):
    """The lock held for a ``with`` block (acquire's arguments and errors)."""
    fd = acquire(path, wait_s, create)
    try:
        yield
    finally:
        release(fd)
