"""Throughput self-check of the emulator: N concurrent streams against a running emulator.

    python -m bench.emulator.loadcheck --url http://127.0.0.1:30000 --concurrency 256 \
        --requests 512 --max-tokens 512 --endpoint chat

Prints client-side aggregate tok/s (completion tokens from the final usage / meta_info) and the
emulator's own count from /_emulator/stats. A deliberately thin client: it parses only the last
chunk of each stream, so the figure measures the emulator rather than this script.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time

import aiohttp


async def one(session, url, endpoint, max_tokens, i):
    if endpoint == "generate":
        path, body = "/generate", {"text": "load check %d" % i, "stream": True,
                                   "sampling_params": {"max_new_tokens": max_tokens,
                                                       "ignore_eos": True}}
    elif endpoint == "completions":
        path, body = "/v1/completions", {"model": "default", "prompt": "load check %d" % i,
                                         "max_tokens": max_tokens, "ignore_eos": True,
                                         "stream": True,
                                         "stream_options": {"include_usage": True}}
    else:
        path, body = "/v1/chat/completions", {
            "model": "default", "messages": [{"role": "user", "content": "load check %d" % i}],
            "max_tokens": max_tokens, "ignore_eos": True, "stream": True,
            "stream_options": {"include_usage": True}}
    last = None
    chunks = 0
    async with session.post(url + path, json=body) as resp:
        resp.raise_for_status()
        async for line in resp.content:
            if line.startswith(b"data: ") and not line.startswith(b"data: [DONE]"):
                last = line
                chunks += 1
    obj = json.loads(last[6:])
    if endpoint == "generate":
        return obj["meta_info"]["completion_tokens"], chunks
    return obj["usage"]["completion_tokens"], chunks


async def main_async(a) -> int:
    conn = aiohttp.TCPConnector(limit=a.concurrency)
    timeout = aiohttp.ClientTimeout(total=None)
    sem = asyncio.Semaphore(a.concurrency)
    async with aiohttp.ClientSession(connector=conn, timeout=timeout) as session:
        before = (await (await session.get(a.url + "/_emulator/stats?requests=0")).json())

        async def guarded(i):
            async with sem:
                return await one(session, a.url, a.endpoint, a.max_tokens, i)

        t0 = time.monotonic()
        results = await asyncio.gather(*(guarded(i) for i in range(a.requests)))
        wall = time.monotonic() - t0
        after = (await (await session.get(a.url + "/_emulator/stats?requests=0")).json())
    tokens = sum(r[0] for r in results)
    chunks = sum(r[1] for r in results)
    produced = after["totals"]["generation_tokens"] - before["totals"]["generation_tokens"]
    print(json.dumps({"endpoint": a.endpoint, "concurrency": a.concurrency,
                      "requests": a.requests, "wall_s": round(wall, 3),
                      "client_tokens": tokens, "emulator_tokens": produced,
                      "sse_chunks": chunks, "aggregate_tok_s": round(tokens / wall, 1)}))
    return 0


def main() -> int:
    p = argparse.ArgumentParser(prog="python -m bench.emulator.loadcheck")
    p.add_argument("--url", default="http://127.0.0.1:30000")
    p.add_argument("--concurrency", type=int, default=256)
    p.add_argument("--requests", type=int, default=512)
    p.add_argument("--max-tokens", type=int, default=512)
    p.add_argument("--endpoint", choices=["chat", "completions", "generate"], default="chat")
    return asyncio.run(main_async(p.parse_args()))


if __name__ == "__main__":
    sys.exit(main())
