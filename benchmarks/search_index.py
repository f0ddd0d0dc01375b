"""How the search environment's BM25 index (rlvr.envs.retrieval, bm25s) scales: build time, disk, memory and query
latency at 10k, 100k and 1M synthetic passages (docs/results.md, "Search index at scale").

    python benchmarks/search_index.py [--sizes 10000 100000 1000000] [--queries 200] [--workdir /tmp/search_index]

Passages are synthetic: a title of two words and a text of 40 words drawn from a 50,000-word made-up vocabulary
with Zipf-like frequencies (rank^-1.1), about 300 characters each (Search-R1's Wikipedia passages are 100 words).
Each size runs in fresh processes: one builds the index from the JSONL file (reading, tokenizing, indexing, saving;
its peak resident memory), one loads it memory-mapped and answers `--queries` queries of 4 words taken from random
passages, one at a time as an episode asks them (latency per query; resident memory after loading and after the
queries, which counts the pages of the memory-mapped files it touched). One CPU thread.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VOCAB, WORDS_PER_PASSAGE = 50_000, 40


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def vocabulary(rng) -> list[str]:
    syllables = [c + v for c in "bcdfghklmnprstvz" for v in "aeiou"]
    words: set[str] = set()
    while len(words) < VOCAB:
        words.add("".join(rng.choice(syllables, size=rng.integers(2, 5))))
    return sorted(words)


def write_corpus(path: Path, n: int, seed: int = 0) -> None:
    import numpy as np

    rng = np.random.default_rng(seed)
    words = np.array(vocabulary(rng))
    weights = 1.0 / np.arange(1, VOCAB + 1) ** 1.1
    weights /= weights.sum()
    with path.open("w") as f:
        for start in range(0, n, 10_000):
            m = min(10_000, n - start)
            drawn = words[rng.choice(VOCAB, size=(m, WORDS_PER_PASSAGE + 2), p=weights)]
            for i, row in enumerate(drawn):
                f.write(json.dumps({"id": str(start + i), "title": " ".join(row[:2]).title(),
                                    "text": " ".join(row[2:])}) + "\n")


def build(corpus: Path, directory: Path) -> dict:
    from rlvr.envs.retrieval import build_index

    t0 = time.perf_counter()
    build_index(corpus, directory)
    seconds = time.perf_counter() - t0
    disk = sum(p.stat().st_size for p in directory.rglob("*") if p.is_file())
    return {"build_s": seconds, "build_peak_rss_mb": peak_rss_mb(), "index_disk_mb": disk / 2**20}


def query(corpus: Path, directory: Path, queries: int) -> dict:
    import numpy as np

    from rlvr.envs.retrieval import BM25Index

    before = rss_mb()
    t0 = time.perf_counter()
    index = BM25Index(directory)
    load_s = time.perf_counter() - t0
    after_load = rss_mb()
    rng = np.random.default_rng(1)
    picks = set(rng.choice(index.size, size=queries, replace=False).tolist())
    texts = []
    with corpus.open() as f:
        for i, line in enumerate(f):
            if i in picks:
                words = json.loads(line)["text"].split()
                texts.append(" ".join(rng.choice(words, size=4, replace=False)))
    index.search(texts[0], 3)  # the first query pays for imports and page faults of the vocabulary
    latencies = []
    for text in texts:
        t0 = time.perf_counter()
        index.search(text, 3)
        latencies.append(time.perf_counter() - t0)
    latencies.sort()
    return {"load_s": load_s, "rss_before_load_mb": before, "rss_after_load_mb": after_load,
            "rss_after_queries_mb": rss_mb(), "query_ms_p50": 1000 * latencies[len(latencies) // 2],
            "query_ms_p95": 1000 * latencies[int(len(latencies) * 0.95)], "queries": len(latencies)}


def child(args) -> None:
    corpus, directory = Path(args.corpus), Path(args.index)
    result = build(corpus, directory) if args.child == "build" else query(corpus, directory, args.queries)
    print(json.dumps(result))


def in_child(kind: str, corpus: Path, directory: Path, queries: int) -> dict:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": f"{ROOT}:{os.environ.get('PYTHONPATH', '')}"}
    out = subprocess.run([sys.executable, __file__, "--child", kind, "--corpus", str(corpus), "--index",
                          str(directory), "--queries", str(queries)], capture_output=True, text=True, env=env)
    if out.returncode != 0:
        raise SystemExit(f"{kind} of {corpus} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000, 1_000_000])
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--workdir", default="/tmp/search_index")
    parser.add_argument("--child", choices=["build", "query"], help=argparse.SUPPRESS)
    parser.add_argument("--corpus", help=argparse.SUPPRESS)
    parser.add_argument("--index", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return child(args)
    import bm25s
    from real_model import commit

    work = Path(args.workdir)
    work.mkdir(parents=True, exist_ok=True)
    print(f"commit {commit()}, bm25s {bm25s.__version__}, one thread, {args.queries} queries of 4 words, k=3")
    print("| passages | corpus file | build | build peak memory | index on disk | load | memory after load -> "
          "after queries | query latency p50 / p95 |")
    print("|---|---|---|---|---|---|---|---|")
    for n in args.sizes:
        corpus, directory = work / f"corpus-{n}.jsonl", work / f"index-{n}"
        if not corpus.is_file():
            write_corpus(corpus, n)
        shutil.rmtree(directory, ignore_errors=True)
        b = in_child("build", corpus, directory, args.queries)
        q = in_child("query", corpus, directory, args.queries)
        print(f"| {n:,} | {corpus.stat().st_size / 2**20:.0f} MB | {b['build_s']:.1f} s | "
              f"{b['build_peak_rss_mb']:.0f} MB | {b['index_disk_mb']:.0f} MB | {q['load_s']:.2f} s | "
              f"{q['rss_after_load_mb']:.0f} -> {q['rss_after_queries_mb']:.0f} MB | "
              f"{q['query_ms_p50']:.1f} / {q['query_ms_p95']:.1f} ms |", flush=True)
        shutil.rmtree(directory, ignore_errors=True)


if __name__ == "__main__":
    main()
