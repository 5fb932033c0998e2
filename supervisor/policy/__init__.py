"""Human in the loop: risk assessment, the approval policy, approvals and votes,
budgets, notifications, dependency review, retry policies and the breaker.
"""
