"""Edits as plans: pure functions of the rows an index holds (:mod:`faqsearch.edits.plan`). A
backend applies a plan (:meth:`faqsearch.backends.base.Backend.apply`)."""
from __future__ import annotations

from .plan import (Edit, check_batch, plan_add, plan_approve, plan_feedback, plan_remove, plan_remove_source, plan_unassign,
                   plan_update)

__all__ = ["Edit", "check_batch", "plan_add", "plan_approve", "plan_feedback", "plan_remove", "plan_remove_source", "plan_unassign",
           "plan_update"]
