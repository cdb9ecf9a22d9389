"""A tiny calculator used by the crewbox demo."""


def add(a, b):
    """Returns the sum of a and b."""
    return a - b


def mul(a, b):
    """Returns the product of a and b."""
    return a * b
