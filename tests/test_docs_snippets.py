"""Every runnable code block of README.md and docs/*.md runs, so the docs cannot drift from
the code.

Which blocks run: each ```` ```python ```` block, and each ```` ```bash ```` block whose
commands all start with ``snrl `` (run in-process through ``snrl.cli.main``; exit code 0
expected). The blocks of one file run in order, in one namespace and one fresh temporary
directory (a later block may use what an earlier one made), with small budgets: the library
caps ``learn()`` at ``SNRL_MAX_STEPS`` env steps, rollouts at as many steps and
``evaluate()`` at ``SNRL_MAX_EPISODES`` episodes (docs/cli.md, "Small budgets").

Markers, an HTML comment on the line right before the fence (invisible on GitHub):

* ``<!-- no-test: why -->``: the block does not run (a sketch with undefined names, or a job
  too big even with small budgets). Use sparingly, and say why.
* ``<!-- requires: neurogym, pynwb -->``: the block runs only where these modules import
  (optional extras); elsewhere it is reported as skipped.

All files run in one subprocess (one import of torch for all of them); new files in docs/
are picked up by themselves. Run one file's blocks by hand with
``python tests/test_docs_snippets.py docs/agents.md``.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: The budgets the blocks run under (library features, documented in docs/cli.md).
BUDGET = {"SNRL_MAX_STEPS": "256", "SNRL_MAX_EPISODES": "2"}
RESULT = "snrl-docs-result: "  # the runner's result lines on stdout (the blocks print too)

FENCE = re.compile(r"^```(\w*)[^\n]*\n(.*?)^```[ \t]*$", re.M | re.S)
MARKER = re.compile(r"<!--\s*(no-test|requires)\s*:?\s*(.*?)\s*-->\s*$")


def doc_files() -> list[Path]:
    """README.md and every docs/*.md."""
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def snrl_commands(code: str) -> list[list[str]] | None:
    """The ``snrl`` commands of a bash block as argument lists (without ``snrl``), or None
    when the block holds anything else. Continuation lines are joined, comments dropped."""
    commands = []
    for line in code.replace("\\\n", " ").splitlines():
        words = shlex.split(line, comments=True)
        if not words:
            continue
        if words[0] != "snrl":
            return None
        commands.append(words[1:])
    return commands or None


def blocks(path: Path) -> list[dict]:
    """The runnable blocks of a Markdown file, each ``{"where", "kind", "code" | "commands",
    "skip", "requires"}`` (``where``: ``file:line`` of the fence)."""
    text = path.read_text(encoding="utf-8")
    out = []
    for m in FENCE.finditer(text):
        lang, code = m.group(1), m.group(2)
        line = text.count("\n", 0, m.start()) + 1
        before = text[: m.start()].rstrip("\n").rsplit("\n", 1)[-1]
        marker = MARKER.search(before)
        block = {
            "where": f"{path.relative_to(ROOT)}:{line}",
            "skip": marker.group(2) or "no-test" if marker and marker.group(1) == "no-test" else "",
            "requires": [r.strip() for r in marker.group(2).split(",") if r.strip()]
            if marker and marker.group(1) == "requires"
            else [],
        }
        if lang == "python":
            out.append({**block, "kind": "python", "code": code})
        elif lang in ("bash", "sh", "console", "shell"):
            commands = snrl_commands(code)
            if commands is not None:
                out.append({**block, "kind": "snrl", "commands": commands})
    return out


# ---- the runner (in the subprocess) --------------------------------------------------------
def run_file(blocks_of_file: list[dict], workdir: Path) -> list[dict]:
    """Run one file's blocks in order in ``workdir``; one result per block."""
    from snrl.cli import main as snrl_main

    namespace: dict = {"__name__": "__main__"}
    results = []
    os.chdir(workdir)
    for b in blocks_of_file:
        res = {"where": b["where"], "status": "ok", "error": ""}
        missing = [m for m in b["requires"] if importlib.util.find_spec(m) is None]
        if b["skip"] or missing:
            res["status"] = "skipped"
            res["error"] = b["skip"] or f"requires {', '.join(missing)}"
        else:
            try:
                if b["kind"] == "python":
                    exec(compile(b["code"], b["where"], "exec"), namespace)
                else:
                    for argv in b["commands"]:
                        code = snrl_main(argv)
                        if code != 0:
                            raise RuntimeError(f"snrl {shlex.join(argv)} exited with {code}")
            except SystemExit as e:  # argparse: a command the parser refuses
                res["status"], res["error"] = "failed", f"SystemExit({e.code})"
            except BaseException:  # noqa: BLE001 - report the block's traceback
                res["status"], res["error"] = "failed", traceback.format_exc(limit=-6)
        results.append(res)
        print(RESULT + json.dumps(res), flush=True)
    return results


def _runner_main(paths: list[str]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    for p in paths:
        with tempfile.TemporaryDirectory() as tmp:
            run_file(blocks(Path(p).resolve()), Path(tmp))
        os.chdir(ROOT)


# ---- the tests -----------------------------------------------------------------------------
def test_blocks_are_found_with_their_markers(tmp_path, monkeypatch):
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    doc = tmp_path / "x.md"
    doc.write_text(
        "```python\nx = 1\n```\n\n<!-- no-test: a sketch -->\n```python\nnet(x)\n```\n"
        "<!-- requires: neurogym, pynwb -->\n```python\nimport neurogym\n```\n"
        "```bash\nsnrl train --steps 10 \\\n  --out r   # a run\nsnrl eval r\n```\n"
        "```bash\npip install snrl\n```\n```\nplain text\n```\n",
        encoding="utf-8",
    )
    found = blocks(doc)
    assert [b["where"] for b in found] == ["x.md:1", "x.md:6", "x.md:10", "x.md:13"]
    assert [b["skip"] for b in found] == ["", "a sketch", "", ""]
    assert found[2]["requires"] == ["neurogym", "pynwb"]
    assert found[3]["commands"] == [["train", "--steps", "10", "--out", "r"], ["eval", "r"]]


def test_budget_variables_cap_learn_evaluate_and_rollout(monkeypatch, capsys):
    import pytest

    import snrl
    from snrl.agents import limits
    from snrl.errors import UserError

    monkeypatch.setattr(limits, "_noticed", set())
    monkeypatch.setenv("SNRL_MAX_STEPS", "16")
    monkeypatch.setenv("SNRL_MAX_EPISODES", "1")
    algo = snrl.PPO("CartPole-v1", backbone="mlp", hidden_size=8, n_envs=2, n_steps=8, seed=0)
    history = algo.learn(100_000, progress=False)
    assert history["env_step"] == [16]
    assert algo.evaluate(n_episodes=5)["n_episodes"] == 1
    assert len(algo.rollout(seed=0, record=False, max_steps=50)) <= 16
    algo.learn(200_000, progress=False)  # the same notice again: not repeated
    err = capsys.readouterr().err.splitlines()
    assert err == [
        "snrl: total_steps 100000 capped at 16 by SNRL_MAX_STEPS",
        "snrl: n_episodes 10 capped at 1 by SNRL_MAX_EPISODES",  # learn's final evaluation
        "snrl: n_episodes 5 capped at 1 by SNRL_MAX_EPISODES",
        "snrl: rollouts capped at 16 steps by SNRL_MAX_STEPS",
        "snrl: total_steps 200000 capped at 16 by SNRL_MAX_STEPS",
    ]
    monkeypatch.setenv("SNRL_MAX_STEPS", "many")
    with pytest.raises(UserError, match="SNRL_MAX_STEPS='many'"):
        algo.learn(10, progress=False)


def test_every_runnable_doc_block_runs():
    env = {**os.environ, **BUDGET, "PYTHONPATH": str(ROOT), "MPLBACKEND": "Agg"}
    files = [str(p) for p in doc_files() if blocks(p)]
    proc = subprocess.run(
        [sys.executable, __file__, *files],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
        check=False,
    )
    results = [
        json.loads(ln[len(RESULT) :]) for ln in proc.stdout.splitlines() if ln.startswith(RESULT)
    ]
    failed = [r for r in results if r["status"] == "failed"]
    report = "\n\n".join(f"{r['where']}:\n{r['error']}" for r in failed)
    assert proc.returncode == 0 and not failed, report or proc.stderr[-3000:]
    expected = sum(len(blocks(Path(f))) for f in files)
    assert len(results) == expected, proc.stderr[-3000:]
    ran = [r["where"] for r in results if r["status"] == "ok"]
    assert any(w.startswith("README.md") for w in ran)  # the README's snippets do run


if __name__ == "__main__":
    _runner_main(sys.argv[1:])
