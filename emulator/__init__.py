"""SGLang 0.5.23 emulator: a CPU stand-in for the GPU server, with exact counters.

Shares no code with plugins/module_utils (the benchmark engine). See README.md.
"""
