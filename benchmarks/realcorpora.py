"""Real corpora for benchmarks/realdefaults.py, rebuilt from what installs on this machine (PyPI,
Debian's archive, npm) and cached under a folder of the caller's, never in the repository.

Each builder takes the cache folder and a cap on documents (`limit`, 0: no cap) and returns a
frame of `id` (1..n), `text`, `source` (where the text came from) and, where a corpus has
labels, `group`. With a cap a builder fetches only what it needs where it can (the first
packages of a list), so a small test run downloads little. Once a corpus is cached it builds
without the network; `FETCHED` counts the downloads a build made (0: all from the cache).

- `licences`: ScanCode's licence texts and full-text licence rules (the `licensedcode-data`
  wheel), the SPDX licence list's texts (npm `spdx-license-list`), the dist-info licence files
  of the wheels of `PYPI_PACKAGES` and of the Python packages installed here, and
  /usr/share/common-licenses;
- `versions`: every release's long description of `PYPI_PACKAGES` (PyPI's JSON API, one
  document a release; group: the package);
- `debian-copyright`: /usr/share/doc/*/copyright of the installed Debian packages and of
  `extra` more source packages fetched with `apt-get download` (seeded choice, small ones);
- `manpages`: benchmarks/realtext.py's man pages (en, zh, ja) with the seven edits (group:
  the story);
- `npm-history`: the README and the changelog (History.md, CHANGELOG.md...) of up to
  `per_package` releases of each of `NPM_PACKAGES`, fetched with `npm pack` (group: the
  package and the file).
"""

from __future__ import annotations

import collections
import concurrent.futures
import email
import glob
import gzip
import hashlib
import json
import math
import os
import re
import shutil
import site
import subprocess
import sys
import tarfile
import threading
import time
import urllib.error
import urllib.request
import zipfile
import zlib
from pathlib import Path
from typing import Callable, Iterable

import numpy as np
import pandas as pd

FETCHED: collections.Counter = collections.Counter()  # downloads by kind, for the build record
_FETCHED_LOCK = threading.Lock()


def _fetched(kind: str, n: int = 1) -> None:
    if n <= 0:
        return
    with _FETCHED_LOCK:
        FETCHED[kind] += n

# Well-known packages with many releases (boto3's two thousand would drown the rest).
PYPI_PACKAGES = (
    "requests", "numpy", "pandas", "pytest", "flask", "django", "scipy", "matplotlib", "sqlalchemy", "click",
    "jinja2", "werkzeug", "urllib3", "certifi", "attrs", "pydantic", "fastapi", "httpx", "aiohttp", "celery",
    "redis", "pyyaml", "six", "packaging", "black", "isort", "mypy", "pylint", "flake8", "tox", "virtualenv",
    "coverage", "sphinx", "docutils", "pillow", "lxml", "beautifulsoup4", "scikit-learn", "tornado", "twisted",
    "gunicorn", "uvicorn", "psycopg2", "pymongo", "paramiko", "cryptography", "rich", "typer", "tqdm", "arrow",
    "pendulum", "marshmallow", "alembic", "networkx", "sympy", "ipython", "nltk", "gensim", "dask", "xarray",
)
NPM_PACKAGES = (
    "express", "lodash", "chalk", "commander", "debug", "axios", "yargs", "semver", "uuid", "mocha", "async",
    "underscore", "bluebird", "body-parser", "glob", "minimist", "ws", "redux", "dotenv", "jsonwebtoken", "marked",
    "qs", "node-fetch", "cors", "morgan", "winston", "joi", "ajv", "inquirer", "handlebars", "request",
)
SCANCODE = "licensedcode-data==32.1.0"  # ScanCode's licence and rule texts as a wheel
SPDX_NPM = "spdx-license-list@6.12.0"  # the SPDX licence list with every licence's text
PIECE_CHARS = 1500  # man pages are cut into pieces of about this many characters (realtext's default)


# -- helpers --------------------------------------------------------------------------------------------------


def _numbered(rows: list[dict] | pd.DataFrame) -> pd.DataFrame:
    frame = pd.DataFrame(rows).reset_index(drop=True)
    if "id" in frame:
        frame = frame.drop(columns="id")
    frame.insert(0, "id", np.arange(1, len(frame) + 1, dtype=np.int64))
    return frame


def cap(frame: pd.DataFrame, limit: int, seed: int) -> pd.DataFrame:
    """At most `limit` rows (0: all): whole groups in a seeded order where there are groups
    (a story keeps its edits, a package its versions), else a seeded sample; ids renumbered."""
    if not limit or len(frame) <= limit:
        return _numbered(frame)
    rng = np.random.default_rng(seed)
    if "group" not in frame:
        return _numbered(frame.iloc[np.sort(rng.choice(len(frame), size=limit, replace=False))])
    groups = frame["group"].unique()
    order = {g: i for i, g in enumerate(groups[rng.permutation(len(groups))])}
    ranked = frame.assign(_rank=frame["group"].map(order)).sort_values(["_rank"], kind="stable")
    return _numbered(ranked.drop(columns="_rank").head(limit))


def _text(raw: bytes) -> str:
    return raw.decode("utf-8", errors="replace").replace("\r\n", "\n").strip()


def _get(url: str, tries: int = 4) -> bytes | None:
    """The body at url, or None for a 404; retried on other errors."""
    for attempt in range(tries):
        try:
            req = urllib.request.Request(url, headers={"User-Agent": "neardup-spark-benchmark"})
            with urllib.request.urlopen(req, timeout=60) as resp:
                return resp.read()
        except urllib.error.HTTPError as e:
            if e.code == 404:
                return None
            if attempt == tries - 1:
                raise
        except (urllib.error.URLError, TimeoutError, ConnectionError):
            if attempt == tries - 1:
                raise
        time.sleep(2 ** attempt)
    return None


def _cached_json(path: Path, url: str) -> dict | None:
    """JSON from path (gzipped), fetched from url once; a 404 is cached as {"missing": true}."""
    if path.exists():
        data = json.loads(gzip.decompress(path.read_bytes()))
        return None if data.get("missing") else data
    body = _get(url)
    _fetched("pypi-json", 1)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".part")
    tmp.write_bytes(gzip.compress(body if body is not None else b'{"missing": true}'))
    tmp.replace(path)
    return json.loads(body) if body is not None else None


def _run(cmd: list[str], **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, **kwargs)


def pip_download(requirement: str, folder: Path) -> Path | None:
    """The wheel of `requirement` (no dependencies), downloaded once with pip into folder;
    None when PyPI has no wheel for this machine (remembered in a `.none` marker)."""
    name = re.split(r"[<>=!~ \[]", requirement, maxsplit=1)[0]
    key = re.sub(r"[-_.]+", "-", name).lower()
    done, none = folder / f"{key}.wheel", folder / f"{key}.none"
    if done.exists():
        return folder / done.read_text().strip()
    if none.exists():
        return None
    folder.mkdir(parents=True, exist_ok=True)
    tmp = folder / f".{key}.tmp"
    tmp.mkdir(exist_ok=True)
    proc = _run([sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--disable-pip-version-check",
                 "-q", "-d", str(tmp), requirement])
    _fetched("pip", 1)
    wheels = sorted(tmp.glob("*.whl"))
    if proc.returncode or not wheels:
        if "No matching distribution" in proc.stderr or "Could not find a version" in proc.stderr:
            none.write_text(proc.stderr[-2000:])
            shutil.rmtree(tmp, ignore_errors=True)
            return None
        raise SystemExit(f"pip download {requirement} failed:\n{proc.stderr[-2000:]}")
    wheel = wheels[0]
    wheel.replace(folder / wheel.name)
    for left in tmp.iterdir():
        left.unlink()
    tmp.rmdir()
    done.write_text(wheel.name)
    return folder / wheel.name


def npm_pack(specs: list[str], folder: Path, cache: Path) -> None:
    """`npm pack` each spec (name@version) into folder, those not there yet; one npm process
    for them all, one at a time if that fails (a version npm no longer serves is skipped)."""
    folder.mkdir(parents=True, exist_ok=True)
    npm_cache = cache / "npm" / ".npm-cache"  # npm's own copy: emptied after, the tarballs are the cache

    def pack(batch: list[str]) -> bool:
        proc = _run(["npm", "pack", *batch, "--pack-destination", str(folder), "--cache", str(npm_cache),
                     "--ignore-scripts", "--json"], cwd=folder)
        _fetched("npm", len(batch))
        return proc.returncode == 0

    if specs and not pack(specs):
        for spec in specs:
            if not pack([spec]):
                print(f"npm pack {spec} failed: skipped", file=sys.stderr)
    shutil.rmtree(npm_cache, ignore_errors=True)


def _tgz_name(spec: str) -> str:
    name, version = spec.rsplit("@", 1)
    return f"{name.lstrip('@').replace('/', '-')}-{version}.tgz"


# -- licences -------------------------------------------------------------------------------------------------


_FRONT = re.compile(r"\A---\n(.*?)\n---\n?(.*)\Z", re.S)
_LICENCE_FILE = re.compile(r"\.dist-info/(?:licen[cs]es/.+|(?:licen[cs]e|copying|notice)[^/]*)$", re.I)


def _scancode(cache: Path) -> list[dict]:
    wheel = pip_download(SCANCODE, cache / "wheels")
    if wheel is None:
        raise SystemExit(f"no wheel of {SCANCODE}")
    rows = []
    with zipfile.ZipFile(wheel) as z:
        for name in sorted(z.namelist()):
            kind = "licence" if name.endswith(".LICENSE") else "rule" if name.endswith(".RULE") else None
            if kind is None or "/inactive/" in name:
                continue
            m = _FRONT.match(_text(z.read(name)).replace("\r", ""))
            head, body = (m.group(1), m.group(2).strip()) if m else ("", _text(z.read(name)))
            if kind == "rule" and not re.search(r"^is_license_text:\s*yes", head, re.M):
                continue  # notices, references and tags: a few words each, not licence texts
            if len(body) >= 200:
                rows.append({"text": body, "source": f"scancode:{name.rsplit('/', 1)[-1]}"})
    return rows


def _spdx(cache: Path) -> list[dict]:
    folder = cache / "npm" / "_spdx"
    if not (folder / _tgz_name(SPDX_NPM)).exists():
        npm_pack([SPDX_NPM], folder, cache)
    with tarfile.open(folder / _tgz_name(SPDX_NPM)) as tar:
        full = json.load(tar.extractfile("package/spdx-full.json"))
    return [{"text": v["licenseText"].strip(), "source": f"spdx:{k}"} for k, v in sorted(full.items())
            if len((v.get("licenseText") or "").strip()) >= 200]


def _wheel_licences(wheel: Path) -> list[dict]:
    rows = []
    with zipfile.ZipFile(wheel) as z:
        for name in sorted(z.namelist()):
            if _LICENCE_FILE.search(name) and not name.endswith("/"):
                text = _text(z.read(name))
                if len(text) >= 200:
                    rows.append({"text": text, "source": f"wheel:{wheel.name}:{name.split('.dist-info/', 1)[1]}"})
    return rows


def _installed_licences() -> list[dict]:
    roots = sorted({*site.getsitepackages(), "/usr/lib/python3/dist-packages"})
    patterns = [f"{root}/*.dist-info/**/*" for root in roots] + ["/usr/share/common-licenses/*"]
    seen, rows = set(), []
    for path in sorted(p for pattern in patterns for p in glob.glob(pattern, recursive=True)):
        real = os.path.realpath(path)
        if real in seen or not os.path.isfile(real):
            continue
        if "common-licenses" not in path and not _LICENCE_FILE.search(path):
            continue
        seen.add(real)
        text = _text(Path(real).read_bytes())
        if len(text) >= 200:
            rows.append({"text": text, "source": f"installed:{path}"})
    return rows


def licences(cache: Path, limit: int = 0, seed: int = 7) -> pd.DataFrame:
    """Licence texts from four sources; with a cap, up to a quarter of it from each (wheels
    downloaded only until there are that many) and the rest from the larger sources."""
    quota = math.ceil(limit / 4) if limit else 0
    wheels: list[dict] = []
    for package in PYPI_PACKAGES:
        wheel = pip_download(package, cache / "wheels")
        if wheel is not None:
            wheels += _wheel_licences(wheel)
        if quota and len(wheels) >= quota:
            break
    sources = [_scancode(cache), _spdx(cache), _installed_licences(), wheels]
    if not limit:
        return _numbered([row for rows in sources for row in rows])
    rng = np.random.default_rng(seed)
    order = [rng.permutation(len(rows)) for rows in sources]
    chosen = [list(o[:quota]) for o in order]
    left = [(s, i) for s, o in enumerate(order) for i in o[quota:]]
    for k in rng.permutation(len(left))[:max(0, limit - sum(map(len, chosen)))]:
        chosen[left[k][0]].append(left[k][1])
    return _numbered([sources[s][i] for s, picks in enumerate(chosen) for i in sorted(picks)])


# -- versions: PyPI long descriptions of every release --------------------------------------------------------


def _releases(index: dict) -> list[str]:
    """A package's versions, oldest upload first (as PyPI listed them at the first fetch)."""

    def uploaded(item):
        version, files = item
        return (min((f["upload_time_iso_8601"] for f in files), default="9999"), version)

    return [v for v, _ in sorted(index["releases"].items(), key=uploaded)]


_FILES = "https://files.pythonhosted.org/packages/"


def _file_url(url: str) -> str:
    """A release file's address (the index may give it relative to a mirror of PyPI)."""
    m = re.search(r"packages/([0-9a-f]{2}/[0-9a-f]{2}/[0-9a-f]{60}/[^/]+)$", url)
    return _FILES + m.group(1) if m else url


def _sdist_pkg_info(url: str) -> bytes | None:
    """PKG-INFO of a .tar.gz sdist, read as it streams in: the download stops at that member
    (most sdists put it among the first few)."""
    req = urllib.request.Request(url, headers={"User-Agent": "neardup-spark-benchmark"})
    with urllib.request.urlopen(req, timeout=120) as resp, tarfile.open(fileobj=resp, mode="r|*") as tar:
        for member in tar:
            if member.isfile() and member.name.count("/") == 1 and member.name.endswith("/PKG-INFO"):
                return tar.extractfile(member).read()
    return None


def _release_metadata(files: list[dict]) -> bytes:
    """A release's core metadata: its smallest wheel's (PyPI serves it alone, as the wheel's
    address + ".metadata"), else its sdist's PKG-INFO; b"" when it has neither."""
    for wheel in sorted((f for f in files if f["packagetype"] == "bdist_wheel"), key=lambda f: f["size"])[:1]:
        body = _get(_file_url(wheel["url"]) + ".metadata")
        _fetched("pypi-metadata")
        if body:
            return body
    for sdist in sorted((f for f in files if f["packagetype"] == "sdist"), key=lambda f: f["size"]):
        if re.search(r"\.tar\.(gz|bz2)$|\.tgz$", sdist["filename"]) and sdist["size"] <= 50_000_000:
            _fetched("pypi-sdist")
            try:
                body = _sdist_pkg_info(_file_url(sdist["url"]))
            except (tarfile.TarError, EOFError, zlib.error) as e:
                print(f"{sdist['filename']}: {e}: skipped", file=sys.stderr)
                continue
            if body:
                return body
    return b""


def description(metadata: str) -> str:
    """The long description in core metadata: the message body (Metadata-Version 2.1 on), else
    the Description field with its continuation prefix (8 spaces, or 7 and a bar) removed."""
    msg = email.message_from_string(metadata)
    body = msg.get_payload()
    if isinstance(body, str) and body.strip():
        return body.strip()
    field = msg.get("Description", "")
    lines = str(field).splitlines()
    rest = [re.sub(r"^(?: {8}| {7}\|)", "", line) for line in lines[1:]]
    return "\n".join(lines[:1] + rest).strip()


def versions(cache: Path, limit: int = 0, seed: int = 7, workers: int = 12) -> pd.DataFrame:
    """One document per release of each package: that release's long description."""
    rows: list[dict] = []
    for package in PYPI_PACKAGES:
        index = _cached_json(cache / "pypi" / package / "index.json.gz", f"https://pypi.org/pypi/{package}/json")
        if index is None:
            raise SystemExit(f"PyPI has no package {package}")

        def one(version: str, package=package) -> dict | None:
            path = cache / "pypi" / package / f"{version}.metadata.gz"
            if path.exists():
                raw = gzip.decompress(path.read_bytes())
            else:
                raw = _release_metadata(index["releases"][version])
                tmp = path.with_suffix(".part")
                tmp.write_bytes(gzip.compress(raw))
                tmp.replace(path)
            text = description(_text(raw)) if raw else ""
            if len(text) < 200 or text == "UNKNOWN":
                return None  # old releases often have no description
            return {"text": text, "group": package, "source": f"{package}=={version}"}

        with concurrent.futures.ThreadPoolExecutor(workers) as pool:
            rows += [r for r in pool.map(one, _releases(index)) if r is not None]
        if limit and len(rows) >= limit:
            break
    frame = _numbered(rows)
    return frame.head(limit) if limit else frame


# -- Debian copyright files -----------------------------------------------------------------------------------


def _installed_copyrights() -> list[dict]:
    seen, rows = set(), []
    for path in sorted(glob.glob("/usr/share/doc/*/copyright")):
        real = os.path.realpath(path)
        if real in seen or not os.path.isfile(real):
            continue
        seen.add(real)
        text = _text(Path(real).read_bytes())
        if text:
            rows.append({"text": text, "source": f"installed:{path.split('/')[4]}"})
    return rows


def _archive_choice(n: int, most_bytes: int = 200_000) -> list[str]:
    """n binary packages of source packages not installed here: the smallest binary of each
    source under most_bytes, sources in an order seeded by their names' hashes (a spread over
    the archive, the same on every machine with the same package lists)."""
    installed = set(_run(["dpkg-query", "-W", "-f", "${source:Package}\n"]).stdout.split())
    dump = _run(["apt-cache", "dumpavail"]).stdout
    best: dict[str, tuple[int, str]] = {}
    for record in dump.split("\n\n"):
        fields = dict(line.split(": ", 1) for line in record.splitlines() if ": " in line and not line.startswith(" "))
        if "Package" not in fields or "Size" not in fields:
            continue
        source = fields.get("Source", fields["Package"]).split(" ")[0]
        size = int(fields["Size"])
        if source in installed or size > most_bytes:
            continue
        if source not in best or (size, fields["Package"]) < best[source]:
            best[source] = (size, fields["Package"])
    order = sorted(best, key=lambda s: hashlib.sha1(s.encode()).hexdigest())
    return [best[s][1] for s in order[:n]]


def _apt_download(packages: list[str], folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    have = {p.name.split("_", 1)[0] for p in folder.glob("*.deb")} | \
        {p.name[:-5] for p in folder.glob("*.none")}
    missing = [p for p in packages if p not in have]
    for start in range(0, len(missing), 100):
        batch = missing[start:start + 100]
        _fetched("apt", len(batch))
        if _run(["apt-get", "download", *batch], cwd=folder).returncode == 0:
            continue
        for package in batch:  # one name the archive no longer has fails the whole batch
            if _run(["apt-get", "download", package], cwd=folder).returncode:
                (folder / f"{package}.none").write_text("")


def _deb_copyright(deb: Path) -> str | None:
    """The package's copyright file (the first usr/share/doc/*/copyright in it; None if its doc
    folder is a link to another package's)."""
    from benchmarks.realtext import _deb_members

    try:
        with _deb_members(deb) as tar:
            for member in sorted(tar.getmembers(), key=lambda m: m.name):
                if member.isfile() and re.fullmatch(r"usr/share/doc/[^/]+/copyright", member.name.lstrip("./")):
                    return _text(tar.extractfile(member).read())
    except (SystemExit, tarfile.TarError, OSError, ValueError, EOFError) as e:
        print(f"{deb.name}: {e}: skipped", file=sys.stderr)
    return None


def debian_copyright(cache: Path, limit: int = 0, seed: int = 7, extra: int = 600) -> pd.DataFrame:
    """The installed packages' copyright files and those of `extra` more packages; with a cap,
    at most half of it downloaded."""
    if limit:
        extra = min(extra, limit // 2)
    rows = _installed_copyrights()
    if extra:
        wanted = _archive_choice(extra)
        if len(wanted) < extra:
            print(f"debian-copyright: the package lists offer {len(wanted)} of {extra} extra packages "
                  f"(apt-get update first?)", file=sys.stderr)
        _apt_download(wanted, cache / "debs")
        got = {p.name.split("_", 1)[0]: p for p in (cache / "debs").glob("*.deb")}
        for package in wanted:
            text = _deb_copyright(got[package]) if package in got else None
            if text:
                rows.append({"text": text, "source": f"archive:{package}"})
    return cap(pd.DataFrame(rows), limit, seed)


# -- man pages with the seven edits ---------------------------------------------------------------------------


def manpages(cache: Path, limit: int = 0, seed: int = 7) -> pd.DataFrame:
    from benchmarks.realtext import LANGUAGES, corpus

    wanted = [p for packages, _ in LANGUAGES.values() for p in packages]
    _fetched("apt", sum(not any((cache / "debs").glob(f"{p}_*.deb")) for p in wanted))  # realtext.fetch's downloads
    frame = corpus(["en", "zh", "ja"], cache, PIECE_CHARS, seed)
    frame["source"] = frame["language"] + ":" + frame["edit"]
    return cap(frame[["id", "text", "group", "source"]], limit, seed)


# -- npm READMEs and changelogs across releases ---------------------------------------------------------------


_KINDS = (("readme", re.compile(r"^readme(\.\w+)?$", re.I)),
          ("changelog", re.compile(r"^(history|changelog|changes|release[-_]?notes)(\.\w+)?$", re.I)))


def _npm_versions(package: str, cache: Path) -> list[str]:
    path = cache / "npm" / package / "versions.json"
    if not path.exists():
        proc = _run(["npm", "view", package, "versions", "--json"])
        _fetched("npm", 1)
        if proc.returncode:
            raise SystemExit(f"npm view {package} failed:\n{proc.stderr[-2000:]}")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(proc.stdout)
    found = json.loads(path.read_text())
    return [found] if isinstance(found, str) else found


def _spread(items: list[str], most: int) -> list[str]:
    if len(items) <= most:
        return items
    return [items[i] for i in np.unique(np.linspace(0, len(items) - 1, most).round().astype(int))]


def _package_files(tgz: Path) -> Iterable[tuple[str, str]]:
    """(kind, text) of the top-level README and changelog of an npm tarball."""
    try:
        with tarfile.open(tgz) as tar:
            members = sorted((m for m in tar.getmembers() if m.isfile() and m.name.count("/") == 1),
                             key=lambda m: m.name)
            for kind, pattern in _KINDS:
                member = next((m for m in members if pattern.match(m.name.split("/", 1)[1])), None)
                if member is not None:
                    yield kind, _text(tar.extractfile(member).read())
    except (tarfile.TarError, OSError, EOFError) as e:
        print(f"{tgz.name}: {e}: skipped", file=sys.stderr)


def npm_history(cache: Path, limit: int = 0, seed: int = 7, per_package: int = 25) -> pd.DataFrame:
    """README and changelog of up to per_package releases (evenly spread from the first to the
    newest, pre-releases left out) of each package."""
    rows: list[dict] = []
    for package in NPM_PACKAGES:
        releases = _spread([v for v in _npm_versions(package, cache) if "-" not in v], per_package)
        folder = cache / "npm" / package
        specs = [f"{package}@{v}" for v in releases]
        npm_pack([s for s in specs if not (folder / _tgz_name(s)).exists()], folder, cache)
        for spec in specs:
            if (folder / _tgz_name(spec)).exists():
                for kind, text in _package_files(folder / _tgz_name(spec)):
                    if len(text) >= 200:
                        rows.append({"text": text, "group": f"{package} {kind}", "source": spec})
        if limit and len(rows) >= limit:
            break
    frame = _numbered(rows)
    return frame.head(limit) if limit else frame


BUILDERS: dict[str, Callable[..., pd.DataFrame]] = {
    "licences": licences, "versions": versions, "debian-copyright": debian_copyright, "manpages": manpages,
    "npm-history": npm_history,
}
