"""A lead for issues #44 and #46, measured before building: a linear head over an index's FAQs.

Each FAQ gets a weight vector and a bias, started at its prototype (the unit mean of its questions)
and fitted by multinomial logistic regression on the index's own questions, each labelled with its
FAQ (scale 10, an L2 pull of 1e-3 towards the prototypes, L-BFGS; no query labels). A query's score
for an FAQ is then ``q . w + b / scale`` (cosine units). Everything runs on the raw MiniLM unit
vectors, without the engine's transform, BM25, token matching or fused weights: the figures compare
the head with the nearest question and with the prototype lift term on the same vectors, not with
the engine's defaults.

``ranking``: R@1 / MRR@10 of the nearest question, of the nearest question lifted by the prototype
(the engine's term at weight 1, FAQ by FAQ), of the head alone and of the head added to the nearest question,
on sample_data en, CovidFAQ and Banking77 faqs_1, faqs_5 and faqs_all.

``engine``: the same head fitted on the vectors an index built by default `ingest` scores in (the
whitening's full space, unit rows), its score for each of the 20 fused candidates the index ranks
(`Searcher.candidates`, prototype scores set as `ask` sets them), two ways of adding it to the
ranking: ``fused + a * head`` and, as the prototype term works, the fused score with the head taking
the prototype's place, ``fused - p * max(0, prototype - cosine) + a * max(0, head - cosine)`` (p the
index's own prototype weight).

``choice``: can an index choose the head's weight from its own questions? On the raw vectors, the
head in the prototype's place (each FAQ's ``cosine + a * max(0, head - cosine)``, as the engine's
prototype term; then with the head's score capped at 1): MRR@10 of held-out questions (five rounds,
the r-th question of each FAQ with three or more held out, the head fitted on the rest) against the
test queries' R@1 / MRR@10, for each weight.

``decision``: the confidence learned without labels, as faqsearch/tuning/confidence.py learns it (a
non-negative logistic model, `fit_logistic`, weighted 0.8 / 0.1 / 0.1 over held-out variants,
leave-FAQ-out questions and the shipped general questions; the operating point maximising the
simulated balanced score for a share of in-domain unknowns), in two arms: "prototypes" ranks by the
lifted nearest question with the four scores the engine has on these vectors (cosine, margin,
prototype cosine and margin); "head" ranks by the head and adds its score, margin and probability.
Held-out variants come in five disjoint rounds (the r-th question of every FAQ held out, the head
fitted on the rest), and each round's variants are asked again of the index without a fifth of its
FAQs (five folds, the head fitted again without them): the first answer is wrong by construction.
Measured: Banking77 faqs_5 without 10 intents (decision.py's draws, seeds 0-2; #44's line: at most
35% of the left-out intents' queries answered, at least 68% of the kept ones answered right), and
faqs_5 and faqs_all against their 1,000 out-of-scope questions (benchmarks/calibration.py's; #44's
line: the balanced score within 1 point of the best single threshold on the test queries).

``damped``: the head in the prototype's place at weight 1, its lift over each FAQ's best question
whole or damped by how the query's head score compares with the FAQ's own questions' average (the lift
times ``clip(head / that average, 0, 1)``: a linear head extrapolates, so a question far from every
FAQ can still get one FAQ lifted well above the rest). On sample_data en, faqs_5 and faqs_all: R@1 /
MRR@10, and the best balanced score of a single threshold on the first answer's score and on its
margin to the second FAQ, against the set's out-of-scope questions (sample_data's 30 off-topic, the
Banking77 sets' 1,000); on faqs_5 without 10 intents (decision.py's draws): the kept intents'
queries answered right where a threshold on each answers 35% of the left-out intents' queries.

    python benchmarks/experiments/faq_head.py [ranking] [engine] [choice] [decision] [damped]
"""
from __future__ import annotations

import os
import random
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from calibration import out_of_scope  # noqa: E402
from common import DATA, SAMPLE, CachingEncoder, machine  # noqa: E402
from confidence_limits import best_balanced  # noqa: E402 (the best single threshold's balanced score)

from faqsearch.confidence import fit_logistic, sigmoid  # noqa: E402
from faqsearch.corpus import read_corpus, read_texts  # noqa: E402
from faqsearch.encoders import load_encoder  # noqa: E402
from faqsearch.evaluation import read_labelled_queries, reciprocal_rank  # noqa: E402
from faqsearch.prototypes import unit  # noqa: E402

SCALE, PULL = 10.0, 1e-3
SHARES = (0.25, 0.4, 0.5)
BANK = os.path.join(DATA, "Banking77")
SETS = {"sample_data en": (os.path.join(SAMPLE, "faq.csv"), os.path.join(SAMPLE, "queries.csv")),
        "CovidFAQ": (os.path.join(DATA, "CovidFAQ", "faqs.csv"), os.path.join(DATA, "CovidFAQ", "queries.csv")),
        "Banking77 faqs_1": (os.path.join(BANK, "faqs_1.csv"), os.path.join(BANK, "queries.csv")),
        "Banking77 faqs_5": (os.path.join(BANK, "faqs_5.csv"), os.path.join(BANK, "queries.csv")),
        "Banking77 faqs_all": (os.path.join(BANK, "faqs_all.csv"), os.path.join(BANK, "queries.csv"))}


class Index:
    """An index's questions: unit vectors, each one's FAQ (0..n-1) and its place within its FAQ."""

    def __init__(self, encoder, corpus: str):
        faqs = read_corpus(corpus)
        self.ids = [f.id for f in faqs]
        self.faq = np.array([i for i, f in enumerate(faqs) for _ in f.questions])
        self.place = np.array([k for f in faqs for k in range(len(f.questions))])
        self.vectors = unit(encoder.encode([q for f in faqs for q in f.questions]))
        self.n = len(faqs)


def head(ix: Index, rows: np.ndarray, fit: bool = True):
    """Prototypes, head weights and biases (cosine units) fitted on the questions ``rows``; FAQs
    without a question there get none (-inf bias), and so does every FAQ where ``fit`` is false (an
    arm that ranks without the head: no fit to pay for)."""
    present = np.unique(ix.faq[rows])
    protos = np.zeros((ix.n, ix.vectors.shape[1]))
    np.add.at(protos, ix.faq[rows], ix.vectors[rows])
    protos[present] = unit(protos[present])
    weights, bias = np.zeros_like(protos), np.full(ix.n, -np.inf)
    if fit:
        weights[present], bias[present] = fit_head(protos[present], ix.vectors[rows],
                                                   np.searchsorted(present, ix.faq[rows]))
    return protos, weights, bias, present


def fit_head(protos: np.ndarray, vectors: np.ndarray, labels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Weights started at ``protos`` (one row per FAQ) and biases (cosine units) of the head fitted on
    ``vectors`` labelled with their FAQ's row."""
    import torch
    import torch.nn.functional as F

    start = torch.tensor(protos, dtype=torch.float32)
    w, b = torch.nn.Parameter(start.clone()), torch.nn.Parameter(torch.zeros(len(protos)))
    x, y = torch.tensor(vectors, dtype=torch.float32), torch.tensor(labels)
    opt = torch.optim.LBFGS([w, b], max_iter=300, line_search_fn="strong_wolfe")

    def loss():
        opt.zero_grad()
        out = F.cross_entropy(SCALE * x @ w.T + b, y) + PULL * ((w - start) ** 2).sum()
        out.backward()
        return out
    opt.step(loss)
    return w.detach().numpy(), b.detach().numpy() / SCALE


def scores(ix: Index, queries: np.ndarray, rows: np.ndarray, fitted=None, fit: bool = True):
    """Each query's best-question cosine, prototype cosine and head score for every FAQ (-inf where
    the FAQ has no question among ``rows``, and every head score without ``fit``); ``fitted``:
    :func:`head`'s result for these rows, made once by the caller."""
    protos, weights, bias, present = fitted or head(ix, rows, fit)
    sims = queries @ ix.vectors[rows].T
    best = np.full((len(queries), ix.n), -np.inf)
    for j in present:
        best[:, j] = sims[:, ix.faq[rows] == j].max(1)
    proto = np.full_like(best, -np.inf)
    proto[:, present] = queries @ protos[present].T
    score = np.full_like(best, -np.inf)
    score[:, present] = queries @ weights[present].T + bias[present]
    return best, proto, score


def lifted(best: np.ndarray, proto: np.ndarray, weight: float = 1.0) -> np.ndarray:
    """Each FAQ's best cosine lifted as the engine's prototype term lifts it (search.fusion_score):
    ``best + weight * max(0, prototype - best)``, FAQ by FAQ (-inf where the FAQ has no question)."""
    present = np.isfinite(best)
    out = np.full_like(best, -np.inf)
    out[present] = best[present] + weight * np.maximum(0, proto[present] - best[present])
    return out


def features(best, proto, score, arm: str):
    """The first answer of each list and its features in ``arm`` ('prototypes' or 'head')."""
    rank = score if arm == "head" else lifted(best, proto)
    n, top = np.arange(len(best)), rank.argmax(1)

    def margin(m):
        other = m.copy()
        other[n, top] = -np.inf
        nxt = other.max(1)
        return m[n, top] - np.where(np.isfinite(nxt), nxt, m[n, top])
    cols = [best[n, top], margin(rank), proto[n, top], margin(proto)]
    if arm == "head":
        z = np.exp(SCALE * (score - score.max(1, keepdims=True)))
        cols += [score[n, top], margin(score), (z / z.sum(1, keepdims=True))[n, top]]
    return np.column_stack(cols), top


def learn_confidence(ix: Index, rows: np.ndarray, general: np.ndarray, arm: str):
    """The simulation of the module docstring on the index's questions ``rows``: the fitted model
    (coefficients, intercept), each kind's confidences with the variants' rightness, and
    :func:`head` on all of ``rows`` (for the queries the caller asks)."""
    fit = arm == "head"
    rng = np.random.default_rng(0)
    faqs = np.unique(ix.faq[rows])
    fold = dict(zip(rng.permutation(faqs), np.arange(len(faqs)) % 5))
    pos, right, unknown = [], [], []
    for r in range(5):
        held, rest = rows[ix.place[rows] == r], rows[ix.place[rows] != r]
        held = held[np.isin(ix.faq[held], ix.faq[rest])]  # an FAQ keeps a question to be found by
        if not len(held):
            break
        x, top = features(*scores(ix, ix.vectors[held], rest, fit=fit), arm)
        pos.append(x)
        right.append(top == ix.faq[held])
        for k in range(5):
            out = np.array([fold[f] == k for f in ix.faq[held]])
            keep = rest[np.array([fold[f] != k for f in ix.faq[rest]])]
            if out.any():
                unknown.append(features(*scores(ix, ix.vectors[held[out]], keep, fit=fit), arm)[0])
    whole = head(ix, rows, fit)
    gen = features(*scores(ix, general, rows, whole), arm)[0]
    pos, right, unknown = np.concatenate(pos), np.concatenate(right).astype(float), np.concatenate(unknown)
    parts = [(pos, right, 0.8), (unknown, np.zeros(len(unknown)), 0.1), (gen, np.zeros(len(gen)), 0.1)]
    x, y = np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])
    w = np.concatenate([np.full(len(p[0]), p[2] / len(p[0])) for p in parts]) * len(x)
    coef, intercept = fit_logistic(x, y, w)
    conf = lambda f: sigmoid(f @ coef + intercept)  # noqa: E731
    return (coef, intercept), (conf(pos), right, conf(unknown), conf(gen)), whole


def operating_point(sim, share: float) -> float:
    """The committed rule: the middle of the best run of the simulated balanced score."""
    pos, right, unknown, gen = sim
    grid = np.round(np.arange(0.02, 0.981, 0.01), 2)
    bal = np.array([(np.mean((pos >= t) * right) + (1 - share) * np.mean(gen < t) + share * np.mean(unknown < t)) / 2
                    for t in grid])
    return float(np.median(grid[np.flatnonzero(bal >= bal.max() - 1e-12)]))


def top10(m: np.ndarray) -> np.ndarray:
    """Each row's ten best columns, best first (ties in column order)."""
    return np.argsort(-m, 1, kind="stable")[:, :10]


def r1_mrr(orders, gold) -> tuple[float, float]:
    """R@1 and MRR@10 (x100) of ranked lists of FAQs against each query's gold set."""
    return (100 * float(np.mean([len(o) > 0 and o[0] in g for o, g in zip(orders, gold)])),
            100 * float(np.mean([reciprocal_rank(list(o), g) for o, g in zip(orders, gold)])))


def ranking(encoder) -> None:
    print("Ranking on raw MiniLM unit vectors (R@1 / MRR@10; no transform, BM25 or token matching)\n")
    print("| set | questions / FAQs / queries | nearest question | + prototype lift | head | head + nearest question | head fit s |")
    print("|---|---|---|---|---|---|---|")
    import time
    for name, (corpus, qfile) in SETS.items():
        ix = Index(encoder, corpus)
        qs = read_labelled_queries(qfile)
        gold = [{ix.ids.index(g) for g in q.gold if g in ix.ids} for q in qs]
        queries = unit(encoder.encode([q.text for q in qs]))
        rows = np.arange(len(ix.faq))
        t = time.perf_counter()
        fitted = head(ix, rows)
        fit_s = time.perf_counter() - t
        best, proto, score = scores(ix, queries, rows, fitted)

        def measure(m):
            return "%.2f / %.2f" % r1_mrr(top10(m), gold)
        print(f"| {name} | {len(rows)} / {ix.n} / {len(qs)} | {measure(best)} | {measure(lifted(best, proto))} | "
              f"{measure(score)} | {measure(best + score)} | {fit_s:.1f} |")


def engine(encoder) -> None:
    import tempfile

    from faqsearch import FAQSearch
    from faqsearch.defaults import FUSION_POOL
    from faqsearch.tuning.confidence import rank

    adds, lifts, capped = (0.5, 1.0, 2.0), (0.5, 1.0, 2.0), (0.5, 1.0)
    print("\nThe head in an index built by default `ingest` (R@1 / MRR@10 over its 20 fused candidates)\n")
    header = (" | ".join(f"+ {a} x head" for a in adds) + " | " + " | ".join(f"head as the prototype, weight {a}" for a in lifts)
              + " | " + " | ".join(f"the same capped at 1, weight {a}" for a in capped))
    print("| set | mode (BM25, token, prototype weights) | default | " + header + " |")
    print("|---|---|---|" + "---|" * (len(adds) + len(lifts) + len(capped)))
    own: list[str] = []
    for name in ("sample_data en", "CovidFAQ", "Banking77 faqs_1", "Banking77 faqs_5", "Banking77 faqs_all"):
        corpus, qfile = SETS[name]
        e = FAQSearch.build(corpus, os.path.join(tempfile.mkdtemp(), "ix"), encoder=encoder, force=True)
        snap = e.snapshot
        ids, keys, raw = snap.prototype_rows()
        vec = unit(snap.whitening.full(np.asarray(raw)))
        groups, labels = np.unique(keys, return_inverse=True)
        protos = np.zeros((len(groups), vec.shape[1]))
        np.add.at(protos, labels, vec)
        w, b = fit_head(unit(protos), vec, labels)
        group_of = dict(zip(np.asarray(ids).tolist(), labels.tolist()))
        searcher = e.searcher()

        def collect(texts: list[str]) -> list[list[tuple]]:
            """Each text's fused candidates: (FAQ id, fused score, head score, cosine, fused score without
            the prototype term)."""
            out = []
            for start in range(0, len(texts), 64):
                block = texts[start:start + 64]
                v = searcher.vectors(block, tokens=snap.mode == "hybrid" and snap.token_weight > 0)
                pools = (searcher.candidates(block, v, FUSION_POOL) if snap.mode == "hybrid" else
                         searcher.dense(v, FUSION_POOL, widen=False))
                searcher.add_prototype_scores(v.full, pools)
                for j, pool in enumerate(pools):
                    q = unit(np.asarray(v.full[j], np.float64))
                    rows = []
                    for a in rank(snap, pool, k=len(pool)):
                        g = group_of[a.question_id]
                        fused = float(a.fused) if a.fused is not None else float(a.dense)
                        lift = snap.prototype_weight * max(0.0, a.prototype - a.dense) if a.prototype is not None else 0.0
                        rows.append((a.faq_id, fused, float(q @ w[g] + b[g]), float(a.dense), fused - lift))
                    out.append(rows)
            return out
        qs = read_labelled_queries(qfile)
        lists = collect([q.text for q in qs])
        some = np.sort(np.random.default_rng(0).permutation(np.asarray(ids))[:2000])  # a sample across FAQs
        stored = snap.store.question_rows(some)  # (id, faq_id, text): asked as they are
        verbatim = collect([r[2] for r in stored])
        e.close()

        def measure(key, lists=lists, gold=[q.gold for q in qs]) -> str:
            return "%.2f / %.2f" % r1_mrr([[t[0] for t in sorted(lst, key=lambda t: -key(t))] for lst in lists], gold)
        keys = [lambda t: t[1]] + [lambda t, a=a: t[1] + a * t[2] for a in adds]
        keys += [lambda t, a=a: t[4] + a * max(0.0, t[2] - t[3]) for a in lifts]
        keys += [lambda t, a=a: t[4] + a * max(0.0, min(t[2], 1.0) - t[3]) for a in capped]
        print(f"| {name} | {snap.mode} ({snap.hybrid_weight:g}, {snap.token_weight:g}, {snap.prototype_weight:g}) | "
              + " | ".join(measure(k) for k in keys) + " |")
        own.append(f"| {name} ({len(stored)} asked) | " + " | ".join(
            measure(k, verbatim, [{r[1]} for r in stored]).split(" / ")[0] for k in keys) + " |")
    print(f"\nThe index's own questions asked as they are (up to 2,000 drawn at random): R@1 (own FAQ first), the same columns\n")
    print("| set | default | " + header + " |")
    print("|---|---|" + "---|" * (len(adds) + len(lifts) + len(capped)))
    print("\n".join(own))


def choice(encoder) -> None:
    weights = (0.0, 0.25, 0.5, 0.75, 1.0, 1.5, 2.0)

    tables = {False: [], True: []}
    for name, (corpus, qfile) in SETS.items():
        ix = Index(encoder, corpus)
        sizes = np.bincount(ix.faq, minlength=ix.n)
        rounds = []
        for r in range(5):
            held = np.flatnonzero((ix.place == r) & (sizes[ix.faq] >= 3))
            if len(np.unique(ix.faq[held])) < 10:
                break
            rest = np.setdiff1d(np.arange(len(ix.faq)), held)
            best, _, score = scores(ix, ix.vectors[held], rest)
            rounds.append((best, score, [{g} for g in ix.faq[held]]))
        asked = sum(len(g) for _, _, g in rounds)
        qs = read_labelled_queries(qfile)
        gold = [{ix.ids.index(g) for g in q.gold if g in ix.ids} for q in qs]
        best, _, score = scores(ix, unit(encoder.encode([q.text for q in qs])), np.arange(len(ix.faq)))
        for capped in (False, True):
            cells = []
            for a in weights:
                def lift(b, sc):
                    return lifted(b, np.minimum(sc, 1.0) if capped else sc, a)
                held = (f"{sum(r1_mrr(top10(lift(b, sc)), g)[1] * len(g) for b, sc, g in rounds) / asked:.2f}"
                        if asked else "-")
                cells.append(f"{held} \\| " + "%.2f / %.2f" % r1_mrr(top10(lift(best, score)), gold))
            tables[capped].append(f"| {name} | {asked} | " + " | ".join(cells) + " |")
    for capped in (False, True):
        print(f"\nThe head in the prototype's place{', its score capped at 1' if capped else ''}, raw vectors: "
              "held-out MRR@10 of the index's own questions (five rounds) | test R@1 / MRR@10\n")
        print("| set | held-out questions | " + " | ".join(f"weight {a:g}" for a in weights) + " |")
        print("|---|---|" + "---|" * len(weights))
        print("\n".join(tables[capped]))


def decision(encoder) -> None:
    general = unit(encoder.encode([ln.strip() for ln in open(os.path.join(os.path.dirname(os.path.dirname(
        os.path.dirname(os.path.abspath(__file__)))), "faqsearch", "data", "offtopic.txt"), encoding="utf-8") if ln.strip()]))
    qs = read_labelled_queries(os.path.join(BANK, "queries.csv"))
    queries = unit(encoder.encode([q.text for q in qs]))
    oos = unit(encoder.encode(out_of_scope()[0]))
    print("\nThe confidence learned without labels (operating point per share of in-domain unknowns)\n")
    print("| arm | in-domain share | faqs_5 without 10 intents, seeds 0 / 1 / 2: kept right / left-out answered (mean) "
          "| kept right at 35% left-out answered (chosen on the test) | faqs_5: balanced (best) | faqs_all: balanced (best) |")
    print("|---|---|---|---|---|---|")
    for arm in ("prototypes", "head"):
        left: dict[float, list] = {s: [] for s in SHARES}
        oracle = []
        five = Index(encoder, SETS["Banking77 faqs_5"][0])
        gold = np.array([five.ids.index(next(iter(q.gold))) for q in qs])
        for seed in (0, 1, 2):
            drop = set(random.Random(seed).sample(sorted(five.ids), 10))  # decision.py's subset()
            kept_faq = np.array([i not in drop for i in five.ids])
            rows = np.flatnonzero(kept_faq[five.faq])
            model, sim, fitted = learn_confidence(five, rows, general, arm)
            x, top = features(*scores(five, queries, rows, fitted), arm)
            conf = sigmoid(x @ model[0] + model[1])
            kept = kept_faq[gold]
            right = kept & (top == gold)
            at = np.quantile(conf[~kept], 0.65)
            oracle.append(100 * np.mean((right & (conf > at))[kept]))
            for s in SHARES:
                op = operating_point(sim, s)
                left[s].append((100 * np.mean((right & (conf >= op))[kept]), 100 * np.mean(conf[~kept] >= op)))
        whole = {}
        for name in ("Banking77 faqs_5", "Banking77 faqs_all"):
            ix = five if name.endswith("faqs_5") else Index(encoder, SETS[name][0])
            rows = np.arange(len(ix.faq))
            model, sim, fitted = learn_confidence(ix, rows, general, arm)
            x, top = features(*scores(ix, queries, rows, fitted), arm)
            xo, _ = features(*scores(ix, oos, rows, fitted), arm)
            conf, confo = sigmoid(x @ model[0] + model[1]), sigmoid(xo @ model[0] + model[1])
            right = top == np.array([ix.ids.index(next(iter(q.gold))) for q in qs])

            def balanced(t):
                return 100 * (np.mean(right & (conf >= t)) + np.mean(confo < t)) / 2
            best = best_balanced(conf, right, confo)
            whole[name] = {s: f"{balanced(operating_point(sim, s)):.2f} ({best:.2f})" for s in SHARES}
        for s in SHARES:
            cells = " / ".join(f"{r:.1f}% / {a:.1f}%" for r, a in left[s])
            mean = np.mean(left[s], 0)
            print(f"| {arm} | {s} | {cells} ({mean[0]:.1f}% / {mean[1]:.1f}%) | "
                  f"{' / '.join(f'{o:.1f}' for o in oracle)} (mean {np.mean(oracle):.1f}) | "
                  f"{whole['Banking77 faqs_5'][s]} | {whole['Banking77 faqs_all'][s]} |")


def damped(encoder) -> None:
    def own_level(ix: Index, rows: np.ndarray, fitted) -> np.ndarray:
        """Each FAQ's head score averaged over its own questions among ``rows``."""
        _, weights, bias, _ = fitted
        own = (ix.vectors[rows] * weights[ix.faq[rows]]).sum(1) + bias[ix.faq[rows]]
        return np.bincount(ix.faq[rows], own, ix.n) / np.maximum(np.bincount(ix.faq[rows], minlength=ix.n), 1)

    def arms(best, score, level):
        with np.errstate(invalid="ignore"):  # FAQs left out: -inf scores, and their lists drop them
            share = np.clip(score / np.where(level > 0, level, np.inf), 0.0, 1.0)
            return {"head": lifted(best, score),
                    "damped": best + np.maximum(0, score - best) * np.where(level > 0, share, 1.0)}

    def first_and_margin(m):
        s = np.sort(m, 1)
        return m.argmax(1), s[:, -1], s[:, -1] - s[:, -2]

    qs = read_labelled_queries(os.path.join(BANK, "queries.csv"))
    bank_q, bank_oos = unit(encoder.encode([q.text for q in qs])), unit(encoder.encode(out_of_scope()[0]))
    sample_q = read_labelled_queries(SETS["sample_data en"][1])
    sample_oos = [t for t in read_texts(os.path.join(SAMPLE, "offtopic.txt")) if t]
    print("\nThe head's lift whole or damped (raw vectors, weight 1): R@1 / MRR@10 | best balanced of a threshold on "
          "the first answer's score / on its margin, against the set's out-of-scope questions\n")
    print("| set | head | damped |")
    print("|---|---|---|")
    for name in ("sample_data en", "Banking77 faqs_5", "Banking77 faqs_all"):
        ix = Index(encoder, SETS[name][0])
        rows = np.arange(len(ix.faq))
        fitted = head(ix, rows)
        level = own_level(ix, rows, fitted)
        if name == "sample_data en":
            queries, gold = unit(encoder.encode([q.text for q in sample_q])), [q.gold for q in sample_q]
            oos = unit(encoder.encode(sample_oos))
        else:
            queries, gold, oos = bank_q, [q.gold for q in qs], bank_oos
        gold = [{ix.ids.index(g) for g in gs if g in ix.ids} for gs in gold]
        best, _, score = scores(ix, queries, rows, fitted)
        obest, _, oscore = scores(ix, oos, rows, fitted)
        cells = []
        for (arm, m), (_, o) in zip(arms(best, score, level).items(), arms(obest, oscore, level).items()):
            top, first, margin = first_and_margin(m)
            _, ofirst, omargin = first_and_margin(o)
            right = np.array([t in g for t, g in zip(top, gold)])
            cells.append("%.2f / %.2f" % r1_mrr(top10(m), gold)
                         + f" \\| {best_balanced(first, right, ofirst):.2f} / {best_balanced(margin, right, omargin):.2f}")
        print(f"| {name} | " + " | ".join(cells) + " |")
    five = Index(encoder, SETS["Banking77 faqs_5"][0])
    gold = np.array([five.ids.index(next(iter(q.gold))) for q in qs])
    got: dict[str, list] = {"head": [], "damped": []}
    for seed in (0, 1, 2):
        drop = set(random.Random(seed).sample(sorted(five.ids), 10))  # decision.py's subset()
        kept_faq = np.array([i not in drop for i in five.ids])
        rows = np.flatnonzero(kept_faq[five.faq])
        fitted = head(five, rows)
        best, _, score = scores(five, bank_q, rows, fitted)
        kept = kept_faq[gold]
        for arm, m in arms(best, score, own_level(five, rows, fitted)).items():
            top, first, margin = first_and_margin(np.where(np.isfinite(m), m, -np.inf))
            right = kept & (top == gold)
            got[arm].append([100 * np.mean(right[kept]), *(100 * np.mean((right & (f >= np.quantile(f[~kept], 0.65)))[kept])
                                                          for f in (first, margin))])
    print("\nBanking77 faqs_5 without 10 intents (seeds 0 / 1 / 2, mean): the kept intents' R@1 | their queries answered "
          "right where a threshold on the first answer's score / on its margin answers 35% of the left-out intents' queries\n")
    print("| arm | kept R@1 | right at 35%: score | right at 35%: margin |")
    print("|---|---|---|---|")
    for arm, rows_ in got.items():
        v = np.array(rows_)
        print(f"| {arm} | " + " | ".join(" / ".join(f"{x:.1f}" for x in v[:, c]) + f" ({v[:, c].mean():.1f})"
                                        for c in range(3)) + " |")


def main() -> None:
    import logging

    import torch

    logging.basicConfig(level=logging.ERROR)
    torch.set_num_threads(os.cpu_count() or 1)
    names = ("ranking", "engine", "choice", "decision", "damped")
    parts = [a for a in sys.argv[1:] if a in names] or list(names)
    encoder = CachingEncoder(load_encoder("minilm"))
    print(f"Measured {machine()} with `python benchmarks/experiments/faq_head.py {' '.join(sys.argv[1:])}`\n")
    if "ranking" in parts:
        ranking(encoder)
    if "engine" in parts:
        engine(encoder)
    if "choice" in parts:
        choice(encoder)
    if "decision" in parts:
        decision(encoder)
    if "damped" in parts:
        damped(encoder)


if __name__ == "__main__":
    main()
