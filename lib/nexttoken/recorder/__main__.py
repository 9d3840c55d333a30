"""``python -m nexttoken.recorder``: how the grader starts the recorder in each sandbox (``main``)."""

from .main import main

main()
