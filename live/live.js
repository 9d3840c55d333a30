// The live page (live_loop.md): chapter 5's loop on the shipped model, in the browser.
//
// Nothing heavy loads with the page: the first press of a button fetches the tokenizer (js-tiktoken's
// GPT-2 ranks), onnxruntime-web and the model (ONNX, exported by scripts/export_onnx.py), all from this
// site's _static/live/ (no CDN). Each step is chapter 5's: forward on the whole id row (cropped to the
// model's context window, as nexttoken.generate crops), keep the last position's logits, softmax,
// select, append. Greedy selection is the argmax of the logits (the softmax keeps their order, up to
// float32 rounding where Python takes the argmax of its probabilities; ties go to the lowest id, as in
// torch.argmax). Sampling draws with the page's own seeded generator: repeatable
// here, but not the draws torch.multinomial makes in Python.
//
// window.nexttokenDemo is the handle the tests use: load(), encode(text), topk(text, k), attention(text),
// work(n, first), generate(text, n).
(() => {
  "use strict";
  const root = document.getElementById("live-loop");
  if (!root) return;
  const here = new URL("./", document.currentScript.src);  // _static/live/ of this site
  const $ = (id) => document.getElementById(id);
  const status = $("live-status");
  const say = (text) => { status.textContent = text; };
  const buttons = ["live-load", "live-step", "live-run", "live-reset"].map($);

  if (location.protocol === "file:") {
    // Browsers refuse to fetch WASM and models from file:// pages: say how to serve the site instead.
    $("live-file-warning").hidden = false;
    buttons.forEach((b) => { b.disabled = true; });
    say("Opened from a file: serve the site over http to run the model (see above).");
    return;
  }

  class LoadError extends Error {}  // load()'s failure, its message already the whole sentence to show
  let loading = null;  // the one load() in flight or done
  let enc, session, info;
  const state = {prompt: null, ids: [], promptLength: 0, steps: 0, done: false, rng: null, work: {none: 0, cache: 0}};

  function addScript(name) {
    return new Promise((ok, fail) => {
      const s = document.createElement("script");
      s.src = new URL(name, here).href;
      s.onload = ok;
      s.onerror = () => fail(new Error(`could not load ${s.src}`));
      document.head.appendChild(s);
    });
  }

  async function fetchWithProgress(name, label) {
    const response = await fetch(new URL(name, here));
    if (!response.ok) throw new Error(`${name}: HTTP ${response.status}`);
    const total = Number(response.headers.get("Content-Length")) || 0;
    const reader = response.body.getReader();
    const chunks = [];
    let got = 0;
    for (;;) {
      const {done, value} = await reader.read();
      if (done) break;
      chunks.push(value);
      got += value.length;
      say(`Loading ${label}: ${(got / 1e6).toFixed(1)}` + (total ? ` of ${(total / 1e6).toFixed(1)} MB` : " MB"));
    }
    const bytes = new Uint8Array(got);
    let at = 0;
    for (const c of chunks) { bytes.set(c, at); at += c.length; }
    return bytes;
  }

  function load() {
    if (!loading) {
      loading = (async () => {
        const started = performance.now();
        say("Loading the tokenizer (GPT-2's ranks, 0.5 MB)...");
        await addScript("tiktoken-gpt2.js");
        enc = window.nexttokenGpt2();
        info = await (await fetch(new URL("model.json", here))).json();
        say("Loading onnxruntime-web...");
        await addScript("ort.wasm.min.js");
        ort.env.wasm.numThreads = 1;  // no SharedArrayBuffer needed: the site sends no isolation headers
        ort.env.wasm.wasmPaths = here.href;  // its .mjs and .wasm from this site
        const model = await fetchWithProgress("model.onnx", "the model");
        say("Starting the model (WebAssembly)...");
        session = await ort.InferenceSession.create(model, {executionProviders: ["wasm"]});
        const seconds = ((performance.now() - started) / 1000).toFixed(1);
        say(`Model loaded in ${seconds} s: ${info.parameters.toLocaleString("en")} parameters, ` +
            `context window ${info.context_length} tokens.`);
        $("live-load").disabled = true;
        showPromptIds();
      })();
      // A failed load is said once, by whoever awaited it (a button's guarded(), or the tests' handle),
      // with what went wrong and the likeliest reason: a site built without Node has live.js alone.
      loading = loading.catch((err) => {
        loading = null;
        throw new LoadError(`Loading failed: ${err.message}. A site built without Node 20 and npm has no live files: ` +
                            "the course's README says how to build them.");
      });
    }
    return loading;
  }

  function encode(text) {
    if (typeof text !== "string" || text.length === 0) throw new Error("the prompt is empty: type some text");
    return enc.encode(text, "all");  // "<|endoftext|>" typed in the prompt is the EOS id, as Python's encode(text, allowed_special="all")
  }

  // One forward pass: logits (1, T, vocab) for the last context_length ids; returns the last row too.
  async function forward(ids) {
    const window_ = ids.slice(-info.context_length);
    const input = new ort.Tensor("int64", BigInt64Array.from(window_, BigInt), [1, window_.length]);
    const result = await session.run({input_ids: input});
    const out = result.logits;
    const V = out.dims[2];
    const last = out.data.subarray((window_.length - 1) * V, window_.length * V);
    // attention (1, heads, T): the last position's weights over the window in one layer, per head
    const [, H, T] = result.attention.dims;
    const heads = Array.from({length: H}, (_, h) => Array.from(result.attention.data.subarray(h * T, (h + 1) * T)));
    return {dims: out.dims, last, contextLength: window_.length, window: window_, heads};
  }

  function softmax(row, temperature) {
    let max = -Infinity;
    for (const x of row) if (x > max) max = x;
    const probs = new Float64Array(row.length);
    let sum = 0;
    for (let i = 0; i < row.length; i++) { probs[i] = Math.exp((row[i] - max) / temperature); sum += probs[i]; }
    for (let i = 0; i < row.length; i++) probs[i] /= sum;
    return probs;
  }

  function argmax(row) {
    let best = 0;
    for (let i = 1; i < row.length; i++) if (row[i] > row[best]) best = i;  // strict: ties keep the lowest id
    return best;
  }

  // The work of a forward pass that runs q new positions, each attending to k positions: the multiply-adds
  // of its matrix products (blocks, LM head, attention), from model.json's counts (scripts/export_onnx.py's
  // work_counts, which the tests hold to torch's FLOP counter). Embeddings, norms, softmax: not counted.
  const macs = (q, k) => q * (info.block_macs_per_position + info.head_macs_per_position) +
                         q * k * info.attention_macs_per_pair;

  // One step on n ids, without a cache (this page: the whole window) and with one, as nexttoken.generate
  // runs it (use_cache=True): the prompt at the first step, then only the new position, which attends to
  // the n - 1 cached ones and itself; once the row outgrows the window, positions shift at every step, the
  // cache is dropped and the window is recomputed, as without one.
  function work(n, first) {
    const T = Math.min(n, info.context_length);
    const whole = {q: T, k: T, macs: macs(T, T), kept: 0};
    if (n > info.context_length) return {none: whole, cache: whole};
    const q = first ? n : 1;
    return {none: whole, cache: {q, k: n, macs: macs(q, n), kept: n * info.cache_numbers_per_position}};
  }

  function top(probs, k) {
    const order = Array.from(probs.keys()).sort((a, b) => probs[b] - probs[a] || a - b);
    return order.slice(0, k).map((id) => ({id, token: enc.decode([id]), prob: probs[id]}));
  }

  // mulberry32: a small seeded generator, so that a sampled run repeats with the same seed.
  function seeded(seed) {
    let a = seed >>> 0;
    return () => {
      a = (a + 0x6d2b79f5) >>> 0;
      let t = a;
      t = Math.imul(t ^ (t >>> 15), t | 1);
      t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
      return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
    };
  }

  function draw(probs, rng) {
    let u = rng(), acc = 0;
    for (let i = 0; i < probs.length; i++) { acc += probs[i]; if (u < acc) return i; }
    return probs.length - 1;  // u within rounding of 1
  }

  // ---------------------------------------------------------------------------------------------
  // the page

  const show = (token) => JSON.stringify(token).slice(1, -1);  // "\n" shows as \n, a space stays visible
  function quoted(id) {  // a token in quotes, in a span that a narrow screen does not break (live.css)
    const span = document.createElement("span");
    span.className = "live-token";
    span.textContent = `"${show(enc.decode([id]))}"`;
    return span;
  }
  const idList = (ids) => `[${ids.join(", ")}]`;

  function settings() {
    const maxNew = Number($("live-max").value);
    if (!Number.isInteger(maxNew) || maxNew < 1 || maxNew > 500) throw new Error("max new tokens must be a whole number from 1 to 500");
    const sampling = $("live-sample").checked;
    const temperature = Number($("live-temperature").value);
    const seed = Number($("live-seed").value);
    if (sampling && !(temperature > 0)) throw new Error("the temperature must be above 0");
    if (sampling && !Number.isInteger(seed)) throw new Error("the seed must be a whole number");
    return {maxNew, sampling, temperature, seed};
  }

  function showPromptIds() {
    if (!enc) return;
    const text = $("live-prompt").value;
    try {
      const ids = encode(text);
      $("live-prompt-ids").textContent = `${ids.length} tokens: ${idList(ids)}`;
      $("live-prompt-ids").dataset.ids = JSON.stringify(ids);
    } catch (err) {
      $("live-prompt-ids").textContent = err.message;
      $("live-prompt-ids").dataset.ids = "[]";
    }
  }

  function reset() {
    state.prompt = null;
    state.ids = [];
    state.steps = 0;
    state.done = false;
    state.work = {none: 0, cache: 0};
    root.dataset.state = "";  // "running", then "stepped" or "done": what the tests wait for
    $("live-trace-body").textContent = "";
    for (const id of ["live-shape", "live-last-row", "live-selected", "live-row"]) $(id).textContent = "";
    $("live-row").dataset.ids = "[]";
    $("live-bars").textContent = "";
    $("live-attention-tokens").textContent = "";
    $("live-cache-body").textContent = "";
    $("live-step-view").hidden = true;
  }

  function startIfNeeded(s) {
    const text = $("live-prompt").value;
    if (state.prompt !== text) {  // a new or edited prompt starts a new run
      reset();
      state.ids = encode(text);
      state.prompt = text;
      state.promptLength = state.ids.length;
      state.rng = seeded(s.seed);
    }
  }

  function drawBars(rows, chosen) {
    const bars = $("live-bars");
    bars.textContent = "";
    const widest = rows[0].prob;
    for (const r of rows) {
      const tr = document.createElement("tr");
      if (r.id === chosen) tr.className = "live-chosen";
      const token = document.createElement("td");
      token.appendChild(quoted(r.id));
      const id = document.createElement("td");
      id.textContent = r.id;
      const bar = document.createElement("td");
      const fill = document.createElement("span");
      fill.className = "live-bar";
      fill.style.width = `${(100 * r.prob / widest).toFixed(1)}%`;
      bar.appendChild(fill);
      const p = document.createElement("td");
      p.textContent = r.prob.toFixed(4);
      tr.append(token, id, bar, p);
      bars.appendChild(tr);
    }
  }

  // Which positions the last token attends to: the mean of the layer's heads (a distribution too), each
  // token shaded by its weight, and the five heaviest written out.
  function drawAttention(window_, heads) {
    const T = window_.length;
    const mean = Array.from({length: T}, (_, j) => heads.reduce((sum, row) => sum + row[j], 0) / heads.length);
    const box = $("live-attention-tokens");
    box.textContent = "";
    const max = Math.max(...mean);
    window_.forEach((id, j) => {
      const span = document.createElement("span");
      span.className = "live-attended";
      span.textContent = enc.decode([id]).replace(/\n/g, "\u21b5\n");  // a newline token shows as ↵, then breaks
      span.title = `position ${j}, id ${id}: weight ${mean[j].toFixed(4)}`;
      span.style.setProperty("--weight", (mean[j] / max).toFixed(3));
      box.appendChild(span);
    });
    const order = Array.from(mean.keys()).sort((a, b) => mean[b] - mean[a] || a - b).slice(0, 5);
    $("live-attention-top").textContent = "Heaviest: " + order.map(
      (j) => `position ${j} "${show(enc.decode([window_[j]]))}" ${mean[j].toFixed(3)}`).join("; ");
    $("live-attention-caption").textContent = `Layer ${info.attention_layer + 1} of the model: the attention of ` +
      `the last position (${T - 1}) over the ${T} positions it may see, the mean of its ${heads.length} heads.`;
  }

  // The cache comparison of one step, and of the run so far.
  function drawWork(w) {
    state.work.none += w.none.macs;
    state.work.cache += w.cache.macs;
    const M = (x) => `${(x / 1e6).toFixed(1)} M`;
    const rows = [
      ["positions run through the model", w.none.q, w.cache.q],
      ["query-key pairs in attention, per layer and head", w.none.q * w.none.k, w.cache.q * w.cache.k],
      ["multiply-adds in the step's matrix products", M(w.none.macs), M(w.cache.macs)],
      ["keys and values kept for the next step (numbers)", 0, w.cache.kept],
      ["multiply-adds in this run so far", M(state.work.none), M(state.work.cache)],
    ];
    const body = $("live-cache-body");
    body.textContent = "";
    for (const [what, none, cache] of rows) {
      const tr = document.createElement("tr");
      const th = document.createElement("th");
      th.scope = "row";
      th.textContent = what;
      tr.appendChild(th);
      for (const x of [none, cache]) {
        const td = document.createElement("td");
        td.textContent = typeof x === "number" ? x.toLocaleString("en") : x;
        tr.appendChild(td);
      }
      body.appendChild(tr);
    }
    $("live-cache").dataset.step = JSON.stringify({none: w.none.macs, cache: w.cache.macs});
    $("live-cache").dataset.run = JSON.stringify(state.work);
    const n = state.ids.length;
    $("live-cache-caption").textContent = `Step ${state.steps + 1}, on ${n} ids: with a cache it would take ` +
      `${(w.none.macs / w.cache.macs).toFixed(1)} times fewer multiply-adds.`;
    $("live-cache-note").textContent = n > info.context_length
      ? `The row is longer than the model's window (${info.context_length}): positions shift at every step, ` +
        "so a cache no longer applies and both recompute the window."
      : state.steps === 0
        ? "The first step runs the whole prompt either way; the cache keeps its keys and values."
        : `With the cache, only the new token runs; it attends to the ${n - 1} cached positions and itself. ` +
          `The LM head is most of the work: ${M(info.head_macs_per_position)} multiply-adds a position.`;
  }

  // One turn of the loop, drawn; returns its time in milliseconds (forward pass to the trace row), which the
  // trace shows and scripts/measure_live_page.py reads.
  async function step(s) {
    const t0 = performance.now();
    const {dims, last, contextLength, window: window_, heads} = await forward(state.ids);
    drawAttention(window_, heads);
    drawWork(work(state.ids.length, state.steps === 0));
    const probs = softmax(last, s.sampling ? s.temperature : 1);
    const next = s.sampling ? draw(probs, state.rng) : argmax(last);
    const rows = top(probs, 10);
    state.ids.push(next);
    state.steps += 1;
    state.done = next === info.eos_token_id || state.steps >= s.maxNew;

    $("live-step-view").hidden = false;
    $("live-shape").textContent = `logits = model(ids): shape [${dims.join(", ")}] (batch, positions, vocabulary)`;
    const head = Array.from(last.slice(0, 6), (x) => x.toFixed(3)).join(", ");
    $("live-last-row").textContent = `logits[0, -1]: [${head}, ...] (${last.length.toLocaleString("en")} numbers)`;
    drawBars(rows, next);
    $("live-selected").textContent = `${s.sampling ? `sampled (temperature ${s.temperature})` : "greedy (argmax)"}: ` +
      `id ${next}, "${show(enc.decode([next]))}", probability ${probs[next].toFixed(4)}`;
    $("live-row").textContent = `${state.ids.length} ids: ${idList(state.ids)}\n\n${enc.decode(state.ids)}`;
    $("live-row").dataset.ids = JSON.stringify(state.ids);
    const tr = document.createElement("tr");
    const cells = [state.steps, contextLength, [quoted(next), ` (${next})`], probs[next].toFixed(4)];
    for (const cell of cells) {
      const td = document.createElement("td");
      td.append(...[cell].flat());
      tr.appendChild(td);
    }
    const ms = performance.now() - t0;
    const time = document.createElement("td");
    time.textContent = ms.toFixed(0);
    tr.dataset.ms = ms.toFixed(2);
    tr.appendChild(time);
    $("live-trace-body").appendChild(tr);
    return ms;
  }

  function stopMessage(s) {
    const last = state.ids[state.ids.length - 1];
    return last === info.eos_token_id ? `Stopped: the model wrote <|endoftext|> (${info.eos_token_id}) after ${state.steps} steps.`
                                      : `Stopped: max_new_tokens (${s.maxNew}) reached.`;
  }

  let busy = false;
  async function guarded(action) {
    if (busy) return;
    busy = true;
    buttons.forEach((b) => { b.disabled = true; });
    try {
      await action();
    } catch (err) {
      say(err instanceof LoadError ? err.message : `Error: ${err.message}`);
    } finally {
      busy = false;
      buttons.forEach((b) => { b.disabled = false; });
      $("live-load").disabled = Boolean(session);
    }
  }

  async function onStep(repeat) {
    const s = settings();
    await load();
    startIfNeeded(s);
    root.dataset.state = "running";
    if (state.done) {
      say(stopMessage(s) + " Edit the prompt or press Reset to start again.");
      root.dataset.state = "done";
      return;
    }
    do {
      const ms = await step(s);
      say(`Step ${state.steps}: ${ms.toFixed(0)} ms` + (state.done ? `. ${stopMessage(s)}` : "."));
      if (repeat) await new Promise((ok) => setTimeout(ok, 0));  // let the page draw between steps
    } while (repeat && !state.done);
    root.dataset.state = state.done ? "done" : "stepped";
  }

  $("live-load").addEventListener("click", () => guarded(load));
  $("live-step").addEventListener("click", () => guarded(() => onStep(false)));
  $("live-run").addEventListener("click", () => guarded(() => onStep(true)));
  $("live-reset").addEventListener("click", () => { if (!busy) { reset(); say("Reset."); } });
  $("live-prompt").addEventListener("input", showPromptIds);
  $("live-attention-toggle").addEventListener("change", () => {
    $("live-attention").hidden = !$("live-attention-toggle").checked;
  });
  $("live-cache-toggle").addEventListener("change", () => {
    $("live-cache").hidden = !$("live-cache-toggle").checked;
  });
  $("live-sample").addEventListener("change", () => {
    $("live-sampling").disabled = !$("live-sample").checked;
    state.prompt = null;  // another way of selecting: start again
  });
  $("live-temperature").addEventListener("input", () => { $("live-temperature-value").textContent = $("live-temperature").value; });
  $("live-seed").addEventListener("change", () => { state.prompt = null; });  // a new seed: start again, from its first draw
  say("Nothing is loaded yet: press Load model (about 31 MB, from this site), or Step.");

  // The tests' handle: greedy, the prompt's tokens plus up to maxNewTokens, stopping after <|endoftext|>.
  window.nexttokenDemo = {
    load,
    encode: async (text) => { await load(); return encode(text); },
    async topk(text, k) {
      await load();
      const probs = softmax((await forward(encode(text))).last, 1);
      return top(probs, k);
    },
    async work(n, first) {  // the cache comparison's counts for a step on n ids (the first of its run or not)
      await load();
      return work(n, first);
    },
    async attention(text) {  // the last position's weights in the exported layer, per head: heads x T
      await load();
      return (await forward(encode(text))).heads;
    },
    async generate(text, maxNewTokens) {
      await load();
      const ids = encode(text);
      for (let i = 0; i < maxNewTokens; i++) {
        const next = argmax((await forward(ids)).last);
        ids.push(next);
        if (next === info.eos_token_id) break;
      }
      return ids;
    },
  };
})();
