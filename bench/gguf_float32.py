"""A float32 copy of a GGUF file, for llama.cpp's equal-precision row in bench/generate_speed.py.

    .venv/bin/python bench/gguf_float32.py SOURCE.gguf TARGET.gguf

Every tensor of SOURCE dequantized to float32 (``gguf.quants.dequantize``, the reader llama.cpp's project
keeps: the values ``nexttoken.load_smollm2`` computes the same way), every metadata field copied as is but
``general.file_type``, which says float32. llama.cpp then reads the same float32 weights our fast path
reads (538 MB a token for SmolLM2-135M, against the Q4_1 file's 97 MB): a fair comparison of the two
engines at equal precision, where the Q4_1 row compares bytes as much as code.
"""

import os
import sys
from pathlib import Path

import gguf

USAGE = "usage: .venv/bin/python bench/gguf_float32.py SOURCE.gguf TARGET.gguf"  # (the docstring is gone under -OO)


def float32_copy(source: Path, target: Path) -> Path:
    """Write TARGET (through a temporary name, so that an interrupted run leaves no half file); return it."""
    reader = gguf.GGUFReader(source)
    architecture = reader.fields[gguf.Keys.General.ARCHITECTURE].contents()
    partial = target.with_name(target.name + ".partial")
    writer = gguf.GGUFWriter(partial, architecture)
    for field in reader.fields.values():
        # the writer writes the architecture and its own GGUF.* header fields itself
        if field.name == gguf.Keys.General.ARCHITECTURE or field.name.startswith("GGUF."):
            continue
        if field.name == gguf.Keys.General.FILE_TYPE:
            writer.add_file_type(gguf.LlamaFileType.ALL_F32)
            continue
        kind = field.types[0]
        item_kind = field.types[-1] if kind == gguf.GGUFValueType.ARRAY else None
        writer.add_key_value(field.name, field.contents(), kind, sub_type=item_kind)
    for tensor in reader.tensors:
        writer.add_tensor(tensor.name, gguf.quants.dequantize(tensor.data, tensor.tensor_type))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    os.replace(partial, target)
    return target


def cached_float32_copy(source: Path) -> Path:
    """The float32 copy of SOURCE under the user's cache directory, made on first use (seconds)."""
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    target = base / "nexttoken" / "gguf" / f"{source.stem}.F32-of-{source.stat().st_size}.gguf"
    if not target.is_file():
        target.parent.mkdir(parents=True, exist_ok=True)
        print(f"writing {target} (the float32 copy of {source.name}, once)", file=sys.stderr, flush=True)
        float32_copy(source, target)
    return target


if __name__ == "__main__":
    if len(sys.argv) != 3:
        raise SystemExit(USAGE)
    float32_copy(Path(sys.argv[1]), Path(sys.argv[2]))
