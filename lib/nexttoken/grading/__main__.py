"""``python -m nexttoken.grading``, the same command as ``python -m nexttoken.grade``."""

import sys

from .cli import main

sys.exit(main())
