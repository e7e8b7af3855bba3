from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ctxnb.retrieval.markdown_links import MarkdownLink, extract_markdown_links


def paths(text: str, **kwargs: bool) -> list[str]:
    return [link.relative_path for link in extract_markdown_links(text, **kwargs)]


def one(text: str, **kwargs: bool) -> MarkdownLink:
    links = extract_markdown_links(text, **kwargs)
    assert len(links) == 1, links
    return links[0]


# --- inline links ------------------------------------------------------------------------


def test_simple_inline_link() -> None:
    assert one("see [the rules](docs/rules.md) now") == MarkdownLink(
        "the rules", "docs/rules.md", 1, "link", None, None
    )


def test_link_is_frozen() -> None:
    link = one("[a](b.md)")
    with pytest.raises(dataclasses.FrozenInstanceError):
        link.relative_path = "x"  # type: ignore[misc]


def test_nested_brackets_in_text() -> None:
    link = one("[a [b] c](x.md)")
    assert (link.display_text, link.relative_path) == ("a [b] c", "x.md")


@pytest.mark.parametrize(
    "src",
    ['[t](p.md "Title")', "[t](p.md 'Title')", "[t](p.md (Title))", '[t]( p.md  "Title" )'],
)
def test_titles_are_stripped(src: str) -> None:
    link = one(src)
    assert (link.relative_path, link.title) == ("p.md", "Title")


def test_title_with_escaped_quote() -> None:
    assert one(r'[t](p.md "say \"hi\"")').title == 'say "hi"'


def test_anchor_is_split_off() -> None:
    link = one("[t](p.md#sec)")
    assert (link.relative_path, link.anchor) == ("p.md", "sec")


def test_pure_anchor_is_not_a_file_link() -> None:
    assert paths("[jump](#usage) and [t](a.md)") == ["a.md"]


def test_query_is_dropped() -> None:
    assert paths("[t](a.md?plain=1#L3)") == ["a.md"]


def test_angle_bracket_destination_with_spaces() -> None:
    link = one("[t](<a b.md> 'T')")
    assert (link.relative_path, link.title) == ("a b.md", "T")


def test_unclosed_angle_destination_is_not_a_link() -> None:
    assert paths("[t](<a b.md)") == []


def test_balanced_parentheses_in_destination() -> None:
    assert paths("[t](notes/a(1).md) and [u](b.md)") == ["notes/a(1).md", "b.md"]


def test_unbalanced_parenthesis_ends_destination() -> None:
    # The first ")" closes the link; the rest is text.
    assert paths("([t](a.md))") == ["a.md"]


def test_space_in_raw_destination_is_not_a_link() -> None:
    assert paths("[t](a b.md)") == []


def test_space_between_text_and_destination_is_not_a_link() -> None:
    assert paths("[t] (a.md)") == []


def test_percent_encoded_path_is_decoded() -> None:
    link = one("[t](my%20notes/caf%C3%A9.md#two%20words)")
    assert (link.relative_path, link.anchor) == ("my notes/café.md", "two words")


def test_backslash_escapes_in_destination_are_removed() -> None:
    assert paths(r"[t](a\(b\).md)") == ["a(b).md"]


def test_empty_destination_is_skipped() -> None:
    assert paths("[t]() [u](<>) [v](x.md)") == ["x.md"]


def test_link_text_may_span_lines_and_is_collapsed() -> None:
    link = one("intro\n[a long\n   text](x.md)\n")
    assert (link.display_text, link.line_number) == ("a long text", 2)


def test_link_text_cannot_cross_a_blank_line() -> None:
    assert paths("[a\n\nb](x.md)") == []


def test_title_on_next_line() -> None:
    link = one('[t](x.md\n  "Title")')
    assert link.title == "Title"


def test_link_inside_link_text_wins() -> None:
    # CommonMark: links cannot contain links, so the inner one is the link.
    assert paths("[a [b](inner.md) c](outer.md)") == ["inner.md"]


def test_badge_image_inside_link() -> None:
    src = "[![build](badge.svg)](ci.md)"
    assert paths(src) == ["ci.md"]
    links = extract_markdown_links(src, include_images=True)
    assert [(x.kind, x.relative_path) for x in links] == [
        ("link", "ci.md"),
        ("image", "badge.svg"),
    ]


def test_escaped_brackets_are_not_links() -> None:
    assert paths(r"\[not](a.md) and [yes\]](b.md)") == ["b.md"]
    assert one(r"[yes\]](b.md)").display_text == "yes]"


def test_escaped_bang_makes_a_link_not_an_image() -> None:
    assert one(r"\![alt](a.md)").kind == "link"


def test_several_links_keep_document_order_and_lines() -> None:
    src = "# T\n[a](1.md) [b](2.md)\n\n- [c](3.md)\n"
    links = extract_markdown_links(src)
    assert [(x.relative_path, x.line_number) for x in links] == [
        ("1.md", 2),
        ("2.md", 2),
        ("3.md", 4),
    ]


def test_crlf_line_endings() -> None:
    src = "a\r\n\r\n[t](x.md)\r\n```\r\n[c](no.md)\r\n```\r\n[u](y.md)"
    links = extract_markdown_links(src)
    assert [(x.relative_path, x.line_number) for x in links] == [("x.md", 3), ("y.md", 7)]


def test_form_feed_does_not_shift_line_numbers() -> None:
    assert one("a\fb\n[t](x.md)").line_number == 2


def test_windows_style_backslash_path_is_kept() -> None:
    assert paths(r"[t](docs\rules.md)") == [r"docs\rules.md"]


def test_task_list_checkboxes_are_not_links() -> None:
    assert paths("- [ ] todo\n- [x] done [t](a.md)\n") == ["a.md"]


# --- reference links ---------------------------------------------------------------------


def test_full_collapsed_and_shortcut_references() -> None:
    src = (
        "[Full text][ref] and [Ref][] and [ref].\n\n"
        '[REF]: docs/ref.md "The ref"\n'
        "[other]: <a b.md>\n"
    )
    links = extract_markdown_links(src)
    assert [(x.display_text, x.relative_path, x.title) for x in links] == [
        ("Full text", "docs/ref.md", "The ref"),
        ("Ref", "docs/ref.md", "The ref"),
        ("ref", "docs/ref.md", "The ref"),
    ]
    assert all(x.line_number == 1 for x in links)


def test_undefined_reference_is_not_a_link() -> None:
    assert paths("[text][nope] and [nope]") == []


def test_first_definition_wins_and_labels_fold_whitespace() -> None:
    src = "[The  Label]\n\n[the label]: first.md\n[THE LABEL]: second.md\n"
    assert paths(src) == ["first.md"]


def test_inline_form_that_fails_falls_back_to_shortcut_reference() -> None:
    assert paths("[foo](not a link)\n\n[foo]: /url.md\n") == ["/url.md"]


def test_definition_inside_code_block_is_ignored() -> None:
    assert paths("[r]\n\n```\n[r]: x.md\n```\n") == []


def test_reference_to_external_target() -> None:
    src = "[site][s]\n\n[s]: https://example.com/x\n"
    assert paths(src) == []
    assert one(src, include_external=True).kind == "external"


# --- images and external ------------------------------------------------------------------


def test_images_excluded_by_default_included_on_request() -> None:
    src = "![alt text](img/a.png 'Pic') [t](b.md)"
    assert paths(src) == ["b.md"]
    links = extract_markdown_links(src, include_images=True)
    assert links[0] == MarkdownLink("alt text", "img/a.png", 1, "image", "Pic", None)


@pytest.mark.parametrize(
    "dest",
    ["https://example.com/a.md", "http://x", "mailto:a@b.com", "//cdn.example.com/x.md", "ftp://h"],
)
def test_external_targets(dest: str) -> None:
    src = f"[t]({dest})"
    assert paths(src) == []
    link = one(src, include_external=True)
    assert (link.kind, link.relative_path) == ("external", dest)


def test_external_keeps_fragment_and_is_not_decoded() -> None:
    link = one("[t](https://x.org/a%20b#frag)", include_external=True)
    assert (link.relative_path, link.anchor) == ("https://x.org/a%20b#frag", None)


def test_windows_drive_letter_is_not_a_scheme() -> None:
    assert one("[t](C:/notes/a.md)").kind == "link"


def test_external_image_needs_both_flags() -> None:
    src = "![logo](https://x.org/logo.png)"
    assert extract_markdown_links(src, include_images=True) == []
    assert extract_markdown_links(src, include_external=True) == []
    assert one(src, include_images=True, include_external=True).kind == "external"


def test_autolinks_are_external() -> None:
    src = "<https://example.com/x> and <me@example.com> and <notalink>"
    assert paths(src) == []
    links = extract_markdown_links(src, include_external=True)
    assert [x.relative_path for x in links] == ["https://example.com/x", "mailto:me@example.com"]


# --- code ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "src",
    [
        "`[a](no.md)`",
        "``[a](no.md)``",
        "`` `[a](no.md)` ``",
        "```[a](no.md)```",
        "`multi\nline [a](no.md)`",
    ],
)
def test_links_in_code_spans_are_ignored(src: str) -> None:
    assert paths(src + " [y](yes.md)") == ["yes.md"]


def test_unmatched_backtick_is_literal() -> None:
    assert paths("a ` b [t](x.md)") == ["x.md"]


def test_code_span_length_must_match() -> None:
    # `` opens, a single ` inside does not close it.
    assert paths("``a ` [t](no.md) ``[u](yes.md)") == ["yes.md"]


def test_code_span_does_not_cross_paragraphs() -> None:
    assert paths("`open\n\n[t](x.md) `") == ["x.md"]


def test_escaped_backtick_does_not_open_code_span() -> None:
    assert paths(r"\`[t](x.md)`") == ["x.md"]


def test_backtick_in_link_text() -> None:
    link = one("[`run()`](docs/run.md)")
    assert (link.display_text, link.relative_path) == ("`run()`", "docs/run.md")


def test_bracket_in_code_span_does_not_close_link_text() -> None:
    assert one("[a `]` b](x.md)").display_text == "a `]` b"


@pytest.mark.parametrize(
    "fence",
    ["```", "````", "~~~", "```python", "~~~ {.md}", "   ```", "``` title='x'"],
)
def test_fenced_code_blocks_are_ignored(fence: str) -> None:
    stripped = fence.strip()
    closer = stripped[: len(stripped) - len(stripped.lstrip(stripped[0]))]
    src = f"[a](1.md)\n{fence}\n[b](no.md) @no/import.md\n{closer}\n[c](2.md)\n"
    assert paths(src) == ["1.md", "2.md"]


def test_fence_needs_matching_char_and_length() -> None:
    src = "````\n```\n[a](no.md)\n~~~~\n[b](no2.md)\n````\n[c](yes.md)\n"
    assert paths(src) == ["yes.md"]


def test_unclosed_fence_runs_to_end() -> None:
    assert paths("[a](1.md)\n```\n[b](no.md)\n") == ["1.md"]


def test_four_space_fence_is_indented_code_not_a_fence() -> None:
    # Indented four spaces after a blank line: an indented code block. The ``` inside it
    # is content, so it opens no fence and the link after it counts.
    assert paths("text\n\n    ```\n    [a](no.md)\n\n[b](yes.md)\n") == ["yes.md"]


def test_backtick_fence_info_with_backtick_is_not_a_fence() -> None:
    assert paths("``` a`b\n[t](x.md)\n") == ["x.md"]


def test_indented_code_block_is_ignored() -> None:
    src = "para\n\n    [a](no.md)\n\tb [b](no2.md)\n\n[c](yes.md)\n"
    assert paths(src) == ["yes.md"]


def test_indented_line_continuing_a_paragraph_is_not_code() -> None:
    assert paths("para\n    [a](yes.md)\n") == ["yes.md"]


def test_indented_content_inside_a_list_is_not_code() -> None:
    src = "- item\n\n    continued [a](yes.md)\n\n      ```\n      [b](no.md)\n      ```\n"
    assert paths(src) == ["yes.md"]


@pytest.mark.parametrize("rule", ["* * *", "---", "___", "- - -"])
def test_thematic_break_is_not_a_list(rule: str) -> None:
    assert paths(f"- item\n\n{rule}\n\n    [a](no.md)\n") == []


def test_indented_code_after_heading() -> None:
    assert paths("# Title\n    [a](no.md)\n[b](yes.md)") == ["yes.md"]


def test_fence_inside_blockquote() -> None:
    assert paths("> ```\n> [a](no.md)\n> ```\n> [b](yes.md)\n") == ["yes.md"]


def test_html_comment_is_ignored() -> None:
    src = "<!-- [a](no.md)\n@no/x.md -->\n[b](yes.md)"
    assert paths(src) == ["yes.md"]


# --- imports -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("src", "path"),
    [
        ("@docs/rules.md", "docs/rules.md"),
        ("see @~/x.md", "~/x.md"),
        ("  @AGENTS.md", "AGENTS.md"),
        ("Read @docs/rules.md.", "docs/rules.md"),
        ("(see\n@./a/b.md)", "./a/b.md"),
        (r"@my\ notes/a.md", "my notes/a.md"),
    ],
)
def test_imports(src: str, path: str) -> None:
    link = one(src)
    assert (link.kind, link.relative_path) == ("import", path)


@pytest.mark.parametrize(
    "src",
    [
        "mail a@b.com",
        "ask @alice",
        "x@docs/a.md",
        "(@docs/a.md)",
        "`@docs/a.md`",
        "@",
        "@@x.md",
        "@https://example.com/a.md",
        r"\@docs/a.md",
    ],
)
def test_not_imports(src: str) -> None:
    assert extract_markdown_links(src) == []


def test_import_line_number_and_anchor() -> None:
    link = one("# Rules\n\nAlso @docs/x.md#part\n")
    assert (link.line_number, link.relative_path, link.anchor) == (3, "docs/x.md", "part")
    assert link.display_text == "@docs/x.md#part"


def test_imports_can_be_turned_off() -> None:
    src = "@docs/a.md [t](b.md)"
    assert paths(src, include_imports=False) == ["b.md"]


def test_at_sign_inside_destination_is_not_an_import() -> None:
    assert one("[t]( @x.md)").kind == "link"


# --- robustness ------------------------------------------------------------------------------


@pytest.mark.timeout(20)
def test_pathological_input_finishes() -> None:
    src = "[" * 5000 + "`" * 3 + " x" * 2000 + "(" * 5000
    assert extract_markdown_links(src) == []
    deep = "[" * 200 + "a" + "]" * 200 + "(x.md)"
    extract_markdown_links(deep)  # must not hit the recursion limit


@given(st.text(alphabet="[]()!<>`~@#\\ \n\tab.md/:%\"'", max_size=200))
def test_never_raises_and_line_numbers_are_in_range(src: str) -> None:
    n_lines = src.count("\n") + 1
    for link in extract_markdown_links(src, include_images=True, include_external=True):
        assert 1 <= link.line_number <= n_lines
        assert link.relative_path
        assert link.kind in ("link", "image", "import", "external")
