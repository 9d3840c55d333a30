"""``python -m nexttoken.evaluate``: the documented command; the code is ``nexttoken.training.evaluate``."""

from .training.evaluate import main

if __name__ == "__main__":
    main()
