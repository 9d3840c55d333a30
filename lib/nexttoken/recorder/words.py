"""Words for counts, in the right number: "1 row", "3 rows". Both sides use them (the recorder's checks of
how, the exercises' feedback, the grader's console), so they live where the sandbox shows them."""


def counted(k: int, noun: str, plural: str | None = None) -> str:
    """"1 row", "3 rows", "1 forward pass", "2 forward passes": a count with its noun in the right number."""
    return f"{k} {noun if k == 1 else plural or noun + 's'}"


def tokens(k: int) -> str:
    """"1 token", "3 tokens"."""
    return counted(k, "token")
