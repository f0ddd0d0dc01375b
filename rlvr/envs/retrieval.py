"""A BM25 retriever over a corpus of passages, the search tool of search agents (Search-R1, Jin et al. 2025).

**Corpus**: a JSONL or Parquet file of passages with `id`, `title` and `text` (`title` may be empty). A line that
cannot be read, a passage without text, a repeated id or a file without passages is an error naming the file and
line.

**Scoring**: bm25s (Lù 2024) with the Lucene variant of BM25,

    idf(t) = ln(1 + (N - df(t) + 0.5) / (df(t) + 0.5))
    score(q, d) = sum over the distinct terms t of q: idf(t) * tf(t, d) / (tf(t, d) + k1 * (1 - b + b * |d| / avgdl))

with k1 = 0.9, b = 0.4 by default (Pyserini's defaults, the BM25 of Search-R1's baseline). A passage is indexed as its
title and text; terms are bm25s' tokens: lowercased runs of two or more word characters, English stop words removed.

**Cache**: the index is built once per corpus content, in `<index_dir>/<file stem>-<hash>` (the hash of the file's
bytes, k1, b and the index version); it is written to a temporary folder and renamed, so a build that is cut short
leaves nothing half-made, and loaded memory-mapped (scores and passages) once per process. A missing index (a new
corpus, a cleaned cache, a resumed run on another machine) is built again, said once.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from rlvr.errors import ConfigError, DataError

INDEX_VERSION = 1
DEFAULT_K1, DEFAULT_B = 0.9, 0.4
STOPWORDS = "en"
COMPLETE = "complete.json"  # written last: an index folder without it is not an index
FIELDS = ("id", "title", "text")


@dataclass(frozen=True)
class Passage:
    id: str
    title: str
    text: str


@dataclass(frozen=True)
class Hit:
    passage: Passage
    score: float


def _require_bm25s():
    try:
        import bm25s
    except ImportError:
        raise ConfigError("The search environment's BM25 index needs bm25s: pip install 'rlvr[search]' "
                          "(or pip install bm25s).") from None
    return bm25s


def _passage(value: Any, where: str) -> Passage:
    if not isinstance(value, dict):
        raise DataError(f"{where}: expected a passage object with {', '.join(FIELDS)}, got {type(value).__name__}.")
    missing = [f for f in ("id", "text") if value.get(f) is None]
    if missing:
        raise DataError(f"{where}: the passage has no {' or '.join(missing)} (a corpus row needs {', '.join(FIELDS)}; "
                        f"found {', '.join(sorted(value)) or 'nothing'}).")
    text, title = value["text"], value.get("title") or ""
    if not isinstance(text, str) or not text.strip():
        raise DataError(f"{where}: the passage's text is empty or not a string.")
    if not isinstance(title, str):
        raise DataError(f"{where}: the passage's title must be a string, got {type(title).__name__}.")
    return Passage(str(value["id"]), title, text)


def iter_passages(path: str | Path) -> Iterator[tuple[str, Passage]]:
    """(where, passage) for each passage of a JSONL or Parquet corpus, read lazily; the first bad row raises
    DataError naming the file and line."""
    p = Path(path).expanduser()
    if not p.is_file():
        raise DataError(f"Corpus file '{path}' does not exist (data.tasks[].env.args.corpus).")
    suffix = p.suffix.lower()
    if suffix in (".jsonl", ".ndjson"):
        with p.open("rb") as f:
            for line_no, raw in enumerate(f, 1):
                where = f"{path}, line {line_no}"
                if not raw.strip():
                    continue
                try:
                    value = json.loads(raw.decode("utf-8"))
                except UnicodeDecodeError:
                    raise DataError(f"{where}: not valid UTF-8.") from None
                except json.JSONDecodeError as e:
                    raise DataError(f"{where}: not valid JSON ({e.msg}).") from None
                yield where, _passage(value, where)
    elif suffix == ".parquet":
        import pyarrow.parquet as pq

        row = 0
        for batch in pq.ParquetFile(p).iter_batches(batch_size=65536):
            for value in batch.to_pylist():
                row += 1
                yield f"{path}, row {row}", _passage(value, f"{path}, row {row}")
    else:
        raise DataError(f"Corpus file '{path}' has an unknown format '{suffix}'; use .jsonl or .parquet with "
                        f"{', '.join(FIELDS)}.")


def read_passages(path: str | Path) -> list[Passage]:
    """Every passage of a corpus file, checked: ids unique, at least one passage."""
    passages, seen = [], {}
    for where, passage in iter_passages(path):
        if passage.id in seen:
            raise DataError(f"{where}: passage id {passage.id!r} was already used at {seen[passage.id]}; ids must be "
                            "unique.")
        seen[passage.id] = where
        passages.append(passage)
    if not passages:
        raise DataError(f"Corpus file '{path}' holds no passages; each line should be a JSON object with "
                        f"{', '.join(FIELDS)}.")
    return passages


def content_hash(path: str | Path, k1: float, b: float) -> str:
    """The cache key of an index: the corpus file's bytes, the BM25 parameters and the index version."""
    digest = hashlib.sha256(f"bm25 v{INDEX_VERSION} k1={k1} b={b} stop={STOPWORDS}\0".encode())
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()[:20]


def tokenize(texts: list[str]):
    """bm25s' tokens of `texts`: (ids per text, vocabulary)."""
    return _require_bm25s().tokenize(texts, stopwords=STOPWORDS, show_progress=False)


def query_terms(query: str) -> list[str]:
    """The distinct terms of a query, in order."""
    terms = _require_bm25s().tokenize([query], stopwords=STOPWORDS, return_ids=False, show_progress=False)[0]
    return list(dict.fromkeys(terms))


def build_index(corpus: str | Path, directory: Path, k1: float = DEFAULT_K1, b: float = DEFAULT_B) -> None:
    """Index `corpus` into `directory` (made whole or not at all)."""
    bm25s = _require_bm25s()
    passages = read_passages(corpus)
    tokens = tokenize([f"{p.title}\n{p.text}" for p in passages])
    retriever = bm25s.BM25(k1=k1, b=b, method="lucene")
    retriever.index(tokens, show_progress=False)
    directory.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{directory.name}-", dir=directory.parent))
    try:
        retriever.save(str(staging), corpus=[{"id": p.id, "title": p.title, "text": p.text} for p in passages],
                       show_progress=False)
        (staging / COMPLETE).write_text(json.dumps({"corpus": str(corpus), "passages": len(passages), "k1": k1,
                                                    "b": b, "version": INDEX_VERSION}))
        try:
            os.rename(staging, directory)
        except OSError:  # another process built it meanwhile: theirs is the same index
            if not (directory / COMPLETE).exists():
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)


class BM25Index:
    """A saved index, memory-mapped: `search(query, k)` gives the top passages by BM25."""

    def __init__(self, directory: Path):
        bm25s = _require_bm25s()
        self.directory = directory
        self.retriever = bm25s.BM25.load(str(directory), load_corpus=True, mmap=True, show_progress=False)
        self.size = int(self.retriever.scores["num_docs"])

    def search(self, query: str, k: int) -> list[Hit]:
        """The `k` best passages for `query` (fewer when fewer share a term with it), best first."""
        terms = [t for t in query_terms(query) if t in self.retriever.vocab_dict and t != ""]
        if not terms or k < 1:
            return []
        documents, scores = self.retriever.retrieve([terms], k=min(k, self.size), show_progress=False, n_threads=0)
        hits = []
        for doc, score in zip(documents[0], scores[0]):
            if score > 0:
                hits.append(Hit(Passage(str(doc["id"]), doc.get("title") or "", doc["text"]), float(score)))
        return hits


def index_directory(corpus: str | Path, index_dir: str | Path | None, k1: float, b: float) -> Path:
    """Where the index of `corpus` (by its content) lives."""
    from rlvr.models.gguf import user_cache

    root = Path(index_dir).expanduser() if index_dir else user_cache("bm25")
    return root / f"{Path(corpus).stem}-{content_hash(corpus, k1, b)}"


def open_index(corpus: str | Path, index_dir: str | Path | None = None, k1: float = DEFAULT_K1,
               b: float = DEFAULT_B) -> BM25Index:
    """The index of `corpus`, built when missing; once per process for a given file content."""
    path = Path(corpus).expanduser()
    if not path.is_file():
        raise DataError(f"Corpus file '{corpus}' does not exist (data.tasks[].env.args.corpus).")
    stat = path.resolve().stat()
    return _open(str(path.resolve()), stat.st_size, stat.st_mtime_ns, str(index_dir or ""), k1, b)


@lru_cache(maxsize=8)
def _open(path: str, size: int, mtime_ns: int, index_dir: str, k1: float, b: float) -> BM25Index:
    directory = index_directory(path, index_dir or None, k1, b)
    if not (directory / COMPLETE).exists():
        print(f"rlvr: no BM25 index of {path} in {directory}: building it (once; later runs reuse it)",
              file=sys.stderr)
        build_index(path, directory, k1, b)
    return BM25Index(directory)
