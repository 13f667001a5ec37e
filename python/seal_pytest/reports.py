"""Test reports across processes: a sealed pytest (a `--seal-verify` run, the child of a
`@pytest.mark.seal` test) writes each TestReport as one JSON line to an inherited file
descriptor (pytest's own `pytest_report_to_serializable`, the form pytest-xdist uses); the
pytest that started it reads them back."""

import json
import os
import tempfile

REPORT_FD_ENV = "SEAL_PYTEST_REPORT_FD"


class Sink:
    """Writes this session's test reports to the descriptor named by SEAL_PYTEST_REPORT_FD."""

    def __init__(self, fd):
        self.fd = fd
        # The test's own subprocesses must not inherit it.
        os.set_inheritable(fd, False)

    @classmethod
    def from_env(cls):
        # Removed, so that a pytest the test itself starts does not write to a descriptor
        # number that means something else there.
        value = os.environ.pop(REPORT_FD_ENV, None)
        if not value:
            return None
        try:
            return cls(int(value))
        except (ValueError, OSError):
            return None

    def write(self, config, report):
        data = config.hook.pytest_report_to_serializable(config=config, report=report)
        if data is None:
            return
        line = json.dumps(data, sort_keys=True, default=str) + "\n"
        view = memoryview(line.encode("utf-8"))
        while view:
            n = os.write(self.fd, view)
            view = view[n:]


class SinkPlugin:
    """Registered in a sealed child or a --seal-verify run: sends each test report to the
    pytest that started it (a report relayed from a marked test's own child is sent on too)."""

    def __init__(self, config, sink):
        self.config = config
        self.sink = sink

    def pytest_runtest_logreport(self, report):
        self.sink.write(self.config, report)


class Channel:
    """The reading side: an unlinked temporary file the child writes to through `fd`."""

    def __init__(self):
        self.file = tempfile.TemporaryFile()
        self.fd = self.file.fileno()

    def env(self, base):
        env = dict(base)
        env[REPORT_FD_ENV] = str(self.fd)
        return env

    def read(self):
        """The serialized reports written so far, in order (each a dict)."""
        self.file.seek(0)
        out = []
        for raw in self.file.read().decode("utf-8", "replace").splitlines():
            try:
                out.append(json.loads(raw))
            except ValueError:
                continue
        return out

    def close(self):
        self.file.close()


def captured(data):
    """A serialized report's captured output and failure text, as one text to compare."""
    parts = []
    for name, content in data.get("sections", []):
        parts.append(f"[{name}]\n{content}")
    longrepr = data.get("longrepr")
    if longrepr:
        parts.append("[failure]\n" + longrepr_text(longrepr))
    return "".join(p if p.endswith("\n") else p + "\n" for p in parts)


def longrepr_text(longrepr):
    """The text of a serialized longrepr (a string, a skip tuple, or a ReprExceptionInfo)."""
    if isinstance(longrepr, str):
        return longrepr
    if isinstance(longrepr, (list, tuple)):
        return " ".join(str(x) for x in longrepr)
    if isinstance(longrepr, dict):
        lines = []
        chain = longrepr.get("chain") or [
            [longrepr.get("reprtraceback"), longrepr.get("reprcrash"), None]
        ]
        for tb, crash, _ in chain:
            for entry in (tb or {}).get("reprentries", []):
                lines.extend((entry.get("data") or {}).get("lines") or [])
            if crash:
                lines.append(f"{crash.get('path')}:{crash.get('lineno')}: {crash.get('message')}")
        return "\n".join(lines)
    return str(longrepr)
