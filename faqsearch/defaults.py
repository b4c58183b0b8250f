"""Every tuned default of faqsearch, once, with the measurement that chose it.

Modules import their defaults from here; docs/ pages name the benchmark behind each figure.
Nothing here imports anything: this is the bottom of the dependency graph.
"""
from __future__ import annotations

# -- the transform (benchmarks/results/quality.md, "Choosing the defaults"): with the bundled encoders a rotation
# that keeps 256 dimensions never lost quality, while full whitening did
BETA = 0.0
GAMMA = 0.0
K = 256

# -- answering
# scores below this are "no confident answer" where an index has not chosen its own (docs/quality.md,
# "The threshold")
THRESHOLD = 0.5
# an index chooses its own (tuning/threshold.py) from at least this many held-out variants answered
# right, within this range (docs/quality.md, "The threshold")
SELF_THRESHOLD_MIN = 10
THRESHOLD_RANGE = (0.3, 0.8)
MIN_LABELLED = 20  # labelled queries (and --offtopic questions) `tune threshold --apply` needs: a handful chose
# thresholds far off (3 answered a quarter; one off-topic question answered 13% of the 30 sample ones)
# the confidence (faqsearch/confidence.py, tuning/confidence.py; docs/quality.md, "Answer or abstain"):
# learned from held-out variants where at least this many FAQs have several questions (as the threshold)
CONFIDENCE_MIN_VARIANTS = 10
CONFIDENCE_ROUNDS = 5  # a small FAQ holds out another question of each FAQ, up to this many rounds in all
# the weight of in-scope queries, in-domain and general out-of-scope questions in the fit: its
# calibration is for a stream that is mostly in scope (benchmarks/decision.py: expected calibration
# error 0.112 / 0.085 on sample_data / Banking77 faqs_5, against 0.133 / 0.103 with 0.7, 0.15, 0.15)
CONFIDENCE_MIX = (0.8, 0.1, 0.1)
CONFIDENCE_SAMPLE = 300  # held-out variants sought (several rounds on a small FAQ)
# single-question FAQs searched without themselves, and pseudo-queries, at most: each is a hybrid
# search with token matching at ingest (150 + 150 + the 200 general questions took 2.5 s at 5,000 questions)
CONFIDENCE_SINGLES = 150
# the share of in-domain unknowns among the out-of-scope questions the operating point is chosen for
UNKNOWN_SHARE = 0.25
ASK_K = 3  # answers per query, the same in the CLI, the library and the HTTP API
MAX_COUNT = 1 << 31  # bound of a count or offset given (k, limit, batch size): more than any index holds, and SQLite's
# LIMIT overflowed past 2**63
MODES = ("dense", "lexical", "hybrid")
MODE = "hybrid"  # measured at or above dense on every set (docs/hybrid.md)
HYBRID_WEIGHT = 0.1  # weight of the normalised BM25 score; `tune fusion` learns it per index (docs/hybrid.md)
TOKEN_WEIGHT = 1.0  # weight of token matching in hybrid mode, where the encoder has token states (docs/quality.md)
TOKEN_WEIGHTS = (0.0, 0.5, 1.0)  # token matching weights `tune fusion` compares (with each of FUSION_WEIGHTS)
TOKEN_POOL = 20  # candidates per query that token matching re-ranks (the first by cosine and BM25)
TOKEN_CACHE = 4096  # token states of recent texts (questions and queries) kept for token matching
TOKEN_BLOCK = 64  # queries whose candidates' token states are computed together (bounded memory)
TOKEN_STORE_MAX = 100_000  # versions of at most this many questions keep their token states (~10 KB a question)
FUSION_POOL = 20  # FAQs taken from the dense side before ranking (enough for a top 10)
LEXICAL_POOL = 50  # FAQs taken from the lexical side (cheap, and its tail still re-ranks dense hits)
DENSE_CANDIDATES = 256  # nearest questions (k dims) re-scored per query: they decide the answer, whatever k is
DENSE_BLOCK = 512  # queries searched and re-scored together (bounds the memory of large batches)
QUERY_CACHE = 4096  # encoded queries kept for repeated questions (chatbots see many)

# -- building
CHUNK = 4096  # texts encoded per streaming step while building
PROGRESS_STEP = 256  # texts per step when a progress bar is shown (the bar moves from the first texts)
BATCH_SIZE = 64
MAX_LENGTH = 256

# -- devices (docs/speed.md, "Devices"): auto = CUDA when torch sees a GPU, else the CPU (ONNX Runtime)
DEVICES = ("auto", "cpu", "cuda")
DEVICE = "auto"
GPU_BATCH = 256  # texts per GPU batch at least: BATCH_SIZE's 64 leaves a GPU waiting on each launch

# -- FAISS (docs/speed.md, "Scale")
INDEX_TYPE = "auto"
AUTO_FLAT_MAX = 100_000  # auto: flat below this many vectors
AUTO_HNSW_MAX = 250_000  # ... hnsw below this (built in memory: ~1.8 KB a vector), ivf-sq8 above (streamed)
EF_SEARCH = 128  # HNSW: 64 gave Recall@10 0.92 at 1M
TRAIN_SAMPLE = 100_000  # vectors used to train IVF / SQ quantizers
PQ_TRAIN_SAMPLE = 32_000  # PQ codebooks: k-means per sub-vector is slow on 2 cores, 32k is plenty for 256 codes
REFINE_FACTOR = 10  # PQ: candidates taken per wanted result before exact re-scoring
SMALL_BATCH = 4  # query batches up to this size search single-threaded (waking OpenMP costs more)

# -- live edits (docs/live-edits.md): a delta holds at most 5% of the base, at least 1,000 and at most
# 20,000 questions (an exact search over 20k vectors of 256 dims costs about a millisecond a query)
DELTA_SHARE = 20
DELTA_MIN = 1_000
DELTA_MAX = 20_000

# -- lexical side (benchmarks/experiments/zh_lexical.py): CJK unigrams alone scored above unigrams + bigrams on zh-STS-B
# retrieval (MRR@10 83.09 vs 81.29) and sample_data zh (95.71 vs 94.44), and are faster
CJK = "unigram"
COMMON = 0.2  # query tokens found in more than this share of the questions are dropped
LEXICAL_ARRAYS_MIN = 1  # versions this large keep their BM25 postings as arrays (faqsearch/postings.py): faster than
# FTS5 at every size measured, 500 to 1M questions (benchmarks/results/speed.md, "Chinese lexical search")
KEEP_MIN = 2  # ... unless that would leave fewer than this many tokens (the rarest are kept)

# -- versions (docs/reliability.md, "Versions kept"): previous versions an index keeps besides the live one,
# for `faqsearch restore`; the oldest beyond are removed after each new commit
KEEP_VERSIONS = 5
# ... and, older than those, the last version before each of this many edits that drop or rewrite content (remove,
# update, upsert, ingest, restore, learn...): the undo a command printed outlives a run of feedback and approvals
KEEP_UNDO_POINTS = 5
PHRASING_EDITS = ("add", "feedback", "approve", "unassign", "augment", "remove-generated")  # all else is an undo point

# -- tuning (docs/quality.md, "Evaluate and tune")
BETAS = (0.0, 0.5, 1.0)
GAMMAS = (0.0, 0.5, 1.0)
KS = (64, 128, 256, None)  # None = every dimension the data supports
FOLDS = 5
FUSION_WEIGHTS = (0.0, 0.05, 0.1, 0.2, 0.3, 0.5, 1.0, 2.0)
# held-out variants searched at most by the self-supervised fusion (a seeded sample beyond): at 1M
# questions all of them took over an hour
SELF_FUSION_MAX = 2_000
SELF_TOKEN_MAX = 300  # held-out variants the choice uses where token matching is on (their candidates are encoded again)
# ... among at most this many questions (BM25 postings and vectors of every question took 10 GB at 1M)
SELF_FUSION_DOCS = 50_000

# -- gaps (benchmarks/gaps_quality.py, chosen on sample_data's held-out FAQs; CovidFAQ held out)
GAP_SIMILARITY = 0.55
GAP_MARGIN = 0.25  # answered, but within this of the threshold: low confidence
GAP_MIN_COUNT = 2

# -- paraphrases (benchmarks/experiments/paraphrase_dev.py's split): of the paraphrases between 0.80 and 0.85 most
# changed the request, and 21 of 43 were similar under USE, against 181 of 203 at >= 0.85
PARAPHRASE_MIN_SIMILARITY = 0.85
PARAPHRASE_MAX_CHARS = 1000  # a text longer than this is not reworded (a query's bound in the service too)
PARAPHRASE_ROUNDS = 3  # batches drawn at most until n candidates pass the screen

# faqsearch learn: the recipe that did best on Banking77 faqs_5 (benchmarks/results/quality.md,
# "Training recipes for an index's own encoder"): one pair per FAQ in each batch of 64, 5 epochs, rate 3e-5
LEARN_MINUTES = 10.0  # the whole run's time budget; training stops early to keep it
LEARN_MIN_MINUTES = 1.2  # below it no budget works: a minute is kept to load, choose and measure, 10 s to train
LEARN_EPOCHS = 5
LEARN_BATCH = 64
LEARN_LR = 3e-5
LEARN_MIN_FAQS = 10  # FAQs with three or more questions (one held out, two to pair) below which learn refuses
LEARN_LOG_CONFIDENCE = 0.8  # logged queries the index answers at this confidence or more are trained on
LEARN_LOG_PER_FAQ = 40  # at most this many of them per FAQ (the most confident)
LEARN_LOG_QUERIES = 10000  # the most recent distinct logged queries looked at

# FAQ prototypes in hybrid ranking (faqsearch.prototypes): the weights an index compares, leaving
# each of up to PROTOTYPE_QUERIES of its questions out in turn, searched among up to PROTOTYPE_DOCS
PROTOTYPE_WEIGHTS = (0.0, 0.25, 0.5, 0.75, 1.0)
PROTOTYPE_QUERIES = 2_000
PROTOTYPE_DOCS = 50_000
# above this many questions no prototype weight is chosen: the first query after each change makes one
# pass over all stored vectors (benchmarks/results/speed.md, "FAQ prototypes")
PROTOTYPE_MAX_QUESTIONS = 100_000
