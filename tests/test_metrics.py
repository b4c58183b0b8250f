import math

import numpy as np
import pytest

from faqsearch.evaluation import rankdata, ranking_metrics, spearman


def test_ranking_metrics_hand_computed():
    ranked = [["a", "b", "c"], ["x", "a", "y"], ["p", "q", "r"], ["m", "n", "g"]]
    gold = [{"a"}, {"a"}, {"z"}, {"g", "n"}]
    m = ranking_metrics(ranked, gold)
    assert m["recall@1"] == pytest.approx(1 / 4)
    assert m["recall@5"] == pytest.approx(3 / 4)
    assert m["mrr@10"] == pytest.approx((1 + 1 / 2 + 0 + 1 / 2) / 4)
    # query 4: hits at ranks 2 and 3, two gold -> dcg = 1/log2(3) + 1/log2(4), idcg = 1 + 1/log2(3)
    q4 = (1 / math.log2(3) + 1 / math.log2(4)) / (1 + 1 / math.log2(3))
    assert m["ndcg@10"] == pytest.approx((1 + 1 / math.log2(3) + 0 + q4) / 4)


def test_cutoff_ignores_hits_past_10():
    ranked = [[str(i) for i in range(20)]]
    m = ranking_metrics(ranked, [{"15"}])
    assert m["mrr@10"] == 0 and m["recall@10"] == 0


def test_rankdata_ties_and_spearman():
    np.testing.assert_array_equal(rankdata(np.array([10, 20, 20, 5])), [2, 3.5, 3.5, 1])
    assert spearman(np.array([1, 2, 3, 4]), np.array([10, 20, 30, 40])) == pytest.approx(1)
    assert spearman(np.array([1, 2, 3, 4]), np.array([4, 3, 2, 1])) == pytest.approx(-1)
    # hand-computed: ranks x = 1,2,3,4,5 ; y = 2,1,4,3,5 -> rho = 1 - 6*4/(5*24) = 0.8
    assert spearman(np.array([1., 2, 3, 4, 5]), np.array([2., 1, 4, 3, 5])) == pytest.approx(0.8)
