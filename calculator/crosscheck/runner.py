"""Child process of the vLLM cross-check: start vLLM's engine on the CPU build and let it log its capacity.

Run as ``python -m calculator.crosscheck.runner '<json of vllm.LLM keyword arguments>'`` with
``VLLM_CPU_KVCACHE_SPACE`` set by the parent. The parent reads the ``CPU KV cache size: …`` line from this
process's output and kills the process group as soon as it appears; if the engine gets further, this
script generates nothing and exits.
"""
from __future__ import annotations

import json
import sys


def main(argv: list[str]) -> int:
    kwargs = json.loads(argv[1])
    from vllm import LLM  # imported here: the parent never imports vLLM

    LLM(**kwargs)
    print("CROSSCHECK-RUNNER: engine started", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
