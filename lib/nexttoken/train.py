"""``python -m nexttoken.train``: the documented command; the code is ``nexttoken.training.train``."""

from .training.train import main

if __name__ == "__main__":
    main()
