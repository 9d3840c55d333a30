"""``python -m nexttoken.grade``: the documented command; the grader is the package ``nexttoken.grading``."""

import sys

from .grading.cli import main

if __name__ == "__main__":
    sys.exit(main())
