"""sglang_model_check on tiny synthetic safetensors models (scripts/stand_in_hub.py writes them):
complete, truncated, missing, mismapped, single-file, cache snapshots with symlinks, the pinned
commit, paths the service cannot see or read; and the stand-in hub's answers."""
from __future__ import annotations

import json
import os
import pwd
import shutil
import struct
import tempfile
import threading
import urllib.error
import urllib.request
from http.server import ThreadingHTTPServer

import pytest

from ansiblerun import module_result
from plugins.modules import sglang_model_check as mc
from sglang_perf.plan import drafter
from scripts import stand_in_hub as hub

SHARD1, SHARD2 = "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"
SHA = "0123456789abcdef0123456789abcdef01234567"


@pytest.fixture
def model(tmp_path):
    d = tmp_path / "model"
    hub.write_model(str(d))
    return d


def problems(path, **kw):
    return mc.check(str(path), **kw)[0]


def test_a_complete_sharded_model(model):
    found, facts = mc.check(str(model))
    assert found == []
    assert facts == {"layout": "sharded", "shards": 2, "commit": None, "trained_block": None,
                     "size_bytes": (model / SHARD1).stat().st_size + (model / SHARD2).stat().st_size}


def test_a_truncated_shard_is_named_with_its_size(model):
    full = (model / SHARD2).stat().st_size
    os.truncate(model / SHARD2, 1200)
    assert problems(model) == ["%s is 1.20 kB of %s (truncated)" % (SHARD2, mc.size_text(full))]


def test_a_shard_cut_inside_its_header(model):
    os.truncate(model / SHARD1, 5)
    assert problems(model) == ["%s is 5 B: no safetensors header (truncated)" % SHARD1]
    os.truncate(model / SHARD2, 20)
    assert problems(model)[1].startswith(SHARD2 + " is 20 B, shorter than its ")


def test_missing_shard_and_trailing_bytes(model):
    (model / SHARD1).unlink()
    with open(model / SHARD2, "ab") as f:
        f.write(b"xx")
    assert problems(model) == ["missing " + SHARD1,
                               "%s is %s, 2 bytes more than its header accounts for"
                               % (SHARD2, mc.size_text((model / SHARD2).stat().st_size))]


def test_tensors_the_index_maps_to_a_shard_that_lacks_them(model):
    index = json.loads((model / "model.safetensors.index.json").read_text())
    index["weight_map"]["model.layers.0.norm.weight"] = SHARD2
    index["weight_map"]["lm_head.weight"] = SHARD1
    index["weight_map"]["model.layers.9.a"] = SHARD2
    (model / "model.safetensors.index.json").write_text(json.dumps(index))
    assert problems(model) == ["tensor lm_head.weight not in " + SHARD1,
                               "2 tensors the index maps to %s are not in it "
                               "(first: model.layers.0.norm.weight)" % SHARD2]


def test_index_and_config_problems(model):
    (model / "config.json").write_text("{not json")
    (model / "model.safetensors.index.json").write_text(json.dumps({"weight_map": {"x": "../elsewhere"}}))
    assert problems(model) == ["config.json is not valid JSON",
                               "model.safetensors.index.json maps tensor x to '../elsewhere', "
                               "not a file in the directory"]
    (model / "config.json").unlink()
    (model / "model.safetensors.index.json").write_text("[]")
    assert problems(model) == ["missing config.json", "model.safetensors.index.json is not a JSON object"]


def test_a_single_file_model_and_no_weights(tmp_path):
    (tmp_path / "config.json").write_text("{}")
    assert problems(tmp_path) == ["no weights: neither model.safetensors.index.json nor model.safetensors"]
    data = hub.safetensors_bytes({"w": ("F32", (4, 4))})
    assert len(data) == struct.unpack("<Q", data[:8])[0] + 8 + 64
    (tmp_path / "model.safetensors").write_bytes(data)
    assert mc.check(str(tmp_path))[0] == [] and mc.check(str(tmp_path))[1]["layout"] == "single"
    (tmp_path / "model.safetensors").write_bytes(data[:-1])
    assert problems(tmp_path) == [
        "model.safetensors is %d B of %d B (truncated)" % (len(data) - 1, len(data))]
    assert problems(tmp_path / "absent") == ["no such directory"]


def snapshot(tmp_path, model, commit=SHA):
    """A Hugging Face cache repository: snapshots/<commit>/<file> -> ../../blobs/<hash>."""
    repo = tmp_path / "hub" / "models--Qwen--Qwen3.6-27B"
    (repo / "blobs").mkdir(parents=True)
    snap = repo / "snapshots" / commit
    snap.mkdir(parents=True)
    for i, f in enumerate(sorted(os.listdir(model))):
        shutil.copy(model / f, repo / "blobs" / ("blob%d" % i))
        os.symlink("../../blobs/blob%d" % i, snap / f)
    return snap


def test_a_cache_snapshot_through_its_symlinks_and_its_commit(tmp_path, model):
    snap = snapshot(tmp_path, model)
    found, facts = mc.check(str(snap), revision=SHA)
    assert found == [] and facts["commit"] == SHA
    assert problems(snap, revision="main") == []
    assert problems(snap, revision="f" * 40) == [
        "the files are at commit %s, the revision asked for is %s" % (SHA, "f" * 40)]
    os.unlink(os.path.realpath(snap / SHARD2))
    assert problems(snap) == ["missing %s (a broken symlink)" % SHARD2]


def test_files_the_service_cannot_see(tmp_path, model):
    snap = snapshot(tmp_path, model)
    blobs = str(tmp_path / "hub" / "models--Qwen--Qwen3.6-27B" / "blobs")
    assert problems(snap, hidden_paths=[blobs]) == [
        "config.json resolves to %s/blob0, under %s, which the service cannot see" % (blobs, blobs)]
    assert problems(snap, hidden_paths=[str(tmp_path) + "/"])[0] == (
        "the directory is under %s, which the service cannot see" % tmp_path)
    os.symlink(snap, tmp_path / "link")
    assert problems(tmp_path / "link", hidden_paths=[str(snap)])[0] == (
        "the directory resolves to %s, under %s, which the service cannot see" % (snap, snap))


def test_the_commit_a_local_dir_download_recorded(model):
    meta = model / ".cache" / "huggingface" / "download"
    meta.mkdir(parents=True)
    for f in ("config.json", SHARD1):
        (meta / (f + ".metadata")).write_text("%s\n\"etag\"\n1.0\n" % SHA)
    assert mc.check(str(model), revision=SHA) == ([], mc.check(str(model))[1])
    assert mc.check(str(model))[1]["commit"] == SHA
    (meta / (SHARD2 + ".metadata")).write_text("%s\n\"etag\"\n1.0\n" % ("e" * 40))
    assert problems(model, revision=SHA) == [
        "the files are at commit %s, %s, the revision asked for is %s" % (SHA, "e" * 40, SHA)]


def test_read_access_as_the_service_user():
    me = pwd.getpwuid(os.geteuid()).pw_name
    base = tempfile.mkdtemp(prefix="model-check-", dir="/tmp")
    try:
        os.chmod(base, 0o755)
        d = os.path.join(base, "m")
        hub.write_model(d)
        for f in os.listdir(d):
            os.chmod(os.path.join(d, f), 0o644)
        assert problems(d, readable_by=me) == []
        if os.geteuid() != 0:
            assert problems(d, readable_by="nobody") == [
                "the module runs as uid %d, not root: cannot check nobody's access" % os.geteuid()]
            return
        assert problems(d, readable_by="nobody") == []
        os.chmod(os.path.join(d, SHARD1), 0o600)
        os.chmod(os.path.join(d, SHARD2), 0o600)
        assert problems(d, readable_by="nobody") == ["nobody cannot read %s and 1 more" % SHARD1]
        os.chmod(d, 0o700)
        assert problems(d, readable_by="nobody") == ["nobody cannot read the directory and 4 more"]
        assert problems(d, readable_by="no-such-user-x") == ["user no-such-user-x does not exist"]
    finally:
        shutil.rmtree(base)


def test_through_ansible_in_check_mode(model):
    os.truncate(model / SHARD1, 10000)
    _, r, _ = module_result("sglang_model_check", json.dumps({"path": str(model), "max_problems": 1}),
                            check=True, timeout=120)
    assert (r["changed"], r["complete"], r["problem_count"]) == (False, False, 1)
    assert r["problems"][0].startswith(SHARD1 + " is 10.00 kB of ")


def test_a_drafter_trained_for_another_block_warns_naming_both(tmp_path):
    """block: a DFLASH drafter's config.json naming another block than the profile's is a warning
    (both engines run the profile's block); judged on complete files only (an incomplete one is
    refused or downloaded first, its config.json maybe replaced)."""
    d = tmp_path / "drafter"
    hub.write_model(str(d), drafter=True)
    trained = json.loads((d / "config.json").read_text())["dflash_config"]["block_size"]
    args = {"path": str(d), "block": trained, "block_of": "the profile dflash"}
    _, r, _ = module_result("sglang_model_check", json.dumps(args), check=True, timeout=120)
    assert (r.get("failed"), r["complete"], r["trained_block"]) == (None, True, trained)
    assert r["block_note"] is None
    _, r, _ = module_result("sglang_model_check", json.dumps(dict(args, block=8)), timeout=120)
    assert not r.get("failed")
    assert r["block_note"] == drafter.block_note(str(d), trained, 8, "the profile dflash")
    assert r["warnings"] == [r["block_note"][0].upper() + r["block_note"][1:]]
    os.truncate(d / SHARD1, 100)
    _, r, _ = module_result("sglang_model_check", json.dumps(dict(args, block=8)), timeout=120)
    assert (r.get("failed"), r["complete"], r["trained_block"]) == (None, False, trained)


def test_the_stand_in_hub_answers_what_hf_download_asks(model, tmp_path):
    repo = hub.Repo(str(model), "Qwen/Qwen3.6-27B")
    hub.write_model(str(tmp_path / "drafter"), drafter=True)
    drafter = hub.Repo(str(tmp_path / "drafter"), "z-lab/Qwen3.6-27B-DFlash")
    log = tmp_path / "requests.jsonl"
    server = ThreadingHTTPServer(("127.0.0.1", 0), hub.handler([repo, drafter], "hf_" + "x" * 30, str(log)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = "http://127.0.0.1:%d" % server.server_address[1]

    def get(path, method="GET", token="hf_" + "x" * 30, **headers):
        if token:
            headers["Authorization"] = "Bearer " + token
        return urllib.request.urlopen(urllib.request.Request(base + path, method=method, headers=headers))

    try:
        with pytest.raises(urllib.error.HTTPError) as e:
            get("/api/models/Qwen/Qwen3.6-27B/revision/main", token=None)
        assert e.value.code == 401
        info = json.load(get("/api/models/Qwen/Qwen3.6-27B/revision/main"))
        assert info["sha"] == repo.commit and {s["rfilename"] for s in info["siblings"]} == set(repo.files)
        tree = json.load(get("/api/models/Qwen/Qwen3.6-27B/tree/%s?recursive=True" % repo.commit))
        assert {t["path"]: t["size"] for t in tree} == {k: len(v) for k, v in repo.files.items()}
        head = get("/Qwen/Qwen3.6-27B/resolve/main/" + SHARD1, method="HEAD")
        assert head.headers["X-Repo-Commit"] == repo.commit and head.headers["ETag"].startswith('"')
        assert int(head.headers["Content-Length"]) == len(repo.files[SHARD1])
        part = get("/Qwen/Qwen3.6-27B/resolve/%s/%s" % (repo.commit, SHARD1), Range="bytes=10-")
        assert part.status == 206 and part.read() == repo.files[SHARD1][10:]
        with pytest.raises(urllib.error.HTTPError) as e:
            get("/Qwen/Qwen3.6-27B/resolve/other/" + SHARD1)
        assert e.value.code == 404
        # the drafter beside it, at a commit of its own, its config.json a DFlash drafter's
        info = json.load(get("/api/models/z-lab/Qwen3.6-27B-DFlash/revision/main"))
        assert info["sha"] == drafter.commit != repo.commit
        config = json.load(get("/z-lab/Qwen3.6-27B-DFlash/resolve/main/config.json"))
        assert config["dflash_config"] == {"block_size": 16}
        with pytest.raises(urllib.error.HTTPError) as e:
            get("/api/models/org/unknown/revision/main")
        assert e.value.code == 404
    finally:
        server.shutdown()
    lines = [json.loads(x) for x in log.read_text().splitlines()]
    assert [x["token"] for x in lines] == [False] + [True] * 8
    assert "x" * 30 not in log.read_text()
