"""vLLM 0.33.0 emulator: the same CPU stand-in (scheduler, speed and acceptance model, faults,
exact counters) behind vLLM's command line and HTTP shapes. See ../README.md "vLLM 0.33.0"."""
