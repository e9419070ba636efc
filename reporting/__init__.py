"""What runs on the operator's machine over downloaded results: a run's figures and report
(analysis.py, report.py, with the seeds' published figures beside them: seeds.py, seedcompare.py)
and a tuning study's figures and report (study.py, intervals.py, tuning_report.py). It reads what
the benchmark pod wrote through benchmark/ (results, acceptance); benchmark/ never imports it.
report.png needs matplotlib.
"""
