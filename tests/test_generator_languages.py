"""Generators and languages: the English generator refuses Chinese at once, naming what to use;
the screen reads Chinese; `--generator DIR` runs end to end with a tiny causal LM made here."""
from __future__ import annotations

import json
import time

import pytest
from click.testing import CliRunner

from faqsearch.cli import cli
from faqsearch.generators import (Candidate, UnsupportedLanguageError, check_languages, generator_languages,
                                  normal, screen, screen_rounds)
from faqsearch.generators.languages import main_script, parse_languages, writes
from faqsearch.generators.recipe import content, is_question, shape_ok

ZH = "我的银行卡丢了，怎么冻结？"


@pytest.fixture
def english_only(monkeypatch):
    """Only the English generator's weights installed (as on a machine without faqsearch[gemma])."""
    import faqsearch.generators.languages as languages

    monkeypatch.setattr(languages, "installed", lambda name: name == "smollm2")


def test_languages_declared_without_loading():
    assert generator_languages(None) == ("en",) and generator_languages("smollm2") == ("en",)
    assert generator_languages("gemma3") == ("zh",)
    assert generator_languages("some/dir") is None  # a directory or hub id: not known, anything goes
    assert generator_languages("smollm2", "en,zh-CN") == ("en", "zh")
    assert parse_languages("any") is None and parse_languages("") is None
    assert main_script([ZH]) == "Han" and main_script(["Где моя карта?"]) == "Cyrillic"
    assert writes(("en",), ["How do I reset my password?", "我"])  # mostly Latin
    assert not writes(("en",), [ZH]) and writes(("en", "zh"), [ZH]) and writes(None, [ZH])
    assert writes(("ja",), ["パスワードを忘れました"]) and not writes(("zh",), ["Где моя карта?"])
    # a hostile run: Spanish and German went to the English generator (80 s, then "no candidate passed"),
    # and Japanese written mostly in kanji to the Chinese one
    assert not writes(("en",), ["¿Cómo devuelvo un producto?"]) and not writes(("en",), ["Wo ist meine Bestellung?"])
    assert writes(("en", "es"), ["¿Cómo devuelvo un producto?"]) and writes(("en",), ["UN shipping rates to Los Angeles"])
    assert writes(("en",), ["Mac OS X El Capitan support"]) and writes(("en",), ["Hotel de la Paz parking"])
    assert main_script(["送料無料の条件は？"]) == "Hiragana" and not writes(("zh",), ["送料無料の条件は？"])
    chinese = ["我的订单在哪里", "怎么申请退款", "索尼ソニー耳机保修多久"] * 20  # one brand in katakana: still Chinese
    assert main_script(chinese) == "Han" and writes(("zh",), chinese) and writes(("zh",), ["我の订单在哪里？怎么查询物流信息"])
    with pytest.raises(UnsupportedLanguageError, match="a language other than English"):
        check_languages("¿Cómo devuelvo un producto?", ("en",))


def test_chinese_to_the_english_generator_is_refused_at_once_naming_a_generator(english_only):
    t = time.perf_counter()
    r = CliRunner().invoke(cli, ["paraphrase", ZH])  # the default for Chinese is gemma3: not installed here
    took = time.perf_counter() - t
    assert r.exit_code == 1, r.output
    assert took < 1.0, took  # nothing was loaded or sampled
    assert "pip install 'faqsearch[gemma]'" in r.output and "--generator" in r.output
    assert "chat template" in r.output and "Qwen/Qwen2.5-0.5B-Instruct" in r.output
    r = CliRunner().invoke(cli, ["paraphrase", ZH, "--generator", "smollm2"])  # named: refused, pointing at gemma3
    assert r.exit_code == 1 and "--generator gemma3" in r.output and "faqsearch[gemma]" in r.output, r.output
    # the same for the library, before sampling
    class Never:
        name, languages = "english-only", ("en",)

        def sample(self, *a, **k):
            raise AssertionError("sampled")

    with pytest.raises(UnsupportedLanguageError, match="--generator"):
        screen_rounds(Never(), ZH, 5)
    with pytest.raises(UnsupportedLanguageError):
        check_languages(ZH, ("en", "fr"))
    check_languages(ZH, ("en", "zh"))  # declared: allowed


def test_declared_languages_let_the_request_through(monkeypatch):
    import faqsearch.generators as generators

    def boom(*a, **k):
        raise RuntimeError("loading")

    monkeypatch.setattr(generators, "load_generator", boom)
    r = CliRunner().invoke(cli, ["paraphrase", ZH, "--generator-languages", "en,zh"])
    assert isinstance(r.exception, RuntimeError)  # past the check, on to loading the model


def test_chinese_questions_and_statements():
    for q in ("忘记密码怎么办", "可以退款吗", "运费是多少？", "你们周末营业吗。", "为什么我的订单还没到", "能不能分期付款"):
        assert is_question(q), q
    for s in ("我忘了密码", "我想退款。", "我的包裹还没到。", "谢谢！"):
        assert not is_question(s), s


def test_chinese_screen_rules():
    src = "我的密码怎么重置？"
    assert shape_ok(src, "怎样才能重置我的密码？")
    assert shape_ok(src, "如何重置我的密码")  # a question without ？ is still a question
    assert shape_ok(src, "你能帮我重置密码吗？")  # asking the service is the writer's voice
    assert not shape_ok(src, "我想重置密码。")  # a question came back as a statement
    assert not shape_ok(src, "您的密码怎么重置？")  # my -> your: someone else's question
    assert not shape_ok(src, "您可以在登录页面重置密码。")  # an answer
    assert not shape_ok(src, "是的，可以重置密码？")  # how replies start
    assert not shape_ok(src, "我可以帮您重置密码吗？")  # the service speaking
    assert not shape_ok(src, "密码？")  # truncated
    assert not shape_ok(src, "我的密码怎么重置，还有多少钱？")  # a question the writer did not ask
    req = "我想开一个新账户"
    assert not shape_ok(req, "新账户需要几天才能开通。")  # a statement about the world
    assert shape_ok(req, "我要开个新账户。")  # a statement about the writer stays
    assert not shape_ok(req, "我们可以帮您开一个新账户")  # the service speaking


def test_chinese_copies_up_to_punctuation_and_width():
    assert normal("怎么重置密码？") == normal("怎么重置密码?") == normal("怎么重置密码")
    assert normal("ＡＴＭ取款限额是多少？") == normal("atm取款限额是多少")  # full width is half width (NFKC)
    assert content("我的密码怎么重置？") == content("请问我的密码怎么重置呢")  # particles, "please" and "my" only
    src = "我的密码怎么重置？"
    cands = [Candidate("我的密码怎么重置?", True), Candidate("ＡＴＭ怎么用？", True), Candidate("我的密码怎么重置呢？", True),
             Candidate("怎样才能重置我的密码？", True), Candidate("怎样才能重置我的密码?", True)]
    reasons = [s.reason for s in screen(src, cands, None)]
    assert reasons[0] == "copy" and reasons[2] == "near-copy"  # only a particle differs
    assert reasons[3] == "kept" and reasons[4] == "duplicate"  # ？ and ? are the same text


# ---------------------------------------------------------------- a tiny causal LM made here

CHAT_TEMPLATE = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
                 "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")


@pytest.fixture(scope="module")
def tiny_lm(tmp_path_factory):
    """A 2-layer Llama with hidden size 16 and a byte-level BPE tokenizer with a chat template."""
    pytest.importorskip("transformers")
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    path = tmp_path_factory.mktemp("tiny-lm")
    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    corpus = ["How do I reset my password? Where is my parcel? Can I pay with a credit card?",
              "You reword what a customer wrote. Write the same message in different words.", "question\nanswer"]
    tok.train_from_iterator(corpus, trainers.BpeTrainer(vocab_size=400, special_tokens=specials,
                                                        initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>",
                                   bos_token="<|endoftext|>")
    fast.chat_template = CHAT_TEMPLATE
    fast.save_pretrained(path)
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=len(fast), hidden_size=16, intermediate_size=32, num_hidden_layers=2,
                         num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=4096,
                         eos_token_id=fast.eos_token_id, pad_token_id=fast.pad_token_id,
                         bos_token_id=fast.bos_token_id)
    LlamaForCausalLM(config).save_pretrained(path)
    return str(path)


@pytest.mark.slow
def test_paraphrase_end_to_end_with_a_tiny_local_generator(tiny_lm):
    args = ["paraphrase", "how do I reset my password?", "--generator", tiny_lm, "--candidates", "6", "--rounds", "1",
            "--json"]
    r = CliRunner().invoke(cli, args)
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert d["text"] == "how do I reset my password?" and isinstance(d["paraphrases"], list)
    for p in d["paraphrases"]:  # gibberish rarely passes; what passes has a score
        assert set(p) == {"text", "score"}
    r = CliRunner().invoke(cli, args + ["--all"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert len(d["candidates"]) == 6  # every candidate is listed with the screen's decision
    assert all(c["reason"] in {"kept", "copy", "near-copy", "unfinished", "shape", "duplicate", "dissimilar", "empty"}
               for c in d["candidates"])
    assert len(d["paraphrases"]) <= min(5, sum(c["reason"] == "kept" for c in d["candidates"]))  # only what passed
    # a directory's languages are not known: Chinese goes through to the model
    r = CliRunner().invoke(cli, ["paraphrase", ZH, "--generator", tiny_lm, "--candidates", "2", "--rounds", "1",
                                 "--json"])
    assert r.exit_code == 0, r.output
    # declared English only: refused
    r = CliRunner().invoke(cli, ["paraphrase", ZH, "--generator", tiny_lm, "--generator-languages", "en"])
    assert r.exit_code == 1 and "--generator" in r.output


@pytest.mark.slow
def test_service_refuses_chinese_to_the_english_generator_at_once(tmp_path, monkeypatch, english_only):
    pytest.importorskip("fastapi")
    from fastapi.testclient import TestClient

    from faqsearch import FAQSearch
    from faqsearch.service import Service, create_app
    from faqsearch.service.app import Generators

    def never(self, spec):
        raise AssertionError("the generator was loaded")

    monkeypatch.setattr(Generators, "get", never)
    corpus = tmp_path / "faq.csv"
    corpus.write_text("id,question,answer\npw,How do I reset my password?,Use the Forgot password link.\n")
    ix = str(tmp_path / "shop")
    FAQSearch.build(str(corpus), ix).close()
    service = Service({"shop": ix}, watch=False)
    c = TestClient(create_app(service))
    t = time.perf_counter()
    r = c.post("/indexes/shop/paraphrase", json={"text": ZH, "n": 3})
    assert time.perf_counter() - t < 1.0
    assert r.status_code == 400 and "--generator" in r.text, r.text
    service.close()


def test_ask_with_paraphrases_answers_a_chinese_query_without_loading_the_english_generator(tmp_path, run,
                                                                                          monkeypatch, english_only):
    """`ask --paraphrases` on a Chinese query: the answer stands, a note says why there are no
    paraphrases, and the English-only generator is never loaded."""
    import json

    import faqsearch.generators as generators

    def never(*a, **k):
        raise AssertionError("the generator was loaded")

    monkeypatch.setattr(generators, "load_generator", never)
    monkeypatch.setattr(generators, "generator_from_spec", never)
    corpus = tmp_path / "zh.csv"
    corpus.write_text("id,question,answer\nz1,怎么修改密码,在安全中心修改。\nz2,如何注册账户,下载应用注册。\n", encoding="utf-8")
    ix = tmp_path / "ix"
    # the encoder named: a Chinese corpus would otherwise pick the multilingual one (an extra; faked here anyway)
    assert run("ingest", corpus, "--index", ix, "-q", "--model", "minilm").exit_code == 0
    res = run("ask", "怎么修改密码", "--index", ix, "--paraphrases", "2", "--json", "--threshold", "-1")
    assert res.exit_code == 0 and "no paraphrases" in res.stderr
    got = json.loads(res.stdout)
    assert got["answers"][0]["faq_id"] == "z1" and got["paraphrases"] == []


def test_declared_languages_refuse_latin_text_too_and_blank_or_long_text_is_refused_before_loading(run):
    """--generator-languages zh let English through to the model, contrary to its help; `paraphrase ""`
    loaded the generator and sampled 72 invented candidates; a 64 KB text ran for minutes."""
    with pytest.raises(UnsupportedLanguageError, match="mostly in Latin script"):
        check_languages(["where is my parcel"], ("zh",), "some-generator")
    check_languages(["where is my parcel"], ("zh", "en"), "some-generator")
    for text, words in (("   ", "the text is blank"), ("reset my password " * 100, "at most 1000 are reworded")):
        res = run("paraphrase", text, "--generator", "./not-loaded")  # refused before the generator is looked for
        assert res.exit_code == 2 and words in res.output


def test_a_chinese_question_naming_an_english_brand_stays_chinese():
    """Words, not letters: the six letters of "PayPal" used to weigh as much as six Chinese characters,
    so "可以用PayPal付款吗" went to the English generator (and was refused by gemma3 as Latin text)."""
    from faqsearch.text import non_latin_share

    for text in ("可以用PayPal付款吗", "PayPal 怎么付款", "iPhone上App闪退", "用Apple Pay付款可以吗"):
        assert non_latin_share([text]) > 0.5 and main_script([text]) == "Han", text
        assert writes(["zh"], [text]) and not writes(["en"], [text]), text
    for text in ("How do I pay at the 北京 branch?", "can I pay with PayPal?"):
        assert non_latin_share([text]) < 0.5 and writes(["en"], [text]) and not writes(["zh"], [text]), text
    # without Chinese or Japanese every letter counts, as before: a mostly Russian corpus with English
    # questions stays one for the multilingual encoder (by words, English's shorter ones would tip it)
    mixed = ["Как сбросить пароль", "Где мой заказ", "Можно вернуть товар", "Сколько стоит доставка",
             "Как оплатить картой", "Изменить адрес", "how do I reset my password", "where is my order",
             "can I return it", "shipping cost"]
    assert non_latin_share(mixed) > 0.5 and non_latin_share(["Как оплатить через PayPal"]) > 0.5


def test_the_chinese_screen_reads_traditional_characters():
    assert is_question("忘記密碼了怎麼辦") and is_question("信用卡可以分期嗎")
    assert shape_ok("信用卡可以分期嗎？", "信用卡能分期嗎")  # a question for a question
    assert not shape_ok("信用卡可以分期嗎？", "信用卡可以分期嗎，還有多少手續費")  # a second question added
    assert content("請問一下信用卡丟了怎麼辦") == content("信用卡丟了怎麼辦")  # polite prefixes: a near-copy
