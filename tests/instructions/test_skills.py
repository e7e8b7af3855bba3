from __future__ import annotations

import os
from pathlib import Path

import pytest

from ctxnb.errors import ConfigError, CtxnbError, NotFoundError
from ctxnb.instructions.skills import Skill, SkillError, SkillSet, discover_skills, load_skill


def make_skill(
    root: Path,
    name: str,
    frontmatter: str | None = None,
    body: str = "Body.\n",
    *,
    where: str = ".ctxnb/skills",
    raw: str | None = None,
) -> Path:
    folder = root / where / name
    folder.mkdir(parents=True, exist_ok=True)
    if raw is None:
        fm = frontmatter if frontmatter is not None else f"name: {name}\ndescription: Does {name}."
        raw = f"---\n{fm}\n---\n{body}"
    (folder / "SKILL.md").write_text(raw, encoding="utf-8")
    return folder


def only_error(skills: SkillSet) -> SkillError:
    assert len(skills.errors) == 1, skills.errors
    return skills.errors[0]


# --- discovery ------------------------------------------------------------------------------


def test_discovers_both_folders_sorted_by_name(tmp_path: Path) -> None:
    make_skill(tmp_path, "zeta")
    make_skill(tmp_path, "alpha", where=".claude/skills")
    make_skill(tmp_path, "mid")
    skills = discover_skills(tmp_path)
    assert skills.names() == ["alpha", "mid", "zeta"]
    assert skills.errors == [] and skills.shadowed == []
    assert skills["alpha"].path == tmp_path / ".claude/skills/alpha/SKILL.md"
    assert len(skills) == 3 and "mid" in skills and "nope" not in skills
    assert [s.name for s in skills] == ["alpha", "mid", "zeta"]


def test_no_skill_folders_is_empty_not_an_error(tmp_path: Path) -> None:
    skills = discover_skills(tmp_path)
    assert (len(skills), skills.errors) == (0, [])
    skills.raise_for_errors()


def test_ctxnb_folder_shadows_claude_folder(tmp_path: Path) -> None:
    make_skill(tmp_path, "pdf", "name: pdf\ndescription: ctxnb copy")
    make_skill(tmp_path, "pdf", "name: pdf\ndescription: claude copy", where=".claude/skills")
    skills = discover_skills(tmp_path)
    assert skills["pdf"].description == "ctxnb copy"
    assert skills.shadowed == [tmp_path / ".claude/skills/pdf/SKILL.md"]


def test_custom_dirs(tmp_path: Path) -> None:
    make_skill(tmp_path, "a", where="skills")
    make_skill(tmp_path, "b")
    assert discover_skills(tmp_path, dirs=["skills"]).names() == ["a"]


def test_hidden_folders_and_plain_files_are_ignored(tmp_path: Path) -> None:
    make_skill(tmp_path, "real")
    (tmp_path / ".ctxnb/skills/.git").mkdir()
    (tmp_path / ".ctxnb/skills/README.md").write_text("# skills\n")
    skills = discover_skills(tmp_path)
    assert skills.names() == ["real"] and skills.errors == []


def test_getitem_unknown_lists_known(tmp_path: Path) -> None:
    make_skill(tmp_path, "one")
    with pytest.raises(NotFoundError, match="no skill named 'two'; known skills: one"):
        discover_skills(tmp_path)["two"]


# --- a loaded skill --------------------------------------------------------------------------


def test_full_skill(tmp_path: Path) -> None:
    folder = make_skill(
        tmp_path,
        "pdf-forms",
        "name: pdf-forms\n"
        "description: >\n  Fill PDF forms.\n  Use when the user mentions forms.\n"
        "license: Apache-2.0\n"
        "allowed-tools: Bash(git status:*) Read\n"
        "metadata:\n  author: ex\n  version: '1.0'\n"
        "x-custom: [1, 2]",
        "# PDF forms\n\nSee [the reference](references/REFERENCE.md#fields) and\n"
        "run `scripts/fill.py`.\n\n```\n[not](a-link.md)\n```\n@references/extra.md\n"
        "![logo](assets/logo.png)\n",
    )
    (folder / "scripts/sub").mkdir(parents=True)
    (folder / "scripts/fill.py").write_text("print()\n")
    (folder / "scripts/sub/helper.sh").write_text("true\n")
    (folder / "scripts/__pycache__").mkdir()
    (folder / "scripts/__pycache__/fill.cpython-311.pyc").write_bytes(b"")
    (folder / "scripts/.hidden").write_text("")
    (folder / "references").mkdir()
    (folder / "references/REFERENCE.md").write_text("# Ref\n")

    skill = load_skill(folder)
    assert skill.name == "pdf-forms"
    assert skill.description == "Fill PDF forms. Use when the user mentions forms.\n"
    assert skill.metadata_line() == (
        "skill pdf-forms: Fill PDF forms. Use when the user mentions forms."
    )
    assert skill.license == "Apache-2.0"
    assert skill.allowed_tools == ["Bash(git status:*)", "Read"]
    assert skill.metadata == {"author": "ex", "version": "1.0"}
    assert skill.frontmatter["x-custom"] == [1, 2]
    assert skill.body.startswith("# PDF forms\n")
    assert skill.directory == folder
    assert skill.files == {
        "scripts": ["scripts/fill.py", "scripts/sub/helper.sh"],
        "references": ["references/REFERENCE.md"],
        "assets": [],
    }
    refs = [(r.kind, r.relative_path, r.anchor, r.line_number) for r in skill.references]
    # Frontmatter takes lines 1-12, so the body's line 3 is line 15 of SKILL.md.
    assert refs == [
        ("link", "references/REFERENCE.md", "fields", 15),
        ("import", "references/extra.md", None, 21),
    ]
    lines = (folder / "SKILL.md").read_text().splitlines()
    assert "REFERENCE.md" in lines[14] and "@references/extra.md" in lines[20]


def test_load_skill_accepts_the_file_path(tmp_path: Path) -> None:
    folder = make_skill(tmp_path, "x")
    assert load_skill(folder / "SKILL.md").name == "x"
    assert load_skill(str(folder)).name == "x"


def test_bom_and_crlf(tmp_path: Path) -> None:
    folder = tmp_path / ".ctxnb/skills/win"
    folder.mkdir(parents=True)
    raw = "\ufeff---\r\nname: win\r\ndescription: Windows file.\r\n---\r\n[a](b.md)\r\n"
    (folder / "SKILL.md").write_bytes(raw.encode("utf-8"))
    skill = load_skill(folder)
    assert (skill.name, skill.description) == ("win", "Windows file.")
    assert [(r.relative_path, r.line_number) for r in skill.references] == [("b.md", 5)]


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("Read, Grep, Glob", ["Read", "Grep", "Glob"]),
        ("Bash(git add:*, git commit:*) Read", ["Bash(git add:*, git commit:*)", "Read"]),
        ("Bash(jq:*), Read", ["Bash(jq:*)", "Read"]),
        ("[Read, 'Bash(ls)']", ["Read", "Bash(ls)"]),
    ],
)
def test_allowed_tools_forms(tmp_path: Path, value: str, expected: list[str]) -> None:
    make_skill(tmp_path, "t", f"name: t\ndescription: d\nallowed-tools: {value}")
    assert load_skill(tmp_path / ".ctxnb/skills/t").allowed_tools == expected


def test_skill_without_optional_fields(tmp_path: Path) -> None:
    skill = load_skill(make_skill(tmp_path, "bare", body=""))
    assert (skill.license, skill.metadata, skill.allowed_tools) == (None, {}, [])
    assert skill.body == "" and skill.references == []
    assert skill.files == {"scripts": [], "references": [], "assets": []}


def test_repr_does_not_include_body(tmp_path: Path) -> None:
    skill = load_skill(make_skill(tmp_path, "big", body="x" * 100_000))
    assert len(repr(skill)) < 200 and "big" in repr(skill)
    assert len(repr(discover_skills(tmp_path))) < 200


def test_unicode_lowercase_name(tmp_path: Path) -> None:
    assert load_skill(make_skill(tmp_path, "résumé-2")).name == "résumé-2"


# --- errors --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "problem"),
    [
        ("# no frontmatter\n", "does not start with YAML frontmatter"),
        ("---\nname: bad\ndescription: d\n", "never closed"),
        ("---\n---\nbody", "frontmatter is empty"),
        ("---\n- a\n- b\n---\n", "mapping of keys to values, not a list"),
        ("---\njust text\n---\n", "not a string"),
        ("---\nname: bad\n---\n", "no 'description', which is required"),
        ("---\ndescription: d\n---\n", "no 'name', which is required"),
        ("---\nname: bad\ndescription: ''\n---\n", "'description' must be a non-empty string"),
        ("---\nname: [bad]\ndescription: d\n---\n", "'name' must be a non-empty string, got list"),
        ("---\nname: other\ndescription: d\n---\n", "does not match its folder 'bad'"),
        ("---\nname: bad\ndescription: d\nmetadata: [1]\n---\n", "'metadata' must be a mapping"),
        ("---\nname: bad\ndescription: d\nlicense: 3\n---\n", "'license' must be a string"),
        ("---\nname: bad\ndescription: d\nallowed-tools: 3\n---\n", "'allowed-tools' must be"),
        ("---\nname: bad\ndescription: " + "d" * 1025 + "\n---\n", "limit is 1024"),
        ("---\nname: bad\ndescription: d\ncompatibility: " + "c" * 501 + "\n---\n", "500"),
    ],
)
def test_malformed_skill_is_reported_others_still_load(
    tmp_path: Path, raw: str, problem: str
) -> None:
    make_skill(tmp_path, "good")
    make_skill(tmp_path, "bad", raw=raw)
    skills = discover_skills(tmp_path)
    assert skills.names() == ["good"]
    err = only_error(skills)
    assert problem in err.problem
    assert err.path == tmp_path / ".ctxnb/skills/bad/SKILL.md"
    assert str(err).startswith(str(err.path) + ": ")


def test_bad_yaml_names_the_line(tmp_path: Path) -> None:
    make_skill(tmp_path, "bad", "name: bad\ndescription: Use when: the user asks")
    err = only_error(discover_skills(tmp_path))
    assert "invalid YAML in the frontmatter at line 3" in err.problem
    assert "quote values" in err.problem


@pytest.mark.parametrize("name", ["Bad", "-bad", "bad-", "b--ad", "b_ad", "b ad", "a" * 65, "bad!"])
def test_invalid_names(tmp_path: Path, name: str) -> None:
    folder = tmp_path / "skills" / name
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text(f"---\nname: '{name}'\ndescription: d\n---\n")
    with pytest.raises(SkillError, match="is not allowed: use 1-64 lowercase"):
        load_skill(folder)


def test_max_length_name_is_fine(tmp_path: Path) -> None:
    assert load_skill(make_skill(tmp_path, "a" * 64)).name == "a" * 64


def test_missing_skill_md_with_case_hint(tmp_path: Path) -> None:
    folder = tmp_path / ".ctxnb/skills/lower"
    folder.mkdir(parents=True)
    (folder / "skill.md").write_text("---\nname: lower\ndescription: d\n---\n")
    if (folder / "SKILL.md").is_file():
        pytest.skip("case-insensitive filesystem: skill.md is SKILL.md here")
    err = only_error(discover_skills(tmp_path))
    assert "no SKILL.md" in err.problem and "rename it to 'SKILL.md'" in err.problem
    assert err.path == folder


def test_empty_skill_folder(tmp_path: Path) -> None:
    (tmp_path / ".ctxnb/skills/empty").mkdir(parents=True)
    err = only_error(discover_skills(tmp_path))
    assert err.problem == "no SKILL.md in this skill folder"


def test_missing_folder(tmp_path: Path) -> None:
    with pytest.raises(SkillError, match="no such skill folder"):
        load_skill(tmp_path / "nope")


def test_not_utf8(tmp_path: Path) -> None:
    folder = tmp_path / ".ctxnb/skills/latin"
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_bytes(b"---\nname: latin\ndescription: caf\xe9\n---\n")
    err = only_error(discover_skills(tmp_path))
    assert "not valid UTF-8" in err.problem


def test_unreadable_file(tmp_path: Path) -> None:
    # A FIFO named SKILL.md: a reader that opened it would block forever.
    folder = make_skill(tmp_path, "locked")
    make_skill(tmp_path, "open")
    (folder / "SKILL.md").unlink()
    os.mkfifo(folder / "SKILL.md")
    skills = discover_skills(tmp_path)
    assert skills.names() == ["open"]
    assert "not a regular file" in only_error(skills).problem


def test_symlink_loop_in_scripts_does_not_hang(tmp_path: Path) -> None:
    folder = make_skill(tmp_path, "loop")
    (folder / "scripts").mkdir()
    (folder / "scripts/a.py").write_text("")
    (folder / "scripts/self").symlink_to(folder / "scripts", target_is_directory=True)
    # Symlinked folders are not walked into.
    assert load_skill(folder).files["scripts"] == ["scripts/a.py"]


def test_raise_for_errors_lists_every_problem(tmp_path: Path) -> None:
    make_skill(tmp_path, "ok")
    make_skill(tmp_path, "b1", raw="nothing\n")
    make_skill(tmp_path, "b2", "name: wrong\ndescription: d", where=".claude/skills")
    skills = discover_skills(tmp_path)
    assert skills.names() == ["ok"]
    with pytest.raises(ConfigError) as info:
        skills.raise_for_errors()
    msg = str(info.value)
    assert msg.startswith("2 skills could not be loaded:")
    assert "b1/SKILL.md: does not start with YAML frontmatter" in msg
    assert "b2/SKILL.md: name 'wrong' does not match its folder 'b2'" in msg
    assert isinstance(info.value, CtxnbError)


def test_skill_error_is_a_config_error(tmp_path: Path) -> None:
    err = SkillError(tmp_path / "SKILL.md", "broken")
    assert isinstance(err, ConfigError) and err.problem == "broken"


def test_metadata_lines(tmp_path: Path) -> None:
    make_skill(tmp_path, "b", "name: b\ndescription: |\n  Two\n  lines.")
    make_skill(tmp_path, "a")
    assert discover_skills(tmp_path).metadata_lines() == [
        "skill a: Does a.",
        "skill b: Two lines.",
    ]


def test_skill_is_frozen(tmp_path: Path) -> None:
    skill = load_skill(make_skill(tmp_path, "f"))
    assert isinstance(skill, Skill)
    with pytest.raises(AttributeError):
        skill.name = "g"  # type: ignore[misc]
