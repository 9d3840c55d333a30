import torch

from . import answers, bank

MUTANTS, mutant = bank()
CORRECT, correct = answers()


# q1: update_finished
@mutant("q1", expect="unfinished again")
def overwrite(finished, next_tokens, eos_token_id):
    return next_tokens == eos_token_id


@mutant("q1", expect="'and'")
def and_instead_of_or(finished, next_tokens, eos_token_id):
    return finished & (next_tokens == eos_token_id)


@mutant("q1", expect="'xor'")
def xor(finished, next_tokens, eos_token_id):
    return finished ^ (next_tokens == eos_token_id)


@mutant("q1", expect="inverted")
def still_running(finished, next_tokens, eos_token_id):
    return ~(finished | (next_tokens == eos_token_id))


@mutant("q1", expect="in place")
def in_place_or(finished, next_tokens, eos_token_id):
    finished |= next_tokens == eos_token_id
    return finished


@mutant("q1", expect="bool tensor")
def as_ints(finished, next_tokens, eos_token_id):
    return (finished | (next_tokens == eos_token_id)).long()


@mutant("q1", expect="should be a torch.Tensor")
def python_list(finished, next_tokens, eos_token_id):
    return [bool(f) or int(t) == eos_token_id for f, t in zip(finished, next_tokens)]


# q2: pad_finished
@mutant("q2", expect="swapped")
def swapped(next_tokens, finished, pad_token_id):
    return torch.where(finished, next_tokens, pad_token_id)


@mutant("q2", expect="every row got the pad id")
def all_padding(next_tokens, finished, pad_token_id):
    return torch.full_like(next_tokens, pad_token_id)


@mutant("q2", expect="only works when the pad id is 0")
def multiply(next_tokens, finished, pad_token_id):
    return next_tokens * ~finished


@mutant("q2", expect="in place")
def in_place(next_tokens, finished, pad_token_id):
    next_tokens[finished] = pad_token_id
    return next_tokens


@mutant("q2", expect="int64")
def float_result(next_tokens, finished, pad_token_id):
    return torch.where(finished, float(pad_token_id), next_tokens.float())


@mutant("q2", expect=None)
def unchanged(next_tokens, finished, pad_token_id):
    return next_tokens.clone()


# q3: generate_with_eos
def _greedy(model, ids):
    return model(ids)[:, -1, :].argmax(dim=-1)


def _loop(model, ids, n, eos, pad, stop="all", pad_rule="before", keep_going=False, extra=0):
    finished = torch.zeros(ids.shape[0], dtype=torch.bool)
    for _ in range(n + extra):
        t = _greedy(model, ids)
        if pad_rule == "before":
            t = torch.where(finished, pad, t)
        elif pad_rule == "after":
            t = torch.where(finished | (t == eos), pad, t)
        ids = torch.cat([ids, t[:, None]], dim=1)
        finished = finished | (t == eos) if pad_rule != "after" else finished | (_greedy(model, ids[:, :-1]) == eos)
        if keep_going:
            continue
        if (stop == "all" and finished.all()) or (stop == "any" and finished.any()):
            break
    return ids


@mutant("q3", expect="more than max_new_tokens")
def one_step_too_many(model, input_ids, max_new_tokens, eos_token_id, pad_token_id):
    return _loop(model, input_ids, max_new_tokens, eos_token_id, pad_token_id, extra=1)


@mutant("q3", expect="went on after every row had finished")
def never_stops_early(model, input_ids, max_new_tokens, eos_token_id, pad_token_id):
    return _loop(model, input_ids, max_new_tokens, eos_token_id, pad_token_id, keep_going=True)


@mutant("q3", expect="stop when *all* rows are done")
def stops_when_any_row_finishes(model, input_ids, max_new_tokens, eos_token_id, pad_token_id):
    return _loop(model, input_ids, max_new_tokens, eos_token_id, pad_token_id, stop="any")


@mutant("q3", expect="EOS token was replaced")
def pads_the_eos_itself(model, input_ids, max_new_tokens, eos_token_id, pad_token_id):
    return _loop(model, input_ids, max_new_tokens, eos_token_id, pad_token_id, pad_rule="after")


@mutant("q3", expect="was not padded after its EOS")
def no_padding(model, input_ids, max_new_tokens, eos_token_id, pad_token_id):
    return _loop(model, input_ids, max_new_tokens, eos_token_id, pad_token_id, pad_rule="none")


@mutant("q3", expect="was not padded after its EOS")
def pads_with_eos(model, input_ids, max_new_tokens, eos_token_id, pad_token_id):
    return _loop(model, input_ids, max_new_tokens, eos_token_id, eos_token_id)


@mutant("q3", expect=None)
def row_zero_logits(model, input_ids, max_new_tokens, eos_token_id, pad_token_id):
    ids, finished = input_ids, torch.zeros(input_ids.shape[0], dtype=torch.bool)
    for _ in range(max_new_tokens):
        t = model(ids)[0, -1].argmax().expand(ids.shape[0])
        t = torch.where(finished, pad_token_id, t)
        ids = torch.cat([ids, t[:, None]], dim=1)
        finished = finished | (t == eos_token_id)
        if finished.all():
            break
    return ids


# q4: to_left_padding
@mutant("q4", expect="reversed the rows")
def flipped(input_ids, attention_mask):
    return input_ids.flip(1), attention_mask.flip(1)


@mutant("q4", expect="tokens did not move")
def mask_only(input_ids, attention_mask):
    order = torch.argsort(attention_mask, dim=1, stable=True)
    return input_ids, attention_mask.gather(1, order)


@mutant("q4", expect="mask did not move")
def ids_only(input_ids, attention_mask):
    order = torch.argsort(attention_mask, dim=1, stable=True)
    return input_ids.gather(1, order), attention_mask


@mutant("q4", expect="same amount")
def same_shift_for_all(input_ids, attention_mask):
    k = int((attention_mask == 0).sum(1).max())
    return input_ids.roll(k, 1), attention_mask.roll(k, 1)


@mutant("q4", expect="two tensors")
def ids_alone(input_ids, attention_mask):
    return input_ids.gather(1, torch.argsort(attention_mask, dim=1, stable=True))


@mutant("q4", expect=None)
def rolls_every_row_by_its_pads(input_ids, attention_mask):  # breaks rows that were already left-padded
    rows = [(i.roll(int((m == 0).sum())), m.roll(int((m == 0).sum()))) for i, m in zip(input_ids, attention_mask)]
    return torch.stack([r[0] for r in rows]), torch.stack([r[1] for r in rows])


@mutant("q4", expect=None)
def descending_sort(input_ids, attention_mask):
    order = torch.argsort(attention_mask, dim=1, descending=True, stable=True)
    return input_ids.gather(1, order), attention_mask.gather(1, order)


# q5: generate_cropped
def _cropped(model, ids, n, window):
    for _ in range(n):
        ids = torch.cat([ids, _greedy(model, window(ids))[:, None]], dim=1)
    return ids


@mutant("q5", expect="crop it")
def no_cropping(model, input_ids, max_new_tokens):
    return _cropped(model, input_ids, max_new_tokens, lambda x: x)


@mutant("q5", expect="*first* context_length")
def keeps_the_start(model, input_ids, max_new_tokens):
    L = model.config.context_length
    return _cropped(model, input_ids, max_new_tokens, lambda x: x[:, :L])


@mutant("q5", expect="not L - 1")
def window_one_short(model, input_ids, max_new_tokens):
    L = model.config.context_length
    return _cropped(model, input_ids, max_new_tokens, lambda x: x[:, -(L - 1):])


@mutant("q5", expect="only the cropped window")
def returns_the_window(model, input_ids, max_new_tokens):
    L = model.config.context_length
    return _cropped(model, input_ids, max_new_tokens, lambda x: x[:, -L:])[:, -L:]


@mutant("q5", expect=None)
def crops_the_sequence_itself(model, input_ids, max_new_tokens):  # loses the prompt from the output
    L = model.config.context_length
    ids = input_ids
    for _ in range(max_new_tokens):
        ids = torch.cat([ids, _greedy(model, ids[:, -L:])[:, None]], dim=1)[:, -L:]
    return ids


@mutant("q5", expect=None)
def window_of_half(model, input_ids, max_new_tokens):
    L = model.config.context_length // 2
    return _cropped(model, input_ids, max_new_tokens, lambda x: x[:, -L:])


# --- issue 19: zero steps, EOS in the prompt, pad ids that are real tokens, unstable sorts, 0-valued pads ---
def _greedy(model, ids):
    return model(ids)[:, -1, :].argmax(-1)


@mutant("q3", expect="nexttoken.generate is what you are rebuilding")
def eos_by_library(model, input_ids, max_new_tokens, eos_token_id, pad_token_id):
    import nexttoken

    return nexttoken.generate(model, input_ids, max_new_tokens, eos_token_id=eos_token_id,
                              pad_token_id=pad_token_id)


@mutant("q3", expect=None)
def eos_do_while(model, input_ids, max_new_tokens, eos_token_id, pad_token_id):
    ids, finished = input_ids, torch.zeros(input_ids.shape[0], dtype=torch.bool)
    while True:
        t = torch.where(finished, pad_token_id, _greedy(model, ids))
        ids = torch.cat([ids, t[:, None]], 1)
        finished = finished | (t == eos_token_id)
        if finished.all() or ids.shape[1] - input_ids.shape[1] >= max_new_tokens:
            return ids


@mutant("q3", expect=None)
def finished_from_the_prompt(model, input_ids, max_new_tokens, eos_token_id, pad_token_id):
    ids, finished = input_ids, (input_ids == eos_token_id).any(-1)  # the prompt's EOS counts as finished
    for _ in range(max_new_tokens):
        t = torch.where(finished, pad_token_id, _greedy(model, ids))
        ids = torch.cat([ids, t[:, None]], 1)
        finished = finished | (t == eos_token_id)
        if finished.all():
            break
    return ids


@mutant("q3", expect=None)
def finished_when_last_is_eos_or_pad(model, input_ids, max_new_tokens, eos_token_id, pad_token_id):
    ids = input_ids
    for step in range(max_new_tokens):
        last = ids[:, -1]
        finished = (last == eos_token_id) | (last == pad_token_id) if step else torch.zeros_like(last, dtype=torch.bool)
        if step and finished.all():
            break
        ids = torch.cat([ids, torch.where(finished, pad_token_id, _greedy(model, ids))[:, None]], 1)
    return ids


@mutant("q4", expect="stable=True")
def unstable_argsort(input_ids, attention_mask):
    order = torch.argsort(attention_mask, dim=1)  # not stable: equal keys may be reordered
    return input_ids.gather(1, order), attention_mask.gather(1, order)


@mutant("q4", expect=None)
def pads_are_the_zero_ids(input_ids, attention_mask):
    order = torch.argsort((input_ids != 0).long(), dim=1, stable=True)  # trusts the ids, not the mask
    return input_ids.gather(1, order), attention_mask.gather(1, order)


@mutant("q4", expect=None)
def pads_written_as_zero(input_ids, attention_mask):
    order = torch.argsort(attention_mask, dim=1, stable=True)
    return (input_ids * attention_mask).gather(1, order), attention_mask.gather(1, order)


@mutant("q5", expect="nexttoken.generate is what you are rebuilding")
def cropped_by_library(model, input_ids, max_new_tokens):
    import nexttoken

    return nexttoken.generate(model, input_ids, max_new_tokens)


@mutant("q5", expect=None)
def cropped_first_then_range_minus_one(model, input_ids, max_new_tokens):
    L = model.config.context_length
    ids = torch.cat([input_ids, _greedy(model, input_ids[:, -L:])[:, None]], 1)
    for _ in range(max_new_tokens - 1):
        ids = torch.cat([ids, _greedy(model, ids[:, -L:])[:, None]], 1)
    return ids


# --- issue 42: the two escapes of q3, and its messages ---
@mutant("q3", expect="its prompt holds eos_token_id")
def counts_eos_in_the_whole_row(model, input_ids, max_new_tokens, eos_token_id, pad_token_id):
    """Finished when the row holds one EOS more than its prompt; when pad == EOS "any EOS at all" (the pads
    are EOS too, so the count only grows), which counts the prompt's EOS."""
    ids = input_ids
    before = 0 if pad_token_id == eos_token_id else (input_ids == eos_token_id).sum(-1)
    for _ in range(max_new_tokens):
        finished = (ids == eos_token_id).sum(-1) >= before + 1
        if finished.all():
            break
        ids = torch.cat([ids, torch.where(finished, pad_token_id, _greedy(model, ids))[:, None]], 1)
    return ids


@mutant("q3", expect="produced pad_token_id")
def finished_when_the_last_token_is_the_pad(model, input_ids, max_new_tokens, eos_token_id, pad_token_id):
    ids, finished = input_ids, torch.zeros(input_ids.shape[0], dtype=torch.bool)
    for _ in range(max_new_tokens):
        t = torch.where(finished, pad_token_id, _greedy(model, ids))
        ids = torch.cat([ids, t[:, None]], 1)
        finished = (t == eos_token_id) | (ids[:, -1] == pad_token_id)  # a padded row stays padded... and a pad token
        if finished.all():
            break
    return ids


@mutant("q3", expect="its prompt holds eos_token_id")
def last_token_is_pad_from_the_prompt_on(model, input_ids, max_new_tokens, eos_token_id, pad_token_id):
    ids = input_ids
    for _ in range(max_new_tokens):
        finished = (ids[:, -1] == eos_token_id) | (ids[:, -1] == pad_token_id)  # the prompt's last token counts
        if finished.all():
            break
        ids = torch.cat([ids, torch.where(finished, pad_token_id, _greedy(model, ids))[:, None]], 1)
    return ids


@mutant("q3", expect="was it sampled")
def samples_instead_of_greedy(model, input_ids, max_new_tokens, eos_token_id, pad_token_id):
    ids, finished = input_ids, torch.zeros(input_ids.shape[0], dtype=torch.bool)
    for _ in range(max_new_tokens):
        t = torch.multinomial(torch.softmax(model(ids)[:, -1], -1), 1)[:, 0]
        t = torch.where(finished, pad_token_id, t)
        ids = torch.cat([ids, t[:, None]], 1)
        finished = finished | (t == eos_token_id)
        if finished.all():
            break
    return ids


@mutant("q3", expect="one fewer than max_new_tokens")
def one_step_short(model, input_ids, max_new_tokens, eos_token_id, pad_token_id):
    return _loop(model, input_ids, max_new_tokens, eos_token_id, pad_token_id, extra=-1)


@mutant("q3", expect="not padded after its EOS")
def flag_not_kept(model, input_ids, max_new_tokens, eos_token_id, pad_token_id):
    """finished = next == EOS: right only while the pads are EOS too."""
    ids, finished = input_ids, torch.zeros(input_ids.shape[0], dtype=torch.bool)
    for _ in range(max_new_tokens):
        t = torch.where(finished, pad_token_id, _greedy(model, ids))
        ids = torch.cat([ids, t[:, None]], 1)
        finished = t == eos_token_id
        if finished.all():
            break
    return ids


# --- right answers written another way ---
@correct("q3")
def eos_counted_in_the_new_tokens(model, input_ids, max_new_tokens, eos_token_id, pad_token_id):
    """Counting EOS is right when only the generated part is counted: a pad that is EOS comes after one."""
    ids, P = input_ids, input_ids.shape[1]
    for _ in range(max_new_tokens):
        finished = (ids[:, P:] == eos_token_id).sum(-1) > 0
        if finished.all():
            break
        ids = torch.cat([ids, torch.where(finished, pad_token_id, _greedy(model, ids))[:, None]], 1)
    return ids


@correct("q3")
def eos_with_unfinished_flags(model, input_ids, max_new_tokens, eos_token_id, pad_token_id):
    ids, unfinished = input_ids, torch.ones(input_ids.shape[0], dtype=torch.long)
    for _ in range(max_new_tokens):
        t = _greedy(model, ids) * unfinished + pad_token_id * (1 - unfinished)
        ids = torch.cat([ids, t[:, None]], 1)
        unfinished = unfinished * (t != eos_token_id).long()
        if unfinished.max() == 0:
            break
    return ids


@correct("q4")
def left_padding_row_by_row(input_ids, attention_mask):
    rows = [torch.cat([ids[m == 0], ids[m == 1]]) for ids, m in zip(input_ids, attention_mask)]
    return torch.stack(rows), attention_mask.sort(dim=1).values


# q6: pad_layout (predict)
def _layout(eos_steps, n, width=None, start=1, stop_when="all"):
    done = [s if s is not None and s <= n else None for s in eos_steps]
    if width is None:
        finished = [s for s in done if s is not None]
        if stop_when == "all":
            width = max(finished) if len(finished) == len(done) else n
        else:
            width = min(finished) if finished else n
    return torch.stack([torch.arange(1, width + 1) > (s + start - 1 if s is not None else width) for s in done])


@mutant("q6", expect="too many slots")
def layout_never_stops_early(eos_steps, max_new_tokens):
    return _layout(eos_steps, max_new_tokens, width=max_new_tokens)


@mutant("q6", expect="EOS token itself is not padding")
def pads_the_eos(eos_steps, max_new_tokens):
    return _layout(eos_steps, max_new_tokens, start=0)


@mutant("q6", expect="one slot late")
def one_late(eos_steps, max_new_tokens):
    return _layout(eos_steps, max_new_tokens, start=2)


@mutant("q6", expect="too few slots")
def stops_at_the_first_eos(eos_steps, max_new_tokens):
    return _layout(eos_steps, max_new_tokens, stop_when="any")


@correct("q6")
def no_eos_as_eos_at_the_limit(eos_steps, max_new_tokens):
    steps = [s if s is not None else max_new_tokens for s in eos_steps]  # "no EOS: it ends at the limit"
    width = min(max(steps), max_new_tokens)
    return torch.stack([torch.arange(1, width + 1) > s for s in steps])


@mutant("q6", expect="should be a bool tensor")
def ones_for_padding(eos_steps, max_new_tokens):
    return _layout(eos_steps, max_new_tokens).long()


@mutant("q6", expect=None)
def true_for_real_tokens(eos_steps, max_new_tokens):
    return ~_layout(eos_steps, max_new_tokens)


@correct("q6")
def step_by_step_like_the_loop(eos_steps, max_new_tokens):
    finished = [False] * len(eos_steps)
    columns = []
    for step in range(1, max_new_tokens + 1):
        columns.append(list(finished))  # padded where the row had finished before this step
        finished = [f or s == step for f, s in zip(finished, eos_steps)]
        if all(finished):
            break
    if not columns:
        return torch.zeros(len(eos_steps), 0, dtype=torch.bool)
    return torch.tensor(columns).T


@mutant("q5", expect="GPT-2's EOS id 50256")
def cropped_stops_on_gpt2_eos(model, input_ids, max_new_tokens):
    L, ids = model.config.context_length, input_ids
    for _ in range(max_new_tokens):
        ids = torch.cat([ids, _greedy(model, ids[:, -L:])[:, None]], 1)
        if (ids[:, -1] == 50256).any():
            break
    return ids


# issue 53: breaking before the final EOS is appended
@mutant("q3", expect="but that EOS was not appended")
def break_before_appending_eos(model, input_ids, max_new_tokens, eos_token_id, pad_token_id):
    ids = input_ids
    finished = torch.zeros(ids.shape[0], dtype=torch.bool)
    with torch.no_grad():
        for _ in range(max_new_tokens):
            next_tokens = model(ids)[:, -1, :].argmax(dim=-1)
            next_tokens = torch.where(finished, pad_token_id, next_tokens)
            finished = finished | (next_tokens == eos_token_id)
            if finished.all():
                break
            ids = torch.cat([ids, next_tokens[:, None]], dim=1)
    return ids
