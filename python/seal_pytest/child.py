"""One test in a sealed child pytest: `@pytest.mark.seal(...)` (the test's own settings) and
`--seal-census` (the test's own census). The child runs only that test's node id, under
`seal` (or `seal census`), and sends its reports back (see reports.py); the parent logs them
as if the test had run in-process, so the terminal, junitxml and `-rA` see the usual reports.
"""

import os
import subprocess
import sys
import tempfile

import pytest

from . import reports

CHILD_ENV = "SEAL_PYTEST_CHILD"

# Marker keywords and the seal option each becomes; a list value repeats the option.
MARKER_OPTIONS = {
    "epoch": "--epoch",
    "seed": "--seed",
    "tick": "--tick",
    "spin_after": "--spin-after",
    "tz": "--tz",
    "locale": "--locale",
    "hash_seed": "--hash-seed",
    "hostname": "--hostname",
    "cpus": "--cpus",
    "unseal": "--unseal",
    "only": "--only",
    "skip": "--skip",
    "warp": "--warp",
}


# Read once and removed, so that a pytest the test itself starts (pytester, a subprocess) is
# not taken for a child of this plugin.
_IN_CHILD = os.environ.pop(CHILD_ENV, None) == "1"


def in_child():
    return _IN_CHILD


def item_options(item):
    """The seal options of a test's child: the ini's `seal_epoch`/`seal_seed`, then the test's
    `seal` markers (the closest one wins per keyword)."""
    merged = {}
    epoch = item.config.getini("seal_epoch")
    seed = item.config.getini("seal_seed")
    if epoch:
        merged["epoch"] = str(epoch)
    if seed:
        merged["seed"] = str(seed)
    for mark in reversed(list(item.iter_markers("seal"))):
        if mark.args:
            raise pytest.UsageError(
                f"{item.nodeid}: @pytest.mark.seal takes keywords only "
                f"({', '.join(sorted(MARKER_OPTIONS))})"
            )
        merged.update(mark.kwargs)
    opts = []
    for key, value in merged.items():
        flag = MARKER_OPTIONS.get(key)
        if flag is None:
            raise pytest.UsageError(
                f"{item.nodeid}: @pytest.mark.seal: unknown keyword {key!r} "
                f"(known: {', '.join(sorted(MARKER_OPTIONS))})"
            )
        if key == "warp":
            opts += [flag] if value else []
            continue
        values = value if isinstance(value, (list, tuple)) else [value]
        for v in values:
            opts += [flag, str(v)]
    return opts


def plugin_args(config):
    """The `-p NAME` options of this pytest's command line (how the plugin may be loaded)."""
    args = list(config.invocation_params.args)
    out = []
    for i, a in enumerate(args):
        if a == "-p" and i + 1 < len(args):
            out += ["-p", args[i + 1]]
        elif a.startswith("-p") and len(a) > 2:
            out.append(a)
    return out


def child_pytest_args(config, nodeid):
    args = [sys.executable, "-m", "pytest", *plugin_args(config)]
    args += ["-p", "no:cacheprovider", "-q", "--rootdir", str(config.rootpath)]
    if config.inipath:
        args += ["-c", str(config.inipath)]
    return args + [nodeid]


def run_item(item, seal_cmd, timeout=None):
    """Runs `item` in a child pytest under `seal_cmd` (a list ending before `--`); returns the
    deserialized reports, or one failed report saying why there are none."""
    config = item.config
    channel = reports.Channel()
    env = channel.env(os.environ)
    env[CHILD_ENV] = "1"
    env["SEAL_PYTEST_INNER"] = "1"
    cmd = [*seal_cmd, "--", *child_pytest_args(config, item.nodeid)]
    try:
        proc = subprocess.run(
            cmd,
            cwd=str(config.rootpath),
            env=env,
            pass_fds=(channel.fd,),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        data = [d for d in channel.read() if d.get("$report_type") == "TestReport"]
    finally:
        channel.close()
    out = []
    for d in data:
        rep = config.hook.pytest_report_from_serializable(config=config, data=d)
        if rep is not None and rep.nodeid == item.nodeid:
            out.append(rep)
    if not out:
        tail = "\n".join((proc.stdout + proc.stderr).splitlines()[-30:])
        out.append(
            pytest.TestReport(
                item.nodeid,
                item.location,
                {},
                "failed",
                f"seal: the sealed child of {item.nodeid} reported no result "
                f"(exit {proc.returncode}):\n$ {' '.join(cmd)}\n{tail}",
                "call",
            )
        )
    return out, proc


def log_reports(item, reps):
    """Logs `reps` as this item's reports; with `-s`, echoes their captured output."""
    ihook = item.ihook
    ihook.pytest_runtest_logstart(nodeid=item.nodeid, location=item.location)
    echo = item.config.getoption("capture", "fd") == "no"
    for rep in reps:
        if echo:
            # A phase's report also holds the sections of the phases before it.
            for name, content in rep.sections:
                if name in (f"Captured stdout {rep.when}", f"Captured stderr {rep.when}"):
                    stream = sys.stderr if "stderr" in name else sys.stdout
                    stream.write(content)
                    stream.flush()
        ihook.pytest_runtest_logreport(report=rep)
    ihook.pytest_runtest_logfinish(nodeid=item.nodeid, location=item.location)


def temp_path(suffix):
    fd, path = tempfile.mkstemp(prefix="seal-pytest-", suffix=suffix)
    os.close(fd)
    return path
