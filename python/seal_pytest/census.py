"""`pytest --seal-census`: each test runs in its own sealed child under `seal census`, so its
census holds exactly that test's reads; the rows whose innermost user frame is a file of the
project (under rootdir) are that test's reads, by Python file:line (docs/census.md, "Python
frames"). The patch-target rows (`seal census --patch-targets`) of those lines are written to
one JSON file, each with the test's node id."""

import json
import os

from . import child


def _load(path):
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def _project_file(root, path):
    """`path` relative to `root` when it is a file under it, else None."""
    if not path or not os.path.isabs(path):
        return None
    rel = os.path.relpath(path, root)
    if rel.startswith(".." + os.sep) or rel == "..":
        return None
    return rel


def reads_of(census, root):
    """[(file, line, function, family, call, count)] of the reads made from project files."""
    rows = {}
    for proc in (census or {}).get("processes", []):
        for call in proc.get("calls", []):
            what = call["symbol"] + (f" {call['detail']}" if call.get("detail") else "")
            for py in call.get("python", []):
                if py.get("import"):
                    continue  # the import machinery's own reads (bookkeeping)
                user = py.get("user") or {}
                rel = _project_file(root, user.get("file"))
                if rel is None:
                    continue
                key = (rel, user.get("line", 0), user.get("function", "?"), call["family"], what)
                rows[key] = rows.get(key, 0) + py.get("count", 0)
    return sorted((*k, n) for k, n in rows.items())


class CensusRun:
    """Runs each test in a child under `seal census` and keeps its rows for the summary."""

    def __init__(self, config, seal):
        self.config = config
        self.seal = seal
        self.root = str(config.rootpath)
        self.per_test = {}
        self.targets = []
        out = config.getoption("seal_patch_targets")
        self.targets_path = os.path.join(self.root, out)

    def run(self, item):
        json_path = child.temp_path(".census.json")
        targets_path = child.temp_path(".targets.json")
        try:
            cmd = [
                self.seal,
                "census",
                "--quiet",
                "--top",
                "1",
                "--json",
                json_path,
                "--patch-targets",
                targets_path,
                *child.item_options(item),
            ]
            reps, _ = child.run_item(item, cmd)
            self.per_test[item.nodeid] = reads_of(_load(json_path), self.root)
            for row in _load(targets_path) or []:
                if _project_file(self.root, row.get("file")) is not None:
                    self.targets.append({**row, "test": item.nodeid})
        finally:
            for p in (json_path, targets_path):
                try:
                    os.unlink(p)
                except OSError:
                    pass
        return reps

    def write_targets(self):
        rows = sorted(
            self.targets, key=lambda r: (r["test"], r.get("file", ""), r.get("line", 0))
        )
        tmp = self.targets_path + ".tmp"
        os.makedirs(os.path.dirname(self.targets_path) or ".", exist_ok=True)
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(json.dumps(rows, indent=2, sort_keys=True) + "\n")
        os.replace(tmp, self.targets_path)

    def summary(self, tr):
        tr.write_sep("=", "seal census: reads per test, by project file:line")
        for nodeid in sorted(self.per_test):
            rows = self.per_test[nodeid]
            tr.write_line(nodeid)
            if not rows:
                tr.write_line("       (no sealed reads from the project's code)")
            for rel, line, func, family, what, n in rows:
                tr.write_line(f"  {n:>5}  {rel}:{line} {func}  {family} {what}")
        self.write_targets()
        tr.write_line(
            f"seal census: {len(self.targets)} patch-target row(s) -> "
            f"{os.path.relpath(self.targets_path, self.root)}"
        )
