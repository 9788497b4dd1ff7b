"""Progress of a measurement on the controller's terminal: per case, a tqdm bar of the requests
done (out of the case's max_requests), the current figure with its interval and the state of the
verdict, and tqdm's ETA to the maximum (a sequential case usually stops well before it). Not on a
terminal (CI logs, pipes): one line per request and per verdict instead of a redrawn bar.

The engine calls the object per finished request (``progress(rec)``) and, when it has them,
``start(cfg)`` as a case begins, ``look(cfg, result, elapsed)`` at every verdict it takes."""
from __future__ import annotations

import sys

from tqdm import tqdm

from sglang_perf.judge import verdict


def _fmt(value, spec=".1f"):
    return "-" if value is None else format(value, spec)


def _headline(cfg, result):
    """The case's main figure with its interval: decode tok/s, or the aggregate at C > 1 when only
    it is judged."""
    iv = result.get("intervals") or {}
    if cfg.get("min_aggregate_tok_s") is not None and cfg.get("min_tok_s") is None:
        return "aggregate %s tok/s" % verdict.fmt_interval(iv.get("aggregate_tok_s"))
    text = "decode %s tok/s" % verdict.fmt_interval(iv.get("decode_tok_s"))
    if iv.get("accept_len"):
        text += ", accept %s" % verdict.fmt_interval(iv["accept_len"], ".2f")
    return text


class Progress(object):
    def __init__(self, stream=None, bar=None):
        self.stream = stream or sys.stderr
        self.bar_mode = self.stream.isatty() if bar is None else bar
        self.bar = None
        self.cfg = None

    # -- the engine's calls ------------------------------------------------------------------
    def start(self, cfg):
        self.close()
        self.cfg = cfg
        if self.bar_mode:
            self.bar = tqdm(total=cfg["max_requests"], desc=cfg["case"], unit="req", file=self.stream,
                            leave=True, dynamic_ncols=True)
        else:
            more = "" if cfg["max_requests"] == cfg["requests"] else ", then %s up to %d" % (
                "one at a time" if cfg["concurrency"] == 1 else "%d at a time" % cfg["concurrency"],
                cfg["max_requests"])
            self._line("case %s: %d requests%s, C=%d, %d tokens each"
                       % (cfg["case"], cfg["requests"], more, cfg["concurrency"], cfg["max_tokens"]))

    def __call__(self, rec):
        if rec.phase != "measure" or not self.bar_mode:
            self._line(self.request_line(rec))
        elif self.bar is not None:
            self.bar.update(1)

    def look(self, cfg, result, elapsed):
        state = result["verdict"]
        text = "%s: %s" % (state, _headline(cfg, result))
        if self.bar is not None:
            self.bar.set_postfix_str(text)
        else:
            self._line("  %s after %d requests, %.0fs: %s" % (cfg["case"], result["requests"], elapsed, text))

    def close(self):
        if self.bar is not None:
            self.bar.close()
            self.bar = None

    # -- lines ------------------------------------------------------------------------------
    @staticmethod
    def request_line(rec):
        """One finished request: phase, prompt, the server's prompt tokens, tokens, decode tok/s,
        accept length, TTFT."""
        if rec.error:
            return "  %-7s %-20s ERROR %s: %s" % (rec.phase, rec.case, rec.error[0], rec.error[1])
        al = (rec.completion_tokens / rec.verify_ct) if rec.verify_ct else None
        return "  %-7s %-20s prompt %6s  %5d tok  %6s tok/s  accept %s  ttft %.2fs" % (
            rec.phase, rec.case, rec.prompt_tokens or "-", rec.completion_tokens or 0,
            _fmt(rec.decode_tok_s()), _fmt(al, ".2f"), rec.t_first - rec.t_send)

    def _line(self, text):
        if self.bar is not None:
            self.bar.write(text, file=self.stream)
        else:
            self.stream.write(text + "\n")
            self.stream.flush()
