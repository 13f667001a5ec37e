"""The seal pytest plugin (registered through the `pytest11` entry point).

- `pytest --seal` re-executes this pytest run once under `seal` (guarded by SEAL_PYTEST_INNER
  so the sealed pytest does not re-execute itself); its exit status is pytest's.
- the `sealed` fixture runs one command under `seal` and can compare its output with a golden
  file in the layout `seal golden` uses (`golden/NAME.json`, canonical JSON).
"""

import difflib
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile

import pytest

INNER_ENV = "SEAL_PYTEST_INNER"
GOLDEN_VERSION = 1


def find_seal():
    """The `seal` executable: $SEAL_BIN, else PATH, else this interpreter's scripts dir."""
    env = os.environ.get("SEAL_BIN")
    if env:
        return env
    found = shutil.which("seal")
    if found:
        return found
    cand = os.path.join(sysconfig.get_path("scripts"), "seal")
    if os.access(cand, os.X_OK):
        return cand
    raise pytest.UsageError(
        "seal: the `seal` executable was not found (pip install seal-determinism, or set SEAL_BIN)"
    )


def pytest_addoption(parser):
    group = parser.getgroup("seal")
    group.addoption(
        "--seal",
        action="store_true",
        default=False,
        help="re-run this pytest session under `seal` (clocks, randomness, pids... sealed)",
    )
    group.addoption(
        "--seal-update",
        action="store_true",
        default=False,
        help="sealed.golden(): (re)write golden files instead of comparing",
    )
    parser.addini("seal_epoch", "seal --epoch for sealed runs (default: seal's)", default="")
    parser.addini("seal_seed", "seal --seed for sealed runs (default: seal's)", default="")
    parser.addini("seal_golden_dir", "golden directory, relative to rootdir", default="golden")


def _seal_options(config):
    opts = []
    epoch = config.getini("seal_epoch")
    seed = config.getini("seal_seed")
    if epoch:
        opts += ["--epoch", str(epoch)]
    if seed:
        opts += ["--seed", str(seed)]
    return opts


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config):
    if not config.getoption("seal") or os.environ.get(INNER_ENV) == "1":
        return None
    seal = find_seal()
    args = list(config.invocation_params.args)
    cmd = [seal, "--quiet", *_seal_options(config), "--", sys.executable, "-m", "pytest", *args]
    env = dict(os.environ)
    env[INNER_ENV] = "1"
    sys.stdout.flush()
    sys.stderr.flush()
    proc = subprocess.run(cmd, env=env, cwd=str(config.invocation_params.dir))
    # A killed pytest has no exit code; 128+N as a shell would say.
    return proc.returncode if proc.returncode >= 0 else 128 - proc.returncode


def pytest_report_header(config):
    if os.environ.get(INNER_ENV) == "1":
        return "seal: this session runs sealed"
    return None


class SealedResult:
    """One sealed command: `stdout`, `stderr` (text), `returncode`, `census` (seal's JSON)."""

    def __init__(self, argv, cwd, stdout, stderr, returncode, census):
        self.argv = argv
        self.cwd = cwd
        self.stdout = stdout
        self.stderr = stderr
        self.returncode = returncode
        self.census = census

    def __repr__(self):
        return f"SealedResult(argv={self.argv!r}, returncode={self.returncode})"


def _lines(text):
    """Text as `seal golden` stores it: lines, each keeping its newline."""
    return text.splitlines(keepends=True)


class Sealed:
    """The `sealed` fixture's object."""

    def __init__(self, config, request):
        self._config = config
        self._request = request
        self.seal = find_seal()
        self.update = config.getoption("seal_update")
        self.golden_dir = os.path.join(
            str(config.rootpath), config.getini("seal_golden_dir") or "golden"
        )

    def run(self, cmd, *, cwd=None, env=None, input=None, timeout=60, seal_args=()):
        """Runs `cmd` (a list of arguments) under `seal`; returns a SealedResult."""
        cmd = [str(c) for c in cmd]
        with tempfile.TemporaryDirectory(prefix="seal-pytest-") as d:
            census_path = os.path.join(d, "census.json")
            argv = [
                self.seal,
                "--quiet",
                *_seal_options(self._config),
                *seal_args,
                "--census",
                census_path,
                "--",
                *cmd,
            ]
            run_env = dict(os.environ if env is None else env)
            run_env.pop(INNER_ENV, None)
            proc = subprocess.run(
                argv,
                cwd=cwd,
                env=run_env,
                input=input,
                capture_output=True,
                text=True,
                timeout=timeout,
            )
            try:
                with open(census_path, encoding="utf-8") as f:
                    census = json.load(f)
            except (OSError, ValueError):
                census = None
        return SealedResult(cmd, cwd, proc.stdout, proc.stderr, proc.returncode, census)

    def golden(self, name, output):
        """Compares `output` (a str or a SealedResult) with golden/NAME.json, recording it when
        missing or with --seal-update; fails with a unified diff otherwise."""
        if not name or any(not (c.isalnum() or c in "._-") for c in name):
            raise ValueError(f"golden name {name!r}: letters, digits, '.', '_', '-' only")
        if isinstance(output, SealedResult):
            doc = self._document(name, output.argv, output.cwd or ".", output.stdout,
                                 output.stderr, output.returncode)
        else:
            doc = self._document(name, [self._request.node.nodeid], ".", str(output), "", 0)
        path = os.path.join(self.golden_dir, name + ".json")
        text = json.dumps(doc, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
        if self.update or not os.path.exists(path):
            os.makedirs(self.golden_dir, exist_ok=True)
            tmp = path + ".tmp"
            with open(tmp, "w", encoding="utf-8") as f:
                f.write(text)
            os.replace(tmp, path)
            return path
        with open(path, encoding="utf-8") as f:
            try:
                want = json.load(f)
            except ValueError as e:
                pytest.fail(f"{path}: not a valid golden file ({e}); re-record with --seal-update")
        problems = []
        for key in ("stdout", "stderr"):
            a, b = want.get(key, []), doc[key]
            if a != b:
                diff = difflib.unified_diff(
                    a, b, fromfile=f"{path} {key}", tofile=f"actual {key}"
                )
                problems.append(f"{key} differs\n" + "".join(
                    line if line.endswith("\n") else line + "\n" for line in diff
                ))
        if want.get("exit_code") != doc["exit_code"]:
            problems.append(f"exit code {want.get('exit_code')} -> {doc['exit_code']}\n")
        if problems:
            pytest.fail(
                f"golden {name} ({path}):\n" + "".join(problems)
                + "(re-record with pytest --seal-update)",
                pytrace=False,
            )
        return path

    def _document(self, name, argv, cwd, stdout, stderr, code):
        seal = {}
        epoch = self._config.getini("seal_epoch")
        seed = self._config.getini("seal_seed")
        if epoch:
            seal["epoch"] = str(epoch)
        if seed:
            seal["seed"] = int(seed)
        # The keys of `seal golden`'s files; `seal` holds only the settings given in the ini
        # (the plugin does not know seal's defaults), and no census is pinned.
        return {
            "argv": list(argv),
            "artifacts": {},
            "census": {},
            "cwd": cwd,
            "exit_code": code,
            "masks": [],
            "name": name,
            "seal": seal,
            "stderr": _lines(stderr),
            "stdout": _lines(stdout),
            "version": GOLDEN_VERSION,
        }


@pytest.fixture
def sealed(request):
    """Runs commands under seal: `sealed.run([...])`, `sealed.golden(name, output)`."""
    return Sealed(request.config, request)
