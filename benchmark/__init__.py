"""The benchmark: pod side (podsetup, driver, proxy, acceptance, telemetry, publish, with results
and analysis) and operator side (report, seedcompare, seeds).

The pod-side modules run in the benchmark pod (Python 3.11, shipped by ConfigMap) with the
standard library and the hash-locked boto3 of requirements-pod.lock; report.py runs wherever
results are downloaded and needs matplotlib for report.png.
"""
