"""The README and the reference pages in docs/: the static site builds with no broken
link between pages (mkdocs --strict), every relative link of the README and of the pages
names a file of the repository (and an anchor of it that exists), and the README's
first-message steps work against a real broker."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

from tests.support.broker import running_broker

REPO = Path(__file__).resolve().parents[2]
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")


def _anchors(md: Path) -> set[str]:
    """GitHub's / mkdocs' heading slugs of a Markdown file (outside code blocks)."""
    out: set[str] = set()
    fence = False
    for line in md.read_text().splitlines():
        if line.startswith("```"):
            fence = not fence
        m = re.match(r"#{1,6} (.*)", line)
        if m and not fence:
            slug = re.sub(r"[^\w\- ]", "", m.group(1).strip().lower()).replace(" ", "-")
            out.add(slug)
    return out


def _links(md: Path) -> list[str]:
    text = re.sub(r"```.*?```", "", md.read_text(), flags=re.S)
    return LINK.findall(text)


def test_docs_site_builds_strict_with_no_broken_links(tmp_path: Path) -> None:
    r = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir",
                        str(tmp_path / "site")], cwd=REPO, capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert (tmp_path / "site" / "security" / "index.html").is_file()


def test_every_relative_link_of_the_readme_and_docs_resolves() -> None:
    pages = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
    broken = []
    for md in pages:
        for link in _links(md):
            if re.match(r"[a-z]+:", link):
                continue  # http(s), mailto: not checked (no network here)
            target, _, anchor = link.partition("#")
            path = (md.parent / target).resolve() if target else md
            if not path.exists():
                broken.append(f"{md.relative_to(REPO)}: {link} (no such file)")
            elif anchor and path.suffix == ".md" and anchor not in _anchors(path):
                broken.append(f"{md.relative_to(REPO)}: {link} (no such heading)")
    assert not broken, "\n".join(broken)


def test_readme_first_message_steps_work(tmp_path: Path) -> None:
    readme = (REPO / "README.md").read_text()
    section = readme.split("## First message", 1)[1]
    block = re.search(r"```sh\n(.*?)```", section, re.S)
    assert block, "the README's first-message section has a sh block"
    steps = [ln.split("#", 1)[0].strip() for ln in block.group(1).splitlines()]
    steps = [s for s in steps if s]
    assert len(steps) == 3
    expected = re.search(r"#\s*(\S+)\t(\S+)\s*$", block.group(1).splitlines()[-1])
    assert expected, "the consume step says what it prints"
    with running_broker(tmp_path) as broker:
        out = ""
        for step in steps:
            stdin = None
            if "|" in step:
                echo, step = (s.strip() for s in step.split("|", 1))
                stdin = shlex.split(echo)[1] + "\n"
            argv = shlex.split(step)
            assert argv[0] == ".venv/bin/jocko-py"
            argv = [sys.executable, "-m", "jocko_py.cli", *argv[1:],
                    "--bootstrap-server", broker.bootstrap]
            r = subprocess.run(argv, input=stdin, capture_output=True, text=True, timeout=60,
                               cwd=tmp_path)
            assert r.returncode == 0, f"{step}: {r.stdout}{r.stderr}"
            out = r.stdout
        assert out.strip() == f"{expected.group(1)}\t{expected.group(2)}"
