"""Entry point: python -m emulator <argv of python -m sglang.launch_server>."""
import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main())
