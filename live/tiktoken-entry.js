// Bundled by esbuild at build time (_ext/live_page.py) into _static/live/tiktoken-gpt2.js, one classic
// script: js-tiktoken's encoder with its GPT-2 ranks (the same 50,257 tokens as the package's
// gpt2.tiktoken; tests/book/test_live_export.py checks them rank by rank).
import { Tiktoken } from "js-tiktoken/lite";
import gpt2 from "js-tiktoken/ranks/gpt2";

window.nexttokenGpt2 = () => new Tiktoken(gpt2);
