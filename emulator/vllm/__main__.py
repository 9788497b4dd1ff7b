"""Entry point: python -m emulator.vllm serve MODEL [flags] (the argv of `vllm`)."""
import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main())
