#!/usr/bin/env python3
"""A local stand-in for the Hugging Face Hub: what `hf download REPO --revision R --local-dir D`
asks (huggingface_hub 2.4), for tiny synthetic models, on loopback. Standard library only.

    stand_in_hub.py model DIR [--shards 2] [--drafter]   write the synthetic model (or drafter) into DIR
    stand_in_hub.py serve DIR --repo ORG/NAME --port P [--also ORG/NAME=DIR ...] [--token-file F] [--log F]

A drafter (--drafter) is the model's files with the config.json of z-lab's DFlash drafters
(architectures DFlashDraftModel, dflash_config.block_size 16), which the emulators read.
--also serves more repositories beside the first, each at its own commit.

The endpoints huggingface_hub calls:
  GET  /api/models/<repo>/revision/<rev>     model info: the commit sha and the siblings
  GET  /api/models/<repo>/tree/<commit>      the file listing (size, blob id, LFS sha256)
  HEAD /<repo>/resolve/<rev>/<file>          X-Repo-Commit, ETag, Content-Length (no Xet headers,
                                             so the client downloads over plain HTTP)
  GET  /<repo>/resolve/<rev>/<file>          the file (Range honoured, for resumed downloads)
<rev> is the repository's commit sha or `main`. With --token-file every request must carry
`Authorization: Bearer <token>` (401 otherwise). --log gets one JSON line per request: method,
path, status, whether a token was sent - never the token.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import struct
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote, urlsplit

DTYPE_BYTES = {"F32": 4, "BF16": 2, "F16": 2, "I64": 8, "U8": 1}


def safetensors_bytes(tensors):
    """A safetensors file: {name: (dtype, shape)} -> bytes (data is a repeating byte pattern)."""
    header, offset, data = {}, 0, bytearray()
    for name, (dtype, shape) in tensors.items():
        n = DTYPE_BYTES[dtype]
        for dim in shape:
            n *= dim
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [offset, offset + n]}
        data += bytes((offset + i) % 251 for i in range(n))
        offset += n
    raw = json.dumps(header, separators=(",", ":")).encode("utf-8")
    raw += b" " * (-len(raw) % 8)  # safetensors pads the header to 8 bytes with spaces
    return struct.pack("<Q", len(raw)) + raw + bytes(data)


MODEL_CONFIG = {"architectures": ["Qwen3_5ForConditionalGeneration"], "model_type": "qwen3_5",
                "num_hidden_layers": 64, "mtp_num_hidden_layers": 1, "torch_dtype": "bfloat16",
                "note": "stand-in for the Qwen3.6-27B weights (scripts/stand_in_hub.py)"}
# What SGLang's dflash_utils.parse_dflash_draft_config and the emulators read of a DFlash drafter.
DRAFTER_CONFIG = {"architectures": ["DFlashDraftModel"], "model_type": "qwen3", "num_hidden_layers": 5,
                  "torch_dtype": "bfloat16", "dflash_config": {"block_size": 16},
                  "note": "stand-in for z-lab/Qwen3.6-27B-DFlash (scripts/stand_in_hub.py)"}


def model_files(shards=2, drafter=False):
    """{relative path: bytes} of a tiny model (or drafter): config.json, the index and `shards`
    shards."""
    files = {"config.json": json.dumps(DRAFTER_CONFIG if drafter else MODEL_CONFIG, indent=1).encode()}
    weight_map, total = {}, 0
    for i in range(shards):
        name = "model-%05d-of-%05d.safetensors" % (i + 1, shards)
        tensors = {"model.layers.%d.mlp.weight" % i: ("BF16", (64, 128)),
                   "model.layers.%d.norm.weight" % i: ("F32", (128,))}
        if i == 0:
            tensors["model.embed_tokens.weight"] = ("BF16", (256, 64))
        for t, (dtype, shape) in tensors.items():
            weight_map[t] = name
            total += DTYPE_BYTES[dtype] * shape[0] * (shape[1] if len(shape) > 1 else 1)
        files[name] = safetensors_bytes(tensors)
    files["model.safetensors.index.json"] = json.dumps(
        {"metadata": {"total_size": total}, "weight_map": weight_map}, indent=1, sort_keys=True).encode()
    return files


def write_model(directory, shards=2, drafter=False):
    """Write the model's files into ``directory``, world-readable (as a pre-staged model is)."""
    os.makedirs(directory, exist_ok=True)
    os.chmod(directory, 0o755)
    for rel, data in model_files(shards, drafter).items():
        path = os.path.join(directory, rel)
        with open(path, "wb") as f:
            f.write(data)
        os.chmod(path, 0o644)


class Repo:
    def __init__(self, directory, repo):
        self.repo, self.files = repo, {}
        for rel in sorted(os.listdir(directory)):
            path = os.path.join(directory, rel)
            if os.path.isfile(path):
                with open(path, "rb") as f:
                    self.files[rel] = f.read()
        listing = "".join("%s %s\n" % (rel, hashlib.sha256(d).hexdigest()) for rel, d in self.files.items())
        self.commit = hashlib.sha1(listing.encode()).hexdigest()

    def tree(self):
        out = []
        for rel, data in self.files.items():
            entry = {"type": "file", "path": rel, "size": len(data),
                     "oid": hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()}
            if rel.endswith(".safetensors"):
                entry["lfs"] = {"oid": hashlib.sha256(data).hexdigest(), "size": len(data),
                                "pointerSize": 134}
            out.append(entry)
        return out


def handler(repos, token, log):
    """The request handler serving ``repos`` (a list of Repo), the first one's commit on answers
    that name no repository."""
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, fmt, *args):
            pass

        def _send(self, status, body=b"", headers=(), head=False):
            if log:  # before the answer: the client's next request cannot be logged ahead of this one
                with open(log, "a") as f:
                    f.write(json.dumps({"method": self.command, "path": urlsplit(self.path).path,
                                        "status": status, "token": self._auth is not None}) + "\n")
            self.send_response(status)
            for k, v in headers:
                self.send_header(k, v)
            if not any(k.lower() == "content-length" for k, _ in headers):
                self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if not head:
                self.wfile.write(body)

        def _json(self, repo, status, obj, head=False):
            self._send(status, json.dumps(obj).encode(), [("Content-Type", "application/json"),
                                                          ("X-Repo-Commit", repo.commit)], head)

        def _route(self, head):
            auth = self.headers.get("Authorization")
            self._auth = auth
            if token is not None and auth != "Bearer " + token:
                return self._send(401, b'{"error": "Invalid credentials"}', [
                    ("Content-Type", "application/json"), ("X-Error-Code", "Unauthorized")], head)
            path = unquote(urlsplit(self.path).path)
            repo = next((r for r in repos if path.startswith(("/api/models/%s/" % r.repo, "/%s/" % r.repo))),
                        None)
            if repo is None:
                return self._send(404, b'{"error": "Repository not found"}',
                                  [("X-Error-Code", "RepoNotFound")], head)
            revs = (repo.commit, "main")
            api = "/api/models/%s/" % repo.repo
            if path.startswith(api + "revision/") and path[len(api + "revision/"):] in revs:
                return self._json(repo, 200, {"id": repo.repo, "modelId": repo.repo, "sha": repo.commit,
                                        "private": False, "gated": False,
                                        "siblings": [{"rfilename": r} for r in repo.files]}, head)
            if path.startswith(api + "tree/") and path[len(api + "tree/"):].strip("/") in revs:
                return self._json(repo, 200, repo.tree(), head)
            resolve = "/%s/resolve/" % repo.repo
            if path.startswith(resolve):
                rev, _, rel = path[len(resolve):].partition("/")
                if rev in revs and rel in repo.files:
                    return self._file(repo, repo.files[rel], head)
                return self._send(404, b'{"error": "Entry not found"}',
                                  [("X-Error-Code", "EntryNotFound"), ("X-Repo-Commit", repo.commit)], head)
            return self._send(404, b'{"error": "Repository not found"}',
                              [("X-Error-Code", "RepoNotFound")], head)

        def _file(self, repo, data, head):
            etag = '"%s"' % hashlib.sha256(data).hexdigest()
            headers = [("ETag", etag), ("X-Repo-Commit", repo.commit), ("Accept-Ranges", "bytes"),
                       ("Content-Type", "application/octet-stream")]
            rng = self.headers.get("Range", "")
            if rng.startswith("bytes=") and not head:
                start_s, _, end_s = rng[6:].partition("-")
                start = int(start_s or 0)
                end = int(end_s) if end_s else len(data) - 1
                part = data[start:end + 1]
                return self._send(206, part, headers + [
                    ("Content-Range", "bytes %d-%d/%d" % (start, start + len(part) - 1, len(data)))])
            return self._send(200, data, headers + [("Content-Length", str(len(data)))], head)

        def do_HEAD(self):
            self._route(head=True)

        def do_GET(self):
            self._route(head=False)

    return Handler


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("model", help="write the synthetic model")
    m.add_argument("dir")
    m.add_argument("--shards", type=int, default=2)
    m.add_argument("--drafter", action="store_true", help="a DFlash drafter's config.json")
    s = sub.add_parser("serve", help="serve a directory as a model repository")
    s.add_argument("dir")
    s.add_argument("--repo", required=True)
    s.add_argument("--port", type=int, required=True)
    s.add_argument("--bind", default="127.0.0.1")
    s.add_argument("--also", action="append", default=[], metavar="ORG/NAME=DIR",
                   help="another repository served beside the first")
    s.add_argument("--token-file")
    s.add_argument("--log")
    a = ap.parse_args(argv)
    if a.cmd == "model":
        write_model(a.dir, a.shards, a.drafter)
        return 0
    token = None
    if a.token_file:
        with open(a.token_file) as f:
            token = f.read().strip()
    repos = [Repo(a.dir, a.repo)]
    for also in a.also:
        name, sep, directory = also.partition("=")
        if not sep or not directory:
            ap.error("--also takes ORG/NAME=DIR, got %r" % also)
        repos.append(Repo(directory, name))
    server = ThreadingHTTPServer((a.bind, a.port), handler(repos, token, a.log))
    for repo in repos:
        print("stand-in hub: %s at commit %s on http://%s:%d" % (repo.repo, repo.commit, a.bind, a.port),
              flush=True)
    server.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())
