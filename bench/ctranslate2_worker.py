"""CTranslate2 float32 in a process of its own, for bench/generate_speed.py (not run by hand).

    python bench/ctranslate2_worker.py HF_MODEL_DIR THREADS

Converts the transformers GPT-2 saved in HF_MODEL_DIR (the benchmark's random weights, so the same
model) to CTranslate2 float32, then answers requests, one JSON line each on stdin:
{"prompt": [ids], "new_tokens": n} -> {"seconds": s, "tokens": [n new ids], "stamps": [n times]}, timing
only the generation (stamps: each new token's time, perf_counter's, from the per-token callback). A process of its
own because torch and CTranslate2 each bring an OpenMP runtime, and
two in one process can disturb each other's timing (and the torch contenders').
"""

import json
import sys
import tempfile
import time

import ctranslate2
from ctranslate2.converters import TransformersConverter

REST_SECONDS = 0.5  # after each timed generation, before replying (not timed)


class StandInTokenizer:
    """What the converter reads from a tokenizer: the vocabulary and three special tokens.

    The benchmark's model has no tokenizer files (random weights, built offline). CTranslate2 works on
    token strings, so any unique string per id does: "t0", "t1", ..., and GPT-2's <|endoftext|> last.
    """

    def __init__(self, vocab_size: int):
        self.strings = [f"t{i}" for i in range(vocab_size - 1)] + ["<|endoftext|>"]
        self.bos_token = self.eos_token = self.unk_token = "<|endoftext|>"

    def get_vocab(self) -> dict[str, int]:
        return {s: i for i, s in enumerate(self.strings)}


class Converter(TransformersConverter):
    def load_tokenizer(self, tokenizer_class, model_name_or_path, **kwargs):
        return StandInTokenizer(self.vocab_size)


def main():
    hf_dir, threads = sys.argv[1], int(sys.argv[2])
    vocab_size = json.load(open(f"{hf_dir}/config.json"))["vocab_size"]
    with tempfile.TemporaryDirectory() as out_dir:
        converter = Converter(hf_dir)
        converter.vocab_size = vocab_size
        converter.convert(out_dir, quantization="float32", force=True)
        generator = ctranslate2.Generator(out_dir, device="cpu", compute_type="float32", intra_threads=threads)
        strings = StandInTokenizer(vocab_size).strings
        print(json.dumps({"ready": ctranslate2.__version__}), flush=True)
        for line in sys.stdin:
            request = json.loads(line)
            prompt = [strings[i] for i in request["prompt"]]
            stamps = []  # each new token's time, from its per-token callback (the steady step's)
            start = time.perf_counter()
            # Greedy (top-1), never stopping early (no end token): n new tokens, as the other contenders.
            result = generator.generate_batch([prompt], max_length=request["new_tokens"], sampling_topk=1,
                                              end_token=[], include_prompt_in_result=False,
                                              callback=lambda step: stamps.append(time.perf_counter()) and False)
            seconds = time.perf_counter() - start
            # CTranslate2's OpenMP threads keep spinning for a while after its last parallel loop: reply
            # only once they have gone to sleep, or they steal the cores from whatever runs next.
            time.sleep(REST_SECONDS)
            print(json.dumps({"seconds": seconds, "tokens": result[0].sequences_ids[0], "stamps": stamps}), flush=True)


if __name__ == "__main__":
    main()
