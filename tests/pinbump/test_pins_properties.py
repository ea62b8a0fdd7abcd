"""Property: whatever the formatting, a bump changes the fork's commits and not one other byte."""

from __future__ import annotations

import re
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.pins import NEW_SHA, OLD_A, OLD_B

from forensics.pinbump.plan import plan_bump

pytestmark = pytest.mark.e2e

HEX = re.compile(r"([0-9a-f]{7,40})")
FORMS = (
    "https://github.com/{repo}/archive/{sha}.tar.gz",
    "https://github.com/{repo}/archive/{sha}.zip",
    "https://codeload.github.com/{repo}/tar.gz/{sha}",
    "git+https://github.com/{repo}.git@{sha}",
    "git+https://github.com/{repo}@{sha}",
    # how private forks are pinned (issue 43, item 3): ssh, pip's scp-like form, a token
    "git+ssh://git@github.com/{repo}.git@{sha}",
    "git+git@github.com:{repo}.git@{sha}",
    "git+https://x-access-token:${{GITHUB_TOKEN}}@github.com/{repo}.git@{sha}",
    "https://oauth2:glpat-Zz_notasecret@github.com/{repo}/archive/{sha}.tar.gz",
)
REPOS = ("exa-labs/flytekit", "Exa-Labs/FlyteKit", "flyteorg/flytekit")


@st.composite
def requirement(draw: st.DrawFn) -> tuple[str, bool]:
    """A PEP 508 URL requirement in some spelling, and whether it is a pin of the fork."""
    repo = draw(st.sampled_from(REPOS))
    sha = draw(st.sampled_from((OLD_A, OLD_B, OLD_B[:7])))
    url = draw(st.sampled_from(FORMS)).format(repo=repo, sha=sha)
    if draw(st.booleans()):
        url += "#subdirectory=plugins/flytekit-kf-pytorch"
    name = draw(st.sampled_from(("flytekit", "flytekitplugins-kfpytorch", "FlyteKit_Plugins.X")))
    extras = draw(st.lists(st.sampled_from(("zeta", "elastic", "alpha")), unique=True))
    extra = f"[{','.join(extras)}]" if extras else ""
    at = draw(st.sampled_from(("@", " @ ", " @", "@ ")))
    marker = draw(
        st.sampled_from(("", ' ; python_version >= "3.10"', " ; sys_platform == 'linux'"))
    )
    return f"{name}{extra}{at}{url}{marker}", repo.lower() == "exa-labs/flytekit"


def _only_commits_moved(before: str, after: str) -> int:
    b, a = HEX.split(before), HEX.split(after)
    assert b[0::2] == a[0::2], "a byte outside a commit changed"
    moved = [(x, y) for x, y in zip(b[1::2], a[1::2], strict=True) if x != y]
    assert all(y == NEW_SHA for _, y in moved)
    return len(moved)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    reqs=st.lists(requirement(), min_size=1, max_size=5),
    literal=st.lists(st.booleans(), min_size=5, max_size=5),
    newline=st.sampled_from(("\n", "\r\n")),
    comment=st.booleans(),
)
def test_pyproject_bump_changes_only_the_forks_commits(reqs, literal, newline, comment) -> None:
    lines = ["[project]", 'name = "p"', "dependencies = ["]
    for (req, _), lit in zip(reqs, literal, strict=False):
        quoted = f"'{req}'" if lit and "'" not in req else '"' + req.replace('"', '\\"') + '"'
        lines.append(f"  {quoted},{'  # ' + req if comment else ''}")
    lines.append("]")
    text = newline.join(lines) + newline
    with tempfile.TemporaryDirectory() as tmp:
        Path(tmp, "pyproject.toml").write_bytes(text.encode())
        plan = plan_bump(Path(tmp), NEW_SHA)
    after = plan.changes[0].after if plan.changes else text
    assert _only_commits_moved(text, after) == sum(fork for _, fork in reqs)
    assert plan.unmovable == ()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    reqs=st.lists(requirement(), min_size=1, max_size=5),
    continued=st.lists(st.booleans(), min_size=5, max_size=5),
    newline=st.sampled_from(("\n", "\r\n")),
)
def test_requirements_bump_changes_only_the_forks_commits(reqs, continued, newline) -> None:
    lines = ["# pins", "-r base.txt"]
    for (req, _), cont in zip(reqs, continued, strict=False):
        if cont and " @ " in req:
            head, _, tail = req.partition(" @ ")
            lines += [f"{head} @ \\", f"    {tail}  # continued"]
        else:
            lines.append(req)
    text = newline.join(lines) + newline
    with tempfile.TemporaryDirectory() as tmp:
        Path(tmp, "requirements.txt").write_bytes(text.encode())
        plan = plan_bump(Path(tmp), NEW_SHA)
    after = plan.changes[0].after if plan.changes else text
    assert _only_commits_moved(text, after) == sum(fork for _, fork in reqs)
    assert plan.unmovable == ()
