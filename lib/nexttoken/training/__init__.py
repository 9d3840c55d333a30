"""Model-card tooling, not part of the lesson: how the shipped Tiny Shakespeare model was trained and
measured. ``python -m nexttoken.train`` and ``python -m nexttoken.evaluate`` run these modules."""
