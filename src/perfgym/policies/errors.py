"""The policies' one error (a module of its own: every policy raises it, and the package's
__init__ imports the policies)."""


class PolicyError(RuntimeError):
    """The policy cannot produce completions (server down, bad model path); a user can fix it."""
