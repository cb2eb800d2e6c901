"""A sweep's grid file (`scripts/experiment.py sweep GRID.toml`, docs/learning.md
"Sweeps"): read, checked, and turned into the runs of one manager.

    base = "configs/learn.toml"   # the manager config every run starts from
    seeds = [1, 2, 3]             # every setting runs once per seed (its workers' seeds)
    sort = "final"                # the table's order: final, models or window

    [grid]
    dqn.lr = [0.00025, 0.001]     # SECTION.KEY = [values]; each combination of values is a
    workers.epsilon = [0.1, 0.4]  # setting, and each setting runs once per seed

What is read here is the file's shape (its keys, the lists, the seeds); whether a key
is a run setting and a value is in range is the manager's to say (`shine-manager
--check-config`, which starts nothing and writes nothing): one source of truth. Every
error names the file and the line.
"""
import itertools
import os
import re
import subprocess
import tempfile
import tomllib

# The sections a [[runs]] entry may set (manager/src/config.rs, RunSpec); of [workers]
# only the exploration (epsilon, epsilon_base, epsilon_alpha, fleet_size).
SECTIONS = ("game", "dqn", "replay", "trainer", "workers")

# The figures a sweep's table can be sorted by (`sort`): the final model's evaluation
# (highest first), and the train steps at which the last minute's models, or the
# manager's evaluation window, first reached 90 % (fewest first).
FIGURES = {
    "final": "the final model's evaluation at level 9",
    "models": "train steps when the last minute's models first reached 90 %",
    "window": "train steps when the evaluation window first reached 90 %",
}

# What runs must share to train as one grouped step (agent/src/dqn/group.rs, GroupShape:
# the action set, batch size, optimizer, Double DQN, whether an average is published,
# uniform or prioritized sampling; and, manager/src/device/mod.rs, whether the step can
# be a CUDA graph: GRAPH_KEYS), and what keeps a run out of any group (the [trainer]
# grouped switch). A setting that changes one of these trains in a group of its own;
# the table says so.
SHAPE_KEYS = ("game.action_set", "dqn.batch_size", "dqn.optimizer", "dqn.double_dqn", "dqn.publish_average_tau", "replay.sampling")
GRAPH_KEYS = ("replay.kind", "trainer.cuda_graph")
ALONE_KEYS = ("trainer.grouped",)


class GridError(Exception):
    """A grid file that cannot run: `where` is "FILE:LINE" (or the file alone)."""

    def __init__(self, where, message):
        super().__init__(f"{where}: {message}")


class Axis:
    """One line of [grid]: a run setting and the values it takes."""

    def __init__(self, key, values, line):
        self.key, self.values, self.line = key, values, line
        self.section, self.name = key.split(".", 1)


class Grid:
    def __init__(self, path, base, seeds, sort, axes):
        self.path, self.base, self.seeds, self.sort, self.axes = path, base, seeds, sort, axes

    def where(self, line):
        return f"{self.path}:{line}" if line else self.path

    def points(self):
        """Every combination of the axes' values (the first axis slowest), each as
        [(axis, value)]: the grid's settings, in the file's order."""
        return [list(zip(self.axes, values)) for values in itertools.product(*(a.values for a in self.axes))]

    def runs(self):
        """The sweep's runs: (name, setting index, seed), every setting once per seed."""
        points = self.points()
        names = [point_name(p) for p in points]
        # A name that is no run name, or one two settings share, gives way to numbers.
        run_name = re.compile(r"[a-z0-9][a-z0-9_-]*")
        longest = max(len(f"-s{seed}") for seed in self.seeds)
        if len(set(names)) < len(names) or any(not run_name.fullmatch(n) or len(n) + longest > 64 for n in names):
            names = [f"p{i}" for i in range(len(points))]
        return [(f"{names[i]}-s{seed}", i, seed) for i in range(len(points)) for seed in self.seeds]


def label(point, varying_only=True):
    """A setting as the table names it: `dqn.lr = 0.001, workers.epsilon = 0.1` (the
    axes with one value, which every run shares, left out)."""
    shown = [(a, v) for a, v in point if not varying_only or len(a.values) > 1]
    return ", ".join(f"{a.key} = {toml_value(v)}" for a, v in shown) or "(one setting)"


def point_name(point):
    """A run name for a setting from its varying values: `lr-0_001-epsilon-0_1`."""
    parts = []
    for a, v in point:
        if len(a.values) > 1:
            value = "-".join(toml_value(x) for x in v) if isinstance(v, list) else toml_value(v)
            parts.append(f"{a.name}-{re.sub(r'[^a-z0-9_-]', '_', value.lower().strip(chr(34)))}")
    return "-".join(parts) or "run"


def toml_value(v):
    """A value as TOML writes it (and as the table shows it)."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, str):
        return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(v, list):
        return "[" + ", ".join(toml_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{k} = {toml_value(x)}" for k, x in v.items()) + " }"
    raise TypeError(f"no TOML for {v!r}")


def runs_toml(grid, runs):
    """The [[runs]] entries of `runs` (grid.runs()'s), appended to the base config's text."""
    points = grid.points()
    out = []
    for name, i, _ in runs:
        out.append(f"\n[[runs]]\nname = \"{name}\"\n")
        sections = {}
        for axis, value in points[i]:
            sections.setdefault(axis.section, {})[axis.name] = value
        for section, table in sections.items():
            out.append(f"{section} = {toml_value(table)}\n")
    return "".join(out)


def key_lines(text):
    """{dotted key: its line} for every `key = ...` of a TOML text, with its table's name
    before it (`[grid.dqn]` then `lr = ...` is grid.dqn.lr), and every table's header."""
    lines, table = {}, ""
    for n, line in enumerate(text.splitlines(), 1):
        s = line.strip()
        header = re.match(r'^\[\s*([A-Za-z_"][A-Za-z0-9_."\- ]*?)\s*\]\s*(#.*)?$', s)
        if header:
            table = re.sub(r'[" ]', "", header.group(1))
            lines.setdefault(table, n)
            continue
        key = re.match(r'^([A-Za-z0-9_"][A-Za-z0-9_."\- ]*?)\s*=', s)
        if key:
            name = re.sub(r'[" ]', "", key.group(1))
            lines.setdefault(f"{table}.{name}" if table else name, n)
    return lines


def read(path, root="."):
    """The grid file at `path` (its base config found from `root`, the repository), its
    shape checked; GridError names the line of what is wrong."""
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except OSError as e:
        raise GridError(path, f"cannot read the grid file: {e.strerror}")
    text = raw.decode("utf-8", errors="replace")
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        found = re.search(r"line (\d+)", str(e))
        raise GridError(f"{path}:{found.group(1)}" if found else path, f"not valid TOML: {e}")
    lines = key_lines(text)

    def line_of(key):
        """The line of key, or of the first key inside it (grid.dqn: grid.dqn.lr's)."""
        found = [n for k, n in lines.items() if k == key or k.startswith(key + ".")]
        return min(found) if found else None

    at = lambda key: f"{path}:{line_of(key)}" if line_of(key) else path

    for key in doc:
        if key not in ("base", "seeds", "sort", "grid"):
            raise GridError(at(key), f"unknown key {key}: a grid file has base, seeds, sort and [grid] (scripts/grid.py)")
    base = doc.get("base")
    if not isinstance(base, str) or not base:
        raise GridError(at("base"), 'base must name the manager config every run starts from, e.g. base = "configs/learn.toml"')
    base_path = base if os.path.isabs(base) else os.path.join(root, base)
    if not os.path.isfile(base_path):
        raise GridError(at("base"), f"base = {base!r}: no such file (a path from the repository's top, or absolute)")
    with open(base_path) as f:
        if re.search(r"^\s*\[\[\s*runs\s*\]\]", f.read(), re.M):
            raise GridError(at("base"), f"base = {base!r} declares [[runs]]: a sweep's runs are its grid's settings; start from a config without them")
    seeds = doc.get("seeds")
    if not (isinstance(seeds, list) and seeds and all(type(s) is int and 0 <= s < 2**40 for s in seeds)):
        raise GridError(at("seeds"), "seeds must be a list of worker seeds (whole numbers from 0), e.g. seeds = [1, 2, 3]")
    if len(set(seeds)) < len(seeds):
        raise GridError(at("seeds"), f"seeds = {seeds}: a seed twice")
    sort = doc.get("sort", "final")
    if sort not in FIGURES:
        raise GridError(at("sort"), f"sort = {sort!r}: one of " + ", ".join(f"{k!r} ({v})" for k, v in FIGURES.items()))

    table = doc.get("grid")
    if not isinstance(table, dict) or not table:
        raise GridError(at("grid"), "no [grid]: name the settings to vary, e.g. [grid] then dqn.lr = [0.00025, 0.001]")
    axes = []
    for section, keys in table.items():
        if section not in SECTIONS or not isinstance(keys, dict):
            raise GridError(at(f"grid.{section}"), f"grid key {section}: write SECTION.KEY = [values], SECTION one of {', '.join(SECTIONS)}")
        for name, values in keys.items():
            key = f"{section}.{name}"
            where = at(f"grid.{key}")
            if isinstance(values, dict):
                raise GridError(where, f"{key}.{next(iter(values))}: a setting is SECTION.KEY, one dot")
            if not isinstance(values, list) or not values:
                raise GridError(where, f"{key} = {toml_value(values)}: give the values to try as a list, e.g. {key} = [{toml_value(values)}]")
            try:
                toml_value(values)
            except TypeError:
                raise GridError(where, f"{key}: a date or time is no value a run setting takes")
            if any(a == b for a, b in itertools.combinations(values, 2)):
                raise GridError(where, f"{key} = {toml_value(values)}: a value twice")
            # (A key inside an inline table, dqn = { lr = [...] }, has its table's line.)
            axes.append(Axis(key, values, line_of(f"grid.{key}") or line_of(f"grid.{section}")))
    return Grid(path, base_path, seeds, sort, axes)


def manager_error(stderr):
    """shine-manager's error (anyhow's report, without a backtrace) on one line, a
    section its causes repeat named once."""
    text = re.sub(r"^Error: ", "", stderr.strip())
    text = re.sub(r"\s*Caused by:\s*", ": ", text)
    text = re.sub(r"\s*\n\s*(\d+: )?", " ", text).strip()
    return re.sub(r"(\[\w+\]): \1", r"\1", text)


def check(grid, manager, device=None):
    """The manager's verdict on every value of every axis (each alone on the base
    config), then on every setting (the axes' values together): GridError names the
    line (or the setting's lines) it refuses. Nothing is started or written."""

    def refused(runs_text):
        with tempfile.TemporaryDirectory() as tmp:
            config = os.path.join(tmp, "manager.toml")
            with open(grid.base) as b, open(config, "w") as f:
                f.write(b.read() + "\n" + runs_text)
            p = subprocess.run([manager, "--config", config, "--data-dir", os.path.join(tmp, "data"), "--token", "check",
                                *(["--device", device] if device else []), "--check-config"], capture_output=True, text=True,
                               env={**os.environ, "RUST_BACKTRACE": "0", "RUST_LIB_BACKTRACE": "0"})
        return None if p.returncode == 0 else manager_error(p.stderr)

    entries = []
    for k, a in enumerate(grid.axes):
        for j, v in enumerate(a.values):
            entries.append(f'\n[[runs]]\nname = "axis{k}-value{j}"\n{a.section} = {{ {a.name} = {toml_value(v)} }}\n')
    error = refused("".join(entries))
    if error:
        found = re.search(r'run "axis(\d+)-value(\d+)"', error)
        if not found:
            raise GridError(grid.path, f"base = {os.path.relpath(grid.base)}: the manager refuses it: {error}")
        axis = grid.axes[int(found.group(1))]
        value = axis.values[int(found.group(2))]
        message = re.sub(r'^run "axis\S+": ', "", error)
        raise GridError(grid.where(axis.line), f"{axis.key} = {toml_value(value)}: the manager refuses it: {message}")
    runs = grid.runs()
    error = refused(runs_toml(grid, runs))
    if error:
        found = re.search(r'run "([a-z0-9_-]+)"', error)
        point = grid.points()[next(i for n, i, _ in runs if n == found.group(1))] if found else None
        where = grid.where(",".join(str(a.line) for a, _ in point)) if point else grid.path
        raise GridError(where, f"the setting {label(point, False) if point else '?'}: the manager refuses it: {error}")


def shape(settings):
    """What of a run's resolved settings (GET /api/v1/runs's `settings`) decides its
    group: None when it trains alone whatever the device (ALONE_KEYS), else the values
    runs must share to train as one step (SHAPE_KEYS, and whether it can be a CUDA graph:
    the device replay, cuda_graph not false)."""
    get = lambda key: settings[key.split(".")[0]][key.split(".")[1]]
    if get("trainer.grouped") is False:
        return None
    graph = get("replay.kind") == "device" and get("trainer.cuda_graph") is not False
    return tuple(get(k) > 0 if k == "dqn.publish_average_tau" else get(k) for k in SHAPE_KEYS) + (graph,)
