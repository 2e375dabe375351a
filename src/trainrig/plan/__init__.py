"""The planner: enumerate valid configurations, evaluate them vectorized, apply the constraints, pick
the best and size the node around them. Pure: no I/O beyond catalog lookups, no clock, no torch."""

from trainrig.plan.planner import compare, plan
from trainrig.plan.request import OBJECTIVES
from trainrig.plan.result import CompareResult, Comparison, NodeAdvice, Plan, PlanResult
from trainrig.plan.space import SearchSpace

__all__ = ["plan", "compare", "PlanResult", "Plan", "NodeAdvice", "CompareResult", "Comparison", "SearchSpace",
           "OBJECTIVES"]
