"""A tiny calculator module (the sample task's code under test)."""


def add(a, b):
    return a - b


def mean(values):
    return sum(values) / len(values)
