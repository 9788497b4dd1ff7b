"""On the local container: the `dflash` profile (a DFlash drafter beside the model, staged by
scripts/local-host.sh as the model is) deployed through the gate and recorded with the commits its
weights are at; the same profile on a model whose `main` moved, held to a bar it falls short of,
fails, names the moved weights and is rolled back to the run before it."""
from __future__ import annotations

import json

from hostutil import ensure_deployed, flat, needs_local_host, on_host, play

pytestmark = needs_local_host

MODEL = "/srv/models/Qwen3.6-27B"
DRAFTER = "/srv/models/Qwen3.6-27B-DFlash"
A, B, D = "a1" * 20, "b2" * 20, "d4" * 20


def _record_download(directory, commit):
    """What `hf download --local-dir` leaves beside the files: one metadata file per file, the
    commit on its first line (huggingface_hub's _local_folder.py)."""
    script = ("import os,sys; d,c=sys.argv[1:]; m=os.path.join(d,'.cache/huggingface/download'); "
              "os.makedirs(m,exist_ok=True); "
              "[open(os.path.join(m,f+'.metadata'),'w').write(c+'\\n'+'e'*64+'\\n1733300000.0\\n') "
              "for f in os.listdir(d) if os.path.isfile(os.path.join(d,f))]")
    on_host("python3 -c %s %s %s" % (json.dumps(script), directory, commit))


def _records():
    return [json.loads(x) for x in on_host("cat /var/lib/sglang/gate-history.jsonl").splitlines()]


def test_dflash_passes_the_gate_and_a_moved_main_short_of_its_bar_is_rolled_back():
    ensure_deployed()
    try:
        _record_download(MODEL, A)
        _record_download(DRAFTER, D)
        before = len(_records())
        p = play("deploy.yml", "-e", "sglang_profile=dflash")
        assert p.returncode == 0, p.stdout[-3000:]
        unit = on_host("systemctl show -p ExecStart --value sglang")
        assert "--speculative-algorithm DFLASH" in unit
        assert "--speculative-num-draft-tokens 16" in unit
        assert "--speculative-draft-model-path %s" % DRAFTER in unit
        (passed,) = _records()[before:]
        assert (passed["profile"], passed["passed"]) == ("dflash", True)
        # the emulator's DFLASH at a block of 16 on coding prompts: above the profile's bars
        assert passed["accept_len"] >= 3.5 and passed["decode_tok_s"]["median"] >= 45, passed
        assert passed["fingerprint"]["model"] == {"repo": "Qwen/Qwen3.6-27B", "revision": "main",
                                                  "path": MODEL, "commit": A}
        assert passed["fingerprint"]["drafter"] == {"repo": "z-lab/Qwen3.6-27B-DFlash", "revision": "main",
                                                    "path": DRAFTER, "commit": D}

        # main moved under the same name; the profile is held to a bar above what it reaches
        _record_download(MODEL, B)
        p = play("deploy.yml", "-e", "sglang_profile=dflash",
                 "-e", json.dumps({"sglang_gate_calibrated": {"dflash": {"coding": {"min_tok_s": 200}}}}))
        out = flat(p.stdout + p.stderr)
        assert p.returncode == 2, out[-3000:]
        moved = "model Qwen/Qwen3.6-27B at commit %s -> %s (revision main)" % (A[:12], B[:12])
        assert "host changed since the last-known-good: " + moved in out
        (failed,) = _records()[before + 1:]
        assert (failed["profile"], failed["passed"]) == ("dflash", False)
        assert failed["fingerprint"]["model"]["commit"] == B
        assert moved in failed["fingerprint_changes"]
        # rolled back to the last-known-good: the passing dflash unit, serving
        assert "--speculative-algorithm DFLASH" in on_host("systemctl show -p ExecStart --value sglang")
        assert on_host("systemctl is-active sglang") == "active"
    finally:
        # the dflash unit stays: a test that needs the 3-step profile deploys it (ensure_deployed)
        on_host("rm -rf %s/.cache %s/.cache" % (MODEL, DRAFTER))
