"""`pytest --seal-verify N`: the same pytest command N times sealed, at most as many at once
as this machine has CPUs, each with a private /tmp (`seal --private-tmp`), pytest's cache off
(a run must not read what another wrote). Each run sends its test reports back (reports.py);
the runs agree when every test has the same outcome, captured output and failure text in
every run. Otherwise each differing test is named with the first line that differs."""

import os
import subprocess
import sys
import threading

from . import reports

VERIFY_ENV = "SEAL_PYTEST_VERIFY"


def strip_verify(args):
    """The command line without `--seal-verify N` / `--seal-verify=N`."""
    out, skip = [], False
    for a in args:
        if skip:
            skip = False
            continue
        if a == "--seal-verify":
            skip = True
            continue
        if a.startswith("--seal-verify="):
            continue
        out.append(a)
    return out


def per_test(data):
    """nodeid -> (outcome per phase, captured text), in report order."""
    tests = {}
    for d in data:
        if d.get("$report_type") != "TestReport":
            continue
        outcomes, text = tests.setdefault(d["nodeid"], ([], []))
        outcomes.append(f"{d.get('when')}:{d.get('outcome')}")
        text.append(reports.captured(d))
    return {k: (" ".join(o), "".join(t)) for k, (o, t) in tests.items()}


def first_difference(a, b):
    """(line number, line in a, line in b) of the first differing line of two texts."""
    la, lb = a.splitlines(), b.splitlines()
    for i in range(max(len(la), len(lb))):
        x = la[i] if i < len(la) else "<no line>"
        y = lb[i] if i < len(lb) else "<no line>"
        if x != y:
            return i + 1, x, y
    return None


def compare(runs):
    """Messages naming each test whose runs differ (empty: all runs agree)."""
    problems = []
    base = runs[0]["tests"]
    names = list(base)
    for r in runs[1:]:
        names += [n for n in r["tests"] if n not in names]
    for name in names:
        for k, r in enumerate(runs[1:], start=2):
            a, b = base.get(name), r["tests"].get(name)
            if a == b:
                continue
            if a is None or b is None:
                which = 1 if a is None else k
                problems.append(f"{name}: not run in run {which}")
            elif a[0] != b[0]:
                problems.append(f"{name}: outcome differs: run 1 {a[0]}, run {k} {b[0]}")
            else:
                n, x, y = first_difference(a[1], b[1])
                problems.append(
                    f"{name}: output differs, first at line {n}:\n"
                    f"    run 1: {x}\n    run {k}: {y}"
                )
            break
    codes = [r["code"] for r in runs]
    if len(set(codes)) > 1:
        problems.append(f"exit status differs between runs: {codes}")
    return problems


def run(config, seal, session_opts, n):
    """Runs the session N times sealed; prints run 1's output and the verdict; returns the
    exit status (1 when the runs differ, else run 1's)."""
    args = strip_verify(config.invocation_params.args)
    cmd = [seal, "--quiet", "--private-tmp", *session_opts, "--", sys.executable, "-m", "pytest"]
    # Per-test captured output is what is compared: capture on, whatever -s said; no cache.
    cmd += [*args, "-p", "no:cacheprovider", "--capture=fd"]
    jobs = max(1, min(n, os.cpu_count() or 1))
    runs = [None] * n
    sem = threading.Semaphore(jobs)

    def one(i):
        with sem:
            channel = reports.Channel()
            env = channel.env(os.environ)
            env["SEAL_PYTEST_INNER"] = "1"
            env[VERIFY_ENV] = "1"
            try:
                proc = subprocess.run(
                    cmd,
                    cwd=str(config.invocation_params.dir),
                    env=env,
                    pass_fds=(channel.fd,),
                    stdin=subprocess.DEVNULL,
                    capture_output=True,
                    text=True,
                )
                runs[i] = {
                    "code": proc.returncode,
                    "stdout": proc.stdout,
                    "stderr": proc.stderr,
                    "tests": per_test(channel.read()),
                }
            finally:
                channel.close()

    threads = [threading.Thread(target=one, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    sys.stdout.write(runs[0]["stdout"])
    sys.stderr.write(runs[0]["stderr"])
    problems = compare(runs)
    ntests = len(runs[0]["tests"])
    if problems:
        print(f"seal-verify: {n} sealed runs of {ntests} test(s) differ:")
        for p in problems:
            print(f"  {p}")
        sys.stdout.flush()
        return 1
    print(
        f"seal-verify: {n} sealed runs of {ntests} test(s): every outcome and captured output "
        f"identical"
    )
    sys.stdout.flush()
    code = runs[0]["code"]
    return code if code >= 0 else 128 - code
