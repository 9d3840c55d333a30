"""llama.cpp on the GGUF file itself, in a process of its own, for bench/generate_speed.py (not run by hand).

    python bench/llama_cpp_worker.py GGUF_FILE THREADS CONTEXT

Loads the file with llama-cpp-python (llama.cpp's own loader and its quantized kernels: the weights stay
Q4_1, as stored, where nexttoken and transformers dequantize them to float32), then answers requests,
one JSON line each on stdin:
{"prompt": [ids], "new_tokens": n} -> {"seconds": s, "tokens": [n new ids], "stamps": [n times]},
timing only the generation. A process of its own, as the CTranslate2 worker: llama.cpp brings its own
thread pool, which would disturb torch's (and the other way round).
"""

import json
import sys
import time

import llama_cpp

REST_SECONDS = 0.5  # after each timed generation, before replying (not timed): let its threads go idle


def main():
    path, threads, context = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    llm = llama_cpp.Llama(model_path=path, n_ctx=context, n_threads=threads, n_threads_batch=threads,
                          verbose=False)
    print(json.dumps({"ready": llama_cpp.__version__}), flush=True)
    for line in sys.stdin:
        request = json.loads(line)
        tokens, stamps = [], []  # stamps: each new token's time (the steady step's)
        start = time.perf_counter()
        # Greedy (top_k=1, temperature 0), no end token checked: exactly n new tokens, as the other contenders.
        for token in llm.generate(request["prompt"], top_k=1, temp=0.0, reset=True):
            stamps.append(time.perf_counter())
            tokens.append(token)
            if len(tokens) == request["new_tokens"]:
                break
        seconds = time.perf_counter() - start
        time.sleep(REST_SECONDS)
        print(json.dumps({"seconds": seconds, "tokens": tokens, "stamps": stamps}), flush=True)


if __name__ == "__main__":
    main()
