"""docs/SERVICE.md's "By hand" steps, run as a user runs them: its shell lines as written (its
own database, Redis number and port put in place of the doc's), then the first block of "Use it"
(a smaller budget): the campaign finishes, and its best kernel is exported. Followed literally
before, both campaigns of a user failed: the API stamped the default gpu backend on them while
only the GPU worker was told to replay."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from repo import ROOT

from service.service_stack import (
    REDIS_HOST,
    free_port,
)

DOC = ROOT / "docs" / "SERVICE.md"


def bash_block(text: str, after: str) -> list[str]:
    """The lines of the first ```bash block after ``after`` in ``text``."""
    rest = text[text.index(after):]
    body = rest[rest.index("```bash\n") + len("```bash\n"):]
    return body[:body.index("```")].splitlines()


@pytest.fixture
def redis_number() -> Iterator[str]:
    """An empty Redis database number of its own (claimed with a key), flushed at the end."""
    for number in range(15, 0, -1):
        client = redis.Redis.from_url(f"{REDIS_HOST}/{number}")
        if client.dbsize() == 0 and client.set("tuneforge:test-claim", os.getpid(), nx=True):
            break
    else:
        pytest.fail("no empty Redis database number (1-15) to run the test in")
    try:
        yield f"{REDIS_HOST}/{number}"
    finally:
        client.flushdb()


def test_the_by_hand_steps_start_a_service_that_finishes_a_campaign(
        empty_db: str, redis_number: str, tmp_path: Path) -> None:
    doc = DOC.read_text()
    port = free_port()
    by_hand = bash_block(doc, "By hand, in one shell")
    use_it = bash_block(doc, "## Use it")
    assert any(line.startswith("export TUNEFORGE_BACKEND=replay") for line in by_hand)
    assert not any("--backend" in line for line in by_hand)  # one setting, read by every role

    def here(line: str) -> str:
        """The doc's line with this machine's database, Redis number and port."""
        line = re.sub(r"TUNEFORGE_DATABASE_URL=\S+", f"TUNEFORGE_DATABASE_URL={empty_db}",
                      line)
        line = re.sub(r"TUNEFORGE_REDIS_URL=\S+", f"TUNEFORGE_REDIS_URL={redis_number}", line)
        return line.replace("--port 8000", f"--port {port}").replace(
            "127.0.0.1:8000", f"127.0.0.1:{port}")

    script = [here(line) for line in by_hand]
    # what a user does next: waits until the API answers
    script.append(f"until curl -sf http://127.0.0.1:{port}/api/v1/healthz >/dev/null; "
                  "do sleep 0.5; done")
    script += [here(line).replace('"iterations": 300', '"iterations": 24') for line in use_it]
    env = {k: v for k, v in os.environ.items() if not k.startswith("TUNEFORGE_")}
    env["TUNEFORGE_HOME"] = str(tmp_path / "home")
    env["PATH"] = f"{Path(sys.executable).parent}:{env['PATH']}"  # the `tuneforge` command
    # files, not pipes: the background processes keep their ends open after the shell is done
    with (tmp_path / "out.log").open("w") as stdout, (tmp_path / "err.log").open("w") as stderr:
        proc = subprocess.Popen(["bash", "-e", "-c", "\n".join(script)], cwd=tmp_path, env=env,
                                stdout=stdout, stderr=stderr,
                                start_new_session=True)  # its background processes: one group
        try:
            proc.wait(timeout=240)
        finally:
            try:
                os.killpg(proc.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
    out, err = (tmp_path / "out.log").read_text(), (tmp_path / "err.log").read_text()
    assert proc.returncode == 0, f"{out}\n{err[-4000:]}"
    assert "new campaigns run on the replay backend" in err
    assert "· done (iteration budget of 24 spent) · 24 evaluations" in err + out, err[-3000:]
    best = (tmp_path / "best.cu").read_text()
    assert "__global__" in best
