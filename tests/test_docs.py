"""The docs are tested: their runnable shell examples run as written, and their process lists agree.

**Runnable examples.** A shell block in README.md or docs/*.md preceded by the line
``<!-- runnable -->`` is run by bash (``-e -o pipefail``), README.md's first, then docs/*.md's
by file name, each file's in order, as a newcomer would follow them: from a throw-away checkout
(the repository's files linked into a temporary directory, ``.venv`` the running interpreter's
environment), with a database, a RabbitMQ vhost, a Redis key prefix and a Dramatiq namespace of
their own that do not exist before (so README's ``db migrate`` creates the database, as on a
fresh clone) and are removed at the end. ``8080`` in a block is replaced by a free
port, so a ``kickoff serve --port 8080 &`` of the block listens where its ``curl`` calls go; the
block's process group (with anything it left in the background) is killed when it ends.

The block must exit 0, and its stdout must be what the `````text````` block right after it
says, line by line (without one: nothing). In an expected line ``...`` stands for any text on
that line; a line that is ``...`` alone stands for any number of lines. Stderr (logs) is not
compared. For example::

    <!-- runnable -->
    ```sh
    .venv/bin/kickoff amqp setup
    ```

    ```text
    declared lineup_updates
    ...
    ```

**Process lists.** The table after ``<!-- processes -->`` in README.md and in docs/lifecycle.md
names the processes of deploy/Procfile, which also each have a systemd unit that the staging
deploy restarts.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest

from cli.procfile import read_procfile
from harness.ports import free_port
from tests.process_groups import group_members

REPO = Path(__file__).resolve().parent.parent
RUNNABLE = "<!-- runnable -->"
PROCESSES = "<!-- processes -->"
BLOCK_TIMEOUT = 180


@dataclass(frozen=True)
class DocBlock:
    """One runnable shell block: where it is, its script, the stdout lines it promises."""

    path: Path
    line: int  # 1-based line of its ```sh fence
    script: str
    expected: tuple[str, ...]

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(REPO)}:{self.line}"


def _fenced(lines: list[str], start: int, lang: str) -> tuple[list[str], int] | None:
    """The body of the ```lang block opening at ``start`` (after blank lines) and the index after it."""
    i = start
    while i < len(lines) and not lines[i].strip():
        i += 1
    if i >= len(lines) or lines[i].strip() != f"```{lang}":
        return None
    end = i + 1
    while end < len(lines) and lines[end].strip() != "```":
        end += 1
    if end == len(lines):
        raise AssertionError(f"line {i + 1}: ```{lang} block is never closed")
    return lines[i + 1 : end], end + 1


def runnable_blocks(path: Path, text: str | None = None) -> list[DocBlock]:
    """Every block marked runnable in the Markdown file ``path``, in order."""
    lines = (path.read_text() if text is None else text).splitlines()
    blocks = []
    for i, line in enumerate(lines):
        if line.strip() != RUNNABLE:
            continue
        found = _fenced(lines, i + 1, "sh")
        if found is None:
            raise AssertionError(f"{path}:{i + 1}: {RUNNABLE} is not followed by a ```sh block")
        body, after = found
        expected = _fenced(lines, after, "text")
        fence = next(j for j in range(i + 1, len(lines)) if lines[j].strip() == "```sh")
        blocks.append(
            DocBlock(
                path=path,
                line=fence + 1,
                script="\n".join(body) + "\n",
                expected=tuple(expected[0]) if expected else (),
            )
        )
    return blocks


def output_matches(expected: tuple[str, ...] | list[str], actual: str) -> bool:
    """Whether ``actual`` (stdout) is what ``expected`` says, ``...`` as described in the module."""
    pattern = ""
    for line in expected:
        line = line.rstrip()
        if line.strip() == "...":
            pattern += r"(?:[^\n]*\n)*?"
        else:
            pattern += re.escape(line).replace(re.escape("..."), r"[^\n]*?") + r"\n"
    got = "".join(f"{line.rstrip()}\n" for line in actual.splitlines())
    return re.fullmatch(pattern, got) is not None


def process_table(path: Path) -> list[str]:
    """The first-column names (backticks removed) of the table after ``<!-- processes -->``."""
    lines = path.read_text().splitlines()
    start = next((i for i, line in enumerate(lines) if line.strip() == PROCESSES), None)
    assert start is not None, f"{path.name} has no {PROCESSES} table"
    rows = []
    for line in lines[start + 1 :]:
        if not line.strip():
            if rows:
                break
            continue
        if not line.startswith("|"):
            break
        rows.append(line.strip("|").split("|")[0].strip())
    return [r.strip("`") for r in rows[2:]]  # past the header and its separator


def doc_files() -> list[Path]:
    """README.md, then docs/*.md by name: the files with runnable blocks, in the order they run."""
    files = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
    return [p for p in files if runnable_blocks(p)]


# -- the rules of the runner, on texts of their own (no service) ---------------------------------


def test_a_marked_block_and_the_text_block_after_it_are_read_in_order(tmp_path):
    doc = tmp_path / "doc.md"
    text = f"intro\n{RUNNABLE}\n```sh\necho one\n```\n\n```text\none\n```\n\n```sh\necho unmarked\n```\n"
    text += f"{RUNNABLE}\n\n```sh\ntrue\n```\nprose\n"
    blocks = runnable_blocks(doc, text)
    assert [(b.line, b.script, b.expected) for b in blocks] == [
        (3, "echo one\n", ("one",)),
        (16, "true\n", ()),
    ]


def test_a_marker_without_a_shell_block_is_an_error(tmp_path):
    with pytest.raises(AssertionError, match="not followed by a ```sh block"):
        runnable_blocks(tmp_path / "doc.md", f"{RUNNABLE}\n```text\nx\n```\n")


@pytest.mark.parametrize(
    ("expected", "actual", "ok"),
    [
        (["declared a", "declared b"], "declared a\ndeclared b\n", True),
        (["declared a"], "declared a\ndeclared b\n", False),  # a line the doc does not say
        (["declared a", "declared b"], "declared a\n", False),  # a line the doc says but is missing
        (['{"status": "queued", "id": "..."}'], '{"status": "queued", "id": "42"}\n', True),
        (['{"status": "queued", "id": "..."}'], '{"status": "pending", "id": "42"}\n', False),
        (["created database ...", "...", "done"], "created database k\napplied 1\napplied 2\ndone\n", True),
        (["created database ...", "...", "done"], "created database k\ndone\n", True),
        (["a ... b"], "a x\ny b\n", False),  # an in-line ... never spans lines
        ([], "", True),
        ([], "anything\n", False),
    ],
)
def test_output_must_be_what_the_doc_says_with_ellipses(expected, actual, ok):
    assert output_matches(expected, actual) is ok


# -- the process lists -----------------------------------------------------------------------------


def test_the_readme_docs_lifecycle_and_deploy_name_the_same_processes():
    procfile = [e.name for e in read_procfile()]
    assert procfile, "deploy/Procfile lists no process"
    assert process_table(REPO / "README.md") == procfile
    assert process_table(REPO / "docs/lifecycle.md") == procfile
    units = sorted(
        p.name.removeprefix("kickoff-").removesuffix(".service")
        for p in (REPO / "deploy/systemd").glob("kickoff-*.service")
    )
    assert units == sorted(procfile)
    deploy = (REPO / "deploy/staging-deploy.sh").read_text()
    restarted = re.search(r'^UNITS="\$\{UNITS:-([^}]*)\}"', deploy, re.M)
    assert restarted is not None
    assert sorted(u.removeprefix("kickoff-") for u in restarted[1].split()) == sorted(procfile)


# -- running the examples --------------------------------------------------------------------------


def _checkout(tmp_path: Path) -> Path:
    """A throw-away checkout: the repository's top-level entries linked, ``.venv`` this environment."""
    root = tmp_path / "checkout"
    root.mkdir()
    for entry in REPO.iterdir():
        if entry.name not in {".venv", ".git", ".env"}:
            (root / entry.name).symlink_to(entry)
    (root / ".venv").symlink_to(Path(sys.prefix))
    return root


def _end_group(pgid: int) -> None:
    """SIGTERM the block's process group, SIGKILL what is left after 15 s; wait until it is gone."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, signal.SIGTERM)
    deadline = time.monotonic() + 15
    while group_members(pgid) and time.monotonic() < deadline:
        time.sleep(0.1)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while group_members(pgid) and time.monotonic() < deadline:
        time.sleep(0.1)


@pytest.fixture
def doc_env(subprocess_env, test_env, tmp_path):
    """The environment of one file's examples: a database, vhost, Redis prefix, Dramatiq namespace
    and data directory of their own (none exists yet), all removed at the end."""
    from models.coordination import connect_redis
    from models.migrate import drop_database

    tag = uuid.uuid4().hex[:6]
    vhost = f"{test_env['AMQP_URL'].rsplit('/', 1)[1]}_doc{tag}"
    env = dict(subprocess_env)
    env.pop("KICKOFF_API_KEY", None)
    env.update(
        DATABASE_URL=f"{test_env['DATABASE_URL']}_doc{tag}",
        AMQP_URL=f"{test_env['AMQP_URL'].rsplit('/', 1)[0]}/{vhost}",
        REDIS_KEY_PREFIX=f"{test_env['REDIS_KEY_PREFIX']}doc{tag}:",
        BROKER_NAMESPACE=f"{test_env['BROKER_NAMESPACE']}-doc{tag}",
        DATA_DIR=str(tmp_path / "data"),
    )
    subprocess.run(["rabbitmqctl", "-q", "add_vhost", vhost], check=True, capture_output=True, timeout=60)
    subprocess.run(
        ["rabbitmqctl", "-q", "set_permissions", "-p", vhost, "guest", ".*", ".*", ".*"],
        check=True,
        capture_output=True,
        timeout=60,
    )
    try:
        yield env
    finally:
        drop_database(env["DATABASE_URL"])
        subprocess.run(["rabbitmqctl", "-q", "delete_vhost", vhost], capture_output=True, timeout=60)
        for url, pattern in (
            (env["REDIS_URL"], f"{env['REDIS_KEY_PREFIX']}*"),
            (env["BROKER_URL"], f"{env['BROKER_NAMESPACE']}*"),
        ):
            if url.startswith("redis://"):
                client = connect_redis(url)
                keys = list(client.scan_iter(match=pattern, count=1000))
                if keys:
                    client.delete(*keys)


def _run_block(
    block: DocBlock, *, env: dict[str, str], cwd: Path, port: int
) -> subprocess.CompletedProcess[str]:
    """Run ``block`` in its own session; its output goes to files (a server it started in the
    background keeps its copy of stdout open, so a pipe would never end)."""
    script = block.script.replace("8080", str(port))
    out, err = cwd.parent / "stdout", cwd.parent / "stderr"
    with out.open("wb") as out_fh, err.open("wb") as err_fh:
        proc = subprocess.Popen(
            ["bash", "-e", "-o", "pipefail", "-c", script],
            cwd=cwd,
            env=env,
            stdout=out_fh,
            stderr=err_fh,
            start_new_session=True,
        )
        note = ""
        try:
            proc.wait(timeout=BLOCK_TIMEOUT)
        except subprocess.TimeoutExpired:
            note = f"\n[the block did not end within {BLOCK_TIMEOUT} s]"
        finally:
            _end_group(proc.pid)
            proc.wait(timeout=10)
    stderr = err.read_text(errors="replace") + note
    return subprocess.CompletedProcess(proc.args, proc.returncode, out.read_text(errors="replace"), stderr)


@pytest.mark.e2e
@pytest.mark.timeout(600)
def test_the_runnable_examples_of_the_readme_and_docs_run_and_print_what_they_say(doc_env, tmp_path):
    missing = [tool for tool in ("bash", "curl", "jq") if shutil.which(tool) is None]
    assert not missing, f"the examples need {', '.join(missing)} (apt-get install -y {' '.join(missing)})"
    cwd = _checkout(tmp_path)
    for block in (b for path in doc_files() for b in runnable_blocks(path)):
        done = _run_block(block, env=doc_env, cwd=cwd, port=free_port())
        report = (
            f"{block.where}\n--- block\n{block.script}--- exit {done.returncode}\n--- stdout\n{done.stdout}"
            "--- expected\n" + "\n".join(block.expected) + f"\n--- stderr (tail)\n{done.stderr[-3000:]}"
        )
        assert done.returncode == 0, report
        assert output_matches(block.expected, done.stdout), report


def test_the_readme_and_the_docs_have_runnable_examples():
    files = [p.relative_to(REPO).as_posix() for p in doc_files()]
    assert files[0] == "README.md"
    assert len(runnable_blocks(REPO / "README.md")) >= 3
    assert any(f.startswith("docs/") for f in files)


def test_the_publisher_doc_names_the_http_api_of_every_trigger_queue():
    """kickoff serves the triggers over HTTP: docs/publisher.md says so and names each route."""
    from publisher.trigger_queues import ROUTE_PREFIX, trigger_queues

    text = (REPO / "docs" / "publisher.md").read_text()
    assert "no HTTP API" not in text
    assert "HttpTriggerClient" in text and "`kickoff serve`" in text
    for queue in trigger_queues():
        assert f"{ROUTE_PREFIX}/{queue.command}" in text, queue.command
