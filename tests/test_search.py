"""Search agents: the BM25 retriever and its cache, the corpus and questions, the two protocols, exact match / F1,
and passages kept out of the loss."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import pytest

from rlvr.config import EnvConfig
from rlvr.envs import retrieval
from rlvr.envs.retrieval import content_hash, open_index, read_passages
from rlvr.envs.task import EnvTask
from rlvr.errors import DataError
from rlvr.tasks import make_task
from rlvr.verifiers.qa import exact_match, f1_score, normalize_answer, token_f1

DATA = Path(__file__).parents[1] / "rlvr" / "recipes" / "data"
PASSAGES = [
    ("p0", "Veltor Quann", "Veltor Quann was a glassblower born in Dreshold. Quann belonged to the Amber Guild."),
    ("p1", "Dreshold", "Dreshold is a town in Morrow Vale on the river Amble, founded in 1340."),
    ("p2", "Amber Guild", "The Amber Guild was founded in 1702. Its hall stands in Dreshold, by the river."),
    ("p3", "Morrow Vale", "Morrow Vale is a region of towns and rivers; the river Amble crosses it twice."),
    ("p4", "Sella Brin", "Sella Brin was a clockmaker born in Kestwick. Brin made clocks, clocks and more clocks."),
    ("p5", "Kestwick", "Kestwick is a town on the river Tolle."),
]


def write_corpus(path: Path, passages=PASSAGES) -> Path:
    path.write_text("".join(json.dumps({"id": i, "title": t, "text": x}) + "\n" for i, t, x in passages))
    return path


@pytest.fixture
def corpus(tmp_path) -> Path:
    pytest.importorskip("bm25s", reason="the search environment's index needs the 'search' extra")
    retrieval._open.cache_clear()
    return write_corpus(tmp_path / "corpus.jsonl")


def brute_force_bm25(query: str, k1: float, b: float) -> dict[str, float]:
    """Lucene BM25 over the same tokens, by the formula in rlvr.envs.retrieval, one document at a time."""
    import bm25s

    docs = bm25s.tokenize([f"{t}\n{x}" for _, t, x in PASSAGES], stopwords="en", return_ids=False,
                          show_progress=False)
    terms = set(bm25s.tokenize([query], stopwords="en", return_ids=False, show_progress=False)[0])
    n, avgdl = len(docs), sum(map(len, docs)) / len(docs)
    scores = {}
    for (pid, _, _), doc in zip(PASSAGES, docs):
        score = 0.0
        for t in terms:
            tf, df = doc.count(t), sum(t in d for d in docs)
            if tf:
                idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
                score += idf * tf / (tf + k1 * (1 - b + b * len(doc) / avgdl))
        scores[pid] = score
    return scores


@pytest.mark.parametrize("k1,b", [(0.9, 0.4), (1.5, 0.75)])
def test_bm25_matches_a_brute_force_scoring_of_the_lucene_formula(corpus, tmp_path, k1, b):
    index = open_index(corpus, tmp_path / "index", k1=k1, b=b)
    for query in ["Where was Veltor Quann born?", "river Amble town", "clocks clockmaker", "the river the river"]:
        expected = brute_force_bm25(query, k1, b)
        ranked = sorted((s, pid) for pid, s in expected.items() if s > 0)[::-1]
        hits = index.search(query, k=len(PASSAGES))
        assert {h.passage.id: h.score for h in hits} == pytest.approx({pid: s for s, pid in ranked}, rel=1e-5)
        assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)  # best first
    assert index.search("zebra", 3) == []  # no shared term: no passage
    assert [h.passage.title for h in index.search("Veltor", 1)] == ["Veltor Quann"]


def test_the_index_is_reused_and_rebuilt_when_the_corpus_changes_or_its_folder_is_gone(corpus, tmp_path, capsys):
    root = tmp_path / "index"
    first = open_index(corpus, root)
    assert open_index(corpus, root) is first  # once per process
    built = capsys.readouterr().err
    assert built.count("building it") == 1 and str(corpus.resolve()) in built
    retrieval._open.cache_clear()  # a new process: the saved index is loaded, not rebuilt
    again = open_index(corpus, root)
    assert again.directory == first.directory and "building" not in capsys.readouterr().err
    write_corpus(corpus, PASSAGES[:4])  # new content: a new index
    retrieval._open.cache_clear()
    changed = open_index(corpus, root)
    assert changed.directory != first.directory and changed.size == 4
    assert "building it" in capsys.readouterr().err
    import shutil

    shutil.rmtree(changed.directory)  # a resumed run on a machine without the index: rebuilt, said once
    retrieval._open.cache_clear()
    open_index(corpus, root), open_index(corpus, root)
    assert capsys.readouterr().err.count("building it") == 1 and (changed.directory / retrieval.COMPLETE).exists()
    assert content_hash(corpus, 0.9, 0.4) != content_hash(corpus, 1.2, 0.4)


@pytest.mark.parametrize("content,message", [
    ("", "holds no passages"),
    ('{"id": 1, "title": "a", "text": "x"}\n{"id": 2, "title": "b", "text": \n', "line 2: not valid JSON"),
    ('{"id": 1, "title": "a", "text": "x"}\n\n{"id": 2, "title": "b"}\n', "line 3: the passage has no text"),
    ('{"id": 1, "title": "a", "text": "x"}\n{"id": 1, "title": "b", "text": "y"}\n',
     "line 2: passage id '1' was already used at"),
    ('[1, 2]\n', "line 1: expected a passage object"),
])
def test_a_bad_corpus_names_its_file_and_line(tmp_path, content, message):
    path = tmp_path / "bad.jsonl"
    path.write_text(content)
    with pytest.raises(DataError, match=message) as e:
        read_passages(path)
    assert "bad.jsonl" in str(e.value)
    with pytest.raises(DataError, match="does not exist"):
        open_index(tmp_path / "missing.jsonl", tmp_path)


def search_env(corpus: Path, tmp_path: Path, **args):
    rows = tmp_path / "qa.jsonl"
    rows.write_text(json.dumps({"question": "In which town was Veltor Quann born?", "golden_answers": ["Dreshold"],
                                "entity": "Veltor Quann"}) + "\n")
    task = EnvTask(make_task("qa", 0, {"path": str(rows), "eval_path": str(rows)}),
                   EnvConfig(name="search", args={"corpus": str(corpus), "index_dir": str(tmp_path / "i"), **args}))
    return task, task.make_env(task.problem("train", 0))


def test_search_r1_tags_search_answer_and_malformed_tags(corpus, tmp_path):
    _, env = search_env(corpus, tmp_path, k=2, max_passage_chars=30)
    step = env.step("I should look him up. <search>Veltor Quann born</search>")
    assert not step.done and step.messages[0]["role"] == "user"
    info = step.messages[0]["content"]
    assert info.startswith("<information>Doc 1 (Title: Veltor Quann) Veltor Quann was a glassblower")
    assert info.endswith("</information>") and " ..." in info and "Doc 3" not in info  # k and the length cap
    step = env.step("<search>Dreshold")  # unclosed: told, the episode goes on
    assert not step.done and "closing tag is missing" in step.messages[0]["content"]
    step = env.step("<answer>Dreshold</answer>")
    assert step.done and env.outcome().reward == 1.0 and env.outcome().success
    m = env.metrics()
    assert (m["searches"], m["malformed_searches"], m["search_errors"], m["query_names_entity"]) == (1, 1, 0, 1.0)
    _, env = search_env(corpus, tmp_path)
    assert env.step("Dreshold").done and env.outcome().reward == 1.0  # no tags: the turn is the answer
    assert math.isnan(env.metrics()["query_names_entity"]) and env.metrics()["searched"] == 0


def test_tool_call_protocol_cut_queries_and_a_retriever_that_raises(corpus, tmp_path, monkeypatch):
    _, env = search_env(corpus, tmp_path, call_format="json", max_query_chars=12, format_reward=0.1)
    assert [t.name for t in env.tools] == ["search"] and "query" in env.tools[0].parameters
    call = json.dumps({"name": "search", "arguments": {"query": "Dreshold town and everything else about it"}})
    step = env.step(f"<tool_call>{call}</tool_call><tool_call>{{broken</tool_call>")
    assert [m["role"] for m in step.messages] == ["tool", "tool"]
    assert step.messages[0]["content"].startswith("Doc 1 (Title: Dreshold)")
    assert step.messages[1]["content"].startswith("Error: malformed tool call")
    assert env.searcher.queries == ["Dreshold tow"] and env.metrics()["queries_cut"] == 1

    def broken(query, k):
        raise OSError("index file vanished")

    monkeypatch.setattr(env.searcher.index, "search", broken)
    step = env.step(f"<tool_call>{call}</tool_call>")
    assert not step.done and step.messages[0]["content"] == "Error: OSError: index file vanished"
    assert env.step("The answer is Dreshold.").done
    m = env.metrics()
    assert (m["search_errors"], m["malformed_searches"], m["searches"]) == (1, 1, 2)
    assert env.outcome().reward == 0.0  # not the bare answer, and no format term after failed calls


def test_the_format_term_is_off_by_default_and_paid_for_well_formed_searches(corpus, tmp_path):
    for bonus in (0.0, 0.25):
        _, env = search_env(corpus, tmp_path, format_reward=bonus)
        env.step("<search>Veltor</search>")
        env.step("<answer>Kestwick</answer>")
        assert env.outcome().reward == bonus  # searched, every search well formed; the answer is wrong
    _, env = search_env(corpus, tmp_path, format_reward=0.25)
    assert env.step("<answer>Dreshold</answer>").done and env.outcome().reward == 1.0  # no search: no term
    _, env = search_env(corpus, tmp_path, format_reward=0.25)
    env.step("<search>Veltor</search><search>Dreshold")
    env.step("<answer>Dreshold</answer>")
    assert env.outcome().reward == 1.0  # a malformed search: no term


P = "Where was Veltor Quann born?"


@pytest.mark.parametrize("completion,golden,em,f1", [
    ("<answer>The Dreshold!</answer>", ["Dreshold"], 1.0, 1.0),  # articles and punctuation
    ("<answer>  dreshold </answer>", ["Kestwick", "Dreshold"], 1.0, 1.0),  # any reference
    ("<answer>the big Amber Guild</answer>", ["Amber Guild"], 0.0, 0.8),  # P 2/3, R 1
    ("<answer>guild</answer>", ["the Amber Guild"], 0.0, 2 * 1 * 0.5 / 1.5),  # P 1, R 1/2
    ("<answer>Kestwick</answer>", ["Dreshold"], 0.0, 0.0),
    ("<answer>Kestwick</answer> then <answer>Dreshold</answer>", ["Dreshold"], 0.0, 0.0),  # a hedge
    ("<answer>Dreshold or Kestwick</answer>", ["Dreshold"], 0.0, 0.0),  # alternatives
    ("<answer>Dreshold</answer> <answer>Dreshold.</answer>", ["Dreshold"], 1.0, 1.0),  # one answer twice
    ("<answer>Where was Veltor Quann born?</answer>", ["Veltor Quann born"], 0.0, 0.0),  # the question echoed
    ("Dreshold", ["Dreshold"], 1.0, 1.0),  # no tags: the final message
    ("<information>Dreshold</information> I do not know", ["Dreshold"], 0.0, 0.0),  # passages are not answers
    ("<answer>Dreshold", ["Dreshold"], 1.0, 1.0),  # left open but finished
])
def test_exact_match_and_f1_by_hand(completion, golden, em, f1):
    assert exact_match(P, completion, golden_answers=golden)["score"] == em
    assert token_f1(P, completion, golden_answers=golden)["score"] == pytest.approx(f1)
    assert token_f1(P, completion, golden_answers=golden)["exact_match"] == em


def test_normalization_and_unfinished_answers():
    assert normalize_answer("  The  Cat, an  apple & A dog! ") == "cat apple dog"
    assert f1_score("", "") == 1.0 and f1_score("the", "cat") == 0.0
    assert exact_match(P, "<answer>Dresh", answer="Dreshold", truncated=True)["score"] == 0.0
    assert exact_match(P, "<answer>Dreshold", answer="Dreshold", truncated=True)["score"] == 0.0  # cut: unfinished
    assert exact_match(P, "<answer>Dreshold</answer>", answer="Dreshold", truncated=True)["score"] == 1.0
    assert exact_match(P, "<answer>Dreshold</answer>")["score"] == 0.0  # no reference: nothing matches


def test_qa_loader_reads_nq_triviaqa_and_hotpotqa_fields(tmp_path):
    path = tmp_path / "mixed.jsonl"
    rows = [{"question": "q1?", "golden_answers": ["a", "b"]},  # Search-R1 / FlashRAG
            {"question": "q2?", "answer": ["c"]},  # NQ-open
            {"question": "q3?", "answer": {"value": "d", "aliases": ["D.", "dee"]}},  # TriviaQA
            {"question": "q4?", "answer": "e", "supporting_facts": [["T", 0]]}]  # HotpotQA
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    task = make_task("qa", 0, {"path": str(path), "eval_size": 1})
    problems = [task.problem("train", i) for i in range(3)] + [task.problem("eval", 0)]
    assert [p.fields["golden_answers"] for p in problems] == [["a", "b"], ["c"], ["d", "D.", "dee"], ["e"]]
    assert problems[3].fields["supporting_facts"] == [["T", 0]] and problems[0].prompt == "q1?"
    path.write_text(json.dumps(rows[0]) + "\n" + json.dumps({"question": "q"}) + "\n")
    with pytest.raises(DataError, match="mixed.jsonl, line 2: no reference answer"):
        make_task("qa", 0, {"path": str(path), "eval_size": 1})


def test_the_shipped_questions_are_regenerated_from_the_seed_and_held_out_entities_are_new():
    sys.path.insert(0, str(DATA))
    try:
        import make_search_qa
    finally:
        sys.path.remove(str(DATA))
    made = make_search_qa.make_all()
    for name, rows in made.items():
        assert [json.loads(line) for line in (DATA / f"{name}.jsonl").read_text().splitlines()] == rows
    def entities(rows):
        return {title for r in rows for title, _ in r["supporting_facts"]} | {r["entity"] for r in rows}

    train, heldout = entities(made["search_qa_train"]), entities(made["search_qa_heldout"])
    assert heldout and not train & heldout
    titles = {p["title"] for p in made["search_corpus"]}
    assert heldout <= titles and train <= titles  # every question is answerable from the corpus
    assert {r["hops"] for r in made["search_qa_heldout"]} == {1, 2}


class ScriptedEngine:
    """A policy that searches once, then answers: each turn's text, tokenized, as the engine's sample."""

    def __init__(self, tokenizer):
        self.tokenizer = tokenizer
        self.sampled: dict[tuple[int, ...], list[list[int]]] = {}

    def generate(self, prompts, params, generators=None):
        from rlvr.rollout.base import Completion

        out = []
        for prompt in prompts:
            seen = self.tokenizer.decode(prompt)
            text = "<answer>Dreshold</answer>" if "<information>" in seen else "<search>Veltor Quann</search>"
            ids = self.tokenizer(text, add_special_tokens=False)["input_ids"] + [self.tokenizer.eos_token_id]
            self.sampled.setdefault(tuple(prompt), []).append(ids)
            out.append([Completion(ids, text, [0.0] * len(ids), False) for _ in range(params.n)])
        return out


def test_retrieved_passages_are_environment_tokens_outside_the_loss(corpus, tmp_path):
    from conftest import assert_policy_runs_were_sampled
    from test_episodes import CHATML

    from rlvr.models.loading import train_tokenizer
    from rlvr.models.prompts import PromptEncoder
    from rlvr.rollout import SamplingParams
    from rlvr.rollout.episodes import EpisodeRunner
    from rlvr.training.batch import RolloutBatch

    texts = [f"{t} {x} <search></search><information></information><answer></answer> Doc (Title: ) user assistant"
             for _, t, x in PASSAGES]
    tok = train_tokenizer(texts + ["In which town was Veltor Quann born?"], 200)
    tok.add_special_tokens({"additional_special_tokens": ["<|im_start|>", "<|im_end|>"]})
    tok.eos_token, tok.chat_template = "<|im_end|>", CHATML
    task, _ = search_env(corpus, tmp_path, k=1)
    engine = ScriptedEngine(tok)
    prompts, groups = EpisodeRunner(engine, PromptEncoder(tok)).play(
        [(task, task.problem("train", 0))], SamplingParams(n=2, max_new_tokens=40))
    batch = RolloutBatch.from_completions(prompts, groups, tok.pad_token_id, [{}] * len(groups))
    for row, episode in enumerate(groups[0]):
        assert batch.input_ids[row][batch.attention_mask[row].bool()].tolist() == prompts[0] + episode.token_ids
        mask = batch.completion_mask[row, : len(episode.token_ids)].bool().tolist()
        assert mask == episode.policy_mask
        assert_policy_runs_were_sampled(prompts[0], episode.token_ids, episode.policy_mask, engine.sampled)
        environment = tok.decode([t for t, p in zip(episode.token_ids, mask) if not p])
        policy = tok.decode([t for t, p in zip(episode.token_ids, mask) if p])
        assert "<information>Doc 1 (Title: Veltor Quann) Veltor Quann was a glassblower" in environment
        assert "Veltor Quann was" not in policy and policy.count("<search>") == 1 and "<answer>" in policy
        assert episode.fields["episode_reward"] == 1.0
