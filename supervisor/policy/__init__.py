"""Human in the loop: risk assessment, the approval policy, approvals and votes,
budgets, notifications, dependency review. Public: risk.assess, approvals, budgets.
"""
