"""Container-side benchmark code: driver (runs LLMPerf), publish (CloudWatch), report (tables/charts).

The driver and publisher run in the benchmark pod (Python 3.10, shipped by ConfigMap); the
report runs wherever results are downloaded. Only the standard library and boto3 are needed,
plus matplotlib for report.png.
"""
