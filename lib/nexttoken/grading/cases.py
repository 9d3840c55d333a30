"""The inputs a task is judged on: those one grading run sends in (``orders``) and ``judge`` compares its
outputs against, in the same order."""


def judged_cases(task, held_out: bool) -> tuple[list[tuple], dict[int, str]]:
    """The inputs one grading run sends in and ``judge`` compares against, with {index: name} of the held-out
    ones among them: the task's visible inputs, or with ``held_out`` its held-out ones alone. Imported only
    then: a student build of the package has no held_out module (``cli`` refuses --held-out there)."""
    if not held_out:
        return task.cases(), {}
    from ..exercises import held_out as held_out_cases

    return held_out_cases.judged(task)
