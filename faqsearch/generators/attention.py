"""Attention for a generator whose model runs in bf16 on a CPU: torch's fused attention, in fp32.

On this project's CPUs torch's fused attention (``scaled_dot_product_attention``) runs bf16 inputs
several times slower than fp32 ones: one decoding step of SmolLM2's (12 rows, a 450-token prompt)
took 2.8 ms a layer in bf16 against 0.48 ms with the inputs cast to fp32, while the model's matrix
products run faster in bf16 (:func:`faqsearch.generators.causal.bf16_faster`). So the query, keys and
values go to fp32 for the attention alone, and its output back to bf16. The attention is then exact
fp32; transformers' plain ("eager") attention, as fast, rounds its probabilities to bf16, which
changed which candidates came out (benchmarks/results/paraphrases.md).
"""
from __future__ import annotations

from typing import Any

NAME = "faqsearch_fp32_sdpa"


def fp32_sdpa(module: Any, query, key, value, attention_mask, **kwargs):
    """transformers' SDPA attention on fp32 copies of its inputs; the output in the query's dtype."""
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    dtype = query.dtype
    if attention_mask is not None and attention_mask.is_floating_point():
        attention_mask = attention_mask.float()
    out, weights = sdpa_attention_forward(module, query.float(), key.float(), value.float(), attention_mask,
                                          **kwargs)
    return out.to(dtype), weights


def attend_in_fp32(model: Any) -> bool:
    """Make ``model`` (a transformers model in bf16 on the CPU, using SDPA attention) attend in fp32;
    whether it does. Models on another attention implementation, or whose class cannot switch, keep theirs."""
    if getattr(model.config, "_attn_implementation", None) != "sdpa":
        return False
    try:
        from transformers import AttentionInterface
        from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, AttentionMaskInterface

        AttentionInterface.register(NAME, fp32_sdpa)
        # the masks SDPA gets: without one, a prompt's second part (after its cached first part) would be
        # masked as if it started the sequence
        AttentionMaskInterface.register(NAME, ALL_MASK_ATTENTION_FUNCTIONS["sdpa"])
        model.set_attn_implementation(NAME)
    except (ImportError, AttributeError, KeyError, ValueError, TypeError):
        return False
    return getattr(model.config, "_attn_implementation", None) == NAME
