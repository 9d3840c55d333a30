// Are js-tiktoken's GPT-2 ranks the package's gpt2.tiktoken? Prints a JSON summary; exits 1 if not.
//   node live/check_ranks.mjs lib/nexttoken/assets/gpt2.tiktoken        (tests/book/test_live_export.py runs it)
// js-tiktoken stores its ranks compressed: one line per run of consecutive ranks, "name offset tok tok ...",
// each token base64 (as it parses them itself: dist/chunk-*.js); gpt2.tiktoken has "base64 rank" lines.
import { readFileSync } from "node:fs";
import gpt2 from "js-tiktoken/ranks/gpt2";

const ours = new Map();
for (const line of readFileSync(process.argv[2], "utf8").split("\n").filter(Boolean)) {
  const [token, rank] = line.split(" ");
  ours.set(token, Number(rank));
}
const theirs = new Map();
for (const line of gpt2.bpe_ranks.split("\n").filter(Boolean)) {
  const [, offset, ...tokens] = line.split(" ");
  tokens.forEach((token, i) => theirs.set(token, Number(offset) + i));
}
const differ = [...ours].filter(([token, rank]) => theirs.get(token) !== rank).map(([t]) => t);
const extra = [...theirs.keys()].filter((token) => !ours.has(token));
const summary = {ours: ours.size, theirs: theirs.size, differ: differ.slice(0, 5), n_differ: differ.length,
                 extra: extra.slice(0, 5), n_extra: extra.length, special_tokens: gpt2.special_tokens,
                 explicit_n_vocab: gpt2.explicit_n_vocab};
console.log(JSON.stringify(summary));
process.exit(differ.length || extra.length ? 1 : 0);
