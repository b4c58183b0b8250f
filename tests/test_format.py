"""faqsearch/index/format.py owns the index format: the names of an index's files are spelled there
and nowhere else in the package (read from the code's string constants, so comments and docstrings,
which explain, do not count; f-string parts and regular expressions do)."""
from __future__ import annotations

import ast
import os
import re

import pytest

import faqsearch
from faqsearch.index import format as fmt

PACKAGE = os.path.dirname(faqsearch.__file__)
OWNER = os.path.join(PACKAGE, "index", "format.py")
NAMES = (fmt.CONFIG, fmt.STORE, fmt.FAISS, fmt.WHITENING, fmt.VECTORS, fmt.IDS, fmt.QUERY_LOG, fmt.CURRENT,
         fmt.LOCK, fmt.DELTA_PREFIX, *fmt.TOKENS_FILES)


def strings(path: str) -> list[tuple[int, str]]:
    """The string constants of a module with their lines, docstrings left out."""
    tree = ast.parse(open(path, encoding="utf-8").read())
    docs = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                docs.add(id(first.value))
    return [(n.lineno, n.value) for n in ast.walk(tree)
            if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docs]


def spelled(text: str, name: str) -> bool:
    return name in text or re.escape(name) in text


def test_strings_sees_literals_fstrings_and_patterns_but_not_docstrings(tmp_path):
    src = tmp_path / "m.py"
    src.write_text('"""config.json in a docstring"""\n# store.db in a comment\n'
                   'a = f"{x}/index.faiss"\nb = r"^whitening\\.npz$"\n')
    found = [name for _, text in strings(str(src)) for name in NAMES if spelled(text, name)]
    assert sorted(found) == sorted([fmt.FAISS, fmt.WHITENING])


def test_the_index_files_are_spelled_in_format_only():
    found = []
    for root, _, files in os.walk(PACKAGE):
        for f in files:
            path = os.path.join(root, f)
            if not f.endswith(".py") or os.path.samefile(path, OWNER):
                continue
            found += [f"{os.path.relpath(path, PACKAGE)}:{line}: {name!r} in {text[:60]!r}"
                      for line, text in strings(path) for name in NAMES if spelled(text, name)]
    assert not found, "spell these through faqsearch.index.format:\n" + "\n".join(found)


def test_format_spells_each_name():
    own = [text for _, text in strings(OWNER)]
    assert all(any(spelled(t, name) for t in own) for name in NAMES)


def test_patterns_match_the_names_written():
    assert fmt.VERSION_NAME.match(fmt.version_name(7)) and fmt.version_name(7) == "v00000007"
    assert fmt.DELTA.match(fmt.delta_file(3)).group(1) == "3"
    for name in (*fmt.FILES.values(), fmt.delta_file(12), fmt.CONFIG + fmt.TMP, fmt.STORE + "-wal"):
        assert fmt.OWN_FILES.match(name), name
    for name in (fmt.CURRENT, fmt.CURRENT + fmt.TMP, fmt.LOCK, fmt.QUERY_LOG, fmt.QUERY_LOG + "-journal"):
        assert fmt.TOP.match(name), name
    for name in ("notes.txt", "config.jsonx", fmt.version_name(1), "v1" + fmt.TMP):
        assert not fmt.OWN_FILES.match(name) and not fmt.TOP.match(name), name
    assert fmt.BUILDING.match(f"{fmt.version_name(2)}{fmt.TMP}-0a1b")


# ---- the typed config ---------------------------------------------------------------------------
def _config_json(path) -> dict:
    import json

    from faqsearch.index.directory import resolve

    with open(os.path.join(resolve(str(path)), fmt.CONFIG), encoding="utf-8") as fh:
        return json.load(fh)


def _assert_round_trip(raw: dict) -> fmt.Config:
    import json

    config = fmt.Config.from_dict(raw)
    assert json.dumps(config.to_dict()) == json.dumps(raw)  # same keys, same order, same values
    return config


def test_config_of_an_embedded_index_round_trips_and_is_typed(tmp_path, small_corpus, fake_encoder):
    from faqsearch import FAQSearch

    engine = FAQSearch.build(small_corpus, str(tmp_path / "ix"), encoder=fake_encoder)
    engine.close()
    raw = _config_json(tmp_path / "ix")
    config = _assert_round_trip(raw)
    assert isinstance(config.encoder, fmt.EncoderSection) and config.encoder.name == raw["encoder"]["name"]
    assert isinstance(config.whitening, fmt.WhiteningSection) and config.whitening.beta == raw["whitening"]["beta"]
    assert config.counts.questions == 6 and config.counts.faqs == 4 and config.dim_in == raw["dim_in"]
    assert config.index.factory == raw["index"]["factory"] and config.generation == raw["generation"]
    assert config.files == raw["files"] and set(config.files) >= {fmt.FAISS, fmt.WHITENING}
    from faqsearch.index.config import load_config
    from faqsearch.index.directory import resolve

    loaded = load_config(resolve(str(tmp_path / "ix")))
    assert loaded == config and loaded["counts"] == raw["counts"]  # load_config gives the typed Config


def test_config_of_a_milvus_lite_index_round_trips(tmp_path, small_corpus, fake_encoder):
    import pytest

    pytest.importorskip("pymilvus")
    pytest.importorskip("milvus_lite")
    from faqsearch import FAQSearch

    engine = FAQSearch.build(small_corpus, str(tmp_path / "mil"), encoder=fake_encoder, backend="milvus",
                             uri=str(tmp_path / "m.db"))
    engine.close()
    raw = _config_json(tmp_path / "mil")
    config = _assert_round_trip(raw)
    assert config.backend.kind == "milvus" and config.backend.collection == raw["backend"]["collection"]


def test_unknown_keys_and_order_survive_a_read_and_a_write():
    raw = {"format_version": 2, "from_the_future": {"x": [1, 2]}, "encoder": {"name": "e", "new_knob": 3},
           "dim_out": 8, "dim_in": 16, "whitening": {"enabled": False, "k": None}, "delta": {"file": "d", "z": 1}}
    config = _assert_round_trip(raw)
    assert config.extra == {"from_the_future": {"x": [1, 2]}} and config.encoder.extra == {"new_knob": 3}
    assert config.whitening.k is None and "k" in config.to_dict()["whitening"]  # null kept, not dropped
    from dataclasses import replace

    changed = replace(config, generation=3, dim_out=4).without("delta")
    assert list(changed.to_dict()) == ["format_version", "from_the_future", "encoder", "dim_out", "dim_in",
                                       "whitening", "generation"]
    assert changed.to_dict()["dim_out"] == 4 and changed.delta is None


BASE = {"format_version": 2, "encoder": {"name": "e"}, "whitening": {"enabled": True}, "dim_in": 16, "dim_out": 8}


def test_damaged_configs_are_refused_naming_the_key():
    import pytest

    from faqsearch.errors import IndexFormatError

    cases = [({"encoder": "x"}, "'encoder' must be an object"),
             ({"dim_in": 0}, "'dim_in' must be a positive integer"),
             ({"dim_out": True}, "'dim_out' must be a positive integer"),
             ({"generation": -1}, "'generation' must be a non-negative integer"),
             ({"threshold": 2}, "'threshold' must be a number between -1 and 1"),
             ({"hybrid_weight": "a"}, "'hybrid_weight' must be a number between 0 and 100"),
             ({"token_weight": 101}, "'token_weight' must be a number between 0 and 100"),
             ({"mode": "fuzzy"}, "'mode' must be one of dense, lexical, hybrid, found \"fuzzy\""),
             ({"counts": {"faqs": 1}}, "'counts' must be an object with non-negative faqs and questions"),
             ({"files": []}, "'files' must be an object")]
    for change, message in cases:
        with pytest.raises(IndexFormatError) as err:
            fmt.Config.from_dict({**BASE, **change}, "ix/v1/config.json")
        assert str(err.value).startswith(f"ix/v1/config.json: {message}"), str(err.value)
        assert "rebuild with faqsearch ingest --force" in str(err.value)
    _assert_round_trip(BASE)


def test_a_hand_damaged_config_json_is_refused_on_open(tmp_path, small_corpus, fake_models):
    import json

    import pytest

    from faqsearch import FAQSearch
    from faqsearch.errors import IndexFormatError
    from faqsearch.index.directory import resolve

    FAQSearch.build(small_corpus, str(tmp_path / "ix")).close()
    file = os.path.join(resolve(str(tmp_path / "ix")), fmt.CONFIG)
    raw = json.load(open(file, encoding="utf-8"))
    json.dump({**raw, "threshold": "high"}, open(file, "w", encoding="utf-8"))
    with pytest.raises(IndexFormatError, match=f"{re.escape(file)}: 'threshold' must be a number between -1 and 1, "
                                                'found "high"'):
        FAQSearch.open(str(tmp_path / "ix"))


def test_faqsearch_reads_its_config_by_attribute_never_as_a_mapping(tmp_path, monkeypatch, run):
    """Config is still readable as a mapping (FAQSearch.config was a dict for library users), but
    faqsearch itself reads the typed attributes: with the mapping turned off, the commands that read
    and write every section (ingest, ask, info, edits, refit, tune, versions, restore) work."""
    def refused(self, *args, **kwargs):
        raise AssertionError("faqsearch read its Config as a mapping")

    for name in ("__getitem__", "__contains__", "__iter__", "__len__", "keys", "items", "get"):
        monkeypatch.setattr(fmt.Config, name, refused)
    corpus = tmp_path / "faq.csv"
    corpus.write_text("id,question,answer,category\n" + "".join(
        f"{i},how do I change thing {i},answer {i},c{i % 2}\n{i},thing {i} change please,answer {i},c{i % 2}\n"
        for i in range(12)), encoding="utf-8")
    ix = str(tmp_path / "ix")
    more = tmp_path / "more.csv"
    more.write_text("id,question,answer\n99,where is the new thing,here\n", encoding="utf-8")
    queries = tmp_path / "q.csv"
    queries.write_text("query,faq_id\n" + "".join(f"change thing {i},{i}\n" for i in range(12)), encoding="utf-8")
    for args in (("ingest", corpus, "--index", ix), ("ask", "how do I change thing 3", "--index", ix, "--json"),
                 ("ask", "thing 4", "--index", ix, "--category", "c0"), ("info", "--index", ix, "--json"),
                 ("info", "--index", ix), ("add", more, "--index", ix), ("remove", "99", "--index", ix),
                 ("feedback", "change my thing 5", "5", "--index", ix), ("refit", "--index", ix),
                 ("tune", "threshold", "--self", "--apply", "--index", ix), ("tune", "transform", queries, "--apply", "--index", ix),
                 ("tune", "confidence", "0.6", "--index", ix),
                 ("list", "--index", ix), ("versions", "--index", ix), ("restore", "v00000001", "--index", ix)):
        result = run(*args)
        assert result.exit_code == 0, (args, result.output)


def test_config_reads_as_a_read_only_mapping_for_library_users(tmp_path, small_corpus, fake_encoder):
    """engine.config was a dict: code that read it so keeps working; JSON goes through to_dict()."""
    import collections.abc
    import json

    from faqsearch import FAQSearch

    with FAQSearch.build(small_corpus, str(tmp_path / "ix"), encoder=fake_encoder) as engine:
        config = engine.config
        assert isinstance(config, collections.abc.Mapping) and config["counts"]["faqs"] == 4
        assert dict(config) == config.to_dict() == config.copy() and list(config.values()) == list(config.to_dict().values())
        assert json.loads(json.dumps(config.copy()))["dim_in"] == config.dim_in
        with pytest.raises(TypeError):
            config["mode"] = "dense"  # read-only: a change goes through the engine's methods
