from perfgym.train.tiny import build_tiny_model  # noqa: F401  (tests import it from here)
