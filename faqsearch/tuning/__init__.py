"""Tuning an index from data, without re-encoding it: the transform (:mod:`.transform`: beta, gamma,
k), the hybrid weight (:mod:`.fusion`). These measure and choose; the engine applies a choice
(``FAQSearch.refit``, ``FAQSearch.set_fusion``)."""
from __future__ import annotations

from .fusion import FusionReport, self_fusion_candidates, tune_fusion
from .threshold import (ThresholdReport, calibrate, fusion_changes, chosen_again, ingest_tuned, min_confidence_changes, needs_recalibration, recalibrate_after_edit, recalibrated,
                        refit_calibration, self_tune, self_tuned, threshold_changes, tune_threshold, unknowns_changes)
from .transform import (Setting, TuneReport, cross_validate, current_setting, default_offtopic, grid, transform_for,
                        held_out_variants, moments_rank, refit_config, tune)

__all__ = ["FusionReport", "Setting", "TuneReport", "cross_validate", "current_setting", "default_offtopic", "grid",
           "held_out_variants", "moments_rank", "refit_config", "self_fusion_candidates", "ThresholdReport", "calibrate",
           "ingest_tuned", "min_confidence_changes", "unknowns_changes", "needs_recalibration", "recalibrate_after_edit", "recalibrated", "refit_calibration", "self_tune", "self_tuned", "fusion_changes", "chosen_again", "threshold_changes", "tune_threshold", "transform_for", "tune", "tune_fusion"]
