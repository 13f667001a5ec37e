"""The `sealed` fixture's object: `run` a command sealed, compare it with a `golden` file that
`seal golden` reads too (docs/golden.md, "The golden file"): the same canonical JSON, the
settings record `seal golden settings` prints for the same options in the same directory, and
the census totals `record` pins (the rows of `unpinned` in the launcher's golden/file.rs left
out). Goldens `seal golden record` wrote are compared here the same way, output and exit code.
"""

import difflib
import json
import os
import subprocess
import tempfile

import pytest

INNER_ENV = "SEAL_PYTEST_INNER"
VERIFY_ENV = "SEAL_PYTEST_VERIFY"
GOLDEN_VERSION = 1


def seal_options(config):
    """`--epoch`/`--seed` from the ini keys (seal.toml and SEAL_* apply in seal itself)."""
    opts = []
    epoch = config.getini("seal_epoch")
    seed = config.getini("seal_seed")
    if epoch:
        opts += ["--epoch", str(epoch)]
    if seed:
        opts += ["--seed", str(seed)]
    return opts


class SealedResult:
    """One sealed command: `stdout`, `stderr` (text), `returncode`, `census` (seal's JSON)."""

    def __init__(self, argv, cwd, stdout, stderr, returncode, census, seal_args=()):
        self.argv = argv
        self.cwd = cwd
        self.stdout = stdout
        self.stderr = stderr
        self.returncode = returncode
        self.census = census
        self.seal_args = list(seal_args)

    def __repr__(self):
        return f"SealedResult(argv={self.argv!r}, returncode={self.returncode})"


def lines(text):
    """Text as `seal golden` stores it: lines, each keeping its newline."""
    return text.splitlines(keepends=True)


def unpinned(family, function):
    """Census rows `seal golden` never pins (they follow the scheduler): golden/file.rs."""
    return (
        family == "wait"
        or (family == "pid" and function in ("waitpid", "wait4", "waitid", "wait"))
        or (family == "time" and function == "clock read by runtime bookkeeping (no tick)")
    )


def pinned_totals(census):
    """family -> function -> count from a census's `totals`, as `seal golden record` pins."""
    out = {}
    for t in (census or {}).get("totals", []):
        if unpinned(t["family"], t["symbol"]):
            continue
        fam = out.setdefault(t["family"], {})
        fam[t["symbol"]] = fam.get(t["symbol"], 0) + t["count"]
    return out


_settings_cache = {}


def settings_record(seal, opts, cwd):
    """The `seal` object of a golden, from `seal golden settings OPTS` run in `cwd`."""
    key = (seal, tuple(opts), cwd)
    if key not in _settings_cache:
        proc = subprocess.run(
            [seal, "golden", "settings", "--quiet", *opts],
            cwd=cwd,
            capture_output=True,
            text=True,
        )
        if proc.returncode != 0:
            raise pytest.UsageError(f"seal golden settings: {proc.stderr.strip()}")
        _settings_cache[key] = json.loads(proc.stdout)
    return _settings_cache[key]


class Sealed:
    """The `sealed` fixture's object."""

    def __init__(self, config, request, seal):
        self._config = config
        self._request = request
        self.seal = seal
        self.update = config.getoption("seal_update")
        self.root = str(config.rootpath)
        self.golden_dir = os.path.join(self.root, config.getini("seal_golden_dir") or "golden")

    def run(self, cmd, *, cwd=None, env=None, input=None, timeout=60, seal_args=()):
        """Runs `cmd` (a list of arguments) under `seal`; returns a SealedResult."""
        cmd = [str(c) for c in cmd]
        opts = [*seal_options(self._config), *seal_args]
        with tempfile.TemporaryDirectory(prefix="seal-pytest-") as d:
            census_path = os.path.join(d, "census.json")
            # Golden mode's spin_after, as `seal golden record` runs a new case (the record
            # says which: the user's, or golden mode's own when none is given).
            spin = settings_record(self.seal, opts, os.path.abspath(cwd or os.getcwd()))
            spin = ["--spin-after", str(spin.get("spin_after", 0))]
            argv = [self.seal, "--quiet", *opts, *spin, "--census", census_path, "--", *cmd]
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
        return SealedResult(cmd, cwd, proc.stdout, proc.stderr, proc.returncode, census, opts)

    def golden(self, name, output):
        """Compares `output` (a str or a SealedResult) with golden/NAME.json, recording it when
        missing or with --seal-update; fails with a unified diff otherwise."""
        if not name or any(not (c.isalnum() or c in "._-") for c in name):
            raise ValueError(f"golden name {name!r}: letters, digits, '.', '_', '-' only")
        doc = self._document(name, output)
        path = os.path.join(self.golden_dir, name + ".json")
        text = json.dumps(doc, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
        recording = self.update or not os.path.exists(path)
        if recording and os.environ.get(VERIFY_ENV) != "1":
            os.makedirs(self.golden_dir, exist_ok=True)
            tmp = path + ".tmp"
            with open(tmp, "w", encoding="utf-8") as f:
                f.write(text)
            os.replace(tmp, path)
            return path
        if recording:
            # A --seal-verify run compares this output across the runs, and records nothing.
            print(f"seal: golden {name}: not recorded in a --seal-verify run")
            print("".join(doc["stdout"]), end="")
            return path
        self._check(name, path, doc)
        return path

    def _check(self, name, path, doc):
        with open(path, encoding="utf-8") as f:
            try:
                want = json.load(f)
            except ValueError as e:
                pytest.fail(f"{path}: not a valid golden file ({e}); re-record with --seal-update")
        problems = []
        if want.get("masks"):
            problems.append(
                f"the golden masks {want['masks']}: compare it with `seal golden check`\n"
            )
        for key in ("stdout", "stderr"):
            a, b = want.get(key, []), doc[key]
            if a != b:
                diff = difflib.unified_diff(a, b, fromfile=f"{path} {key}", tofile=f"actual {key}")
                problems.append(
                    f"{key} differs\n"
                    + "".join(line if line.endswith("\n") else line + "\n" for line in diff)
                )
        if want.get("exit_code") != doc["exit_code"]:
            problems.append(f"exit code {want.get('exit_code')} -> {doc['exit_code']}\n")
        if problems:
            pytest.fail(
                f"golden {name} ({path}):\n"
                + "".join(problems)
                + "(re-record with pytest --seal-update)",
                pytrace=False,
            )

    def _document(self, name, output):
        if isinstance(output, SealedResult):
            cwd = os.path.abspath(output.cwd or os.getcwd())
            argv, opts, census = output.argv, output.seal_args, output.census
            out, err, code = output.stdout, output.stderr, output.returncode
        else:
            cwd, argv, opts, census = self.root, [self._request.node.nodeid], [], None
            out, err, code = str(output), "", 0
        rel = os.path.relpath(cwd, self.root)
        return {
            "argv": list(argv),
            "artifacts": {},
            "census": pinned_totals(census),
            "cwd": rel,
            "exit_code": code,
            "masks": [],
            "name": name,
            "seal": settings_record(self.seal, opts, cwd),
            "stderr": lines(err),
            "stdout": lines(out),
            "version": GOLDEN_VERSION,
        }
