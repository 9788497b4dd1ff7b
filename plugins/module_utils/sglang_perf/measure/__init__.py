"""Talking to a server and counting what it does, never judging it: the HTTP client (``client``),
the options (``config``), the benchmark (``engine``), the prompts and the long-context corpus
(``prompts``, ``corpus``), the statistics (``stats``), the engines' Prometheus counters
(``metrics``) and the known answers (``answers``)."""
