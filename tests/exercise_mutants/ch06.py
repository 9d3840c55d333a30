import torch

from . import answers, bank

MUTANTS, mutant = bank()
CORRECT, correct = answers()


# q3: update_finished
@mutant("q3", expect="unfinished again")
def overwrite(finished, next_tokens, eos_token_id):
    return next_tokens == eos_token_id


@mutant("q3", expect="'and'")
def and_instead_of_or(finished, next_tokens, eos_token_id):
    return finished & (next_tokens == eos_token_id)


@mutant("q3", expect="'xor'")
def xor(finished, next_tokens, eos_token_id):
    return finished ^ (next_tokens == eos_token_id)


@mutant("q3", expect="inverted")
def still_running(finished, next_tokens, eos_token_id):
    return ~(finished | (next_tokens == eos_token_id))


@mutant("q3", expect="in place")
def in_place_or(finished, next_tokens, eos_token_id):
    finished |= next_tokens == eos_token_id
    return finished


@mutant("q3", expect="bool tensor")
def as_ints(finished, next_tokens, eos_token_id):
    return (finished | (next_tokens == eos_token_id)).long()


@mutant("q3", expect="should be a torch.Tensor")
def python_list(finished, next_tokens, eos_token_id):
    return [bool(f) or int(t) == eos_token_id for f, t in zip(finished, next_tokens)]


# q4: pad_finished
@mutant("q4", expect="swapped")
def swapped(next_tokens, finished, pad_token_id):
    return torch.where(finished, next_tokens, pad_token_id)


@mutant("q4", expect="every row got the pad id")
def all_padding(next_tokens, finished, pad_token_id):
    return torch.full_like(next_tokens, pad_token_id)


@mutant("q4", expect="only works when the pad id is 0")
def multiply(next_tokens, finished, pad_token_id):
    return next_tokens * ~finished


@mutant("q4", expect="in place")
def in_place(next_tokens, finished, pad_token_id):
    next_tokens[finished] = pad_token_id
    return next_tokens


@mutant("q4", expect="int64")
def float_result(next_tokens, finished, pad_token_id):
    return torch.where(finished, float(pad_token_id), next_tokens.float())


@mutant("q4", expect=None)
def unchanged(next_tokens, finished, pad_token_id):
    return next_tokens.clone()


# q5: generate_with_eos
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


@mutant("q5", expect="more than max_new_tokens")
def one_step_too_many(model, input_ids, max_new_tokens, eos_token_id, pad_token_id):
    return _loop(model, input_ids, max_new_tokens, eos_token_id, pad_token_id, extra=1)


@mutant("q5", expect="went on after every row had finished")
def never_stops_early(model, input_ids, max_new_tokens, eos_token_id, pad_token_id):
    return _loop(model, input_ids, max_new_tokens, eos_token_id, pad_token_id, keep_going=True)


@mutant("q5", expect="stop when *all* rows are done")
def stops_when_any_row_finishes(model, input_ids, max_new_tokens, eos_token_id, pad_token_id):
    return _loop(model, input_ids, max_new_tokens, eos_token_id, pad_token_id, stop="any")


@mutant("q5", expect="EOS token was replaced")
def pads_the_eos_itself(model, input_ids, max_new_tokens, eos_token_id, pad_token_id):
    return _loop(model, input_ids, max_new_tokens, eos_token_id, pad_token_id, pad_rule="after")


@mutant("q5", expect="was not padded after its EOS")
def no_padding(model, input_ids, max_new_tokens, eos_token_id, pad_token_id):
    return _loop(model, input_ids, max_new_tokens, eos_token_id, pad_token_id, pad_rule="none")


@mutant("q5", expect="was not padded after its EOS")
def pads_with_eos(model, input_ids, max_new_tokens, eos_token_id, pad_token_id):
    return _loop(model, input_ids, max_new_tokens, eos_token_id, eos_token_id)


@mutant("q5", expect=None)
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


# q6: to_left_padding
@mutant("q6", expect="reversed the rows")
def flipped(input_ids, attention_mask):
    return input_ids.flip(1), attention_mask.flip(1)


@mutant("q6", expect="tokens did not move")
def mask_only(input_ids, attention_mask):
    order = torch.argsort(attention_mask, dim=1, stable=True)
    return input_ids, attention_mask.gather(1, order)


@mutant("q6", expect="mask did not move")
def ids_only(input_ids, attention_mask):
    order = torch.argsort(attention_mask, dim=1, stable=True)
    return input_ids.gather(1, order), attention_mask


@mutant("q6", expect="same amount")
def same_shift_for_all(input_ids, attention_mask):
    k = int((attention_mask == 0).sum(1).max())
    return input_ids.roll(k, 1), attention_mask.roll(k, 1)


@mutant("q6", expect="two tensors")
def ids_alone(input_ids, attention_mask):
    return input_ids.gather(1, torch.argsort(attention_mask, dim=1, stable=True))


@mutant("q6", expect=None)
def rolls_every_row_by_its_pads(input_ids, attention_mask):  # breaks rows that were already left-padded
    rows = [(i.roll(int((m == 0).sum())), m.roll(int((m == 0).sum()))) for i, m in zip(input_ids, attention_mask)]
    return torch.stack([r[0] for r in rows]), torch.stack([r[1] for r in rows])


@mutant("q6", expect=None)
def descending_sort(input_ids, attention_mask):
    order = torch.argsort(attention_mask, dim=1, descending=True, stable=True)
    return input_ids.gather(1, order), attention_mask.gather(1, order)


# q7: generate_cropped
def _cropped(model, ids, n, window):
    for _ in range(n):
        ids = torch.cat([ids, _greedy(model, window(ids))[:, None]], dim=1)
    return ids


@mutant("q7", expect="crop it")
def no_cropping(model, input_ids, max_new_tokens):
    return _cropped(model, input_ids, max_new_tokens, lambda x: x)


@mutant("q7", expect="*first* context_length")
def keeps_the_start(model, input_ids, max_new_tokens):
    L = model.config.context_length
    return _cropped(model, input_ids, max_new_tokens, lambda x: x[:, :L])


@mutant("q7", expect="not L - 1")
def window_one_short(model, input_ids, max_new_tokens):
    L = model.config.context_length
    return _cropped(model, input_ids, max_new_tokens, lambda x: x[:, -(L - 1):])


@mutant("q7", expect="only the cropped window")
def returns_the_window(model, input_ids, max_new_tokens):
    L = model.config.context_length
    return _cropped(model, input_ids, max_new_tokens, lambda x: x[:, -L:])[:, -L:]


@mutant("q7", expect=None)
def crops_the_sequence_itself(model, input_ids, max_new_tokens):  # loses the prompt from the output
    L = model.config.context_length
    ids = input_ids
    for _ in range(max_new_tokens):
        ids = torch.cat([ids, _greedy(model, ids[:, -L:])[:, None]], dim=1)[:, -L:]
    return ids


@mutant("q7", expect=None)
def window_of_half(model, input_ids, max_new_tokens):
    L = model.config.context_length // 2
    return _cropped(model, input_ids, max_new_tokens, lambda x: x[:, -L:])


# --- zero steps, EOS in the prompt, pad ids that are real tokens, unstable sorts, 0-valued pads ---
def _greedy(model, ids):
    return model(ids)[:, -1, :].argmax(-1)


@mutant("q5", expect="do not call nexttoken.generate here")
def eos_by_library(model, input_ids, max_new_tokens, eos_token_id, pad_token_id):
    import nexttoken

    return nexttoken.generate(model, input_ids, max_new_tokens, eos_token_id=eos_token_id,
                              pad_token_id=pad_token_id)


@mutant("q5", expect=None)
def eos_do_while(model, input_ids, max_new_tokens, eos_token_id, pad_token_id):
    ids, finished = input_ids, torch.zeros(input_ids.shape[0], dtype=torch.bool)
    while True:
        t = torch.where(finished, pad_token_id, _greedy(model, ids))
        ids = torch.cat([ids, t[:, None]], 1)
        finished = finished | (t == eos_token_id)
        if finished.all() or ids.shape[1] - input_ids.shape[1] >= max_new_tokens:
            return ids


@mutant("q5", expect=None)
def finished_from_the_prompt(model, input_ids, max_new_tokens, eos_token_id, pad_token_id):
    ids, finished = input_ids, (input_ids == eos_token_id).any(-1)  # the prompt's EOS counts as finished
    for _ in range(max_new_tokens):
        t = torch.where(finished, pad_token_id, _greedy(model, ids))
        ids = torch.cat([ids, t[:, None]], 1)
        finished = finished | (t == eos_token_id)
        if finished.all():
            break
    return ids


@mutant("q5", expect=None)
def finished_when_last_is_eos_or_pad(model, input_ids, max_new_tokens, eos_token_id, pad_token_id):
    ids = input_ids
    for step in range(max_new_tokens):
        last = ids[:, -1]
        finished = (last == eos_token_id) | (last == pad_token_id) if step else torch.zeros_like(last, dtype=torch.bool)
        if step and finished.all():
            break
        ids = torch.cat([ids, torch.where(finished, pad_token_id, _greedy(model, ids))[:, None]], 1)
    return ids


@mutant("q6", expect="stable=True")
def unstable_argsort(input_ids, attention_mask):
    order = torch.argsort(attention_mask, dim=1)  # not stable: equal keys may be reordered
    return input_ids.gather(1, order), attention_mask.gather(1, order)


@mutant("q6", expect=None)
def pads_are_the_zero_ids(input_ids, attention_mask):
    order = torch.argsort((input_ids != 0).long(), dim=1, stable=True)  # trusts the ids, not the mask
    return input_ids.gather(1, order), attention_mask.gather(1, order)


@mutant("q6", expect=None)
def pads_written_as_zero(input_ids, attention_mask):
    order = torch.argsort(attention_mask, dim=1, stable=True)
    return (input_ids * attention_mask).gather(1, order), attention_mask.gather(1, order)


@mutant("q7", expect="do not call nexttoken.generate here: it is what you are rebuilding")
def cropped_by_library(model, input_ids, max_new_tokens):
    import nexttoken

    return nexttoken.generate(model, input_ids, max_new_tokens)


@mutant("q7", expect=None)
def cropped_first_then_range_minus_one(model, input_ids, max_new_tokens):
    L = model.config.context_length
    ids = torch.cat([input_ids, _greedy(model, input_ids[:, -L:])[:, None]], 1)
    for _ in range(max_new_tokens - 1):
        ids = torch.cat([ids, _greedy(model, ids[:, -L:])[:, None]], 1)
    return ids


# --- the two escapes of q3, and its messages ---
@mutant("q5", expect="its prompt holds eos_token_id")
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


@mutant("q5", expect="produced pad_token_id")
def finished_when_the_last_token_is_the_pad(model, input_ids, max_new_tokens, eos_token_id, pad_token_id):
    ids, finished = input_ids, torch.zeros(input_ids.shape[0], dtype=torch.bool)
    for _ in range(max_new_tokens):
        t = torch.where(finished, pad_token_id, _greedy(model, ids))
        ids = torch.cat([ids, t[:, None]], 1)
        finished = (t == eos_token_id) | (ids[:, -1] == pad_token_id)  # a padded row stays padded... and a pad token
        if finished.all():
            break
    return ids


@mutant("q5", expect="its prompt holds eos_token_id")
def last_token_is_pad_from_the_prompt_on(model, input_ids, max_new_tokens, eos_token_id, pad_token_id):
    ids = input_ids
    for _ in range(max_new_tokens):
        finished = (ids[:, -1] == eos_token_id) | (ids[:, -1] == pad_token_id)  # the prompt's last token counts
        if finished.all():
            break
        ids = torch.cat([ids, torch.where(finished, pad_token_id, _greedy(model, ids))[:, None]], 1)
    return ids


@mutant("q5", expect="was it sampled")
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


@mutant("q5", expect="one fewer than max_new_tokens")
def one_step_short(model, input_ids, max_new_tokens, eos_token_id, pad_token_id):
    return _loop(model, input_ids, max_new_tokens, eos_token_id, pad_token_id, extra=-1)


@mutant("q5", expect="the flags are overwritten at each step")  # named by its cause, not its symptom
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
@correct("q5")
def eos_counted_in_the_new_tokens(model, input_ids, max_new_tokens, eos_token_id, pad_token_id):
    """Counting EOS is right when only the generated part is counted: a pad that is EOS comes after one."""
    ids, P = input_ids, input_ids.shape[1]
    for _ in range(max_new_tokens):
        finished = (ids[:, P:] == eos_token_id).sum(-1) > 0
        if finished.all():
            break
        ids = torch.cat([ids, torch.where(finished, pad_token_id, _greedy(model, ids))[:, None]], 1)
    return ids


@correct("q5")
def eos_with_unfinished_flags(model, input_ids, max_new_tokens, eos_token_id, pad_token_id):
    ids, unfinished = input_ids, torch.ones(input_ids.shape[0], dtype=torch.long)
    for _ in range(max_new_tokens):
        t = _greedy(model, ids) * unfinished + pad_token_id * (1 - unfinished)
        ids = torch.cat([ids, t[:, None]], 1)
        unfinished = unfinished * (t != eos_token_id).long()
        if unfinished.max() == 0:
            break
    return ids


@correct("q6")
def left_padding_row_by_row(input_ids, attention_mask):
    rows = [torch.cat([ids[m == 0], ids[m == 1]]) for ids, m in zip(input_ids, attention_mask)]
    return torch.stack(rows), attention_mask.sort(dim=1).values


# q8: pad_layout (predict)
def _layout(eos_steps, n, width=None, start=1, stop_when="all"):
    done = [s if s is not None and s <= n else None for s in eos_steps]
    if width is None:
        finished = [s for s in done if s is not None]
        if stop_when == "all":
            width = max(finished) if len(finished) == len(done) else n
        else:
            width = min(finished) if finished else n
    return torch.stack([torch.arange(1, width + 1) > (s + start - 1 if s is not None else width) for s in done])


@mutant("q8", expect="too many slots")
def layout_never_stops_early(eos_steps, max_new_tokens):
    return _layout(eos_steps, max_new_tokens, width=max_new_tokens)


@mutant("q8", expect="EOS token itself is not padding")
def pads_the_eos(eos_steps, max_new_tokens):
    return _layout(eos_steps, max_new_tokens, start=0)


@mutant("q8", expect="one slot late")
def one_late(eos_steps, max_new_tokens):
    return _layout(eos_steps, max_new_tokens, start=2)


@mutant("q8", expect="too few slots")
def stops_at_the_first_eos(eos_steps, max_new_tokens):
    return _layout(eos_steps, max_new_tokens, stop_when="any")


@correct("q8")
def no_eos_as_eos_at_the_limit(eos_steps, max_new_tokens):
    steps = [s if s is not None else max_new_tokens for s in eos_steps]  # "no EOS: it ends at the limit"
    width = min(max(steps), max_new_tokens)
    return torch.stack([torch.arange(1, width + 1) > s for s in steps])


@mutant("q8", expect="should be a bool tensor")
def ones_for_padding(eos_steps, max_new_tokens):
    return _layout(eos_steps, max_new_tokens).long()


@mutant("q8", expect=None)
def true_for_real_tokens(eos_steps, max_new_tokens):
    return ~_layout(eos_steps, max_new_tokens)


@correct("q8")
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


@mutant("q7", expect="GPT-2's EOS id 50256")
def cropped_stops_on_gpt2_eos(model, input_ids, max_new_tokens):
    L, ids = model.config.context_length, input_ids
    for _ in range(max_new_tokens):
        ids = torch.cat([ids, _greedy(model, ids[:, -L:])[:, None]], 1)
        if (ids[:, -1] == 50256).any():
            break
    return ids


# breaking before the final EOS is appended
@mutant("q5", expect="but that EOS was not appended")
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


# q1: generate_until_eos, the core's loop for one sequence
def _one_row(model, ids, n, eos, keep=True, extra=0, whole=False, limit=True):
    with torch.no_grad():
        for _ in range(n + extra) if limit else iter(int, 1):
            next_id = model(ids)[:, -1, :].argmax(dim=-1, keepdim=True)
            if not keep and next_id.item() == eos:
                break
            ids = torch.cat([ids, next_id], dim=1)
            if (ids == eos).any() if whole else next_id.item() == eos:
                break
            if not limit and ids.shape[1] >= model.config.context_length:
                break
    return ids


@mutant("q1", expect="the EOS was not kept")
def tests_before_appending(model, input_ids, max_new_tokens, eos_token_id):
    return _one_row(model, input_ids, max_new_tokens, eos_token_id, keep=False)


@mutant("q1", expect="the loop never stops at the EOS")
def never_stops_on_eos(model, input_ids, max_new_tokens, eos_token_id):
    return _one_row(model, input_ids, max_new_tokens, None)


@mutant("q1", expect="only a generated token ends the text")
def any_eos_in_the_sequence(model, input_ids, max_new_tokens, eos_token_id):
    return _one_row(model, input_ids, max_new_tokens, eos_token_id, whole=True)


@mutant("q1", expect="max_new_tokens - 1 steps")
def one_row_one_step_short(model, input_ids, max_new_tokens, eos_token_id):
    return _one_row(model, input_ids, max_new_tokens, eos_token_id, extra=-1)


@mutant("q1", expect="more than max_new_tokens")
def one_step_more(model, input_ids, max_new_tokens, eos_token_id):
    return _one_row(model, input_ids, max_new_tokens, eos_token_id, extra=1)


@mutant("q1", expect="more than max_new_tokens")
def no_length_limit(model, input_ids, max_new_tokens, eos_token_id):
    return _one_row(model, input_ids, max_new_tokens, eos_token_id, limit=False)


@mutant("q1", expect="do not call nexttoken.generate here: it is what you are rebuilding")
def the_librarys_loop(model, input_ids, max_new_tokens, eos_token_id):
    import nexttoken

    return nexttoken.generate(model, input_ids, max_new_tokens, eos_token_id=eos_token_id)


@mutant("q1", expect="the greedy token is")
def first_position(model, input_ids, max_new_tokens, eos_token_id):
    ids = input_ids
    with torch.no_grad():
        for _ in range(max_new_tokens):
            next_id = model(ids)[:, 0, :].argmax(dim=-1, keepdim=True)
            ids = torch.cat([ids, next_id], dim=1)
            if next_id.item() == eos_token_id:
                break
    return ids


# q2: stop_reason
@mutant("q2", expect="you read the last token of the whole output")
def last_token_of_the_output(output_ids, prompt_length, eos_token_id):
    return "eos" if output_ids[0, -1].item() == eos_token_id else "length"


@mutant("q2", expect="an EOS id anywhere in the output")
def eos_anywhere(output_ids, prompt_length, eos_token_id):
    return "eos" if eos_token_id in output_ids[0].tolist() else "length"


@mutant("q2", expect="no new token at all")
def last_new_token_of_none(output_ids, prompt_length, eos_token_id):
    new = output_ids[0, prompt_length:]
    return "eos" if new[-1].item() == eos_token_id else "length"


@mutant("q2", expect="in lower case")
def upper_case(output_ids, prompt_length, eos_token_id):
    new = output_ids[0, prompt_length:].tolist()
    return "EOS" if new and new[-1] == eos_token_id else "LENGTH"


@mutant("q2", expect="return 'eos' or 'length'")
def the_chapters_words(output_ids, prompt_length, eos_token_id):
    new = output_ids[0, prompt_length:].tolist()
    return "EOS" if new and new[-1] == eos_token_id else "length limit"


@mutant("q2", expect="(a str)")
def a_bool(output_ids, prompt_length, eos_token_id):
    new = output_ids[0, prompt_length:].tolist()
    return bool(new) and new[-1] == eos_token_id


@mutant("q2", expect="you read the first new token")
def first_new_token(output_ids, prompt_length, eos_token_id):
    new = output_ids[0, prompt_length:].tolist()
    return "eos" if new and new[0] == eos_token_id else "length"


@mutant("q2", expect="swapped")  # the shared diagnosis names it
def the_other_way_round(output_ids, prompt_length, eos_token_id):
    new = output_ids[0, prompt_length:].tolist()
    return "length" if new and new[-1] == eos_token_id else "eos"


@correct("q1")
def with_a_while_loop(model, input_ids, max_new_tokens, eos_token_id):
    ids, steps = input_ids, 0
    while steps < max_new_tokens:
        with torch.no_grad():
            next_id = torch.argmax(model(ids)[0, -1]).view(1, 1)
        ids, steps = torch.cat([ids, next_id], dim=1), steps + 1
        if next_id.item() == eos_token_id:
            break
    return ids


@correct("q2")
def any_eos_among_the_new_tokens(output_ids, prompt_length, eos_token_id):
    """The loop stops at its first EOS, so an EOS among the new tokens can only be the last of them."""
    return "eos" if (output_ids[:, prompt_length:] == eos_token_id).any() else "length"


# the slips a learner made blind on the batch's flags and loop
@mutant("q3", expect="Python's or, and, not and if need one True or False")
def python_or(finished, next_tokens, eos_token_id):
    return finished or (next_tokens == eos_token_id)


@mutant("q3", expect="that is the rule of the opposite flag, unfinished")
def the_unfinished_rule(finished, next_tokens, eos_token_id):
    return finished & ~(next_tokens == eos_token_id)


@mutant("q3", expect="every row was marked finished as soon as one row produced EOS")
def any_row(finished, next_tokens, eos_token_id):
    return finished | (next_tokens == eos_token_id).any()


@mutant("q3", expect="!= marks the rows whose token is *not* the EOS")
def not_equal(finished, next_tokens, eos_token_id):
    return finished | (next_tokens != eos_token_id)


@mutant("q5", expect="`.item()` reads one number, and a batch has a token per row")
def the_cores_one_row_loop(model, input_ids, max_new_tokens, eos_token_id, pad_token_id):
    ids = input_ids
    with torch.no_grad():
        for _ in range(max_new_tokens):
            probs = torch.softmax(model(ids)[:, -1, :], dim=-1)
            next_id = probs.argmax(dim=-1, keepdim=True)
            ids = torch.cat([ids, next_id], dim=1)
            if next_id.item() == eos_token_id:
                break
    return ids


@mutant("q5", expect="torch.where's branches are swapped")
def where_swapped(model, input_ids, max_new_tokens, eos_token_id, pad_token_id):
    ids, finished = input_ids, torch.zeros(input_ids.shape[0], dtype=torch.bool)
    with torch.no_grad():
        for _ in range(max_new_tokens):
            next_tokens = model(ids)[:, -1, :].argmax(dim=-1)
            next_tokens = torch.where(finished, next_tokens, pad_token_id)
            ids = torch.cat([ids, next_tokens[:, None]], dim=1)
            finished = finished | (next_tokens == eos_token_id)
            if finished.all():
                break
    return ids


@mutant("q5", expect="the flags are overwritten at each step")
def flags_overwritten(model, input_ids, max_new_tokens, eos_token_id, pad_token_id):
    ids, finished = input_ids, torch.zeros(input_ids.shape[0], dtype=torch.bool)
    with torch.no_grad():
        for _ in range(max_new_tokens):
            next_tokens = model(ids)[:, -1, :].argmax(dim=-1)
            next_tokens = torch.where(finished, pad_token_id, next_tokens)
            ids = torch.cat([ids, next_tokens[:, None]], dim=1)
            finished = next_tokens == eos_token_id
            if finished.all():
                break
    return ids


@mutant("q5", expect="Python's or, and, not and if need one True or False")
def python_or_in_the_loop(model, input_ids, max_new_tokens, eos_token_id, pad_token_id):
    ids, finished = input_ids, torch.zeros(input_ids.shape[0], dtype=torch.bool)
    with torch.no_grad():
        for _ in range(max_new_tokens):
            next_tokens = model(ids)[:, -1, :].argmax(dim=-1)
            next_tokens = torch.where(finished, pad_token_id, next_tokens)
            ids = torch.cat([ids, next_tokens[:, None]], dim=1)
            finished = finished or next_tokens == eos_token_id
            if finished.all():
                break
    return ids
