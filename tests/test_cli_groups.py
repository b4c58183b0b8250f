"""`tune` and `train` as sub-command groups whose options each have one meaning; their former flag
forms still run, as the sub-command, with a one-line deprecation note on stderr."""
from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from faqsearch.cli import cli
from faqsearch.cli.commands import train as train_cmd
from faqsearch.cli.commands import tune as tune_cmd
from faqsearch.errors import InvalidOptionError


@pytest.mark.parametrize("old,new", [
    (["q.csv", "--index", "ix"], ["transform", "q.csv", "--index", "ix"]),
    (["--self", "--apply", "--index", "ix"], ["transform", "--self", "--apply", "--index", "ix"]),
    (["--pairs", "p.tsv", "--json"], ["transform", "--pairs", "p.tsv", "--json"]),
    (["q.csv", "--fusion", "--apply"], ["fusion", "q.csv", "--apply"]),
    (["--self", "--fusion"], ["fusion", "--self"]),
    (["q.csv", "--threshold", "--offtopic", "o.txt", "--apply"], ["threshold", "q.csv", "--offtopic", "o.txt", "--apply"]),
    (["--self", "--threshold"], ["threshold", "--self"]),
    (["--min-confidence", "0.8", "--index", "ix"], ["confidence", "0.8", "--index", "ix"]),
    (["--index", "ix", "--min-confidence=auto"], ["confidence", "auto", "--index", "ix"]),
])
def test_former_tune_forms_map_to_a_sub_command(old, new):
    assert tune_cmd._former(old) == new


@pytest.mark.parametrize("old,new", [
    (["--corpus", "c.csv", "--out", "m"], ["simbert", "--corpus", "c.csv", "--out", "m"]),
    (["--encoder", "--corpus", "c.csv", "--out", "m"], ["encoder", "--corpus", "c.csv", "--out", "m"]),
])
def test_former_train_forms_map_to_a_sub_command(old, new):
    assert train_cmd._former(old) == new


def test_the_groups_list_their_sub_commands():
    assert sorted(cli.commands["tune"].commands) == ["confidence", "fusion", "threshold", "transform"]
    assert sorted(cli.commands["train"].commands) == ["encoder", "simbert"]
    help_text = CliRunner().invoke(cli, ["tune", "--help"]).output
    assert "transform" in help_text and "Deprecated" not in help_text and "deprecated" not in help_text


@pytest.fixture
def ix(tmp_path, small_corpus, fake_models):
    from faqsearch.engine import FAQSearch

    FAQSearch.build(small_corpus, str(tmp_path / "ix")).close()
    return str(tmp_path / "ix")


def test_an_old_form_runs_as_the_new_one_with_a_note_on_stderr(ix):
    runner = CliRunner()
    new = runner.invoke(cli, ["tune", "confidence", "0.9", "--index", ix, "--json"])
    assert new.exit_code == 0, new.output
    assert new.stderr == ""
    old = runner.invoke(cli, ["tune", "--min-confidence", "0.9", "--index", ix, "--json"], prog_name="faqsearch")
    assert old.exit_code == 0, old.output
    assert json.loads(old.stdout) == json.loads(new.stdout) and json.loads(new.stdout)["min_confidence"] == 0.9
    note = old.stderr.strip().splitlines()
    assert len(note) == 1 and "deprecated" in note[0] and "faqsearch tune confidence" in note[0]
    assert runner.invoke(cli, ["tune", "confidence", "auto", "--index", ix]).exit_code == 0


def test_each_sub_command_takes_only_its_own_options(ix, tmp_path):
    runner = CliRunner()
    q = tmp_path / "q.csv"
    q.write_text("query,faq_id\nreset my password,1\nreturn an item,3\n", encoding="utf-8")
    cases = [(["tune", "fusion", "--pairs", str(q), "--index", ix], "--pairs"),  # pairs tune the transform only
             (["tune", "threshold", str(q), "--folds", "3", "--index", ix], "--folds"),
             (["tune", "confidence", "0.5", "--self", "--index", ix], "--self"),
             (["tune", "transform", "--index", ix], "exactly one"),
             (["tune", "fusion", str(q), "--self", "--index", ix], "exactly one"),
             (["tune", "threshold", str(q), "--index", ix], "--offtopic"),
             (["train", "encoder", "--pairs", str(q), "--out", str(tmp_path / "m")], "--pairs"),
             (["train", "encoder", "--out", str(tmp_path / "m")], "--corpus"),
             (["train", "simbert", "--out", str(tmp_path / "m")], "source of pairs"),
             (["train", "simbert", "--pairs", str(q), "--teacher", "smollm2", "--out", str(tmp_path / "m")], "--teacher")]
    for args, says in cases:
        r = runner.invoke(cli, args)
        assert r.exit_code == 2 and says in r.output, (args, r.output)


def test_train_commands_are_one_library_call(monkeypatch, tmp_path):
    import faqsearch.encoders.device as device
    import faqsearch.tuning.training as training

    calls = []
    monkeypatch.setattr(device, "configure_torch", lambda threads: None)
    monkeypatch.setattr(training, "train_simbert",
                        lambda out, **kw: calls.append(("simbert", out, kw)) or training.SimBertTrained(out, 7, []))
    monkeypatch.setattr(training, "train_encoder",
                        lambda out, **kw: calls.append(("encoder", out, kw)) or training.EncoderTrained(out, 5, [0.5]))
    runner = CliRunner()
    out = str(tmp_path / "m")
    r = runner.invoke(cli, ["train", "simbert", "--pairs", "p.csv", "--mine", "q.txt", "--out", out, "--json", "-q"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout) == {"out": out, "pairs": 7, "epochs": []}
    assert calls[-1][2] == {"from_index": None, "corpus": None, "pairs_file": "p.csv", "mine": "q.txt",
                            "mine_threshold": 0.8, "teacher": None, "teacher_n": 3, "base": "minilm", "epochs": 3,
                            "batch_size": 16, "lr": 5e-5, "seed": 0, "resume": False, "threads": None,
                            "progress": False}
    r = runner.invoke(cli, ["train", "--encoder", "--corpus", "c.csv", "--out", out, "--epochs", "2", "--json", "-q"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout) == {"out": out, "pairs": 5, "loss": [0.5]} and "deprecated" in r.stderr
    assert calls[-1][0] == "encoder" and calls[-1][2]["corpus"] == "c.csv" and calls[-1][2]["epochs"] == 2


def test_the_library_checks_the_sources_of_pairs(tmp_path):
    from faqsearch.tuning.training import base_model, train_encoder, train_simbert

    with pytest.raises(InvalidOptionError, match="question groups"):
        train_encoder(str(tmp_path / "m"))
    with pytest.raises(InvalidOptionError, match="source of pairs"):
        train_simbert(str(tmp_path / "m"))
    with pytest.raises(InvalidOptionError, match="teacher"):
        train_simbert(str(tmp_path / "m"), pairs_file="p.csv", teacher="smollm2")
    assert base_model("org/bert") == "org/bert" and base_model("minilm") != "minilm"


def test_an_old_form_drops_the_options_its_sub_command_does_not_take(ix, tmp_path):
    """The old commands accepted options and ignored them (`tune --threshold --folds 3`, `tune
    --min-confidence P --threads 2`, `--fusion` beside `--threshold`): the old form still runs, the
    sub-command's own options kept and the others named in a note; a value they took goes with them."""
    runner = CliRunner()
    cases = [(["tune", "--threshold", "--self", "--folds", "3", "--index", ix, "--json"], "threshold", ["--folds"]),
             (["tune", "--min-confidence", "0.7", "--threads", "2", "--device", "cpu", "--index", ix, "--json"],
              "confidence", ["--threads", "--device"]),
             (["tune", "--fusion", "--threshold", "--self", "--index", ix, "--json"], "threshold", ["--fusion"]),
             (["tune", "--fusion", "--self", "--offtopic", str(tmp_path / "none.txt"), "--index", ix, "--json"],
              "fusion", ["--offtopic"])]
    for args, sub, dropped in cases:
        r = runner.invoke(cli, args, prog_name="faqsearch")  # fusion --self: too few FAQs here, a library error
        assert r.exit_code == (1 if sub == "fusion" else 0) and "No such option" not in r.output, (args, r.output)
        notes = r.stderr.strip().splitlines()
        assert f"faqsearch tune {sub}" in notes[0] and all(d in notes[1] for d in dropped), (args, notes)
    assert tune_cmd.tune._known(["threshold", "--self", "--threshold-x=1", "--index", "-1"]) == \
        (["threshold", "--self", "--index", "-1"], ["--threshold-x"])  # a value that looks like an option stays


def test_options_before_a_sub_command_name_are_an_error_not_an_old_form(ix):
    r = CliRunner().invoke(cli, ["tune", "--index", ix, "threshold", "--self"], prog_name="faqsearch")
    assert r.exit_code == 2 and "put the options after the sub-command: faqsearch tune threshold" in r.output
    assert "deprecated" not in r.output
