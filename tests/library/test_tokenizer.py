import hashlib
from importlib import resources

import tiktoken

import nexttoken
from nexttoken.tokenizer import GPT2_BPE_SHA256


def test_is_a_tiktoken_encoding_with_gpt2_vocabulary():
    enc = nexttoken.gpt2_tokenizer()
    assert isinstance(enc, tiktoken.Encoding)
    assert enc.n_vocab == 50257
    assert enc.eot_token == 50256 == nexttoken.END_OF_TEXT_ID
    assert enc.encode("<|endoftext|>", allowed_special="all") == [50256]


def test_known_ids():
    enc = nexttoken.gpt2_tokenizer()
    assert enc.encode("AI enhances our") == [20185, 32479, 674]
    assert enc.encode("Hello world") == [15496, 995]  # GPT-2's well-known ids
    assert enc.encode(" the") == [262]


def test_round_trip_on_unicode_and_whitespace():
    enc = nexttoken.gpt2_tokenizer()
    text = "ROMEO:\nBut, soft!  what light through yonder window breaks?\n\n\tÉté 東京 🙂 1234567"
    assert enc.decode(enc.encode(text)) == text


def test_split_pattern_is_tiktokens_r50k():
    from tiktoken_ext.openai_public import r50k_pat_str

    assert nexttoken.gpt2_tokenizer()._pat_str == r50k_pat_str


def test_packaged_rank_file_has_the_expected_hash_and_license():
    files = resources.files("nexttoken").joinpath("assets")
    assert hashlib.sha256(files.joinpath("gpt2.tiktoken").read_bytes()).hexdigest() == GPT2_BPE_SHA256
    assert "MIT License" in files.joinpath("LICENSE-gpt2-tiktoken.txt").read_text()


def test_damaged_rank_file_fails_loudly(monkeypatch):
    import pytest

    from nexttoken import tokenizer

    real = resources.files

    class Damaged:
        def __init__(self, root):
            self.root = root

        def joinpath(self, name):
            inner = self.root.joinpath(name)

            class F:
                def read_bytes(self):
                    return inner.read_bytes()[:-10]

            return F()

    monkeypatch.setattr(tokenizer.resources, "files", lambda pkg: Damaged(real(pkg)))
    with pytest.raises(RuntimeError, match="damaged"):
        tokenizer._load_ranks()
