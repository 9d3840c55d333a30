"""Export the shipped Tiny Shakespeare model (``nexttoken.load_pretrained()``) as ONNX, for the live page.

    .venv/bin/python scripts/export_onnx.py [--out _build/live/model.onnx]

The graph takes ``input_ids`` int64 (1, T), 1 <= T <= context_length, and returns ``logits`` float32
(1, T, vocab): the model's ``run`` on one row, no cache, no padding (what ``generate`` computes when it
recomputes the window); and ``attention`` float32 (1, heads, T): the last position's attention weights
in layer ``ATTENTION_LAYER`` (the page's attention view). To return the weights, every block runs the
explicit attention of chapter 2 (``return_attention=True``) instead of the fused kernel: the same
computation, equal up to float rounding (the tests hold the logits to nexttoken's within 1e-4). The live
page (``live_loop.md``, ``live/live.js``) runs it in the browser with onnxruntime-web; the book's extension
``_ext/live_page.py`` runs this script at build time.

The exporter is torch.onnx's dynamo exporter (``dynamo=True``, which needs ``onnx`` and ``onnxscript``).
The shipped weights are stored in float16 and loaded as float32, so every weight is a float16 number:
the graph stores them as float16 and casts them to float32 once, which halves the file and changes no
value (checked here, weight by weight). Beside the model it writes ``model.json``: the numbers the page
needs (context length, vocabulary size, the EOS id, the work counts of ``work_counts``) and the graph's
size.
"""

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import torch

import nexttoken

EOS = nexttoken.END_OF_TEXT_ID  # GPT-2's <|endoftext|>
ATTENTION_LAYER = -1  # the last block: whose attention row the page shows


class LogitsAndAttention(torch.nn.Module):
    """The decoder's forward pass on checked arguments (``Decoder.forward_unchecked``; the checks in ``forward``
    look at the ids' values, which an exported graph cannot do), and one layer's last attention row."""

    def __init__(self, model: nexttoken.Decoder):
        super().__init__()
        self.model = model

    def forward(self, input_ids):
        logits, attention = self.model.forward_unchecked(input_ids, return_attention=True)
        return logits, attention[ATTENTION_LAYER][:, :, -1, :]  # (1, heads, T): the last query's row


def store_weights_as_float16(model_proto):
    """Every float32 initializer whose values are all float16 numbers becomes a float16 initializer
    and a Cast to float32 under its old name: the same values, half the bytes. Returns how many."""
    import onnx
    from onnx import helper, numpy_helper

    graph, casts, converted = model_proto.graph, [], 0
    for init in list(graph.initializer):
        if init.data_type != onnx.TensorProto.FLOAT:
            continue
        value = numpy_helper.to_array(init)
        with np.errstate(over="ignore"):  # a value past float16's range becomes inf: not kept, below
            half = value.astype(np.float16)
        if value.size < 16 or not np.array_equal(half.astype(np.float32), value):
            continue  # small tensors (shapes, constants) or values float16 cannot hold: keep them
        name = init.name
        new = numpy_helper.from_array(half, name + "__float16")
        graph.initializer.remove(init)
        graph.initializer.append(new)
        casts.append(helper.make_node("Cast", [new.name], [name], to=onnx.TensorProto.FLOAT,
                                      name=name + "__to_float32"))
        converted += 1
    for node in reversed(casts):  # first in the graph: every use of the old name comes after its Cast
        graph.node.insert(0, node)
    return converted


def work_counts(model: nexttoken.Decoder) -> dict:
    """The multiply-adds of the model's matrix products, for the live page's cache comparison: a forward
    pass that runs q new positions, each attending to k positions (itself and those before it), does
    q * (block + head) + q * k * attention_pair of them (tests/book/test_live_export.py checks this
    against torch's FLOP counter). Also the numbers a KV cache keeps per position."""
    config = model.config
    linears = [m for m in model.blocks.modules() if isinstance(m, torch.nn.Linear)]
    return {
        # every block's linear layers (queries, keys and values; the output projection; the MLP), per position
        "block_macs_per_position": sum(m.in_features * m.out_features for m in linears),
        "head_macs_per_position": model.lm_head.in_features * model.lm_head.out_features,  # the logits
        # one query and one key, in every layer: q . k over the query heads, then the weighted value
        "attention_macs_per_pair": config.n_layers * 2 * config.n_heads * config.head_dim,
        "cache_numbers_per_position": config.n_layers * 2 * config.n_kv_heads * config.head_dim,  # keys, values
    }


def export(out: Path) -> dict:
    import onnx

    model = nexttoken.load_pretrained()
    config = model.config
    wrapper = LogitsAndAttention(model).eval()
    example = torch.zeros((1, 8), dtype=torch.long)
    T = torch.export.Dim("T", min=1, max=config.context_length)
    with torch.no_grad():
        program = torch.onnx.export(wrapper, (example,), dynamo=True, input_names=["input_ids"],
                                    output_names=["logits", "attention"], dynamic_shapes={"input_ids": {1: T}},
                                    optimize=True, verbose=False)
    proto = program.model_proto
    converted = store_weights_as_float16(proto)
    onnx.checker.check_model(proto)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(".tmp")
    onnx.save(proto, tmp)
    tmp.replace(out)  # a killed export never leaves a half-written model behind
    layer = range(config.n_layers)[ATTENTION_LAYER]
    info = {"context_length": config.context_length, "vocab_size": config.vocab_size, "eos_token_id": EOS,
            "attention_layer": layer, "n_heads": config.n_heads, "n_layers": config.n_layers,
            "parameters": model.num_parameters(), "onnx_bytes": out.stat().st_size,
            "float16_initializers": converted, **work_counts(model)}
    (out.parent / "model.json").write_text(json.dumps(info, indent=2) + "\n")
    return info


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path("_build/live/model.onnx"))
    args = parser.parse_args(argv)
    info = export(args.out)
    print(f"wrote {args.out} ({info['onnx_bytes'] / 1e6:.1f} MB, {info['parameters']:,} parameters, "
          f"{info['float16_initializers']} weights stored as float16)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
