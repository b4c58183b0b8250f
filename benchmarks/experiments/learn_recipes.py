"""Issue #46's first question: what training of the bundled MiniLM on an index's own question
groups lifts Banking77 faqs_5 R@1 (3,080 test queries), within 10 minutes of this 2-core CPU?

One recipe per run (flags below), seeded; the encoder is trained on the groups of faqs_5.csv
(77 FAQs x 5 questions; the test queries are never seen), saved, and measured through
`FAQSearch.build(..., model=DIR)` + `evaluate`: dense R@1, and R@1 in the mode the index chooses
for itself. Recipes:

- pairs (the `faqsearch train encoder` objective): two questions of one FAQ are a positive, the other
  pairs of the batch negatives (same-FAQ ones masked), symmetric, scale 30;
- --distinct: each batch holds one pair per FAQ (no masking needed: every in-batch negative is real);
- --hard N: N hardest questions of other FAQs per anchor (mined once with the base model) added as
  negatives;
- --supcon F: batches of F FAQs x 4 questions, every other question of the anchor's FAQ a positive;
- --soup A: the trained weights averaged with the base's (A trained, 1-A base) before measuring;
- --proxy W: beside the pairs, each anchor is classified among all FAQs at once against a learned
  vector per FAQ (started at the base model's FAQ centroid, rate 1e-3), weight W.

    python benchmarks/experiments/learn_recipes.py --distinct --batch 64 --epochs 5 --lr 3e-5 [--soup 0.5]
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import random
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from common import DATA, machine  # noqa: E402

from faqsearch import FAQSearch  # noqa: E402
from faqsearch.corpus import read_corpus  # noqa: E402
from faqsearch.encoders import _minilm_path  # noqa: E402
from faqsearch.evaluation import evaluate, read_labelled_queries  # noqa: E402
from faqsearch.finetune import batches  # noqa: E402  the trainer's batching (the same for batches of 8 or more)


def main() -> None:
    import torch
    import torch.nn.functional as F
    from transformers import AutoModel, AutoTokenizer, get_linear_schedule_with_warmup

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--lr", type=float, default=2e-5)
    ap.add_argument("--batch", type=int, default=32, help="pairs per batch")
    ap.add_argument("--distinct", action="store_true")
    ap.add_argument("--hard", type=int, default=0)
    ap.add_argument("--supcon", type=int, default=0, help="FAQs per batch of the all-positives objective")
    ap.add_argument("--steps", type=int, default=24, help="batches per epoch of --supcon")
    ap.add_argument("--soup", type=float, default=None)
    ap.add_argument("--proxy", type=float, default=0.0)
    ap.add_argument("--scale", type=float, default=30.0)
    ap.add_argument("--set", default="faqs_5")
    args = ap.parse_args()
    logging.basicConfig(level=logging.ERROR)
    torch.set_num_threads(os.cpu_count() or 1)
    bank = os.path.join(DATA, "Banking77")
    corpus = os.path.join(bank, f"{args.set}.csv")
    groups = [f.questions for f in read_corpus(corpus)]
    random.seed(0)
    torch.manual_seed(0)
    base = _minilm_path()
    tok, model = AutoTokenizer.from_pretrained(base), AutoModel.from_pretrained(base)

    def embed(texts, grad=True):
        enc = tok(texts, padding=True, truncation=True, max_length=64, return_tensors="pt")
        with torch.set_grad_enabled(grad):
            h = model(**enc).last_hidden_state
            m = enc["attention_mask"].unsqueeze(-1).to(h.dtype)
            return F.normalize((h * m).sum(1) / m.sum(1).clamp(min=1e-9), dim=-1)

    pairs = [(a, b, gi) for gi, g in enumerate(groups) for a in g for b in g if a != b]
    hard = {}
    if args.hard:
        qs = [(q, gi) for gi, g in enumerate(groups) for q in g]
        model.eval()
        vec = torch.cat([embed([q for q, _ in qs[i:i + 128]], grad=False) for i in range(0, len(qs), 128)])
        sims = vec @ vec.T
        gid = torch.tensor([g for _, g in qs])
        sims[gid[:, None] == gid[None, :]] = -9
        for i, j in enumerate(sims.topk(args.hard, dim=1).indices.tolist()):
            hard[qs[i][0]] = [qs[k][0] for k in j]

    def supcon_batches(rng):
        for _ in range(args.steps):
            texts, labels = [], []
            for gi in rng.sample(range(len(groups)), min(args.supcon, len(groups))):
                for q in rng.sample(groups[gi], min(4, len(groups[gi]))):
                    texts.append(q)
                    labels.append(gi)
            yield texts, labels

    proxies = None
    if args.proxy:
        model.eval()
        with torch.no_grad():
            cents = torch.stack([embed(g, grad=False).mean(0) for g in groups])
        proxies = torch.nn.Parameter(F.normalize(cents, dim=-1))
    per_epoch = args.steps if args.supcon else sum(1 for _ in batches(pairs, args.batch, args.distinct,
                                                                             random.Random(0)))
    params = [{"params": model.parameters(), "lr": args.lr}]
    if proxies is not None:
        params.append({"params": [proxies], "lr": 1e-3, "weight_decay": 0.0})
    opt = torch.optim.AdamW(params, lr=args.lr, weight_decay=0.01)
    sched = get_linear_schedule_with_warmup(opt, int(0.1 * per_epoch * args.epochs), per_epoch * args.epochs)
    start = time.perf_counter()
    for epoch in range(args.epochs):
        model.train()
        if args.supcon:
            for texts, labels in supcon_batches(random.Random(epoch)):
                v, g = embed(texts), torch.tensor(labels)
                eye = torch.eye(len(texts), dtype=torch.bool)
                sims = (v @ v.T * args.scale).masked_fill(eye, -1e4)
                logp = sims - torch.logsumexp(sims, dim=1, keepdim=True)
                pos = (g[:, None] == g[None, :]) & ~eye
                loss = -(logp * pos).sum(1).div(pos.sum(1).clamp(min=1)).mean()
                opt.zero_grad()
                loss.backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                opt.step()
                sched.step()
            continue
        for chunk in batches(pairs, args.batch, args.distinct, random.Random(epoch)):
            a, b = embed([p[0] for p in chunk]), embed([p[1] for p in chunk])
            g = torch.tensor([p[2] for p in chunk])
            same = (g[:, None] == g[None, :]) & ~torch.eye(len(chunk), dtype=torch.bool)
            sims = (a @ b.T * args.scale).masked_fill(same, -1e4)
            target = torch.arange(len(chunk))
            if args.hard:
                hs = a @ embed([h for p in chunk for h in hard[p[0]]]).T * args.scale
                loss = (F.cross_entropy(torch.cat([sims, hs], 1), target) + F.cross_entropy(sims.T, target)) / 2
            else:
                loss = (F.cross_entropy(sims, target) + F.cross_entropy(sims.T, target)) / 2
            if proxies is not None:
                loss = loss + args.proxy * F.cross_entropy(a @ F.normalize(proxies, dim=-1).T * args.scale, g)
            opt.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            sched.step()
    train_s = time.perf_counter() - start
    if args.soup is not None:
        base_sd = AutoModel.from_pretrained(base).state_dict()
        model.load_state_dict({k: (args.soup * v + (1 - args.soup) * base_sd[k]) if v.is_floating_point() else v
                               for k, v in model.state_dict().items()})
    out = tempfile.mkdtemp()
    model.save_pretrained(out)
    tok.save_pretrained(out)
    queries = read_labelled_queries(os.path.join(bank, "queries.csv"))
    e = FAQSearch.build(corpus, os.path.join(out, "ix"), model=out, force=True)
    dense, chosen = evaluate(e, queries, mode="dense")["recall@1"], evaluate(e, queries)["recall@1"]
    row = {"recipe": " ".join(a for a in sys.argv[1:]), "train_s": round(train_s), "steps": per_epoch * args.epochs,
           "dense_r1": round(100 * dense, 2), "chosen_mode": e.mode, "chosen_r1": round(100 * chosen, 2)}
    e.close()
    print(f"Measured {machine()}")
    print(json.dumps(row))


if __name__ == "__main__":
    main()
