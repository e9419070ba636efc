"""The rehearsal: a stack's rendered workloads run on one machine as local processes, against a real
vLLM on CPU and local stand-ins for S3, CloudWatch, the hub and the Kubernetes API
(`make rehearse STACK=<s>`; docs/rehearsal.md)."""
