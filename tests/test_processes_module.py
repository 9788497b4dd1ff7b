"""sglang_processes through `ansible localhost -m`: a hand-launched server holding the port is
found (by its module and its port), reported, and stopped only when asked."""
from __future__ import annotations

import subprocess
import sys
import time

from ansiblerun import module_result
from conftest import free_port



def module(args, check=False):
    return module_result("sglang_processes", args, check=check, timeout=120)[1]


def wait_listening(port):
    import socket
    for _ in range(100):
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)


def test_stray_found_reported_and_stopped_on_request():
    port = free_port()
    stray = subprocess.Popen([sys.executable, "-m", "http.server", str(port), "--bind",
                              "127.0.0.1"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_listening(port)
        args = "port=%d launch_modules={\"http.server\":\"sglang\"} service=sglang-test" % port
        r = module(args)
        assert r["changed"] is False
        found = [s for s in r["strays"] if s["pid"] == stray.pid]
        assert found and sorted(found[0]["reasons"]) == ["launch_module", "port"]
        r = module(args + " stop=true", check=True)
        assert r["changed"] is True and stray.pid in r["stopped"] and stray.poll() is None
        r = module(args + " stop=true stop_timeout=5")
        assert r["changed"] is True and stray.pid in r["stopped"]
        assert stray.wait(10) is not None
    finally:
        if stray.poll() is None:
            stray.kill()


def test_nothing_found_on_a_free_port():
    r = module("port=%d launch_modules={\"no.such.module\":\"sglang\"} service=sglang-test" % free_port())
    assert r["strays"] == [] and r["changed"] is False


def test_nvidia_smi_filter_parses_what_an_a6000_host_prints():
    from plugins.filter import nvidia_smi as f
    lines = ["0, NVIDIA RTX A6000, 49140, 580.95.05", "1, NVIDIA RTX A6000, 49140, 580.95.05", ""]
    assert f.nvidia_smi_gpus(lines) == [
        {"index": 0, "name": "NVIDIA RTX A6000", "memory_mib": 49140, "driver": "580.95.05"},
        {"index": 1, "name": "NVIDIA RTX A6000", "memory_mib": 49140, "driver": "580.95.05"}]


def test_redact_api_keys_masks_what_sglang_logs():
    from plugins.filter import redact as r
    lines = ["server_args=ServerArgs(port=1, api_key='k-123456789', x=2)",
             "server_args={'api_key': 'k-123456789', 'port': 1}", "argv: --api-key k-123456789 --port 1"]
    out = r.redact_api_keys(lines)
    assert not any("k-123456789" in line for line in out)
    assert out[0] == "server_args=ServerArgs(port=1, api_key=********', x=2)"
