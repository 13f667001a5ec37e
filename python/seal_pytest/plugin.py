"""The seal pytest plugin (registered through the `pytest11` entry point); docs/pytest.md.

- `pytest --seal` re-executes this pytest run once under `seal` (guarded by SEAL_PYTEST_INNER
  so the sealed pytest does not re-execute itself); its exit status is pytest's.
- `pytest --seal-verify N` runs it N times sealed and compares every test's outcome and
  captured output (verify.py).
- `@pytest.mark.seal(epoch=..., seed=...)` runs that test in a sealed child pytest with those
  settings; `pytest --seal-census` runs every test so, under `seal census` (child.py, census.py).
- the `sealed` fixture runs one command under `seal` and compares its output with a golden
  file `seal golden` reads too (golden.py).
"""

import os
import shutil
import subprocess
import sys
import sysconfig

import pytest

from . import child, reports, verify
from .census import CensusRun
from .golden import INNER_ENV, Sealed, SealedResult, seal_options

__all__ = ["Sealed", "SealedResult", "find_seal"]


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


def _runs(value):
    n = int(value)
    if not 2 <= n <= 1000:
        raise ValueError(value)
    return n


def pytest_addoption(parser):
    group = parser.getgroup("seal")
    group.addoption(
        "--seal",
        action="store_true",
        default=False,
        help="re-run this pytest session under `seal` (clocks, randomness, pids... sealed)",
    )
    group.addoption(
        "--seal-verify",
        type=_runs,
        default=None,
        metavar="N",
        help="run the selected tests N times sealed (2-1000, in parallel, each with a private "
        "/tmp) and fail naming each test whose outcome or captured output differs",
    )
    group.addoption(
        "--seal-census",
        action="store_true",
        default=False,
        help="run each test in its own sealed child under `seal census` and report, per test, "
        "which clocks and entropy sources it read from which file:line",
    )
    group.addoption(
        "--seal-patch-targets",
        default="seal-patch-targets.json",
        metavar="FILE",
        help="with --seal-census: where to write the patch-target rows (relative to rootdir; "
        "default: seal-patch-targets.json)",
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


def pytest_configure(config):
    config.addinivalue_line(
        "markers",
        "seal(epoch=..., seed=..., tick=..., unseal=..., ...): run this test in a sealed child "
        "pytest with these seal settings (docs/pytest.md)",
    )
    sink = reports.Sink.from_env()
    if sink is not None:
        config.pluginmanager.register(reports.SinkPlugin(config, sink), "seal-report-sink")
    config._seal_census = None
    if config.getoption("seal_census") and not child.in_child():
        config._seal_census = CensusRun(config, find_seal())


def _exit_status(code):
    # A killed pytest has no exit code; 128+N as a shell would say.
    return code if code >= 0 else 128 - code


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config):
    if os.environ.get(INNER_ENV) == "1":
        return None
    runs = config.getoption("seal_verify")
    if runs:
        return verify.run(config, find_seal(), seal_options(config), runs)
    if not config.getoption("seal"):
        return None
    seal = find_seal()
    args = list(config.invocation_params.args)
    cmd = [seal, "--quiet", *seal_options(config), "--", sys.executable, "-m", "pytest", *args]
    env = dict(os.environ)
    env[INNER_ENV] = "1"
    sys.stdout.flush()
    sys.stderr.flush()
    proc = subprocess.run(cmd, env=env, cwd=str(config.invocation_params.dir))
    return _exit_status(proc.returncode)


def pytest_ignore_collect(collection_path, config):
    """The golden directory is never collected: it holds no tests, and pytest's collection of
    a directory reads the clock twice (its CallInfo), so the run that first creates it would
    otherwise move every later sealed time of the next runs by two ticks."""
    golden = os.path.join(str(config.rootpath), config.getini("seal_golden_dir") or "golden")
    if os.path.abspath(str(collection_path)) == os.path.abspath(golden):
        return True
    return None


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_protocol(item, nextitem):
    if child.in_child():
        return None
    census = item.config._seal_census
    if census is not None:
        reps = census.run(item)
    elif any(True for _ in item.iter_markers("seal")):
        cmd = [find_seal(), "--quiet", *child.item_options(item)]
        reps, _ = child.run_item(item, cmd)
    else:
        return None
    child.log_reports(item, reps)
    return True


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    if config._seal_census is not None:
        config._seal_census.summary(terminalreporter)




def pytest_report_header(config):
    if os.environ.get(INNER_ENV) == "1":
        return "seal: this session runs sealed"
    return None


@pytest.fixture
def sealed(request):
    """Runs commands under seal: `sealed.run([...])`, `sealed.golden(name, output)`."""
    return Sealed(request.config, request, find_seal())
