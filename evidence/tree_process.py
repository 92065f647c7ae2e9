"""A long-lived process that imports one tree's vllm: JSON lines in and out.

The benchmark's and the planner fuzz's workers both run this way: the script
puts the tree first on sys.path, greets with the `vllm_file` it imported, then
answers one JSON line per request. Its stderr goes to a temporary log, whose
end is shown when it fails.
"""

from __future__ import annotations

import json
import select
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from forktool import process
from forktool.process import ForkToolError


class TreeProcess:
    def __init__(
        self, label: str, tree: Path, command: list[str], env: dict[str, str]
    ) -> None:
        self.label, self.tree, self.vllm_file = label, tree, ""
        self.log = tempfile.NamedTemporaryFile("w+", prefix=f"{label}-", suffix=".log")
        self.proc = process.start(
            [*command, str(tree)],
            cwd=tree,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.log,
            text=True,
            bufsize=1,
        )

    def wait_ready(self, timeout: float) -> None:
        """Read the greeting; refuse a process that imported another vllm."""
        self.vllm_file = self.read(timeout)["vllm_file"]
        if not Path(self.vllm_file).resolve().is_relative_to(self.tree.resolve()):
            raise ForkToolError(f"{self.label}: imported {self.vllm_file}")

    def write(self, message: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(message) + "\n")
        self.proc.stdin.flush()

    def read(self, timeout: float) -> dict[str, Any]:
        assert self.proc.stdout is not None
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
        if not (line := self.proc.stdout.readline() if ready else ""):
            self.log.flush()
            self.log.seek(0)
            raise ForkToolError(
                f"{self.label} worker ({self.tree}) gave no answer within {timeout} s"
                f" (exit status {self.proc.poll()}); its log ends:\n"
                + self.log.read()[-4000:]
            )
        return json.loads(line)

    def close(self) -> None:
        if self.proc.stdin:
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()
