"""`make preflight STACK=<s>`: read-only checks with the user's credentials before money is spent.

One module per concern: account (STS), capacity (offerings, quota, reservations, Capacity
Blocks), platform (AMI alias, EKS add-ons, Kubernetes support), hub (gated model access), clis,
cost (Pricing API), estimate (how long a run takes); run.py runs them and prints the report.
"""
