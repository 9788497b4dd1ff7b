"""The original notes' three launch profiles as SGLang 0.5.23 command lines, for the demo, the tests and
the self-check. (The deploy renders its unit's argv from inventory variables with the filter
plugin; these are the same three profiles written out.)"""

MODEL_ARGS = ["--model-path", "/models/Qwen3.6-27B", "--served-model-name", "Qwen3.6-27B",
              "--tp-size", "2", "--trust-remote-code"]

PROFILE_ARGS = {
    # 26.7 tok/s in the original logs
    "no_spec": [],
    # the hand launch: 35-40 tok/s, accept length 1.75
    "nextn_1step": ["--speculative-algorithm", "NEXTN", "--speculative-num-steps", "1",
                    "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "2",
                    "--mamba-radix-cache-strategy", "extra_buffer"],
    # the recorded good profile: 47-57 tok/s steady, accept length 2.98-3.52
    "nextn_3step": ["--speculative-algorithm", "NEXTN", "--speculative-num-steps", "3",
                    "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "4",
                    "--mem-fraction-static", "0.88", "--context-length", "131072",
                    "--max-running-requests", "16", "--mamba-full-memory-ratio", "0.5",
                    "--mamba-radix-cache-strategy", "extra_buffer",
                    "--reasoning-parser", "qwen3", "--tool-call-parser", "qwen3_coder"],
}
