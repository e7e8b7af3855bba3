"""File trees and random ignore lines that the ignore tests compare against git."""

from __future__ import annotations

import random

FILES = [
    "ab",
    "b.py",
    "f.txt",
    "x.log",
    ".gitkeep",
    "top.py",
    "sp ace.txt",
    "café.txt",
    "[x].txt",
    "#hash",
    "!bang",
    "q?.txt",
    "star*.md",
    "a/b/f.txt",
    "a/c.py",
    "src/a.py",
    "src/x.log",
    "src/sub/b.py",
    "src/sub/deep/c.txt",
    "src/sub/deep/.gitkeep",
    "logs/.gitkeep",
    "logs/a.log",
    "logs/2024/.gitkeep",
    "logs/2024/b.log",
    "d/f.txt",
    "d/e/f.txt",
    "d/e/g/h.py",
    "d/e/g/.gitkeep",
    "build/out.o",
    "build/keep.txt",
    "Build/x.txt",
]


def _random_line(rng: random.Random) -> str:
    parts = [rng.choice(ATOMS) for _ in range(rng.choice([1, 1, 1, 2, 2, 3]))]
    line = "/".join(parts)
    if rng.random() < 0.2:
        line = "/" + line
    if rng.random() < 0.2:
        line += "/"
    if rng.random() < 0.3:
        line = "!" + line
    return line


ATOMS = [
    "a",
    "ab",
    "b.py",
    "*",
    "**",
    "?",
    "*.py",
    "*.txt",
    "*.log",
    "f*",
    "[a-c]*",
    "[!a]*",
    "[z-a]",
    "src",
    "sub",
    "deep",
    "logs",
    "d",
    "e",
    "g",
    ".gitkeep",
    "build",
    "Build",
    "[[:alpha:]]*",
    "x\\",
    "caf?.txt",
    "*e*",
    "2024",
]
